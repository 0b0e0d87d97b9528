"""The article: escaping, the sections' numbers, the notebook pair, a full render, and a browser check.

One render of the committed fixture (real records from the embedded engine) with hostile text
planted where server text reaches the article: a model output, a version string, an error.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
from bracket import article, records
from bracket.article import render as report
from bracket.stats.provenance import attempt_record

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "report" / "probe"
NOTEBOOK = ROOT / "notebooks" / "article.ipynb"
CHROMIUM = Path("/usr/bin/chromium")

SCRIPT = "<script>alert(1)</script>"
BOLD = "<b>bold</b>"


def params(src: Path, out: Path) -> dict:
    return {
        "runs_csv": str(src / "runs.csv"),
        "stats_json": str(src / "stats.json"),
        "meta_dir": str(src / "raw"),
        "corrections_path": str(src / "probe.corrections.yaml"),
        "out_dir": str(out),
    }


def plant_hostile_text(src: Path) -> None:
    """Put HTML in every kind of server text the article shows."""
    block = src / "raw" / "block-0.jsonl"
    recs = [json.loads(line) for line in block.read_text().splitlines()]
    first_timed = next(r for r in recs if not r["warmup"] and r["workload"] == "code")
    first_timed["output_text"] = f"{SCRIPT} {BOLD} | `tick` [x](javascript:alert(2))\n# not a heading"
    block.write_text("".join(json.dumps(r) + "\n" for r in recs))
    # the version the server reported, as stats.json states the blocks' provenance (bracket.stats.provenance)
    stats = json.loads((src / "stats.json").read_text())
    stats["provenance"]["served"]["versions"] = [f"0.32.0 {BOLD}"]
    (src / "stats.json").write_text(json.dumps(stats))
    runs = pd.read_csv(src / "runs.csv")
    runs["error"] = runs["error"].astype(object)
    runs.loc[runs.index[0], "error"] = f"server said {SCRIPT}"
    runs.to_csv(src / "runs.csv", index=False)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    src = tmp_path_factory.mktemp("experiment")
    shutil.copytree(FIXTURE, src, dirs_exist_ok=True)
    plant_hostile_text(src)
    out = tmp_path_factory.mktemp("report")
    t0 = time.perf_counter()
    paths = report.render(NOTEBOOK, out, params(src, out))
    paths["seconds"] = time.perf_counter() - t0
    paths["out"] = out
    paths["src"] = src
    return paths


# ---------------------------------------------------------------- escaping


def test_md_esc_neutralises_html_and_markdown():
    s = article.md_esc(f"{SCRIPT} {BOLD} a|b `c` [d](e) *f* _g_\nline")
    assert "<" not in s and ">" not in s
    assert "&lt;script&gt;" in s
    assert r"\|" in s and r"\`" in s and r"\[" in s and r"\*" in s and r"\_" in s
    assert "\n" not in s
    assert article.md_esc("# title").startswith("\\#")
    assert article.md_esc("1. item").startswith("1\\.")
    assert article.md_esc("6.30") == "6.30"


def test_table_and_pre_escape_in_both_outputs():
    t = article.Table(pd.DataFrame({"out": [SCRIPT], "n": [1]}))
    assert SCRIPT not in t.html() and "&lt;script&gt;alert(1)&lt;/script&gt;" in t.html()
    assert SCRIPT not in t.markdown()
    p = article.Pre("```\n" + SCRIPT)
    assert "<script>" not in p.html()
    fence = p.markdown().split("\n")[0]
    assert fence.startswith("````"), "the fence must be longer than any backtick run inside"


# ---------------------------------------------------------------- reading the files


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("d")
    return article.load(**params(FIXTURE, out))


def test_headline_numbers_are_the_raw_values(data):
    """Median, n, min and max of the headline are those of the valid raw runs printed at the end."""
    rows = article.headline_rows(data)
    assert {r["workload"] for r in rows} == {"code", "prose", "chat"}
    for r in rows:
        vals = data.runs[
            (data.runs["arm"] == r["arm"]) & (data.runs["workload"] == r["workload"]) & data.runs["valid"]
        ]["decode_tok_s"]
        assert r["n"] == len(vals)
        assert r["median"] == pytest.approx(vals.median())
        assert (r["min"], r["max"]) == pytest.approx((vals.min(), vals.max()))
        ref = data.runs[
            (data.runs["arm"] == "baseline") & (data.runs["workload"] == r["workload"]) & data.runs["valid"]
        ]["decode_tok_s"]
        assert r["ratio"] == pytest.approx(vals.median() / ref.median())
        shown = article.raw_table(data.runs, r["workload"])
        printed = shown[(shown["arm"] == r["arm"]) & (shown["status"] == "valid")]["decode tok/s"]
        assert article.rate(r["median"]) in set(printed)


def test_headline_sentence_reads_like_seed_000():
    row = {
        "workload": "code",
        "arm": "D1",
        "median": 65.0181,
        "n": 10,
        "min": 56.63,
        "max": 69.30,
        "ratio": 65.0181 / 12.3162,
        "ci_low": 5.0,
        "ci_high": 5.5,
        "verdict": "faster",
        "is_reference": False,
        "ref_median": 12.3162,
        "ref_n": 10,
        "ref_min": 12.302,
        "ref_max": 12.384,
    }
    s = article.headline_sentence(row, "baseline")
    assert "65.02 tok/s (10 runs, 56.6\u201369.3), 5.28x the baseline" in s


def test_raw_table_keeps_and_marks_every_row(data):
    for wl in data.workloads:
        t = article.raw_table(data.runs, wl)
        assert len(t) == (data.runs["workload"] == wl).sum()
        assert (t["status"] == "warmup").sum() == (data.runs[data.runs["workload"] == wl]["warmup"]).sum()
    runs = data.runs.copy()
    runs.loc[5, ["valid", "invalid_reason"]] = [False, "cache hit"]
    t = article.raw_table(runs, runs.loc[5, "workload"])
    assert "INVALID: cache hit" in set(t["status"])


def test_guards_are_checked_not_assumed(data):
    g = article.guards(data.runs)
    assert any("cached_tokens at 0" in x for x in g)
    assert any("pinned at 256 tokens" in x for x in g)
    runs = data.runs.copy()
    runs.loc[runs.index[~runs["warmup"]][0], "cached_tokens"] = 12
    assert any("hit the prefix cache" in x for x in article.guards(runs))


def test_recommendation_keeps_the_reference_without_a_verdict(data):
    t, split = article.recommendations(data)
    assert split  # the fastest arm differs: ngram_8 on code, ngram_4 on prose and chat
    assert set(t["use"]) == {"baseline"}  # but no verdict said "faster" with three runs
    d = article.Data(**{**data.__dict__, "stats": json.loads(json.dumps(data.stats))})
    for b in d.stats["best"].values():  # as the analysis writes it for a fastest arm shown faster
        b.update(verdict="faster", use=b["arm"], use_because="shown faster")
    t, split = article.recommendations(d)
    assert dict(zip(t["workload"], t["use"])) == {"code": "ngram_8", "prose": "ngram_4", "chat": "ngram_4"}
    assert "--speculative-config" in t.loc[t["workload"] == "code", "flags"].iloc[0]


def test_group_warnings_merges_repeated_messages():
    from bracket.article.findings import message, text
    from bracket.stats import findings as F

    K = F.FindingKind
    fs = [
        F.Finding(K.FEW_RUNS, F.FewRuns(3), arm="a", workload="code"),
        F.Finding(K.FEW_RUNS, F.FewRuns(3), arm="b", workload="chat"),
        F.Finding(K.POOLED, arm="x", vs="a", workload="code"),
        F.Finding(K.INVALID, F.Invalid(2, "cache hit", "probe")),
        F.Finding(
            K.HOST_DIFFERS,
            F.HostDiffers("box-2", "slower", 0.9, 0.85, 0.95),
            host="box-2",
            vs="box-1",
            arm="base",
            workload="code",
        ),
    ]
    pooled = "blocks agreed within request noise (F test), so block and request noise were pooled"
    assert text(fs[2]) == f"x vs a / code: {pooled}"
    g = article.group_warnings([f.record() for f in fs])
    assert g[0].startswith("only 3 valid runs: a median needs at least 5") and g[0].endswith(" (a / code, b / chat)")
    assert f"{pooled} (x vs a / code)" in g
    assert message(fs[3]) in g and message(fs[3]).startswith("2 runs invalid (cache hit), left out of statistics: ")
    assert any(
        w.startswith("the same configuration ran slower on box-2 (ratio 0.900, CI 0.850 to 0.950)")
        and w.endswith("(box-2 vs box-1 / base / code)")
        for w in g
    )


def test_corrections_ledger(tmp_path):
    assert article.load_corrections(tmp_path / "none.yaml") is None
    p = tmp_path / "x.corrections.yaml"
    p.write_text("- {date: 2026-11-29, claim: a, correction: b, evidence: c}\n")
    assert article.load_corrections(p) == [{"date": "2026-11-29", "claim": "a", "correction": "b", "evidence": "c"}]
    p.write_text("- {date: 2026-11-29, claim: a, correction: b}\n")
    with pytest.raises(article.CorrectionsError, match="entry 1 lacks evidence"):
        article.load_corrections(p)
    p.write_text("claim: a\n")
    with pytest.raises(article.CorrectionsError, match="YAML list"):
        article.load_corrections(p)


def test_the_report_reads_the_files_it_is_given(tmp_path):
    """Named blocks only (a stale block file beside them is not read); what ran is stats.json's provenance, so
    the blocks' meta, the failed attempts and the model's build record beside the records are not read."""
    src = tmp_path / "probe"
    shutil.copytree(FIXTURE, src)
    shutil.copy(src / "raw" / "block-2.jsonl", src / "raw" / "block-7.jsonl")  # left from a longer schedule
    named = [src / "raw" / f"block-{k}.jsonl" for k in range(3)]
    d = article.load(**params(src, tmp_path / "out"), block_files=named)
    assert len(d.raw) == sum(len(p.read_text().splitlines()) for p in named)
    assert len(article.load(**params(src, tmp_path / "out2")).raw) > len(d.raw)  # on its own: the folder
    before = article.section_method(d)._repr_markdown_()
    for p in [*(src / "raw").glob("*.meta.json"), src / "raw" / "model-build.json"]:
        p.write_text('{"status": "failed", "arm": "ngram_8", "layers": 99, "version": "9.9.9"}')
    (src / "raw" / "failed").mkdir()
    (src / "raw" / "failed" / "block-0.attempt-1.meta.json").write_text('{"block": 0, "error": "planted"}')
    (src / "failed_attempts.json").write_text('[{"block": 0, "error": "planted"}]')
    d = article.load(**params(src, tmp_path / "out3"), block_files=named)
    assert article.section_method(d)._repr_markdown_() == before
    assert "Built locally (build.json): 4 layers" in before and "vLLM 0.32.0" in before


#: The k model as stats.json holds it when no speculative arm ran (bracket.stats.speculative).
NO_K_MODEL = {"band": None, "rows": [], "verdict": "untested", "reason": "no_valid_runs"}


def test_sections_absent_without_their_data(data):
    d = article.Data(
        **{
            **data.__dict__,
            "stats": {**data.stats, "speculative": [], "k_model": NO_K_MODEL, "physics": None},
            "corrections": None,
        }
    )
    assert article.section_speculative(d) is None
    assert article.section_ceiling(d) is None
    assert article.section_hypotheses(d) is None
    assert "None." in article.section_corrections(d)._repr_markdown_()


# ---------------------------------------------------------------- the notebook pair


def test_notebook_pair_in_sync():
    import jupytext

    py = jupytext.read(ROOT / "notebooks" / "article.py")
    nb = jupytext.read(NOTEBOOK)
    assert [(c.cell_type, c.source) for c in py.cells] == [(c.cell_type, c.source) for c in nb.cells], (
        "notebooks/article.py and article.ipynb differ: run `.venv/bin/jupytext --sync notebooks/article.py`"
    )
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    for line in tagged[0].source.splitlines():
        assert re.fullmatch(r'\w+ = "[^"]*"', line), f"parameters hold literals only: {line!r}"
        name, value = line.split(" = ")[0], line.split('"')[1]
        # fixture paths, the output folder, or the optional lists and paths only the report rule names
        assert (
            value.startswith("../tests/data/report/")
            or name == "out_dir"
            or (name in ("verdict_paths", "block_files") and value in ("", "[]"))
        )


# ---------------------------------------------------------------- the render


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


@pytest.mark.integration
def test_render_writes_article_figures_and_tables(rendered):
    out = rendered["out"]
    html_text = rendered["html"].read_text()
    md = rendered["md"].read_text()
    for name in ("run_sequence", "distributions", "acceptance"):
        w, h = _png_size(out / "figures" / f"{name}.png")
        assert w > 200 and h > 100
        assert f'src="figures/{name}.png"' in html_text and f"(figures/{name}.png)" in md
    for name in ("results_code.csv", "raw_chat.csv", "speculative.csv", "recommendations.csv", "schedule.csv"):
        assert (out / "tables" / name).is_file()
    assert len(pd.read_csv(out / "tables" / "raw_code.csv")) == 12
    for heading in (
        "Results per workload",
        "Speculative decoding",
        "Drift",
        "Hypotheses tested",
        "Recommendation",
        "Warnings the analysis raised",
        "How these numbers were taken",
        "Corrections",
        "Every raw value",
    ):
        assert heading in html_text and heading in md
    # The ceiling comes before the measurements, the raw values last.
    assert html_text.index("the ceiling") < html_text.index("Results per workload") < html_text.index("Every raw value")
    assert "article.load(" not in html_text and "import" not in md, "no code in the article"
    assert "Example entry" in md  # the corrections ledger


@pytest.mark.integration
def test_server_text_is_escaped(rendered):
    html_text = rendered["html"].read_text()
    md = rendered["md"].read_text()
    assert "<script" not in html_text.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html_text
    assert BOLD not in html_text and "&lt;b&gt;bold&lt;/b&gt;" in html_text
    assert "Content-Security-Policy" in html_text and "script-src 'none'" in html_text
    assert "<script" not in md.lower() and BOLD not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert "javascript:alert(2))" not in md.replace("\\", "") or "\\[x\\]" in md


@pytest.mark.integration
def test_rerender_is_fast(rendered):
    # Re-rendering reads files only; the budget on the project's 2-core machines is 20 s.
    assert rendered["seconds"] < 20, f"render took {rendered['seconds']:.1f} s"


# ---------------------------------------------------------------- headless browser


class Chromium:
    """Chromium driven over --remote-debugging-pipe (fd 3 in, fd 4 out, NUL-separated JSON)."""

    FLAGS = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--remote-debugging-pipe",
        "--window-size=1200,900",
        "--hide-scrollbars",
    ]

    def __init__(self, profile: Path):
        to_r, self._to = os.pipe()
        self._from, from_w = os.pipe()

        def fds():
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)

        self.proc = subprocess.Popen(
            [str(CHROMIUM), *self.FLAGS, f"--user-data-dir={profile}", "about:blank"],
            preexec_fn=fds,
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_r)
        os.close(from_w)
        self._buf, self._id, self.events = b"", 0, []

    def send(self, method, params=None, session=None, timeout=30.0):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reply = self._next(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)
        raise TimeoutError(method)

    def wait_event(self, name, timeout=30.0):
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == name for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(name)
            self.events.append(self._next(deadline))

    def _next(self, deadline) -> dict:
        import select

        while b"\0" not in self._buf:
            ready, _, _ = select.select([self._from], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError("no message from chromium")
            chunk = os.read(self._from, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="/usr/bin/chromium is absent: install Debian's chromium "
    "(apt-get install -y chromium) to run the browser check",
)
@pytest.mark.integration
@pytest.mark.browser
def test_article_in_headless_chromium(rendered, tmp_path):
    browser = Chromium(Path(tempfile.mkdtemp(dir=tmp_path)))
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            browser.send(f"{domain}.enable", session=session)
        browser.send("Page.navigate", {"url": rendered["html"].resolve().as_uri()}, session=session)
        browser.wait_event("Page.loadEventFired")

        def js(expr):
            return browser.send("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session=session)[
                "result"
            ]["value"]

        images = js("Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])")
        assert len(images) == 3
        for src, complete, width in images:
            assert complete and width > 0, f"figure {src} did not load"
        assert js("document.scripts.length") == 0
        text = js("document.body.innerText")
        assert SCRIPT in text and BOLD in text, "server text must appear as text"
        assert js("document.querySelectorAll('article b').length") == 0
        shot = base64.b64decode(browser.send("Page.captureScreenshot", {"format": "png"}, session=session)["data"])
        (rendered["out"] / "screenshot.png").write_bytes(shot)
        import io

        from PIL import Image

        img = Image.open(io.BytesIO(shot)).convert("L")
        lo, hi = img.getextrema()
        assert hi - lo > 100, "the screenshot is blank"
        assert not any(e.get("method") == "Page.javascriptDialogOpening" for e in browser.events), "a script ran"
    finally:
        browser.close()


def test_drift_section_when_the_design_measured_it(data):
    """Two rounds: the reference's first-vs-last change, the trend per block, round-to-round changes."""
    drift = {
        wl: {
            "reference_first_vs_last": 0.0131,
            "reference_blocks": {
                "first_position": 0,
                "last_position": 6,
                "first_median": 35.70,
                "last_median": 36.17,
                "change": 0.0131,
            },
            "rounds": {"baseline": {"medians": {"1": 35.70, "2": 36.17}, "change": 0.0131}},
            "slope_per_block": 0.002,
            "slope_ci": [-0.001, 0.005],
            "slope_p": 0.2,
            "effects": {},
        }
        for wl in data.workloads
    }
    worst = {"change": 0.0131, "workload": "code", "threshold": 0.01, "beyond": True}  # as stats.drift.worst says
    d = article.Data(
        **{**data.__dict__, "stats": {**data.stats, "drift": drift, "noise_threshold": 0.01, "drift_worst": worst}}
    )
    t = article.drift_table(d)
    assert list(t["baseline first vs last block"]) == ["+1.31%"] * 3
    assert t["first / last median"].iloc[0] == "35.70\u201336.17"
    assert t["trend per block"].iloc[0] == "+0.20%"
    md = article.section_drift(d)._repr_markdown_()
    assert "up to 1.31%" in md and "cannot be told from drift" in md
    assert "not measurable" in article.section_drift(data)._repr_markdown_()


def test_budget_table_shows_the_same_flag_per_workload(data):
    t = article.budget_table(data)
    assert list(t["workload"]) == ["code", "prose", "chat"]
    code = t.iloc[0]
    assert code["budget 4"] == "510.74" and code["budget 8"] == "653.44" and code["arms"] == "ngram_4, ngram_8"
    assert code["change 4 \u2192 8"] == f"{100 * (653.4400730415679 / 510.73780956534927 - 1):+.1f}%"


@pytest.mark.integration
def test_every_section_on_a_two_round_experiment_with_invalid_runs(tmp_path):
    """A second round (the fixture's blocks again, 3 % slower, later), a cache hit, an error and an
    early stop: drift becomes measurable and every section renders without failing."""
    import yaml
    from bracket.experiment import config
    from bracket.stats import analyze

    recs = records.read(sorted((FIXTURE / "raw").glob("block-*.jsonl")))
    second = []
    for r in recs:
        r2 = dict(
            r,
            position=r["position"] + 3,
            block=r["block"] + 3,
            round=2,
            started_at=r["started_at"] + 600,
            wall_s=r["wall_s"] * 1.03,
        )
        r2["decode_tok_s"] = r2["completion_tokens"] / r2["wall_s"]
        second.append(r2)
    timed = [r for r in second if not r["warmup"]]
    timed[0]["cached_tokens"] = 40
    timed[1].update(error=f"HTTP 500 {SCRIPT}", finish_reason=None)
    timed[2].update(finish_reason="stop", completion_tokens=100)
    (tmp_path / "raw").mkdir()
    for k in range(6):
        (tmp_path / "raw" / f"block-{k}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in recs + second if r["position"] == k)
        )
    raw_cfg = yaml.safe_load((FIXTURE / "probe.yaml").read_text())
    raw_cfg["design"]["rounds"] = 2
    raw_cfg["analysis"]["bootstrap_resamples"] = 200
    (tmp_path / "two.yaml").write_text(yaml.safe_dump(raw_cfg))
    cfg = config.validate(raw_cfg)
    runs = records.tidy(records.read(sorted((tmp_path / "raw").glob("*.jsonl"))))
    runs.to_csv(tmp_path / "runs.csv", index=False)
    from bracket.experiment import design

    design.write(design.from_config(cfg), tmp_path / "schedule.csv")
    stats = analyze(
        runs,
        cfg,
        json.loads((FIXTURE / "ceiling.json").read_text()),
        weights=json.loads((FIXTURE / "weights.json").read_text()),
        schedule=pd.read_csv(tmp_path / "schedule.csv"),
    ).data()
    (tmp_path / "stats.json").write_text(json.dumps(stats))
    d = article.load(
        tmp_path / "runs.csv",
        tmp_path / "stats.json",
        tmp_path / "raw",
        tmp_path / "none.yaml",
        tmp_path / "out",
    )
    sections = [
        article.section_headline(d),
        article.section_ceiling(d),
        article.section_results(d),
        article.section_speculative(d),
        article.section_drift(d, article.figure_run_sequence(d)),
        article.section_hypotheses(d),
        article.section_recommendations(d),
        article.section_warnings(d),
        article.section_method(d),
        article.section_outputs(d),
        article.section_corrections(d),
        article.section_raw(d),
    ]
    md = "\n".join(s._repr_markdown_() for s in sections if s)
    html_text = "\n".join(s._repr_html_() for s in sections if s)
    (tmp_path / "article.md").write_text(md)
    assert "first vs last block" in md  # drift measured
    assert "cache hit" in md and "INVALID: error" in md and "early stop" in md
    assert SCRIPT not in html_text and SCRIPT not in md
    assert "None. Corrections are appended to none.yaml" in md
    assert (tmp_path / "out" / "figures" / "run_sequence.png").is_file()


@pytest.mark.integration
def test_failed_block_attempts_are_reported_escaped(tmp_path):
    """A block that failed and ran again: the article names the attempt, its records and its error."""
    src = tmp_path / "probe"
    shutil.copytree(FIXTURE, src)
    failed = src / "raw" / "failed"
    failed.mkdir()
    keep = (src / "raw" / "block-1.jsonl").read_text().splitlines()[:2]
    (failed / "block-1.attempt-1.jsonl").write_text("\n".join(keep) + "\n")
    (failed / "block-1.attempt-1.meta.json").write_text(
        json.dumps(
            {
                "block": 1,
                "arm": "ngram_4",
                "status": "failed",
                "error": f"BlockFailed: server exited with code -9 in the middle of block 1 {SCRIPT}",
            }
        )
    )
    # as rule collect gathers them and rule analyze states them (bracket.stats.provenance)
    attempts = records.failed_attempts(src / "raw")
    stats = json.loads((src / "stats.json").read_text())
    stats["provenance"]["failed_attempts"] = [attempt_record(m) for m in attempts]
    (src / "stats.json").write_text(json.dumps(stats))
    d = article.load(**params(src, tmp_path / "out"))
    assert len(d.provenance["failed_attempts"]) == 1 and d.provenance["failed_attempts"][0]["records_kept"] == 2
    section = article.section_method(d)
    md, html_ = section._repr_markdown_(), section._repr_html_()
    assert "1 block attempt(s) failed" in md and "raw/failed/block-1.attempt-1.jsonl" in md
    assert "code -9" in md and SCRIPT not in html_ and "&lt;script&gt;" in html_


NO_DRIFT = {"rounds": {}, "slope_ci": None, "slope_p": None}  # a host's drift with nothing measured


def test_hosts_are_compared_like_arms_in_the_drift_section(data):
    """stats.json's hosts section (bracket.stats.hosts) reaches the article: ratio, CI, verdict, drift."""
    hosts = {
        "names": ["spark-1", "spark-2"],
        "baseline": "spark-1",
        "comparisons": [
            {  # a comparison as stats.json holds one (the fixture's), made a host comparison
                **next(c for c in data.stats["comparisons"] if c["workload"] == "code"),
                "arm": "baseline",
                "workload": "code",
                "baseline": "spark-1",
                "candidate": "spark-2",
                "ratio": 0.9512,
                "ci_low": 0.9301,
                "ci_high": 0.9733,
                "ci_level": 0.95,
                "raw_ratio": 0.9498,
                "raw_ci_low": 0.9201,
                "raw_ci_high": 0.9805,
                "basis": "drift-adjusted",
                "p_value": 0.004,
                "verdict": "slower",
            }
        ],
        "drift": {
            "spark-1": {"code": {**NO_DRIFT, "reference_first_vs_last": 0.0123, "slope_per_block": 0.002}},
            "spark-2": {"code": {**NO_DRIFT, "reference_first_vs_last": None, "slope_per_block": None}},
        },
    }
    d = article.Data(**{**data.__dict__, "stats": {**data.stats, "hosts": hosts}})
    md = article.section_drift(d)._repr_markdown_()
    assert "Each host against spark-1" in md
    # The ratio the verdict rests on, the raw ratio with its CI, then the CI the verdict rests on, p, verdict.
    assert (
        "| baseline | code | spark-2 | spark-1 | 0.951x | 0.950x (0.920–0.981) | drift-adjusted, 95% CI 0.930–0.973 | 0.004 | slower |"
        in md
    )
    assert "+1.23%" in md and "n/a" in md
    assert "Hosts" not in article.section_drift(data)._repr_markdown_()


def test_method_says_how_the_server_was_started(data):
    assert "fresh server process was launched for each block" in article.section_method(data)._repr_markdown_()
    import copy

    def method(stats):  # the method section of the fixture with these stats (a Data reads its stats once)
        return article.section_method(article.Data(**{**data.__dict__, "stats": copy.deepcopy(stats)}))

    stats = copy.deepcopy(data.stats)
    stats["provenance"]["served"]["launches"] = ["attach"]  # every block attached to a server started by hand
    md = method(stats)._repr_markdown_()
    assert "not restarted between blocks" in md and "same server flags" in md and "a flush failed" not in md
    stats["provenance"]["flush_warnings"] = True
    assert "see the warnings below: a flush failed" in method(stats)._repr_markdown_()
    stats["provenance"]["served"]["launches"] = ["docker"]
    assert "A fresh container was started for each block" in method(stats)._repr_markdown_()


def _telemetry(sm_min, sm_max, reasons=()):
    return {
        "n": 20,
        "name": "NVIDIA H200",
        "sm_clock_mhz": {"min": sm_min, "median": sm_max, "max": sm_max},
        "mem_clock_mhz": {"min": 3201, "median": 3201, "max": 3201},
        "temp_c": {"min": 36, "median": 45, "max": 48},
        "power_w": {"min": 120.0, "median": 481.3, "max": 504.5},
        "util_gpu_pct": {"min": 0, "median": 72, "max": 76},
        "throttle_reasons_seen": list(reasons),
    }


def test_the_accelerator_of_every_block_is_in_the_method_section(data):
    """NVML telemetry from each block's meta, as stats.json's provenance states it: a table per block, and one
    sentence on whether the clock moved."""
    import copy

    assert article.section_telemetry(data) is None  # the CPU fixture has none
    stats = copy.deepcopy(data.stats)
    blocks = stats["provenance"]["blocks"]
    for b in blocks:
        b["telemetry"] = _telemetry(1980, 1980, ["gpu_idle"])
    d = article.Data(**{**data.__dict__, "stats": stats})
    md = article.section_method(d)._repr_markdown_()
    assert "The accelerator during each block" in md and "held at 1980 MHz in every block" in md
    t = article.telemetry_table(d)
    assert len(t) == len(blocks) == 3 and set(t["power W, median (max)"]) == {"481 (504)"}
    assert set(t["temperature °C (min–median–max)"]) == {"36–45–48"}
    blocks[0]["telemetry"] = _telemetry(1410, 1980, ["sw_thermal_slowdown"])
    md = article.section_telemetry(article.Data(**{**data.__dict__, "stats": copy.deepcopy(stats)}))._repr_markdown_()
    assert "ranged 1410–1980 MHz" in md and "sw\\_thermal\\_slowdown" in md  # markdown-escaped


def test_a_range_that_runs_off_reads_as_such():
    # A ratio CI on one degree of freedom: not a hundred digits, not a false zero.
    assert article.span(0.0001, 3.5e107, 2) == "<0.01\u20133.5e+107"
    assert article.span(56.63, 69.3) == "56.6\u201369.3" and article.span(0.0, 1.0, 2) == "0.00\u20131.00"
