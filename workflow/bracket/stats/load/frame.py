"""Load records -> one row per (arm, block, level): the block-level statistics every interval rests on.

The records are the load driver's (/work/coord/load_contract.md): one row per request, and one level summary per
(block, level) with its steady window and whether the client kept up. Every block is a fresh server that ran every
level, so a block's value at a level is one independent draw of what that arm does at that level; the intervals
(bracket.stats.load.intervals) are taken over these rows.

What each row holds, over the level's steady window [steady_start_s, steady_end_s) only:

- throughput_tok_s: tokens that *arrived* inside the window / its length, from every request of the level that did
  not fail, whatever its phase (a request sent during the ramp delivers tokens inside the window too). Arrival
  times are sent_s + token_times_s; a request whose token list is missing or shorter than its completion tokens
  (the driver bounds the lists) is taken to deliver its first token at first_token_s and the rest evenly up to
  end_s (`interpolated` counts those requests).
- decode_rate_p50: the median over the level's steady requests of 1 / tpot_s (tokens/s one user sees).
- ttft / tpot / itl at each quantile: over the steady requests (itl: over the gaps between a steady request's
  consecutive content events), by the median-unbiased quantile (Hyndman & Fan type 8), which keeps a block's
  tail quantile about as often above as below the block's true one at any size (bench/load_quantiles.py).
- goodput (with an SLO): steady requests that met TTFT <= ttft_s and TPOT <= tpot_s, per second of window, their
  completion tokens per second, and their share of the steady requests.
- n_steady: the steady requests; a quantile whose tail holds fewer than MIN_TAIL of them is NaN (too few requests
  to say anything about that quantile in that block).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Request columns the statistics read (the contract's names).
REQUEST_COLUMNS = (
    "arm",
    "block",
    "level",
    "sent_s",
    "first_token_s",
    "end_s",
    "ttft_s",
    "tpot_s",
    "completion_tokens",
    "load_phase",
    "error",
)
#: Level-summary columns the statistics read.
LEVEL_COLUMNS = ("arm", "block", "level", "steady_start_s", "steady_end_s", "valid")
QUANTILES = (0.5, 0.9, 0.99)
#: Fewest expected requests beyond a quantile for a block's estimate of it: n (1 - p) >= MIN_TAIL. Below it a
#: block's p99 is its largest value, which sits near p(n/(n+1)), not p99 (bench/results/load_quantiles.md).
MIN_TAIL = 1.0


def _check(frame: pd.DataFrame, needed, what: str) -> None:
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(
            f"the {what} frame lacks column(s) {missing} (the load records' contract names them); "
            f"it has {list(frame.columns)}. Read the raw load records with their contract's keys."
        )


def qname(metric: str, p: float) -> str:
    """Column name of a metric's quantile: ttft_p99, tpot_p50, itl_p90 (p99.9 -> p99_9)."""
    return f"{metric}_p{format(100 * p, 'g').replace('.', '_')}"


def group_quantiles(values, codes, n_groups: int, ps, min_tail: float = MIN_TAIL) -> np.ndarray:
    """Median-unbiased (type 8) quantiles of `values` per group code 0..n_groups-1; shape (len(ps), n_groups).

    NaN where a group is empty or n (1 - p) < min_tail. Same as numpy.quantile(method="median_unbiased") per group.
    """
    v = np.asarray(values, dtype=float)
    c = np.asarray(codes, dtype=np.int64)
    keep = np.isfinite(v)
    v, c = v[keep], c[keep]
    order = np.lexsort((v, c))
    v = v[order]
    n = np.bincount(c, minlength=n_groups).astype(float)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)
    out = np.full((len(ps), n_groups), np.nan)
    ok = n > 0
    for i, p in enumerate(ps):
        h = np.clip(n * p + (p + 1) / 3, 1, np.maximum(n, 1))
        lo = np.floor(h)
        frac = h - lo
        i0 = starts + lo.astype(np.int64) - 1
        i1 = np.where(lo < n, starts + lo.astype(np.int64), i0)
        good = ok & (n * (1 - p) >= min_tail)
        i0c, i1c = np.where(good, i0, 0), np.where(good, i1, 0)
        q = v[i0c] + frac * (v[i1c] - v[i0c]) if v.size else np.zeros(n_groups)
        out[i, good] = q[good]
    return out


def tokens_in_window(sent, first, end, tokens, token_times, token_counts, start, stop):
    """Tokens of each request that arrived in [start, stop) (scalars, or one window per request), and whether each
    was interpolated.

    token_times (seconds since sent) and token_counts are per-request lists or None. A request without a full list
    (None, or counts summing short of `tokens`) is interpolated: one token at `first`, the rest evenly to `end`.
    """
    sent = np.asarray(sent, dtype=float)
    first = np.asarray(first, dtype=float)
    end = np.asarray(end, dtype=float)
    n = np.nan_to_num(np.asarray(tokens, dtype=float), nan=0.0)
    start = np.broadcast_to(np.asarray(start, dtype=float), n.shape)
    stop = np.broadcast_to(np.asarray(stop, dtype=float), n.shape)
    out = np.zeros(n.size)
    interp = np.ones(n.size, dtype=bool)
    if token_times is not None:
        for i, (tt, tc) in enumerate(zip(token_times, token_counts if token_counts is not None else [None] * n.size)):
            if not isinstance(tt, (list, tuple, np.ndarray)) or len(tt) == 0:
                continue
            t = sent[i] + np.asarray(tt, dtype=float)
            k = np.ones(t.size) if not isinstance(tc, (list, tuple, np.ndarray)) else np.asarray(tc, dtype=float)
            if k.size != t.size or k.sum() < n[i]:
                continue
            out[i] = k[(t >= start[i]) & (t < stop[i])].sum()
            interp[i] = False
    m = interp & (n >= 1) & np.isfinite(first)
    if m.any():
        f, e, nn = first[m], np.where(np.isfinite(end[m]), end[m], first[m]), n[m]
        start, stop = start[m], stop[m]
        gap = np.where(nn > 1, (e - f) / np.maximum(nn - 1, 1), np.inf)
        with np.errstate(invalid="ignore", divide="ignore"):
            # arrivals f + k gap, k = 0..nn-1: count k with start <= f + k gap < stop
            k_lo = np.where(np.isinf(gap), np.where(f >= start, 0.0, np.inf), np.ceil((start - f) / gap))
            k_hi = np.where(np.isinf(gap), np.where(f < stop, 0.0, -1.0), np.ceil((stop - f) / gap) - 1)
        k_lo = np.clip(np.nan_to_num(k_lo, nan=0.0), 0, nn)
        k_hi = np.clip(np.nan_to_num(k_hi, nan=-1.0), -1, nn - 1)
        out[m] = np.maximum(k_hi - k_lo + 1, 0)
    interp &= n >= 1
    return out, interp


def _itl(steady: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(gap, row position) of every inter-event gap of the steady requests that carry token times."""
    if "token_times_s" not in steady:
        return np.array([]), np.array([], dtype=np.int64)
    gaps, rows = [], []
    for i, tt in enumerate(steady["token_times_s"].to_numpy()):
        if isinstance(tt, (list, tuple, np.ndarray)) and len(tt) >= 2:
            d = np.diff(np.asarray(tt, dtype=float))
            gaps.append(d)
            rows.append(np.full(d.size, i))
    if not gaps:
        return np.array([]), np.array([], dtype=np.int64)
    return np.concatenate(gaps), np.concatenate(rows)


def block_table(requests: pd.DataFrame, levels: pd.DataFrame, slo=None, quantiles=QUANTILES) -> pd.DataFrame:
    """One row per (arm, block, level) of `levels`: the block-level statistics (see the module's doc).

    requests: one row per request (contract keys). levels: one row per (arm, block, level) with the steady window,
    `valid`, and optional `invalid_reason`, `round`, `position` (the block's place in the schedule; where the summaries
    lack them, the requests' values, else the block id stands for the position) and `level_position`. One load
    workload at a time. slo: bracket.stats.load.slo.Slo or None (no goodput columns).
    """
    _check(requests, REQUEST_COLUMNS, "requests")
    _check(levels, LEVEL_COLUMNS, "level summaries")
    lv = levels.reset_index(drop=True).copy()
    keys = ["arm", "block", "level"]
    if lv.duplicated(keys).any():
        dup = lv[lv.duplicated(keys, keep=False)][keys].drop_duplicates().to_dict("records")
        raise ValueError(f"two level summaries for the same (arm, block, level): {dup[:3]}; keep one per level run.")
    for f, what in ((requests, "requests"), (lv, "level summaries")):
        if "workload" in f and f["workload"].nunique() > 1:
            raise ValueError(
                f"the {what} hold {f['workload'].nunique()} load workloads ({sorted(map(str, f['workload'].unique()))}); "
                "analyse one at a time (filter both frames on `workload`)."
            )
    for c in ("round", "position"):
        if c not in lv and c in requests:
            # the level summary leaves the block's round and schedule position to its requests
            per = requests.dropna(subset=[c]).groupby(["arm", "block"])[c].first()
            lv[c] = [per.get((a, b), np.nan) for a, b in zip(lv["arm"], lv["block"])]
    for c in ("round", "position", "level_position"):
        if c not in lv:
            lv[c] = lv["block"] if c == "position" else np.nan
    if "invalid_reason" not in lv:
        lv["invalid_reason"] = None
    lv["valid"] = lv["valid"].astype(bool)
    lv["window_s"] = lv["steady_end_s"].astype(float) - lv["steady_start_s"].astype(float)
    bad = ~(lv["window_s"] > 0)
    if bad.any():
        raise ValueError(
            f"a steady window of length <= 0 at {lv.loc[bad, keys].to_dict('records')[:3]}; "
            "the driver must record steady_start_s < steady_end_s."
        )
    code = pd.MultiIndex.from_frame(lv[keys].astype({"arm": str, "block": float, "level": float}))
    rq = requests.reset_index(drop=True)
    rk = pd.MultiIndex.from_frame(rq[keys].astype({"arm": str, "block": float, "level": float}))
    g = code.get_indexer(rk)
    rq = rq[g >= 0]
    g = g[g >= 0]
    ok = rq["error"].isna().to_numpy()
    window = lv[["steady_start_s", "steady_end_s"]].to_numpy(float)[g]
    got, interp = tokens_in_window(
        rq["sent_s"].to_numpy(float),
        rq["first_token_s"].to_numpy(float),
        rq["end_s"].to_numpy(float),
        rq["completion_tokens"].to_numpy(float),
        rq["token_times_s"].to_numpy() if "token_times_s" in rq else None,
        rq["token_counts"].to_numpy() if "token_counts" in rq else None,
        window[:, 0] if window.size else 0.0,
        window[:, 1] if window.size else 0.0,
    )
    m = len(lv)
    lv["tokens_in_window"] = np.bincount(g[ok], weights=got[ok], minlength=m)
    lv["interpolated"] = np.bincount(g[ok], weights=interp[ok].astype(float), minlength=m).astype(int)
    lv["throughput_tok_s"] = lv["tokens_in_window"] / lv["window_s"]
    st = ok & (rq["load_phase"].to_numpy() == "steady")
    s = rq[st].reset_index(drop=True)
    gs = g[st]
    lv["n_steady"] = np.bincount(gs, minlength=m)
    lv["request_rate"] = lv["n_steady"] / lv["window_s"]
    tpot = s["tpot_s"].to_numpy(float)
    with np.errstate(divide="ignore"):
        rate = np.where(tpot > 0, 1.0 / tpot, np.nan)
    lv["decode_rate_p50"] = group_quantiles(rate, gs, m, (0.5,))[0]
    for metric, vals, codes in (
        ("ttft", s["ttft_s"].to_numpy(float), gs),
        ("tpot", tpot, gs),
        ("itl", *_itl_codes(s, gs)),
    ):
        qs = group_quantiles(vals, codes, m, quantiles)
        for p, row in zip(quantiles, qs):
            lv[qname(metric, p)] = row
    if slo is not None:
        met = slo.met(s["ttft_s"].to_numpy(float), tpot)
        met_n = np.bincount(gs, weights=met.astype(float), minlength=m)
        met_tok = np.bincount(gs, weights=np.where(met, s["completion_tokens"].to_numpy(float), 0.0), minlength=m)
        lv["goodput_req_s"] = met_n / lv["window_s"]
        lv["goodput_tok_s"] = met_tok / lv["window_s"]
        with np.errstate(invalid="ignore", divide="ignore"):
            lv["goodput_fraction"] = np.where(lv["n_steady"] > 0, met_n / lv["n_steady"], np.nan)
    return lv


def _itl_codes(steady: pd.DataFrame, gs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    gaps, rows = _itl(steady)
    return gaps, gs[rows] if rows.size else np.array([], dtype=np.int64)


def from_records(records) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The raw load records (dicts, as read from the blocks' JSON lines) split into the request frame (`"kind":
    "load_request"`) and the level summaries (`"kind": "load_level"`). Records of a control (`control` set) and
    single-stream records are left out."""
    reqs, levels = [], []
    for r in records:
        if r.get("control"):
            continue
        if r.get("kind") == "load_level":
            levels.append(r)
        elif r.get("kind") in ("load_request", None) and "load_phase" in r:
            reqs.append(r)
    if not levels:
        raise ValueError(
            "no level summaries (records with kind 'load_level') among the load records: the steady windows are "
            "unknown; analyse the records of a load workload as the load driver wrote them."
        )
    return pd.DataFrame(reqs), pd.DataFrame(levels)
