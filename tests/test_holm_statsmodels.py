"""Holm's adjustment (stats.multiplicity.holm_adjust) equals statsmodels' multipletests(method="holm"), the
pinned library it is kept beside (the docstring says why: statsmodels runs gc.collect() on every call).

Expected values: Holm (1979) worked by hand for the small cases; for 400 random families (sizes 1-40, with
ties and p-values of 0 and 1) statsmodels itself, and a plain loop over the definition: adjusted p of the
i-th smallest = max over j <= i of min(1, (m - j) p_(j)).
"""

import gc

import numpy as np
import pytest
from bracket.stats import multiplicity


def by_definition(p: list[float]) -> list[float]:
    m = len(p)
    order = sorted(range(m), key=lambda i: (p[i], i))
    out = [0.0] * m
    running = 0.0
    for j, i in enumerate(order):
        running = max(running, min(1.0, (m - j) * p[i]))
        out[i] = running
    return out


@pytest.mark.parametrize(
    "p, adjusted",
    [
        ([0.01, 0.04, 0.03], [0.03, 0.06, 0.06]),  # 3 x 0.01; 2 x 0.03; max(0.06, 1 x 0.04)
        ([0.2, 0.001], [0.2, 0.002]),
        ([0.5, 0.5, 0.5], [1.0, 1.0, 1.0]),  # capped at 1
        ([0.04], [0.04]),  # a family of one is not adjusted
    ],
)
def test_holm_by_hand(p, adjusted):
    adj, order = multiplicity.holm_adjust(p)
    assert np.allclose(adj, adjusted, rtol=0, atol=1e-12)
    assert list(np.asarray(p)[order]) == sorted(p)


def test_holm_equals_statsmodels_and_the_definition_on_many_families(monkeypatch):
    from statsmodels.stats import multitest

    monkeypatch.setattr(gc, "collect", lambda *a: 0)  # its per-call collection: values unchanged, 0.24 s
    rng = np.random.default_rng(45)
    for _ in range(400):
        m = int(rng.integers(1, 41))
        p = rng.uniform(0, 1, m) ** rng.uniform(0.2, 4)  # many small p-values in some families
        if rng.random() < 0.3:
            p[rng.integers(0, m, max(1, m // 3))] = p[0]  # ties
        if rng.random() < 0.1:
            p[0], p[-1] = 0.0, 1.0
        adj, order = multiplicity.holm_adjust(p)
        assert np.allclose(adj, by_definition(list(p)), rtol=0, atol=1e-12), p
        assert np.allclose(adj, multitest.multipletests(p, method="holm")[1], rtol=0, atol=1e-12), p
        assert np.all(np.diff(p[order]) >= 0)


def test_an_empty_family_adjusts_nothing():
    adj, order = multiplicity.holm_adjust([])
    assert adj.size == 0 and order.size == 0
