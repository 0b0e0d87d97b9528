"""stats.json's findings as typed records: the closed set of kinds and frozen payloads of bracket.stats.findings."""

from __future__ import annotations

from typing import Any, Union

from pydantic import model_validator

from bracket.stats.findings import PAYLOADS, Finding, FindingKind
from bracket.stats.results.base import Result, field

#: Every payload a finding can carry (bracket.stats.findings.PAYLOADS), one per kind.
Payload = Union[tuple(dict.fromkeys(PAYLOADS.values()))]  # noqa: UP007


class FindingRecord(Result):
    """What went wrong and what to change, as data (bracket.stats.findings.Finding); bracket.article.findings makes
    its sentence, for the article and the command line alike."""

    kind: FindingKind = field("The kind of finding (bracket.stats.findings.FindingKind), a closed set.")
    arm: str | None = field("The arm it is about (None: the whole experiment).")
    vs: str | None = field("The arm or host it was compared with (None: no comparison).")
    workload: str | None = field("The workload it is about (None: every workload).")
    host: str | None = field("The host it is about (None: every host).")
    payload: Payload = field("The numbers it is about: the kind's frozen payload (bracket.stats.findings.PAYLOADS).")

    @model_validator(mode="before")
    @classmethod
    def _payload_of_its_kind(cls, data: Any) -> Any:
        """A record's payload as its kind's dataclass (bracket.stats.findings.Finding.of checks its fields)."""
        if isinstance(data, Finding):
            return {"kind": data.kind, "payload": data.payload, **_where(data.__dict__)}
        if isinstance(data, dict) and isinstance(data.get("payload"), dict | None):
            found = Finding.of(data)
            return {**data, "kind": found.kind, "payload": found.payload}
        return data

    @property
    def finding(self) -> Finding:
        """The finding itself (bracket.stats.findings.Finding), as bracket.article.findings words it."""
        return Finding(self.kind, self.payload, arm=self.arm, vs=self.vs, workload=self.workload, host=self.host)


def _where(d: dict) -> dict:
    return {k: d.get(k) for k in ("arm", "vs", "workload", "host")}
