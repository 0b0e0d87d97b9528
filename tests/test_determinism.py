"""The determinism control's classification, on recorded hashes (seed 000's table)."""

import pytest
from bracket import article
from bracket.controls import determinism

A1 = "39e462cb7494b66f"  # seed 000, batch=1
B2 = "b660d8f884b9d35c"  # seed 000, batch=2, requests A and B


def test_seed_000_is_two_stable_paths():
    r = determinism.classify({"batch 1": [A1] * 3, "batch 2": [B2] * 6})
    assert r["verdict"] == "two stable paths"
    assert r["paths"] == [A1, B2] and r["unstable"] == []
    assert "reduction order" in determinism.reading(r)


def test_a_config_that_disagrees_with_itself_is_unstable():
    r = determinism.classify({"batch 1": [A1, A1, B2], "batch 2": [B2] * 6})
    assert r["verdict"] == "unstable" and r["unstable"] == ["batch 1"]
    # request A and B of one batch disagreeing is instability too
    r = determinism.classify({"batch 1": [A1] * 3, "batch 2": [A1, B2, A1, A1, A1, A1]})
    assert r["verdict"] == "unstable" and r["unstable"] == ["batch 2"]


def test_all_agree_is_stable_and_more_shapes_count_paths():
    assert determinism.classify({"batch 1": [A1] * 3, "batch 2": [A1] * 6})["verdict"] == "stable"
    r = determinism.classify({"b1": [A1], "b2": [B2], "b4": ["c0ffee"]})
    assert r["verdict"] == "3 stable paths"


def test_classify_needs_hashes():
    with pytest.raises(ValueError, match="at least one output hash"):
        determinism.classify({"batch 1": []})


def test_determinism_section_shows_the_hash_table():
    rows = [
        {
            "config": "batch 1",
            "repeat": i,
            "request": "alone",
            "output_sha256": A1 * 4,
            "completion_tokens": 64,
            "cached_tokens": 0,
            "error": None,
        }
        for i in range(3)
    ] + [
        {
            "config": "batch 2",
            "repeat": i,
            "request": w,
            "output_sha256": B2 * 4,
            "completion_tokens": 64,
            "cached_tokens": 0,
            "error": None,
        }
        for i in range(3)
        for w in "AB"
    ]
    res = determinism.classify({"batch 1": [A1] * 3, "batch 2": [B2] * 6})
    det = {
        "workload": "code",
        "prompt_id": "code-1",
        "max_tokens": 64,
        "repeats": 3,
        "prefix_cache": "off",
        "arms": [{"arm": "baseline", "rows": rows, **res, "reading": determinism.reading(res)}],
    }
    md = article.section_determinism(None, article.Controls([], det, None, None))._repr_markdown_()
    assert "baseline: two stable paths" in md and md.count("39e462cb7494b66f") == 3 and md.count("b660d8f8") == 6
