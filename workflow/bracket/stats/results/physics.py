"""stats.json's physics (the measurement against the ceiling: bracket.physics.ceiling.measured,
bracket.stats.efficiency, bracket.stats.stated) and phases (TTFT apart from decode: bracket.stats.phases)."""

from __future__ import annotations

from bracket.stats.results.base import FrozenMap, Json, Result, field


class Efficiency(Result):
    """One arm without speculation on one workload, against the plain ceiling."""

    workload: str = field("The workload.")
    arm: str = field("The arm.")
    median: float = field("Its median (tokens/s).")
    ceiling_tok_s: float = field("The plain ceiling (tokens/s).")
    efficiency: float = field("median / ceiling.")
    implied_gbps: float = field("The memory bandwidth the median implies (GB/s).")


class Hypothesis(Result):
    """One of seed 000's precision hypotheses, evaluated at the reference's median."""

    name: str = field("The hypothesis (how the weights are read).")
    bits: int | float | None = field("Bits per weight (None: as stored).", default=None)
    bytes_per_token: float = field("Bytes read per token under it.")
    ceiling_tok_s: float = field("Its ceiling (tokens/s).")
    ms_per_token: float | None = field("Its time per token (ms).", default=None)
    efficiency: float = field("The reference's median over its ceiling.")
    possible: bool = field("Whether efficiency <= 1.")
    implied_gbps: float = field("The bandwidth the median implies under it (GB/s).")


class ReadingWorkload(Result):
    """The reference on one workload, against the ceiling."""

    workload: str = field("The workload.")
    median: float = field("The reference's median.")
    efficiency: float = field("Its efficiency.")


class ReferenceReading(Result):
    """The reference's efficiency over its workloads, read as one (bracket.stats.efficiency.reference_reading)."""

    workloads: tuple[ReadingWorkload, ...] = field("Each workload's median and efficiency.")
    median: float = field("The median of the workload medians.")
    efficiency: float = field("The median efficiency.")
    regime: str = field("The regime it puts the server in.")
    spread: float | None = field("The spread of the workload medians (None with one workload).")
    flat: bool | None = field("Whether they are flat (None with one workload).")
    flat_below: float = field("The spread below which they count as flat.")


class Where(Result):
    """An arm on a workload."""

    arm: str = field("The arm.")
    workload: str = field("The workload.")


class ByteAccount(Result):
    """The byte account as the article prints it (weights.json's fields: bracket.stats.stated.WEIGHTS_KEYS,
    bracket.physics.weights); a key weights.json left out is None."""

    status: str | None = field('"unknown" where no tensor header could be read, else None.', default=None)
    reason: str | None = field("Why the account is unknown.", default=None)
    key: str | None = field("The experiment key that would give it (e.g. engine.model).", default=None)
    model: str | None = field("The model the headers were read from.", default=None)
    components: FrozenMap[str, int | float | None] | None = field(
        "Bytes stored per component (backbone, embedding, output, vision, mtp, other).", default=None
    )
    tied_embeddings: bool | None = field("Whether the output layer is the embedding matrix.", default=None)
    stored_bytes: int | float | None = field("Every byte stored.", default=None)
    bytes_per_token: int | float | None = field(
        "The bytes a text token reads (the ceiling's denominator).", default=None
    )
    notes: tuple[str, ...] | None = field("The account's notes.", default=None)


class CeilingRecord(Result):
    """The ceiling as the article prints it (ceiling.json's fields: bracket.stats.stated.CEILING_KEYS,
    bracket.physics.ceiling); a key ceiling.json left out is None."""

    status: str | None = field('"unknown" where no ceiling could be computed, else None.', default=None)
    reason: str | None = field("Why it is unknown.", default=None)
    key: str | None = field("The experiment key that would give it.", default=None)
    bandwidth_gbps: int | float | None = field("The memory bandwidth (GB/s).", default=None)
    bandwidth_source: Json = field(
        "Where the bandwidth comes from ({kind: user, table or probe, and its detail, citation or method}).",
        default=None,
    )
    bytes_per_token: int | float | None = field("The byte account's bytes per token.", default=None)
    ceiling_tok_s: int | float | None = field("bandwidth / bytes per token (tokens/s).", default=None)
    machine_steadiness: Json = field(
        "The machine's memory copy rate over windows before the blocks (bracket.physics.steadiness).", default=None
    )


class Physics(Result):
    """The measurement against ceiling.json; None in stats.json where neither ceiling nor weights was given."""

    efficiency: tuple[Efficiency, ...] = field("Efficiency of each arm without speculation.")
    reference_median: float | None = field("The median of the reference's workload medians.")
    hypotheses: tuple[Hypothesis, ...] = field("Seed 000's precision hypotheses evaluated at it.")
    reference_reading: ReferenceReading | None = field("The reference's efficiency read as one.", default=None)
    above_ceiling: tuple[Where, ...] = field("Arms without speculation above the plain ceiling.", default=())
    weights: ByteAccount | None = field("The byte account as the article prints it.", default=None)
    ceiling: CeilingRecord | None = field("The ceiling as the article prints it.", default=None)


class PhaseRow(Result):
    """One arm on one workload: TTFT, decode phase and decode rate, each its median with a CI; for the
    non-reference arms each one's block-level ratio to the reference."""

    arm: str = field("The arm.")
    workload: str = field("The workload.")
    n: int = field("Valid runs.")
    ttft_s: float | None = field("Median time to first token (s).")
    ttft_ci_low: float | None = field("Its CI, lower end.")
    ttft_ci_high: float | None = field("Its CI, upper end.")
    tg_tok_s: float | None = field("Median decode-phase rate, first to last token (tokens/s).")
    tg_ci_low: float | None = field("Its CI, lower end.")
    tg_ci_high: float | None = field("Its CI, upper end.")
    decode_tok_s: float | None = field("Median decode_tok_s.")
    decode_ci_low: float | None = field("Its CI, lower end.")
    decode_ci_high: float | None = field("Its CI, upper end.")
    ttft_share: float | None = field("Median TTFT / wall time.")
    ttft_ratio: float | None = field("TTFT ratio to the reference.", default=None)
    ttft_ratio_ci_low: float | None = field("Its CI, lower end.", default=None)
    ttft_ratio_ci_high: float | None = field("Its CI, upper end.", default=None)
    tg_ratio: float | None = field("Decode-phase ratio to the reference.", default=None)
    tg_ratio_ci_low: float | None = field("Its CI, lower end.", default=None)
    tg_ratio_ci_high: float | None = field("Its CI, upper end.", default=None)
    decode_ratio: float | None = field("decode_tok_s ratio to the reference.", default=None)
    decode_ratio_ci_low: float | None = field("Its CI, lower end.", default=None)
    decode_ratio_ci_high: float | None = field("Its CI, upper end.", default=None)
    in_ttft: bool | None = field("True: the difference lives in TTFT; None: not decidable.", default=None)


class Phases(Result):
    """TTFT apart from decode (bracket.stats.phases); None in stats.json for a table without ttft_s."""

    margin: float = field("analysis.phase_margin.")
    rule: str = field("The rule a difference in TTFT is judged by.")
    rows: tuple[PhaseRow, ...] = field("One per arm and workload.")
