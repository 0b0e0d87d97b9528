"""A level step the drift term cannot see: where a design's arm effect is exposed to one, and the fits that allow it.

The drift-adjusted fit (bracket.stats.compare) models time as a straight line. A machine that changes level once
(a neighbour starting, a thermal limit) is a step, not a line. For a step of size s between the blocks at
positions k - 1 and k, the fit's arm coefficient moves by s b_k and its residual variance grows by s^2 r_k^2,

    b_k = [(X'X)^-1 X' h_k]_arm,   r_k^2 = |M h_k|^2 / (blocks - rank X),   h_k = [position >= k],

X = [1, arm, position] and M the residual maker of X. The interval's half-width grows by the same step as
s r_k sqrt(c), c = [(X'X)^-1]_arm, so for a large step the bias is q_k = |b_k| / (r_k sqrt(c)) standard errors
whatever its size: a design with q_k near the t quantile cannot see the step at k in its residuals while the
step moves its arm. A/B/A/B has q_k below 1 at every k from 3 rounds on and A/B/B/A below 1.3 from 4 rounds on;
A/B/B/A with 3 rounds (A B B A A B) has q_3 = 3.2, above the t quantile on its 3 df (3.18): a step halfway
through lands on A A B, the line takes it as a slope and the arm carries 0.42 of it (issue 43).

Where some q_k exceeds EXPOSED, the comparison is also fitted with the step at k in place of the line,
[1, arm, h_k], and a verdict must hold under every such fit as under the line (bracket.stats.compare.decide
with `steps`): the interval it rests on is the union of theirs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

#: Large-step bias of the arm, in its standard errors, above which a step position is checked. Below 1.3 in
#: A/B/A/B and A/B/B/A from 3 and 4 rounds on (bench/step_design.py); 3.2 in A/B/B/A with 3 rounds.
EXPOSED = 2.0


@dataclass(frozen=True)
class Exposure:
    """A step position the line cannot see: the first position after the step (`at`), the arm's shift per
    unit step (`shift`, b_k), the residual it leaves (`residual`, r_k) and the large-step bias in standard
    errors (`q`, inf where the step leaves no residual)."""

    at: float
    shift: float
    residual: float
    q: float


@dataclass(frozen=True)
class StepFit:
    """The comparison fitted with a step at `at` in place of the line: the arm's log estimate, its standard
    error and degrees of freedom (bracket.stats.blocks.fit), and the exposure that asked for it."""

    at: float
    estimate: float
    se: float | None
    df: float
    q: float

    def record(self) -> dict:
        return asdict(self)

    def ci(self, level: float) -> tuple[float, float] | None:
        if self.se is None or not self.df > 0:
            return None
        t = stats.t.ppf(0.5 + level / 2, self.df)
        return self.estimate - t * self.se, self.estimate + t * self.se


def exposures(positions, arm, threshold: float = EXPOSED) -> list[Exposure]:
    """Step positions whose large-step bias q_k exceeds `threshold` for the blocks at `positions` with arm
    indicator `arm` (1 for the candidate), X = [1, arm, position]; [] when the fit has no residual df."""
    pos = np.asarray(positions, dtype=float)
    a = np.asarray(arm, dtype=float)
    X = np.column_stack([np.ones(pos.size), a, pos])
    df = pos.size - np.linalg.matrix_rank(X)
    if df < 1:
        return []
    XtX_inv = np.linalg.pinv(X.T @ X)
    P = XtX_inv @ X.T
    c = float(XtX_inv[1, 1])
    out = []
    for k in np.unique(pos)[1:]:
        h = (pos >= k).astype(float)
        shift = float((P @ h)[1])
        res = h - X @ (P @ h)
        r = math.sqrt(float(res @ res) / df)
        q = abs(shift) / (r * math.sqrt(c)) if r > 1e-9 else (math.inf if abs(shift) > 1e-9 else 0.0)
        if q > threshold:
            out.append(Exposure(float(k), shift, r, q))
    return out
