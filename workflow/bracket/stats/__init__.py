"""bracket.stats: statistics that survive "are you sure?".

One idea per module: blocks (the block as the unit: OLS on log block medians, t on the blocks'
df), summary (median, CI, spread), modes (two paths), bootstrap (request-level ratio of medians,
for one block per arm), drift (first vs last, rounds, trend), compare (verdict or undetermined),
multiplicity (Holm), speculative (acceptance, saturation, k model), levels (variance between vs
within blocks), io (reading raw values), tables (frame-level cells and comparisons), analyze
(stats.json), simulate (known truth).
"""

from bracket.stats.analyze import analyze
from bracket.stats.bootstrap import Sample, ratio_of_medians
from bracket.stats.compare import compare, verdict
from bracket.stats.summary import summarize

__all__ = ["analyze", "compare", "ratio_of_medians", "Sample", "summarize", "verdict"]
