"""Schedules: each design's order, worked out by hand; recorded and read back unchanged."""

import pytest
from bracket.experiment import design
from hypothesis import given
from hypothesis import strategies as st


def order(blocks):
    return [(b.arm, b.round) for b in blocks]


def test_abab_repeats_the_order():
    assert order(design.draw(["A", "B"], "A", "abab", 2, 1)) == [("A", 1), ("B", 1), ("A", 2), ("B", 2)]


def test_abba_reverses_every_other_round():
    assert [a for a, _ in order(design.draw(["A", "B", "C"], "A", "abba", 2, 1))] == list("ABCCBA")


def test_bracket_opens_separates_and_closes_with_the_reference():
    got = [a for a, _ in order(design.draw(["R", "M1", "M2", "M3"], "R", "bracket", 1, 1))]
    assert got == ["R", "M1", "M2", "M3", "R"]  # seed 000's REF -> M1 -> ... -> REF
    got2 = [a for a, _ in order(design.draw(["R", "M1"], "R", "bracket", 2, 1))]
    assert got2 == ["R", "M1", "R", "M1", "R"]


def test_sequential_is_all_of_one_then_the_next():
    assert [a for a, _ in order(design.draw(["A", "B"], "A", "sequential", 2, 1))] == list("AABB")


def test_random_is_seeded_and_recorded(tmp_path):
    a = design.draw(list("ABCDE"), "A", "random", 3, 7)
    b = design.draw(list("ABCDE"), "A", "random", 3, 7)
    c = design.draw(list("ABCDE"), "A", "random", 3, 8)
    assert a == b and order(a) != order(c)
    design.write(a, tmp_path / "s.csv")
    assert design.read(tmp_path / "s.csv") == a


@given(
    arms=st.lists(st.sampled_from(list("ABCDEFG")), min_size=1, max_size=6, unique=True),
    kind=st.sampled_from(["abab", "abba", "random", "sequential"]),
    rounds=st.integers(1, 4),
    seed=st.integers(0, 10_000),
)
def test_every_arm_visited_once_per_round(arms, kind, rounds, seed):
    blocks = design.draw(arms, arms[0], kind, rounds, seed)
    assert [b.position for b in blocks] == list(range(len(arms) * rounds))
    for arm in arms:
        assert sorted(b.round for b in blocks if b.arm == arm) == list(range(1, rounds + 1))


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="design kind 'zigzag' is unknown"):
        design.draw(["A"], "A", "zigzag", 1, 1)
