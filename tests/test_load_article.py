"""The load section's capacity sentence (bracket.article.many_users.capacity_sentence), read from typed results built by
hand: a determined capacity, a limit beyond the levels run, an interval straddling the limit, and a level without an
interval."""

from __future__ import annotations

from bracket.article.many_users import capacity_sentence, level_words
from bracket.stats.load import results as R
from bracket.stats.results.load import WorkloadLoad


def _iv(level: float, metric: str, center: float, low: float | None, high: float | None) -> R.LoadInterval:
    return R.LoadInterval(
        arm="a", level=level, metric=metric, center=center, low=low, high=high, blocks=2, df=1.0, scale="log",
        trend=False, se=0.01,
    )  # fmt: skip


def _load(statuses: list[tuple[float, str, str | None]], low, high, determined, intervals=()) -> WorkloadLoad:
    cap = R.LoadCapacityResult(
        arm="a",
        capacity=low if determined else None,
        determined=determined,
        low=low,
        high=high,
        crossing=None,
        levels=tuple(R.LevelStatusResult(level=lv, status=st, limiting=m) for lv, st, m in statuses),
        monotone=True,
    )
    return WorkloadLoad(
        confidence=0.95, seed=1, quantile_method="median_unbiased", min_tail=1.0,
        slo=R.LoadSloResult(ttft_s=1.0, tpot_s=0.06, quantile=0.99), blocks=(), intervals=tuple(intervals),
        capacity=(cap,), verdicts=(), gains=(), ceilings=(), invalid_levels=(), workload="w", level_kind="users",
        reference="a", speculative_arms=(),
    )  # fmt: skip


def test_level_words():
    assert (level_words(1, "users"), level_words(4, "users"), level_words(2.5, "rate")) == (
        "1 user",
        "4 users",
        "2.5 requests/s",
    )


def test_a_determined_capacity_names_the_level_and_the_first_that_fails():
    ld = _load([(1, "meets", None), (4, "meets", None), (8, "fails", "tpot_p99")], 4.0, 8.0, True)
    assert (
        capacity_sentence(ld, "a") == "a: the highest level meeting the SLO is 4 users (between 4 users and 8 users)."
    )


def test_no_level_failing_says_the_limit_lies_beyond_the_levels_run():
    ld = _load([(1, "meets", None), (8, "meets", None)], 8.0, None, True)
    assert "8 users, the highest level run: the limit lies beyond the levels run" in capacity_sentence(ld, "a")


def test_an_undetermined_level_says_whether_its_interval_straddles_or_is_missing():
    statuses = [(1, "meets", None), (2, "undetermined", "tpot_p99"), (4, "undetermined", "ttft_p99"), (8, "fails", "x")]
    ivs = [_iv(2, "tpot_p99", 0.055, 0.05, 0.07)]
    text = capacity_sentence(_load(statuses, 1.0, 8.0, False, ivs), "a")
    assert text.startswith("a: undetermined between 1 user and 8 users: ")
    assert "at 2 users the interval of tpot_p99 (55.0 (50.0\u201370.0) ms) straddles its limit" in text
    assert "at 4 users ttft_p99 has no interval" in text


def test_no_level_meeting_says_the_capacity_lies_below_the_levels_run():
    text = capacity_sentence(_load([(1, "fails", "tpot_p99")], None, 1.0, False), "a")
    assert text == "a: no level run meets the SLO (1 user fails); the capacity lies below the lowest level run."


def test_an_undetermined_lowest_level_is_not_read_as_none_meeting():
    statuses = [(1, "undetermined", "ttft_p99"), (8, "fails", "tpot_p99")]
    text = capacity_sentence(_load(statuses, None, 8.0, False, [_iv(1, "ttft_p99", 0.5, 0.01, 1.2)]), "a")
    assert text.startswith("a: undetermined, below 8 users: at 1 user the interval of ttft_p99")
    assert "no level run meets" not in text
