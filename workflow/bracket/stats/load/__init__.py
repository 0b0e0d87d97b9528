"""Statistics under load: many users at once, per arm and level, with intervals over blocks (issue 39).

frame: records -> one row per (arm, block, level); intervals: t intervals over blocks; slo: goodput and capacity;
verdicts: two arms per level and the speculation gain; ceiling: the batch ceiling; results: the typed results;
analyze: all of it in one call (`analyze_load`); simulate: generators with known truth for the calibration.
"""
