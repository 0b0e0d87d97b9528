"""stats.json's speculation: acceptance per speculative arm, seed 000's k model, the draft-budget groups
(bracket.stats.speculative)."""

from __future__ import annotations

from bracket.stats.results.base import Result, field


class SpeculativeRow(Result):
    """One speculative arm on one workload."""

    arm: str = field("The arm.")
    workload: str = field("The workload.")
    draft_budget: int | None = field("Draft tokens proposed per step.")
    acceptance_length: float | None = field("1 + sum accepted / sum verify steps.")
    acceptance_rate: float | None = field("sum accepted / sum proposed.")
    saturation: float | None = field("acceptance length / draft budget.")
    reading: str | None = field("Seed 000's reading as a code (bracket.stats.speculative.Reading).")
    source: str | None = field("Where the acceptance numbers come from.")


class KRow(Result):
    """One arm and workload's k in seed 000's model."""

    arm: str = field("The arm.")
    workload: str = field("The workload.")
    k: float = field("decode / (baseline x acceptance_length).")
    role: str = field('"calibration" (sets the band) or "test".')
    in_band: str = field('"yes" inside, "marginal" within 2 % of an edge, else "no".')


class KModel(Result):
    """Seed 000's decode = k x baseline x acceptance_length."""

    baseline: str | None = field("The non-speculative arm (the reference if it is one).", default=None)
    band: tuple[float, float] | None = field("[min k, max k] over the calibration arms.")
    calibration: tuple[str, ...] = field("The first half (rounded up) of the speculative arms.", default=())
    rows: tuple[KRow, ...] = field("Each arm and workload's k.")
    tolerance: float | None = field("How near an edge counts as marginal (a fraction).", default=None)
    verdict: str = field('"falsified", "held" or "untested" (bracket.stats.speculative.KVerdict).')
    reason: str | None = field("Why untested (bracket.stats.speculative.KReason).", default=None)


class BudgetWorkload(Result):
    """One workload's medians along a budget group."""

    workload: str = field("The workload.")
    medians: tuple[float | None, ...] = field("The arms' medians, by budget.")
    change: float | None = field("The change from the smallest budget to the largest (a fraction).")


class BudgetGroup(Result):
    """Arms that differ only in the draft budget (bracket.stats.speculative.budget_effects)."""

    method: str = field("The speculative method they share.")
    arms: tuple[str, ...] = field("The arms, by budget.")
    budgets: tuple[int, ...] = field("Their draft budgets.")
    workloads: tuple[BudgetWorkload, ...] = field("Each workload's medians by budget.", default=())
    same_direction: bool | None = field("Whether every workload changed the same way.", default=None)


class TokensPerEvent(Result):
    """Mean completion tokens per stream event of one speculative arm (valid runs)."""

    arm: str = field("The arm.")
    tokens_per_event: float | None = field("Mean completion tokens per stream event.")


class NeverDrafted(Result):
    """A speculative arm that proposed no draft token on a workload."""

    arm: str = field("The arm.")
    workload: str = field("The workload.")
    runs: int = field("Its valid runs.")
    draft_budget: int | None = field("Its draft budget.")
