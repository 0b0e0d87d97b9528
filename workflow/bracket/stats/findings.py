"""Findings: what the analysis warns about, as data.

A finding is one of a closed set of kinds (`FindingKind`), each with a typed payload (the numbers
it is about) and where it applies (arm, the arm or host it was compared with, workload, host).
Nothing here makes a sentence: `bracket.article.findings` is the one place a finding becomes
text, for the article and for the command line alike (as hyperfine's `Warnings` enum and its
Display). stats.json keeps the records: `{"kind", "arm", "vs", "workload", "host", "payload"}`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from enum import StrEnum


class FindingKind(StrEnum):
    """Every kind of finding the analysis can raise; stats.json's `findings[].kind`."""

    FEW_RUNS = "few runs"  # a cell has fewer than 5 valid runs
    WIDE_SPREAD = "wide spread"  # a cell's spread is above analysis.spread_warning
    TWO_MODES = "two modes"  # a cell's runs took two paths
    OUTLIERS = "outliers"  # a cell has runs beyond the modified z limit (kept)
    DRIFT = "drift"  # the reference moved more than the noise threshold first to last block
    HOST_DRIFT = "host drift"  # the same, on one host of several
    NO_REFERENCE = "no reference runs"  # a workload whose reference has no valid run
    NOT_COMPARED = "not compared"  # a comparison the statistics refused (its error)
    DRIFT_UNKNOWN = "drift unknown"  # no arm measured twice: the band is the stated threshold
    POOLED = "pooled"  # blocks agreed within request noise, block and request noise pooled
    COMPARISON_MODES = "comparison modes"  # one side of a comparison took two paths
    UNDETERMINED = "undetermined"  # a comparison without a verdict
    HOST_DIFFERS = "host"  # the same configuration ran faster or slower on another host
    SERVER_STATE = "server state"  # an arm's difference lives in TTFT, not decode
    NEVER_DRAFTED = "never drafted"  # a speculative arm that proposed no draft token
    MACHINE = "machine"  # the machine's memory copy rate was not steady before the blocks
    GAPS = "gaps"  # blocks further apart than the design's cooldown
    INSTRUMENT = "instrument"  # bracket's request costs the server more (or less) than a plain one
    CACHE_UNREPORTED = "cache"  # the server reported no cached tokens; unique prefixes protect the runs
    SEQUENTIAL = "sequential design"  # every arm in one stretch of time: drift and arm confounded
    SLOW_FIRST_RUN = "warmup"  # the first timed run was the slowest in most blocks
    INVALID = "invalid"  # runs left out of the statistics, by reason
    NO_VALID_RUNS = "no valid runs"  # every request was a warmup or invalid
    TORN_RECORD = "torn record"  # a block's raw file ends in a record a crash cut short: left out, unread
    BURSTY = "bursty delivery"  # arena: one network read brought a quarter of a stream or more
    COHERENCE = "coherence"  # arena: the model failed llama-benchy's coherence question
    BENCHY_DROPPED = "llama-benchy dropped"  # arena: llama-benchy's tg leaves values out
    CPUS_NARROW = "cpus"  # a block ran on fewer CPUs than it asked (its meta's cpus_allowed)
    RECORDED = "recorded"  # a stats.json written before findings were data: its sentence as it was


@dataclass(frozen=True)
class Nothing:
    """A finding whose kind says it all."""


@dataclass(frozen=True)
class FewRuns:
    n: int


@dataclass(frozen=True)
class WideSpread:
    spread: float
    threshold: float  # analysis.spread_warning
    n: int
    runs_needed: int  # runs to pin the median to +/- precision
    precision: float  # analysis.noise_threshold


@dataclass(frozen=True)
class TwoModes:
    where: str  # "within blocks" or "between blocks"
    low_n: int
    low_median: float
    high_n: int
    high_median: float


@dataclass(frozen=True)
class Outliers:
    values: tuple[float, ...]
    z: float  # the modified z limit


@dataclass(frozen=True)
class Drift:
    reference: str
    change: float  # ln(last block median / first block median) of the reference
    threshold: float  # analysis.noise_threshold


@dataclass(frozen=True)
class NoReference:
    reference: str


@dataclass(frozen=True)
class NotCompared:
    error: str  # the statistics' refusal, as raised


@dataclass(frozen=True)
class ComparisonModes:
    side: str  # "baseline" or "candidate"
    where: str  # "within blocks" or "between blocks"
    low_n: int
    low_median: float
    high_n: int
    high_median: float
    block_means: bool  # the comparison used block means of log rate (two paths within blocks)


@dataclass(frozen=True)
class Undetermined:
    reason: dict  # the comparison's `undetermined` (bracket.stats.reasons.Undetermined as a record)
    rounds_needed: int | None


@dataclass(frozen=True)
class HostDiffers:
    host: str  # the host that ran faster or slower than the first
    verdict: str  # "faster" or "slower"
    ratio: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class ServerState:
    ttft_ratio: float
    ttft_ratio_ci_low: float | None
    ttft_ratio_ci_high: float | None
    tg_ratio: float
    decode_ratio: float | None
    margin: float  # analysis.phase_margin


@dataclass(frozen=True)
class NeverDrafted:
    runs: int
    draft_budget: int | None


@dataclass(frozen=True)
class Machine:
    spread: float
    window_s: float
    seconds: float
    low_gbps: float
    high_gbps: float
    threshold: float  # analysis.spread_warning


@dataclass(frozen=True)
class Gaps:
    n: int
    over: int
    median_s: float
    max_s: float
    cooldown_s: float
    excess_s: float


@dataclass(frozen=True)
class InstrumentCost:
    cost: float  # ratio - 1
    confidence: float
    ci_low: float
    ci_high: float
    blocks: int
    basis: str
    direction: str  # "slower" or "faster": bracket's request against a plain client's


@dataclass(frozen=True)
class CacheUnreported:
    runs: int


@dataclass(frozen=True)
class SlowFirstRun:
    hits: int
    total: int


@dataclass(frozen=True)
class Invalid:
    runs: int
    reason: str  # one of bracket.records.INVALID_KINDS
    experiment: str


@dataclass(frozen=True)
class TornRecord:
    file: str  # relative to the experiment's results, e.g. raw/block-3.jsonl
    line: int
    bytes: int  # what was written of it


@dataclass(frozen=True)
class Bursty:
    runs: int
    bursty_runs: int
    share: float
    unresolved_runs: int = 0  # runs invalid: one read brought half a stream or more (bracket.arena.readings)


@dataclass(frozen=True)
class Coherence:
    failed: int
    checked: int
    question: str
    answer: str  # the server's answer, untrusted text


@dataclass(frozen=True)
class BenchyDropped:
    tg: int
    of: int
    unit: str
    reason: str


@dataclass(frozen=True)
class CpusNarrow:
    blocks: int  # blocks that ran on fewer CPUs than they asked
    of: int  # blocks whose CPUs were read
    fewest: int  # the fewest CPUs one of them could run on
    asked: int  # what that block asked for
    block: int  # its position
    basis: str  # "cluster.cpus" or "the whole host" (exclusive true, no count)


@dataclass(frozen=True)
class Recorded:
    message: str


K = FindingKind
PAYLOADS: dict[FindingKind, type] = {
    K.FEW_RUNS: FewRuns,
    K.WIDE_SPREAD: WideSpread,
    K.TWO_MODES: TwoModes,
    K.OUTLIERS: Outliers,
    K.DRIFT: Drift,
    K.HOST_DRIFT: Drift,
    K.NO_REFERENCE: NoReference,
    K.NOT_COMPARED: NotCompared,
    K.DRIFT_UNKNOWN: Nothing,
    K.POOLED: Nothing,
    K.COMPARISON_MODES: ComparisonModes,
    K.UNDETERMINED: Undetermined,
    K.HOST_DIFFERS: HostDiffers,
    K.SERVER_STATE: ServerState,
    K.NEVER_DRAFTED: NeverDrafted,
    K.MACHINE: Machine,
    K.GAPS: Gaps,
    K.INSTRUMENT: InstrumentCost,
    K.CACHE_UNREPORTED: CacheUnreported,
    K.SEQUENTIAL: Nothing,
    K.SLOW_FIRST_RUN: SlowFirstRun,
    K.INVALID: Invalid,
    K.NO_VALID_RUNS: Nothing,
    K.TORN_RECORD: TornRecord,
    K.BURSTY: Bursty,
    K.COHERENCE: Coherence,
    K.BENCHY_DROPPED: BenchyDropped,
    K.CPUS_NARROW: CpusNarrow,
    K.RECORDED: Recorded,
}


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    payload: object = Nothing()
    arm: str | None = None
    vs: str | None = None  # the arm or host it was compared with
    workload: str | None = None
    host: str | None = None

    def __post_init__(self):
        kind = FindingKind(self.kind)
        object.__setattr__(self, "kind", kind)
        if not isinstance(self.payload, PAYLOADS[kind]):
            raise TypeError(
                f"a {kind.value!r} finding carries a {PAYLOADS[kind].__name__} payload, "
                f"not {type(self.payload).__name__}."
            )

    def record(self) -> dict:
        """The finding as stats.json keeps it."""
        return {
            "kind": self.kind.value,
            "arm": self.arm,
            "vs": self.vs,
            "workload": self.workload,
            "host": self.host,
            "payload": asdict(self.payload),
        }

    @classmethod
    def of(cls, record: dict) -> Finding:
        """A finding from its stats.json record (`record`); an unknown kind or field is an error that says so."""
        try:
            kind = FindingKind(record["kind"])
        except ValueError:
            raise ValueError(
                f"unknown finding kind {record.get('kind')!r}; known: {', '.join(k.value for k in FindingKind)}. "
                f"A stats.json from another version of bracket: run its analyze step again."
            ) from None
        cls_ = PAYLOADS[kind]
        given = dict(record.get("payload") or {})
        known = {f.name for f in fields(cls_)}
        if set(given) != known:
            raise ValueError(
                f"a {kind.value!r} finding's payload has fields {sorted(given)}, expected {sorted(known)}: "
                f"a stats.json from another version of bracket; run its analyze step again."
            )
        if isinstance(given.get("values"), list):  # JSON has no tuples
            given["values"] = tuple(given["values"])
        where = {k: record.get(k) for k in ("arm", "vs", "workload", "host")}
        return cls(kind, cls_(**given), **where)


def records(findings: list[Finding]) -> list[dict]:
    return [f.record() for f in findings]
