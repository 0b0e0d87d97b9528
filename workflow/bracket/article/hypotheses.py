"""Hypotheses about the draft budget (the K model)."""

from __future__ import annotations

import pandas as pd

from bracket.article.ceiling import hypotheses
from bracket.article.elements import Heading, Para, Section, Table
from bracket.article.inputs import Data
from bracket.article.text import pct, span
from bracket.stats.speculative import KReason

#: Why the k model went untested (stats.json's k_model.reason), in words.
K_REASONS = {
    KReason.NO_VALID_RUNS: "no valid runs",
    KReason.NO_BASELINE: "no arm without speculative decoding to serve as the baseline",
    KReason.NO_ACCEPTANCE: "no acceptance data (draft/accepted/verify counters) for the calibration arms",
    KReason.ALL_CALIBRATION: "every speculative arm was used to set the band; add arms to test it",
}


def k_reason_words(reason: str | None) -> str:
    """Why the k model went untested; an older stats.json's sentence as it was recorded."""
    if not reason:
        return ""
    return K_REASONS.get(reason, reason)


def k_table(d: Data) -> pd.DataFrame:
    k = d.results.k_model
    band = k.band
    rows = []
    for r in k.rows:
        rows.append(
            {
                "arm": r.arm,
                "workload": r.workload,
                "k": f"{r.k:.3f}",
                "role": r.role,
                "in band?": r.in_band if r.role == "test" else "sets the band",
            }
        )
    t = pd.DataFrame(rows)
    if band and not t.empty:
        t.attrs["band"] = list(band)
    return t


def section_hypotheses(d: Data) -> Section | None:
    k = d.results.k_model
    _, hyp = hypotheses(d)
    if not k.rows and not hyp:
        return None
    s = Section([Heading("Hypotheses tested")])
    outcomes = []
    if k.rows or k.verdict:
        verdict = k.verdict
        band = k.band
        outcomes.append(
            {
                "hypothesis": "decode = k x baseline x acceptance length, one k for every arm",
                "test": f"k of the other arms inside the band {span(band[0], band[1], 3)} set by "
                f"{', '.join(k.calibration)}"
                if band
                else "needs acceptance data",
                "outcome": verdict + (f" ({k_reason_words(k.reason)})" if k.reason else ""),
            }
        )
    for h in hyp:
        outcomes.append(
            {
                "hypothesis": f"the engine reads the weights {h.name}",
                "test": "measured rate below that hypothesis' ceiling",
                "outcome": "possible" if h.possible else "falsified",
            }
        )
    s.add(Table(pd.DataFrame(outcomes), "Each hypothesis, its test and its outcome", "hypotheses.csv"))
    if k.rows:
        s.add(Heading("The k model", 3))
        s.add(
            Para(
                f"Seed 000's model: decode {chr(8776)} k x baseline x acceptance length, with the baseline the "
                f"non-speculative arm {k.baseline} on the same workload. The first half of the speculative "
                f"arms set the band; the others test it (within {pct(0.02 if k.tolerance is None else k.tolerance, 0)} of an edge is "
                f"marginal)."
            )
        )
        s.add(Table(k_table(d), "k per arm and workload", "k_model.csv"))
        if k.verdict == "falsified":
            s.add(
                Para(
                    "Falsified: acceptance length alone does not predict the decode rate here. The estimate's "
                    "job was to design the experiment, not to cancel one; the falsification is a result."
                )
            )
        elif k.verdict == "held":
            s.add(
                Para(
                    "Held: every tested arm's k fell inside the band, so acceptance length predicted the decode "
                    "rate within it on this experiment."
                )
            )
    return s
