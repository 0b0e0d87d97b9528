"""The analysis defaults, read from their one home: the experiment schema's `analysis` section.

Every function of bracket.stats and every command takes its default seed, confidence level,
bootstrap resamples, noise threshold and spread warning from here, so changing a default in the
schema (where it is documented) changes it everywhere.
"""

from __future__ import annotations

from bracket.experiment.schema import schema_of


def _default(key: str):
    return schema_of("analysis", key)["default"]


SEED: int = int(_default("seed"))
CONFIDENCE: float = float(_default("confidence"))
RESAMPLES: int = int(_default("bootstrap_resamples"))
NOISE_THRESHOLD: float = float(_default("noise_threshold"))
SPREAD_WARNING: float = float(_default("spread_warning"))
PHASE_MARGIN: float = float(_default("phase_margin"))
