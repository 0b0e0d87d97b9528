"""The one place a finding (bracket.stats.findings) becomes a sentence: for the article and the CLI.

Each kind has one function from its payload to its message; `text` puts where it applies in
front ("arm vs reference / workload: message"), `group` merges identical messages about several
cells. The payload is data from stats.json: nothing in it is evaluated, and text a server sent
(an answer to the coherence question) is quoted with repr, then escaped by the article's elements.
"""

from __future__ import annotations

from collections.abc import Callable

from bracket.article.verdicts import undetermined_words
from bracket.records import REASON_HINTS
from bracket.stats.findings import Finding
from bracket.stats.findings import FindingKind as K


def _s(n: int, one: str = "", many: str = "s") -> str:
    return one if n == 1 else many


def _few_runs(p) -> str:
    return (
        f"only {p.n} valid run{_s(p.n)}: a median needs at least 5, "
        f"10 when speculative decoding is on; raise design.runs_per_block or design.rounds."
    )


def _wide_spread(p) -> str:
    return (
        f"spread {p.spread:.1%} is above {p.threshold:.0%}: {p.n} runs will not pin the "
        f"median; about {p.runs_needed} runs would pin it to +/-{p.precision:.0%} "
        f"(raise design.runs_per_block or design.rounds)."
    )


def _two_modes(p) -> str:
    return (
        f"two modes ({p.where}): {p.low_n} runs near {p.low_median:.4g} and {p.high_n} "
        f"near {p.high_median:.4g} ({p.high_median / p.low_median - 1:+.1%}); the median "
        f"depends on how many runs took each path, so it is unstable. Report both; the "
        f"determinism control (batch=1 vs batch=2) tells two stable paths from an unstable "
        f"configuration."
    )


def _outliers(p) -> str:
    n = len(p.values)
    return (
        f"{n} run{'s are' if n > 1 else ' is an'} outlier{_s(n)} (modified z > {p.z:g}; kept): "
        f"{', '.join(f'{v:.4g}' for v in p.values)}. Look for background load or a "
        f"prompt that decodes differently."
    )


def _drift(p) -> str:
    return (
        f"the reference {p.reference} moved {p.change:+.2%} between its first and last "
        f"blocks, more than the {p.threshold:.0%} noise threshold: raw ratios cannot tell smaller effects "
        f"from drift, and the drift-adjusted ones remove only a linear trend. Lengthen "
        f"design.cooldown_s, fix clocks, or keep the machine otherwise idle."
    )


def _host_drift(p) -> str:
    return (
        f"the reference {p.reference} moved {p.change:+.2%} between its first and last "
        f"blocks on this host, more than the {p.threshold:.0%} noise threshold; keep the host "
        f"otherwise idle (cluster.exclusive) and lengthen design.cooldown_s."
    )


def _comparison_modes(p) -> str:
    share = p.high_n / (p.low_n + p.high_n)
    return (
        f"two modes in the {p.side} ({p.where}): {p.low_n} runs near {p.low_median:.4g} "
        f"({1 - share:.0%}) and {p.high_n} near {p.high_median:.4g} ({share:.0%}), "
        f"{p.high_median / p.low_median - 1:.1%} apart"
        + (
            "; the comparison uses block means of log rate, which move with the mix of the "
            "two paths smoothly, not block medians, which jump between them"
            if p.block_means
            else "; each block settled on one path, so block medians already carry the split"
        )
    )


def _host_differs(p) -> str:
    return (
        f"the same configuration ran {p.verdict} on {p.host} (ratio "
        f"{p.ratio:.3f}, CI {p.ci_low:.3f} to {p.ci_high:.3f}): the hosts differ, so "
        f"pooled arm comparisons mix machines; read each host's results, or find the cause (clocks, "
        f"drivers, cooling, other tenants)."
    )


def _server_state(p) -> str:
    return (
        f"TTFT x{p.ttft_ratio:.2f} the reference's but the decode phase (tg) x{p.tg_ratio:.2f}: the difference "
        f"lives in TTFT (server state or prefill), not in decode, by more than the {p.margin:.0%} margin "
        f"(analysis.phase_margin); compare the arms' server state (arms.X.server.prefix_caching) before "
        f"reading the decode rate" + (f" (x{p.decode_ratio:.2f})" if p.decode_ratio else "") + " as the arm's effect."
    )


def _never_drafted(p) -> str:
    return (
        f"{p.runs} valid runs of a speculative arm (draft budget "
        f"{p.draft_budget}) proposed no draft token: the engine never "
        f"drafted, so the arm measures the baseline under another label; "
        f"check the arm's speculative settings against the engine's."
    )


def _machine(p) -> str:
    return (
        f"this machine is not steady: its memory copy rate, measured before the blocks with no server "
        f"running, moved {p.spread:.0%} between {p.window_s:g} s windows over {p.seconds:g} s "
        f"({p.low_gbps:.1f}-{p.high_gbps:.1f} GB/s). A server's runs and blocks on this machine can "
        f"differ by as much for the machine's sake alone; for narrower intervals run on a machine with "
        f"nothing else on it, or add rounds."
    )


def _gaps(p) -> str:
    return (
        f"{p.over} of {p.n} gaps between consecutive blocks exceeded the design's cooldown "
        f"({p.cooldown_s:g} s) by more than {p.excess_s:g} s (longest {p.max_s:.0f} s, median "
        f"{p.median_s:.0f} s): the blocks were further apart in time than the design asked, so drift "
        f"between them weighs more. On SLURM, run each host's blocks in one allocation "
        f"(cluster.allocation: per_host); a rerun after an interruption also leaves such a gap."
    )


def _instrument(p) -> str:
    return (
        f"bracket's request cost the server {p.cost:+.1%} per token against the "
        f"plainest request that yields the same tokens ({p.confidence:.0%} CI "
        f"{p.ci_low - 1:+.1%} to {p.ci_high - 1:+.1%}, {p.blocks} "
        f"blocks, {p.basis}): every rate in this experiment is the engine's "
        f"under bracket's request, {p.direction} than under a plain client's; see the engine "
        f"adapter's request_body."
    )


def _cache(p) -> str:
    return (
        f"the server reported no cached tokens for {p.runs} timed "
        f"run{_s(p.runs)}; each prompt began with a prefix no "
        f"other request of the experiment carried, so no prefix cache could serve "
        f"it, and the runs are counted (request.cache_guard: strict would refuse "
        f"them)."
    )


def _invalid(p) -> str:
    hint = REASON_HINTS.get(p.reason)
    hint = hint.replace("NAME", p.experiment) if hint else hint
    return f"{p.runs} run{_s(p.runs)} invalid ({p.reason}), left out of statistics" + (f": {hint}." if hint else ".")


def _torn(p) -> str:
    return (
        f"the last line of {p.file} (line {p.line}, {p.bytes} bytes) is a record cut short, as a crash while it was "
        f"written leaves one: it cannot be read, so the request it held (a timed run, a warmup or a control's) is in "
        f"no count, table or statistic here."
    )


def _bursty(p) -> str:
    lost = getattr(p, "unresolved_runs", 0)
    return (
        f"bursty delivery: in {p.bursty_runs} of {p.runs} runs one network read brought a quarter of a "
        f"stream's tokens or more; both bracket's window rate and llama-benchy's tg count only the tokens after "
        f"each stream's first read, which the window can time"
        + (
            f"; in {lost} of them one read brought half a stream or more, too few reads to time the rest, so those "
            f"runs are invalid and the cell's window rate rests on the others"
            + (
                " (none is left: the rate of this cell is not known from what the server sent)"
                if lost >= p.runs
                else ""
            )
            if lost
            else ""
        )
    )


def _coherence(p) -> str:
    return (
        f"the model failed llama-benchy's coherence check on {p.failed} of {p.checked} servers: asked "
        f"{p.question!r}, it answered {p.answer[:120]!r}, without 'Paris' (llama-benchy would have stopped "
        f"here; its numbers measure a model that does not answer sensibly)"
    )


def _benchy_dropped(p) -> str:
    return f"llama-benchy's tg leaves out {p.tg} of {p.of} {p.unit} ({p.reason}); its mean is over the rest"


def _cpus(p) -> str:
    return (
        f"{p.blocks} of {p.of} blocks ran on fewer CPUs than they asked ({p.basis}): block {p.block} could run "
        f"on {p.fewest} of the {p.asked} asked (its meta's cpus_allowed), so its server had less of the machine "
        f"than the design says. On SLURM, set cluster.cpus to the count a server needs, or keep "
        f"cluster.exclusive: true with cluster.cpus: 0 so the job step asks no count."
    )


MESSAGES: dict[K, Callable[[object], str]] = {
    K.FEW_RUNS: _few_runs,
    K.WIDE_SPREAD: _wide_spread,
    K.TWO_MODES: _two_modes,
    K.OUTLIERS: _outliers,
    K.DRIFT: _drift,
    K.HOST_DRIFT: _host_drift,
    K.NO_REFERENCE: lambda p: f"the reference {p.reference} has no valid runs, so nothing is compared.",
    K.NOT_COMPARED: lambda p: f"not compared: {p.error}",
    K.DRIFT_UNKNOWN: lambda p: (
        "no arm was measured twice, so drift is unknown and the band is the stated "
        "threshold; interleave the arms (design.kind: abab) to measure it"
    ),
    K.POOLED: lambda p: "blocks agreed within request noise (F test), so block and request noise were pooled",
    K.COMPARISON_MODES: _comparison_modes,
    K.UNDETERMINED: lambda p: f"undetermined: {undetermined_words(p.reason)}.",
    K.HOST_DIFFERS: _host_differs,
    K.SERVER_STATE: _server_state,
    K.NEVER_DRAFTED: _never_drafted,
    K.MACHINE: _machine,
    K.GAPS: _gaps,
    K.INSTRUMENT: _instrument,
    K.CACHE_UNREPORTED: _cache,
    K.SEQUENTIAL: lambda p: (
        "design.kind is sequential: every arm ran in one stretch of time, so "
        "drift and arm are confounded; use abab or abba."
    ),
    K.SLOW_FIRST_RUN: lambda p: (
        f"the first timed run was the slowest in {p.hits} of {p.total} blocks: raise design.warmup_runs."
    ),
    K.INVALID: _invalid,
    K.NO_VALID_RUNS: lambda p: "no valid runs: every request was a warmup or invalid; see counts.",
    K.TORN_RECORD: _torn,
    K.BURSTY: _bursty,
    K.COHERENCE: _coherence,
    K.BENCHY_DROPPED: _benchy_dropped,
    K.CPUS_NARROW: _cpus,
    K.RECORDED: lambda p: p.message,
}


def _finding(f: Finding | dict) -> Finding:
    return f if isinstance(f, Finding) else Finding.of(f)


def message(f: Finding | dict) -> str:
    """The finding's sentence, without where it applies."""
    f = _finding(f)
    return MESSAGES[f.kind](f.payload)


def where(f: Finding | dict) -> str | None:
    """ "arm / workload", "arm vs reference / workload", "host vs host / arm / workload", or None."""
    f = _finding(f)
    who = f.host or f.arm
    if who and f.vs:
        who = f"{who} vs {f.vs}"
    parts = [p for p in (who, f.arm if f.host else None, f.workload) if p]
    return " / ".join(parts) if parts else None


def text(f: Finding | dict) -> str:
    """ "where: message", as the terminal prints it."""
    w = where(f)
    return f"{w}: {message(f)}" if w else message(f)


def texts(findings: list) -> list[str]:
    return [text(f) for f in findings]


def group(findings: list) -> list[str]:
    """Identical messages about several cells, merged: "message (baseline / code, ngram_4 / chat)"."""
    groups: dict[str, list[str]] = {}
    for r in findings:
        msg, w = message(r), where(r)
        groups.setdefault(msg, [])
        if w:
            groups[msg].append(w)
    return [f"{msg} ({', '.join(who)})" if who else msg for msg, who in groups.items()]
