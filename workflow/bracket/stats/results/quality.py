"""The quality gate's results as frozen, typed values (stats.quality computes them), ready for stats.json.

Every field has a description; sequences are tuples; codes are closed enums, worded by the article, never
sentences here. A difference is always candidate - reference.
"""

from __future__ import annotations

from enum import StrEnum

from bracket.stats.results.base import Result, field


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


class AccuracyArm(Result):
    arm: str = field("the arm's name")
    items: int = field("items scored in this arm")
    correct: int = field("items answered correctly, by the task's extractor, at temperature 0")
    accuracy: float = field("correct / items")
    ci_low: float = field("Wilson score interval's lower end at ci_level")
    ci_high: float = field("Wilson score interval's upper end at ci_level")
    ci_level: float = field("the interval's two-sided confidence level")


class AccuracyComparison(Result):
    arm: str = field("the candidate arm")
    reference: str = field("the reference arm it is judged against")
    paired: bool = field("true where both arms answered the same items (a paired interval)")
    table: tuple[int, int, int, int] | None = field(
        "paired only: items both right, candidate only right, reference only right, both wrong"
    )
    difference: float = field("candidate accuracy - reference accuracy (proportion, 0.01 = 1 point)")
    ci_low: float = field("the difference's interval, lower end, at ci_level")
    ci_high: float = field("the difference's interval, upper end, at ci_level")
    ci_level: float = field("two-sided level of the interval: the Holm step's level of this comparison")
    ci_method: CiMethod = field("how the interval was made")
    margin: float = field("the non-inferiority margin (proportion): worse by at most this is held")
    p_value: float = field("one-sided p of 'the candidate is worse by the margin or more'")
    p_adjusted: float = field("p_value after Holm's adjustment across the candidate arms")
    verdict: Verdict = field("held (ci_low > -margin), lost (ci_high < -margin) or undetermined")
    differs: bool = field("the interval excludes zero: the arms' accuracies differ")


class AccuracyGate(Result):
    reference: str = field("the reference arm")
    margin: float = field("the non-inferiority margin (proportion)")
    confidence: float = field("the family's two-sided confidence level (one-sided alpha = (1 - it)/2)")
    holm_family: int = field("candidate comparisons Holm's adjustment ran over")
    arms: tuple[AccuracyArm, ...] = field("every arm's accuracy, in the experiment's order")
    comparisons: tuple[AccuracyComparison, ...] = field("each candidate against the reference")


class NllArm(Result):
    arm: str = field("the arm's name")
    documents: int = field("held-out documents every arm scored")
    tokens: int = field("tokens scored over those documents")
    nll_per_token: float = field("sum of the documents' NLL / their tokens (nats per token)")
    perplexity: float = field("exp(nll_per_token)")
    ci_low: float = field("percentile bootstrap over documents, lower end, at ci_level (nats/token)")
    ci_high: float = field("percentile bootstrap over documents, upper end, at ci_level (nats/token)")
    ci_level: float = field("the interval's two-sided confidence level")


class NllComparison(Result):
    arm: str = field("the candidate arm")
    reference: str = field("the reference arm it is judged against")
    documents: int = field("documents both scored (the bootstrap draws them, the same for every arm)")
    difference: float = field("candidate - reference NLL per token (nats); above zero is worse")
    perplexity_ratio: float = field("exp(difference): the candidate's perplexity over the reference's")
    ci_low: float = field("paired bootstrap interval of the difference, lower end, at ci_level")
    ci_high: float = field("paired bootstrap interval of the difference, upper end, at ci_level")
    ci_level: float = field("two-sided level of the interval: the Holm step's level of this comparison")
    margin: float = field("the non-inferiority margin in nats per token: worse by at most this is held")
    p_value: float = field("bootstrap one-sided p of 'worse by the margin or more': (1 + #{d* >= m})/(1 + B)")
    p_adjusted: float = field("p_value after Holm's adjustment across the candidate arms")
    verdict: Verdict = field("held (ci_high < margin), lost (ci_low > margin) or undetermined")
    differs: bool = field("the interval excludes zero: the arms' NLL per token differ")


class NllGate(Result):
    reference: str = field("the reference arm")
    margin: float = field("the non-inferiority margin (nats per token)")
    confidence: float = field("the family's two-sided confidence level (one-sided alpha = (1 - it)/2)")
    resamples: int = field("bootstrap draws of the documents")
    seed: int | None = field("the bootstrap's seed where an integer was given")
    holm_family: int = field("candidate comparisons Holm's adjustment ran over")
    arms: tuple[NllArm, ...] = field("every arm's NLL per token, in the experiment's order")
    comparisons: tuple[NllComparison, ...] = field("each candidate against the reference")
