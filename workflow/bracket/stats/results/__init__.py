"""stats.json as typed, frozen values: `Stats` and its parts, what `bracket.stats.analyze.analyze` returns and
the article reads by attribute. workflow/schemas/stats.schema.json is their JSON Schema (tools/stats_schema.py);
bracket.stats.contract.upgrade reads any stats.json into a `Stats`.

One module per topic: base (frozen model, read-only mappings), reasons, findings, cells (cells, levels, best),
comparisons (comparisons, multiplicity, sequential looks, conservatism), drift (drift, hosts), speculation,
physics (physics, phases), run (counts, design ran, guards, gaps, neutrality, the experiment, provenance), stats.

Reading them (the article's `Data.results` is one): attributes, never keys, e.g. `stats.best["code"].use`,
`stats.cell(arm, workload).median`, `stats.comparison(arm, workload).ci_low`, `stats.drift[workload].slope_ci`,
`stats.experiment.title`, `stats.physics.reference_reading.regime if stats.physics else None`. Lists are tuples and
mappings read-only (keyed by workload, arm or host); a field an older file lacks is None (its description says
so); a record whose shape another part of bracket owns (`Json`: a look, a block's provenance) is a read-only
mapping all the way down. A finding's `payload` is its kind's dataclass (bracket.stats.findings) and `.finding`
the Finding that bracket.article.findings words. `Stats.data()` is the JSON as stats.json holds it.
"""

from bracket.stats.results.base import FrozenMap, Json, Result
from bracket.stats.results.cells import Best, Cell, Levels, Modes
from bracket.stats.results.comparisons import (
    Comparison,
    ComparisonMultiplicity,
    Conservatism,
    Flatness,
    HostComparison,
    LookRound,
    Multiplicity,
    Sequential,
    SequentialComparison,
    SequentialState,
    StepFit,
    UndeterminedRow,
)
from bracket.stats.results.drift import Drift, DriftEffect, DriftWorst, HostDrift, Hosts, ReferenceBlocks, RoundChange
from bracket.stats.results.findings import FindingRecord
from bracket.stats.results.physics import (
    ByteAccount,
    CeilingRecord,
    Efficiency,
    Hypothesis,
    PhaseRow,
    Phases,
    Physics,
    ReadingWorkload,
    ReferenceReading,
    Where,
)
from bracket.stats.results.reasons import CiMethod, SignificanceTest, Undetermined
from bracket.stats.results.run import (
    Counts,
    DesignRan,
    Gap,
    Gaps,
    Gpu,
    Guards,
    Machine,
    Neutrality,
    Provenance,
    SameSettings,
    ScheduleRow,
    Served,
    StatedArm,
    StatedDesign,
    StatedEngine,
    StatedExperiment,
    StatedRequest,
    Unmeasured,
)
from bracket.stats.results.speculation import (
    BudgetGroup,
    BudgetWorkload,
    KModel,
    KRow,
    NeverDrafted,
    SpeculativeRow,
    TokensPerEvent,
)
from bracket.stats.results.stats import VERSION, Stats

__all__ = [
    "VERSION",
    "Best",
    "BudgetGroup",
    "BudgetWorkload",
    "ByteAccount",
    "Cell",
    "CeilingRecord",
    "CiMethod",
    "Comparison",
    "ComparisonMultiplicity",
    "Conservatism",
    "Counts",
    "DesignRan",
    "Drift",
    "DriftEffect",
    "DriftWorst",
    "Efficiency",
    "FindingRecord",
    "Flatness",
    "FrozenMap",
    "Gap",
    "Gaps",
    "Gpu",
    "Guards",
    "HostComparison",
    "HostDrift",
    "Hosts",
    "Hypothesis",
    "Json",
    "KModel",
    "KRow",
    "Levels",
    "LookRound",
    "Machine",
    "Modes",
    "Multiplicity",
    "Neutrality",
    "NeverDrafted",
    "PhaseRow",
    "Phases",
    "Physics",
    "Provenance",
    "ReadingWorkload",
    "ReferenceBlocks",
    "ReferenceReading",
    "Result",
    "RoundChange",
    "SameSettings",
    "ScheduleRow",
    "Served",
    "Sequential",
    "SequentialComparison",
    "SequentialState",
    "SignificanceTest",
    "SpeculativeRow",
    "StatedArm",
    "StatedDesign",
    "StatedEngine",
    "StatedExperiment",
    "StatedRequest",
    "Stats",
    "StepFit",
    "TokensPerEvent",
    "Undetermined",
    "UndeterminedRow",
    "Unmeasured",
    "Where",
]
