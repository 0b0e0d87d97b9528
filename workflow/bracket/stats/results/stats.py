"""stats.json as one typed, frozen value: `Stats`, what `bracket.stats.analyze.analyze` returns and the article
reads. workflow/schemas/stats.schema.json is its JSON Schema (tools/stats_schema.py writes it)."""

from __future__ import annotations

from bracket.stats.results.base import FrozenMap, Result, field
from bracket.stats.results.cells import Best, Cell, Levels
from bracket.stats.results.comparisons import Comparison, Conservatism, Multiplicity, Sequential, UndeterminedRow
from bracket.stats.results.drift import Drift, DriftWorst, Hosts
from bracket.stats.results.findings import FindingRecord
from bracket.stats.results.load import WorkloadLoad
from bracket.stats.results.physics import Phases, Physics
from bracket.stats.results.run import (
    Counts,
    DesignRan,
    Gaps,
    Guards,
    Neutrality,
    Provenance,
    SameSettings,
    StatedExperiment,
    Unmeasured,
)
from bracket.stats.results.speculation import BudgetGroup, KModel, NeverDrafted, SpeculativeRow, TokensPerEvent

#: stats.json's contract version (bracket.stats.contract says what each version changed).
VERSION = 5


class Stats(Result):
    """Every statistic of one experiment (results/NAME/stats.json).

    Only valid runs enter statistics; the value is decode_tok_s (completion_tokens / wall time). Ratios and
    changes are fractions (0.013 is 1.3 %). A field that a file older than its version lacks, and that
    bracket.stats.contract.upgrade had no input to fill, is None (the article refuses such a file:
    bracket.stats.contract.require)."""

    stats_version: int = field("The contract version (VERSION); older files are brought up by contract.upgrade.")
    seed: int = field(
        "The analysis seed: every bootstrap derives its own stream from it and the names of what it describes "
        "(recorded as `seed` in each cell and comparison)."
    )
    confidence: float = field("The CI level.")
    resamples: int = field("Bootstrap replicates.")
    value: str = field('The analysed column ("decode_tok_s").')
    reference: str = field("The reference arm, from the experiment.")
    design: str = field("The design's kind, from the experiment.")
    noise_threshold: float = field("The noise threshold, from the experiment (a fraction).")
    spread_warning: float = field("The spread above which a cell is warned about, from the experiment.")
    aa: SameSettings | None = field(
        "An A/A experiment as its configuration declares it (arms whose settings are the reference's), else None.",
        default=None,
    )
    counts: Counts = field("Requests by validity.")
    design_ran: DesignRan | None = field(
        "The design as the runs show it ran; None for a table without blocks.", default=None
    )
    unmeasured: tuple[Unmeasured, ...] | None = field(
        "Each arm and single-request workload without a valid timed run: while an arm is in it, no arm is named "
        "fastest.",
        default=None,
    )
    experiment: StatedExperiment | None = field(
        "The experiment as the article names it, with its schedule.", default=None
    )
    provenance: Provenance | None = field("What ran, as the article's method section states it.", default=None)
    cells: tuple[Cell, ...] = field("One per (arm, workload).")
    hosts: Hosts | None = field("None unless the runs name two hosts or more.", default=None)
    drift: FrozenMap[str, Drift] = field("Per workload: how the reference and the arms moved in time.")
    drift_worst: DriftWorst | None = field("The largest reference drift over the workloads.", default=None)
    comparisons: tuple[Comparison, ...] = field("Each non-reference arm against the reference, per workload.")
    sequential: Sequential | None = field(
        "None unless design.rounds is adaptive: the looks after every round.", default=None
    )
    multiplicity: Multiplicity | None = field("The family the verdicts are adjusted over.", default=None)
    conservatism: Conservatism | None = field(
        "Where the intervals get their width against an oracle's; None without a block-level fit.", default=None
    )
    undetermined: tuple[UndeterminedRow, ...] = field("Each undetermined comparison.", default=())
    phases: Phases | None = field("TTFT apart from decode; None for a table without ttft_s.", default=None)
    speculative: tuple[SpeculativeRow, ...] = field("One per speculative arm and workload.")
    k_model: KModel = field("Seed 000's decode = k x baseline x acceptance_length, tested.")
    budget_groups: tuple[BudgetGroup, ...] | None = field("Arms that differ only in the draft budget.", default=None)
    tokens_per_event: tuple[TokensPerEvent, ...] | None = field(
        "Mean completion tokens per stream event of each speculative arm.", default=None
    )
    never_drafted: tuple[NeverDrafted, ...] | None = field(
        "Speculative arms that proposed no draft token.", default=None
    )
    levels: tuple[Levels, ...] = field("Per (arm, workload) with two blocks or more: variance between and within.")
    best: FrozenMap[str, Best] = field("Per workload: the fastest arm and what to run.")
    physics: Physics | None = field(
        "The measurement against the ceiling; None where neither file was given.", default=None
    )
    guards: Guards | None = field("Seed 000's raw-data checks as facts.", default=None)
    gaps: Gaps | None = field("The gaps between blocks; None without the blocks' provenance.", default=None)
    neutrality: Neutrality | None = field("The instrument's cost (the neutrality control).", default=None)
    findings: tuple[FindingRecord, ...] = field("What went wrong and what to change, as data.")
    load: tuple[WorkloadLoad, ...] | None = field(
        "One per load workload (kind load): throughput, per-user rate and tails per arm and level with intervals "
        "over blocks, goodput, capacity under the SLO, verdicts against the reference and the speculation gain "
        "(bracket.stats.load); None where the experiment has no load workload. Its records are not runs: no other "
        "key counts them.",
        default=None,
    )

    def cell(self, arm: str, workload: str) -> Cell | None:
        """The cell of `arm` on `workload` (None: not measured)."""
        return next((c for c in self.cells if c.arm == arm and c.workload == workload), None)

    def comparison(self, arm: str, workload: str) -> Comparison | None:
        """`arm` against the reference on `workload` (None: not compared)."""
        return next((c for c in self.comparisons if c.candidate == arm and c.workload == workload), None)

    def data(self) -> dict:
        """stats.json's JSON data: the keys as written, none added (a key a file left out stays out)."""
        return self.model_dump(mode="json", exclude_unset=True)
