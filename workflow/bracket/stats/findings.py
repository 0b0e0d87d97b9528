"""Findings: what the analysis warns about, as records rather than sentences.

A finding names where it applies (arm, the arm it was compared with, workload, host), what kind
it is, and its message; `text()` is the one place it becomes the sentence the CLI prints. stats.json
keeps both: `findings` (the records, which the article groups by message without parsing) and
`warnings` (their texts, for the terminal and for readers of older files).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Finding:
    kind: str  # cell, drift, comparison, undetermined, not compared, design, warmup, invalid, host, machine,
    # instrument (bracket.stats.neutrality: what bracket's request costs the engine)
    # server state (bracket.stats.phases: an arm's difference lives in TTFT)
    # cache (the server reported no cached tokens: runs rest on unique prefixes)
    # coherence (bracket.arena.coherence: the model failed llama-benchy's question)
    message: str
    arm: str | None = None
    vs: str | None = None  # the arm or host it was compared with
    workload: str | None = None
    host: str | None = None
    values: dict | None = (
        None  # the numbers the message states, for whoever writes its own sentence (kept out of `where`)
    )

    def where(self) -> str | None:
        """ "arm / workload", "arm vs reference / workload", "host vs host / arm / workload", or None."""
        who = self.host or self.arm
        if who and self.vs:
            who = f"{who} vs {self.vs}"
        parts = [p for p in (who, self.arm if self.host else None, self.workload) if p]
        return " / ".join(parts) if parts else None

    def text(self) -> str:
        w = self.where()
        return f"{w}: {self.message}" if w else self.message

    def record(self) -> dict:
        rec = asdict(self)
        if rec["values"] is None:
            del rec["values"]  # records without numbers keep the shape older stats.json files have
        return rec


def texts(findings: list[Finding]) -> list[str]:
    return [f.text() for f in findings]


def group(records: list[dict]) -> list[str]:
    """Identical messages about several cells, merged: "message (baseline / code, ngram_4 / chat)"."""
    groups: dict[str, list[str]] = {}
    for r in records:
        f = Finding(**r)
        groups.setdefault(f.message, [])
        if f.where():
            groups[f.message].append(f.where())
    return [f"{msg} ({', '.join(who)})" if who else msg for msg, who in groups.items()]
