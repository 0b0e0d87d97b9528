"""What stats.json states of the run itself: counts, the design as it ran, the A/A arms, the raw-data guards,
the gaps between blocks, the instrument's cost, what went unmeasured, the experiment as the article names it
(bracket.stats.stated) and what ran (bracket.stats.provenance)."""

from __future__ import annotations

from bracket.stats.results.base import FrozenMap, Json, Result, field


class Counts(Result):
    """Requests by validity."""

    total: int = field("Every record.")
    valid: int = field("Valid timed runs: the only rows that enter statistics.")
    warmups: int = field("Warmup runs, counted apart.")
    invalid: int = field("Invalid timed runs (not counting warmups).")
    invalid_by_reason: FrozenMap[str, int] = field(
        "Invalid timed runs by their first kind (bracket.records.INVALID_KINDS), each run once."
    )
    torn: int | None = field(
        "Records a crash cut short at the end of a block's file, which no row holds (each also a finding).",
        default=None,
    )


class DesignRan(Result):
    """The design as the runs show it ran (bracket.stats.design_ran)."""

    rounds: int | None = field("Rounds run.")
    blocks: int | None = field("Blocks run.")
    order: tuple[str, ...] = field("The arms in the order their blocks ran.")
    runs_per_block: int | None = field("Timed runs per block and workload (the most common).")
    runs_per_block_min: int | None = field("The fewest.")
    runs_per_block_max: int | None = field("The most.")
    warmup_runs: int | None = field("Warmup runs per block and workload (the most common).")
    warmup_runs_min: int | None = field("The fewest.")
    warmup_runs_max: int | None = field("The most.")


class SameSettings(Result):
    """An A/A experiment as its configuration declares it: arms whose settings are the reference's."""

    reference: str = field("The reference.")
    arms: tuple[str, ...] = field("The arms with the reference's settings.")
    all: bool = field("Whether every arm is (the experiment is an A/A test: a drift test).")


class Guards(Result):
    """Seed 000's raw-data checks as facts (bracket.records.guards)."""

    timed: int = field("Timed runs.")
    cached_unknown: int = field("Runs whose cached tokens the server did not report.")
    cache_unreported_unique: int | None = field("Of those, runs whose unique prefix protects them.", default=None)
    cache_checks: Json = field("The cache checks' counts.", default=None)
    cache_hits: int = field("Runs with cached tokens.")
    pinned_tokens: int | None = field("The completion length every run was pinned to (None: not pinned).")


class Gap(Result):
    """The time from one block's end to the next one's server start on its host."""

    before: int = field("The block before.")
    after: int = field("The block after.")
    host: str | None = field("The host.")
    gap_s: float = field("The gap (s).")


class Gaps(Result):
    """The gaps between blocks against the design's cooldown (bracket.stats.gaps)."""

    n: int = field("Gaps measured.")
    median_s: float | None = field("Their median (s).")
    max_s: float | None = field("The longest (s).")
    cooldown_s: float = field("The design's cooldown (s).")
    excess_s: float | None = field("How far past the cooldown a gap may run before it is named.", default=None)
    over: int = field("Gaps beyond the cooldown by more than that.")
    gaps: tuple[Gap, ...] = field("Every gap.")


class Neutrality(Result):
    """The instrument's cost from the neutrality control's records (bracket.stats.neutrality.instrument_cost)."""

    status: str = field('"on", "off" (see off_reason) or "no_records" (the blocks ran no control pairs).')
    off_reason: str | None = field("Why the control is off (controls.neutrality_off).", default=None)
    reading: str | None = field(
        "The cost against `threshold`, either way (bracket.stats.neutrality.Reading).", default=None
    )
    threshold: float | None = field("The cost named either way (1 %).", default=None)
    basis: str | None = field('"server timing" or "wall time".', default=None)
    confidence: float | None = field("The CI level.", default=None)
    invalid: int | None = field("Invalid control records.", default=None)
    timing_sources: tuple[str, ...] | None = field("Where the server's timings came from.", default=None)
    records: int | None = field("Control records.", default=None)
    ratio: float | None = field("bracket's per-token server time over the plain request's.", default=None)
    cost: float | None = field("ratio - 1.", default=None)
    ci_low: float | None = field("Its block-level CI, lower end.", default=None)
    ci_high: float | None = field("Its block-level CI, upper end.", default=None)
    df: int | None = field("The CI's degrees of freedom.", default=None)
    blocks: int | None = field("Blocks with control pairs.", default=None)
    pairs: int | None = field("Control pairs.", default=None)
    bracket_ms_per_token: float | None = field("bracket's request, median ms per token.", default=None)
    plain_ms_per_token: float | None = field("The plain request's.", default=None)
    same_output: Json = field("{same, of}: pairs whose outputs were identical.", default=None)
    per_block: tuple[Json, ...] | None = field("Each block's {block, arm, pairs, ratio}.", default=None)


class Unmeasured(Result):
    """An arm or single-request workload without a valid timed run (bracket.stats.coverage)."""

    what: str = field('"arm" or "workload".')
    name: str = field("Its name.")
    reasons: FrozenMap[str, int] = field("Its timed runs by first invalid kind, most common first.")


class StatedArm(Result):
    """An arm as the article names it."""

    arm: str = field("The arm's name.")
    label: str | None = field("Its label.", default=None)
    speculative: Json = field("Its speculative settings (the experiment's).", default=None)
    args: tuple[str, ...] | None = field("Its extra launch arguments.", default=None)
    server: Json = field("Its server state settings.", default=None)


class ScheduleRow(Result):
    """A planned block (schedule.csv)."""

    position: int = field("Its position in the schedule.")
    arm: str = field("The arm it serves.")
    round: int = field("Its round.")
    seed: int = field("Its seed.")


class StatedEngine(Result):
    """The engine as the experiment sets it (bracket.stats.stated.ENGINE_KEYS); a key the experiment left unset
    is absent (None)."""

    kind: str | None = field('The engine kind ("vllm", "llamacpp", "sglang", "openai", "auto", ...).', default=None)
    launch: str | None = field('How bracket reaches it: "native", "docker" or "attach".', default=None)
    embedded: bool | None = field("Whether the workflow builds and serves its own tiny model.", default=None)
    base_url: str | None = field("The server's address.", default=None)
    model: str | None = field("The model as the experiment names it.", default=None)


class StatedDesign(Result):
    """The design as planned (bracket.stats.stated.DESIGN_KEYS; what ran is stats.json's design_ran)."""

    kind: str | None = field('The order\'s kind: "abab", "abba", "bracket", "random" or "sequential".', default=None)
    rounds: int | str | None = field('Rounds planned, or "adaptive".', default=None)
    runs_per_block: int | None = field("Timed runs per block and workload.", default=None)
    warmup_runs: int | None = field("Warmup runs per block and workload.", default=None)
    cooldown_s: int | float | None = field("Seconds of cooldown between blocks.", default=None)
    seed: int | None = field("The seed the order was drawn with.", default=None)
    min_rounds: int | None = field("An adaptive design's first round looked at.", default=None)
    max_rounds: int | None = field("An adaptive design's last round.", default=None)


class StatedRequest(Result):
    """The request settings the method section states (bracket.stats.stated.REQUEST_KEYS)."""

    max_tokens: int | None = field("The completion length asked for.", default=None)
    temperature: int | float | None = field("The sampling temperature.", default=None)
    seed: int | None = field("The request's sampling seed.", default=None)
    unique_prefix: bool | None = field("Whether each prompt carried a unique prefix.", default=None)


class StatedExperiment(Result):
    """The experiment as the article names it (bracket.stats.stated.experiment)."""

    name: str = field("The experiment's name (runs.csv's experiment column where none was given).")
    title: str | None = field("Its title.")
    question: str | None = field("Its question.")
    reference: str = field("The reference arm.")
    arms: tuple[StatedArm, ...] = field("The arms in the experiment's order.")
    workloads: tuple[str, ...] = field("The workloads in the experiment's order.")
    engine: StatedEngine = field("The engine as the experiment sets it.")
    design: StatedDesign = field("The design as planned.")
    request: StatedRequest = field("The request settings.")
    schedule: tuple[ScheduleRow, ...] = field("The planned blocks in order.")


class Served(Result):
    """What served the blocks (bracket.stats.provenance.served); a key an older file lacks is None (or empty)."""

    identified: Json = field(
        "The engine as identified on the server (bracket.engines.identify's record: kind, version, evidence), "
        "else None.",
        default=None,
    )
    kind: str | None = field("The engine kind the first block launched or attached as.", default=None)
    versions: tuple[str, ...] = field("The engine versions the blocks reported.", default=())
    launch: str | None = field(
        'How the first block reached the server: "native", "docker", "attach", ...', default=None
    )
    launches: tuple[str | None, ...] = field("Every block's launch, each once.", default=())
    base_url: str | None = field("The server's address as the blocks recorded it.", default=None)
    served_model: str | None = field("The model as the server named it.", default=None)
    model: str | None = field("The model as the blocks recorded it.", default=None)
    model_dir: str | None = field("The model's files as the workflow resolved them (None: embedded).", default=None)
    platforms: tuple[str, ...] = field("The platforms bracket's client ran on.", default=())


class Gpu(Result):
    """GPUs of one kind on a machine, counted."""

    name: str | None = field("The GPU's name.")
    memory_mib: int | None = field("Its memory (MiB).")
    driver: str | None = field("The driver's version.")
    count: int = field("How many.")


class Machine(Result):
    """One distinct machine the blocks ran on (bracket.stats.provenance.hardware)."""

    cpu: str | None = field("The CPU model.", default=None)
    cpus: int | None = field("Logical CPUs.", default=None)
    memory_gib: int | float | None = field("Memory (GiB).", default=None)
    kernel: str | None = field("The Linux kernel's release.", default=None)
    gpus: tuple[Gpu, ...] = field("Its GPUs by kind.", default=())
    hosts: tuple[str, ...] = field("The hosts that are this machine.", default=())


class Provenance(Result):
    """What ran (bracket.stats.provenance): each record's shape is that module's."""

    blocks: tuple[Json, ...] = field("Each block's status, start, server and telemetry.")
    served: Served | None = field("The engine and its versions as served.")
    hardware: tuple[Machine, ...] = field("The hardware by machine.")
    priority: Json = field("Whether process priority was the same in every block.")
    layout: Json = field("Whether the process layout was the same in every block.")
    pinning: Json = field("Whether CPU pinning was the same in every block.")
    weights_served: Json = field("The weights' hashes against the pin.")
    arms: tuple[Json, ...] = field("Each arm's flags, server state and first launch command.")
    arm_states_differ: bool | None = field("Whether the arms' server states differ.", default=None)
    flush_warnings: Json = field("Whether a cache flush warned.", default=None)
    failed_attempts: tuple[Json, ...] = field("The failed attempts (failed_attempts.json).")
    model_build: Json = field("The model's build record (build.json), else None.")
    bracket: Json = field("The bracket that measured and analysed (its version records).", default=None)
