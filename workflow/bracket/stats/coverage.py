"""What the runs did not measure: each arm and each workload without one valid timed run, and why.

While an arm is unmeasured no arm can be named fastest, however fast the others were; the article
says so before any number (bracket.article.headline).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from bracket import records

if TYPE_CHECKING:
    from bracket.typed.experiment import Experiment


def unmeasured(runs: pd.DataFrame, experiment: Experiment) -> list[dict]:
    """[{what: "arm" | "workload", name, reasons: {invalid kind: timed runs}}] for each arm of the experiment
    (in its order) and each single-request workload without a valid timed run; `reasons` counts the timed
    runs that ran by their first invalid kind (records.first_kind), most common first, and is empty when
    no timed request ran. Arena workloads (`kind` other than single) are measured elsewhere and left out."""
    if runs is None or "valid" not in runs or "arm" not in runs:
        return []
    valid = runs.loc[runs["valid"].fillna(False).astype(bool)]
    warm = runs["warmup"].fillna(False).astype(bool) if "warmup" in runs else pd.Series(False, index=runs.index)
    single = [w for w, spec in experiment.workloads.items() if (spec.kind or "single") == "single"]
    out = []
    for what, names in (("arm", list(experiment.arms)), ("workload", single)):
        for name in names:
            if (valid[what] == name).any():
                continue
            tried = runs.loc[(runs[what] == name) & ~warm]
            reasons = records.first_kind(tried).value_counts()
            out.append({"what": what, "name": name, "reasons": {str(k): int(n) for k, n in reasons.items()}})
    return out
