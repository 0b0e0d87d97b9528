"""bracket.stats: statistics that survive "are you sure?".

One idea per module: summary (median, CI, spread), bootstrap (ratio of medians, blocks then
requests), drift (first vs last, rounds, trend), compare (two-gate verdict), speculative
(acceptance, saturation, k model), levels (variance between vs within blocks), io (reading raw
values), tables (frame-level cells and comparisons), analyze (stats.json), simulate (known truth).
"""

from bracket.stats.analyze import analyze
from bracket.stats.bootstrap import Sample, ratio_of_medians
from bracket.stats.compare import compare, verdict
from bracket.stats.summary import summarize

__all__ = ["analyze", "compare", "ratio_of_medians", "Sample", "summarize", "verdict"]
