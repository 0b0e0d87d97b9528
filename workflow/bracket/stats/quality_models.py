"""The quality gate's results as frozen, typed values (stats.quality computes them), ready for stats.json.

Every field has a description; sequences are tuples; codes are closed enums, worded by the article, never
sentences here. A difference is always candidate - reference.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Verdict(StrEnum):
    """A candidate's non-inferiority to the reference at the stated margin."""

    HELD = "held"  # the interval lies wholly on the acceptable side of the margin
    LOST = "lost"  # the interval lies wholly beyond the margin: worse by more than it
    UNDETERMINED = "undetermined"  # the interval straddles the margin: more items or documents decide


class CiMethod(StrEnum):
    """How an accuracy difference's interval was made."""

    TANGO_PAIRED = "tango_paired"  # the same items asked of both arms: Tango's (1998) asymptotic score interval
    NEWCOMBE_PAIRED = "newcombe_paired"  # the same items: Newcombe 1998 paired, method 10 (not the gate's choice)
    NEWCOMBE_UNPAIRED = "newcombe_unpaired"  # different items: Newcombe 1998 independent, method 10


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AccuracyArm(_Frozen):
    arm: str = Field(description="the arm's name")
    items: int = Field(description="items scored in this arm")
    correct: int = Field(description="items answered correctly, by the task's extractor, at temperature 0")
    accuracy: float = Field(description="correct / items")
    ci_low: float = Field(description="Wilson score interval's lower end at ci_level")
    ci_high: float = Field(description="Wilson score interval's upper end at ci_level")
    ci_level: float = Field(description="the interval's two-sided confidence level")


class AccuracyComparison(_Frozen):
    arm: str = Field(description="the candidate arm")
    reference: str = Field(description="the reference arm it is judged against")
    paired: bool = Field(description="true where both arms answered the same items (a paired interval)")
    table: tuple[int, int, int, int] | None = Field(
        description="paired only: items both right, candidate only right, reference only right, both wrong"
    )
    difference: float = Field(description="candidate accuracy - reference accuracy (proportion, 0.01 = 1 point)")
    ci_low: float = Field(description="the difference's interval, lower end, at ci_level")
    ci_high: float = Field(description="the difference's interval, upper end, at ci_level")
    ci_level: float = Field(description="two-sided level of the interval: the Holm step's level of this comparison")
    ci_method: CiMethod = Field(description="how the interval was made")
    margin: float = Field(description="the non-inferiority margin (proportion): worse by at most this is held")
    p_value: float = Field(description="one-sided p of 'the candidate is worse by the margin or more'")
    p_adjusted: float = Field(description="p_value after Holm's adjustment across the candidate arms")
    verdict: Verdict = Field(description="held (ci_low > -margin), lost (ci_high < -margin) or undetermined")
    differs: bool = Field(description="the interval excludes zero: the arms' accuracies differ")


class AccuracyGate(_Frozen):
    reference: str = Field(description="the reference arm")
    margin: float = Field(description="the non-inferiority margin (proportion)")
    confidence: float = Field(description="the family's two-sided confidence level (one-sided alpha = (1 - it)/2)")
    holm_family: int = Field(description="candidate comparisons Holm's adjustment ran over")
    arms: tuple[AccuracyArm, ...] = Field(description="every arm's accuracy, in the experiment's order")
    comparisons: tuple[AccuracyComparison, ...] = Field(description="each candidate against the reference")


class NllArm(_Frozen):
    arm: str = Field(description="the arm's name")
    documents: int = Field(description="held-out documents every arm scored")
    tokens: int = Field(description="tokens scored over those documents")
    nll_per_token: float = Field(description="sum of the documents' NLL / their tokens (nats per token)")
    perplexity: float = Field(description="exp(nll_per_token)")
    ci_low: float = Field(description="percentile bootstrap over documents, lower end, at ci_level (nats/token)")
    ci_high: float = Field(description="percentile bootstrap over documents, upper end, at ci_level (nats/token)")
    ci_level: float = Field(description="the interval's two-sided confidence level")


class NllComparison(_Frozen):
    arm: str = Field(description="the candidate arm")
    reference: str = Field(description="the reference arm it is judged against")
    documents: int = Field(description="documents both scored (the bootstrap draws them, the same for every arm)")
    difference: float = Field(description="candidate - reference NLL per token (nats); above zero is worse")
    perplexity_ratio: float = Field(description="exp(difference): the candidate's perplexity over the reference's")
    ci_low: float = Field(description="paired bootstrap interval of the difference, lower end, at ci_level")
    ci_high: float = Field(description="paired bootstrap interval of the difference, upper end, at ci_level")
    ci_level: float = Field(description="two-sided level of the interval: the Holm step's level of this comparison")
    margin: float = Field(description="the non-inferiority margin in nats per token: worse by at most this is held")
    p_value: float = Field(
        description="bootstrap one-sided p of 'worse by the margin or more': (1 + #{d* >= m})/(1 + B)"
    )
    p_adjusted: float = Field(description="p_value after Holm's adjustment across the candidate arms")
    verdict: Verdict = Field(description="held (ci_high < margin), lost (ci_low > margin) or undetermined")
    differs: bool = Field(description="the interval excludes zero: the arms' NLL per token differ")


class NllGate(_Frozen):
    reference: str = Field(description="the reference arm")
    margin: float = Field(description="the non-inferiority margin (nats per token)")
    confidence: float = Field(description="the family's two-sided confidence level (one-sided alpha = (1 - it)/2)")
    resamples: int = Field(description="bootstrap draws of the documents")
    seed: int | None = Field(description="the bootstrap's seed where an integer was given")
    holm_family: int = Field(description="candidate comparisons Holm's adjustment ran over")
    arms: tuple[NllArm, ...] = Field(description="every arm's NLL per token, in the experiment's order")
    comparisons: tuple[NllComparison, ...] = Field(description="each candidate against the reference")
