"""Output excerpts, the corrections ledger and the raw values."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bracket import records
from bracket.article.elements import Heading, Para, Section, Table, _blank
from bracket.article.inputs import Data
from bracket.article.text import rate
from bracket.stats.analyze import jsonable
from bracket.stats.results import Guards


def output_excerpts(d: Data, chars: int = 160) -> pd.DataFrame:
    """The first timed output of each arm and workload, cut to `chars` characters (untrusted text)."""
    rows, seen = [], set()
    for r in d.raw:
        key = (r.get("arm"), r.get("workload"))
        if r.get("warmup") or key in seen or r.get("output_text") is None:
            continue
        seen.add(key)
        text = str(r["output_text"]).replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
        rows.append(
            {
                "arm": r.get("arm"),
                "workload": r.get("workload"),
                "prompt": r.get("prompt_id"),
                "output (first characters)": text[:chars] + ("..." if len(text) > chars else ""),
            }
        )
    t = pd.DataFrame(rows)
    if not t.empty:
        order = {w: i for i, w in enumerate(d.workloads)}
        t = t.sort_values(["workload", "arm"], key=lambda s: s.map(order) if s.name == "workload" else s)
    return t


def section_outputs(d: Data) -> Section | None:
    t = output_excerpts(d)
    if t.empty:
        return None
    s = Section([Heading("What the model generated")])
    s.add(
        Para(
            "The first timed output of each arm and workload, as the server returned it (shown as text). "
            "Prompt-lookup drafts are accepted when the output repeats what is already in the context, so "
            "repetitive output is what makes ngram speculation pay."
        )
    )
    return s.add(Table(t, "Output excerpts", "outputs.csv"))


def section_corrections(d: Data) -> Section:
    s = Section([Heading("Corrections")])
    if not d.corrections:
        return s.add(
            Para(
                f"None. Corrections are appended to {Path(d.corrections_path).name or 'NAME.corrections.yaml'} "
                f"(date, claim, correction, evidence) and shown here; the article is re-rendered, "
                f"never edited by hand."
            )
        )
    s.add(
        Para(
            "Claims this article made and later had to correct. They stay here, in the order they were made: "
            "the reasoning that went wrong is more useful preserved than quietly fixed."
        )
    )
    for c in d.corrections:
        s.add(
            Heading(f"{c['date']}: {c['claim']}", 3),
            Para(f"Correction: {c['correction']}"),
            Para(f"Evidence: {c['evidence']}", "note"),
        )
    return s


RAW_COLUMNS = {
    "position": "block",
    "arm": "arm",
    "round": "round",
    "run": "run",
    "prompt_id": "prompt",
    "decode_tok_s": "decode tok/s",
    "wall_s": "wall s",
    "ttft_s": "ttft s",
    "completion_tokens": "tokens",
    "cached_tokens": "cached",
    "finish_reason": "finish",
    "acceptance_length": "acc. length",
    "server_id": "server",
    "error": "error",
}


def status(row) -> str:
    if row.get("warmup"):
        return "warmup"
    if row.get("valid"):
        return "valid"
    return "INVALID: " + str(row.get("invalid_reason") or "unknown")


def raw_table(runs: pd.DataFrame, workload: str) -> pd.DataFrame:
    """Every request of one workload in schedule order, warmups and invalid rows marked, nothing dropped."""
    sub = runs[runs["workload"].astype(str) == workload].copy()
    sub = sub.sort_values([c for c in ("position", "started_at") if c in sub], kind="stable")
    out = pd.DataFrame({new: sub[old] for old, new in RAW_COLUMNS.items() if old in sub})
    if "decode tok/s" in out:
        out["decode tok/s"] = sub["decode_tok_s"].map(rate)
    for col in ("wall s", "ttft s"):
        if col in out:
            out[col] = out[col].map(lambda v: "" if _blank(v) else f"{v:.3f}")
    if "acc. length" in out:
        out["acc. length"] = out["acc. length"].map(lambda v: "" if _blank(v) else f"{v:.2f}")
    if {"accepted_tokens", "draft_tokens"} <= set(sub):
        out.insert(
            out.columns.get_loc("acc. length"),
            "accepted / proposed",
            [
                ("" if _blank(a) else f"{int(a)} / {int(p)}")
                for a, p in zip(sub["accepted_tokens"], sub["draft_tokens"])
            ],
        )
    out["status"] = [status(r) for r in sub.to_dict("records")]
    for col in ("round", "run", "tokens", "cached", "block"):
        if col in out:
            out[col] = out[col].map(lambda v: "" if _blank(v) else str(int(v)))
    return out.reset_index(drop=True)


def guard_sentences(g: Guards) -> list[str]:
    """Seed 000's statements about the raw values, from the analysis's checks (records.guards)."""
    out = []
    if g.cached_unknown:
        out.append(
            f"{g.cached_unknown} timed responses did not report cached tokens: the cache guard "
            f"could not be checked for them."
        )
    elif g.cache_hits:
        out.append(f"{g.cache_hits} timed responses hit the prefix cache; they are marked invalid.")
    elif g.cache_unreported_unique:
        out.append(
            f"{g.cache_unreported_unique} timed responses did not report cached tokens; each began with a "
            f"prefix unique in the experiment, so no prefix cache could serve it. Every run that did "
            f"report had cached_tokens at 0."
        )
    else:
        out.append("Every timed response had cached_tokens at 0: the prefix cache never engaged.")
    if g.pinned_tokens is not None:
        out.append(
            f"Output length was pinned at {g.pinned_tokens} tokens per run (finish_reason was length "
            f"every time), so the only variable is elapsed time."
        )
    else:
        out.append("Output length was not the same for every timed run; runs that stopped early are marked invalid.")
    out.append("Throughput is always completion_tokens divided by wall time, never stream events.")
    return out


def typed_guards(runs: pd.DataFrame) -> Guards:
    """The analysis's checks (records.guards) of a runs table, typed as stats.json holds them."""
    return Guards.model_validate(jsonable(records.guards(runs)))


def guards(runs: pd.DataFrame) -> list[str]:
    """The guard sentences of a runs table (checked by bracket.records.guards)."""
    return guard_sentences(typed_guards(runs))


def section_raw(d: Data) -> Section:
    s = Section([Heading("Every raw value")])
    for g in guard_sentences(d.results.guards or typed_guards(d.runs)):
        s.add(Para(g))
    s.add(
        Para(
            "Every request, in the order it ran. Warmups and invalid runs are shown and marked, never dropped; "
            "only rows marked valid enter the statistics above. The same values are in "
            + ", ".join(f"tables/raw_{wl}.csv" for wl in d.workloads)
            + f", and the raw records (with the full output text) in results/{d.name}/raw/."
        )
    )
    for wl in d.workloads:
        s.add(Heading(wl, 3), Table(raw_table(d.runs, wl), f"{wl}: every run", f"raw_{wl}.csv"))
    return s
