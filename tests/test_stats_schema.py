"""stats.json as typed results (bracket.stats.results): the committed JSON Schema is what the models generate,
every key has a description, every stats.json in the repository reads into a `Stats` through
bracket.stats.contract.upgrade, and what it holds cannot be changed."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import tarfile
from types import MappingProxyType

import jsonschema
import pydantic
import pytest
from bracket.stats import contract
from bracket.stats import findings as F
from bracket.stats.results import Comparison, FindingRecord, Result, Stats

from tests.support import ROOT

PROBE = ROOT / "tests" / "data" / "report" / "probe" / "stats.json"


def _generator():
    spec = importlib.util.spec_from_file_location("stats_schema", ROOT / "tools" / "stats_schema.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _committed_stats_files() -> list:
    out = subprocess.run(["git", "ls-files", "*stats.json"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / p for p in out.stdout.split()]


def _archived_stats_files() -> list:
    """(archive, member) of every stats.json inside a committed results archive (the studies' records)."""
    out = subprocess.run(["git", "ls-files", "*.tar.gz"], cwd=ROOT, capture_output=True, text=True, check=True)
    found = []
    for name in out.stdout.split():
        with tarfile.open(ROOT / name) as t:
            found += [(name, m.name) for m in t.getmembers() if m.name.endswith("stats.json")]
    return found


def _models(cls=Stats, seen=None) -> set:
    """`cls` and every results model its fields name, all the way down."""
    seen = set() if seen is None else seen
    if cls in seen:
        return seen
    seen.add(cls)
    for f in cls.model_fields.values():
        for sub in _classes(f.annotation):
            _models(sub, seen)
    return seen


def _classes(annotation) -> list:
    if isinstance(annotation, type) and issubclass(annotation, Result):
        return [annotation]
    return [c for a in getattr(annotation, "__args__", ()) or () for c in _classes(a)] + [
        c for a in getattr(annotation, "__metadata__", ()) or () if isinstance(a, type) for c in _classes(a)
    ]


def test_the_committed_schema_is_what_the_models_generate():
    gen = _generator()
    assert gen.SCHEMA.read_text() == gen.render(), "run .venv/bin/python tools/stats_schema.py"


def test_every_field_of_every_model_says_what_it_is():
    models = _models()
    assert len(models) > 30  # the walk reached the parts, not the top alone
    missing = [f"{m.__name__}.{n}" for m in models for n, f in m.model_fields.items() if not f.description]
    assert missing == []
    assert all(m.model_config.get("frozen") and m.model_config.get("extra") == "forbid" for m in models)


@pytest.mark.parametrize("path", _committed_stats_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_stats_file_reads_as_stats(path):
    raw = json.loads(path.read_text())
    stats = contract.upgrade(raw)
    assert isinstance(stats, Stats)
    assert len(stats.cells) == len(raw["cells"]) and len(stats.comparisons) == len(raw["comparisons"])
    if raw.get("stats_version", 1) >= 4:  # today's JSON: the schema takes the file as it is
        jsonschema.validate(raw, json.loads((ROOT / "workflow/schemas/stats.schema.json").read_text()))


@pytest.mark.parametrize("archive,member", _archived_stats_files(), ids=lambda x: str(x))
def test_every_archived_stats_file_reads_as_stats(archive, member):
    with tarfile.open(ROOT / archive) as t:
        raw = json.load(t.extractfile(member))
    stats = contract.upgrade(raw)
    assert [c.median for c in stats.cells] == [c["median"] for c in raw["cells"]]  # the numbers as they were


def test_a_file_of_today_reads_and_writes_back_as_it_was_but_its_version():
    raw = json.loads(PROBE.read_text())
    stats = contract.upgrade(raw)
    assert stats.stats_version == 5
    assert stats.data() == {**raw, "stats_version": 5}  # no key added, none lost, every number the same
    assert Stats.model_validate(stats.data()) == stats


def test_a_version_1_file_upgrades_its_old_shapes():
    # bench/results/adaptive_draft_sweep/stats.json predates stats_version: its first comparison wrote its plan as
    # "+/-18.5%", its drift's interval method as cov_type, its findings as sentences
    stats = contract.upgrade(json.loads((ROOT / "bench/results/adaptive_draft_sweep/stats.json").read_text()))
    assert stats.comparisons[0].rounds_needed_for == pytest.approx(0.185)
    assert stats.drift["chat"].ci_method.startswith("OLS on log block medians")
    assert stats.experiment is None and stats.provenance is None  # nothing to fill them from: the article refuses
    assert all(f.kind == F.FindingKind.RECORDED for f in stats.findings)
    with pytest.raises(contract.OldStats, match="--forcerun analyze"):
        contract.require(stats, "results/adaptive_draft_sweep/stats.json")


def test_what_stats_holds_cannot_be_changed():
    stats = contract.upgrade(json.loads(PROBE.read_text()))
    with pytest.raises(pydantic.ValidationError):
        stats.reference = "other"
    with pytest.raises(pydantic.ValidationError):
        stats.cells[0].median = 1.0
    assert isinstance(stats.cells, tuple) and isinstance(stats.cells[0].outliers, tuple)
    assert isinstance(stats.drift, MappingProxyType) and isinstance(stats.best, MappingProxyType)
    with pytest.raises(TypeError):
        stats.best["chat"] = stats.best["chat"]
    look = stats.experiment.engine
    with pytest.raises(TypeError):
        look["kind"] = "vllm"  # a record whose shape another part owns is frozen all the way down


def test_no_key_outside_the_contract_is_taken():
    raw = json.loads(PROBE.read_text())
    with pytest.raises(pydantic.ValidationError, match="colour"):
        Stats.model_validate({**raw, "colour": "red"})
    bad = {**raw, "comparisons": [{**raw["comparisons"][0], "verdict_typo": "faster"}]}
    with pytest.raises(pydantic.ValidationError, match="verdict_typo"):
        Stats.model_validate(bad)


def test_a_finding_reads_as_its_kind_with_its_payload():
    record = F.Finding(F.FindingKind.DRIFT, F.Drift("base", -0.07, 0.03), workload="chat").record()
    found = FindingRecord.model_validate(record)
    assert found.kind is F.FindingKind.DRIFT and found.payload == F.Drift("base", -0.07, 0.03)
    assert found.finding == F.Finding(F.FindingKind.DRIFT, F.Drift("base", -0.07, 0.03), workload="chat")
    assert found.model_dump(mode="json") == record
    with pytest.raises(pydantic.ValidationError, match="payload has fields"):
        FindingRecord.model_validate({**record, "payload": {"reference": "base"}})


def test_lookups_by_arm_and_workload():
    stats = contract.upgrade(json.loads(PROBE.read_text()))
    c = stats.comparisons[0]
    assert isinstance(c, Comparison) and stats.comparison(c.candidate, c.workload) is c
    assert stats.cell(stats.reference, c.workload).arm == stats.reference
    assert stats.cell("no such arm", c.workload) is None


def test_analyze_returns_typed_results_the_schema_takes():
    from bracket.stats import analyze

    from tests.test_stats_units import _experiment_runs

    runs, cfg, _ = _experiment_runs()
    stats = analyze(runs, cfg)
    assert isinstance(stats, Stats) and stats.stats_version == 5
    jsonschema.validate(stats.data(), json.loads((ROOT / "workflow/schemas/stats.schema.json").read_text()))
    ng4 = next(r for r in stats.speculative if r.arm == "ng4")
    # 160 of 400 drafted tokens accepted over 100 verify steps: 1 + 160 / 100 = 2.6 tokens a step, 2.6 / 4 of the budget
    assert ng4.acceptance_length == pytest.approx(2.6) and ng4.saturation == pytest.approx(0.65)
    assert dict(stats.counts.invalid_by_reason) == {"cache hit": 1} and stats.counts.warmups == 6
    assert stats.best["code"].arm == "ng8"
    assert {f.kind for f in stats.findings} >= {F.FindingKind.INVALID}
    assert isinstance(next(f for f in stats.findings if f.kind == F.FindingKind.INVALID).payload, F.Invalid)


def test_analyze_without_a_valid_run_returns_stats_that_say_so_first():
    from bracket.stats import analyze

    from tests.test_stats_units import _experiment_runs

    runs, cfg, _ = _experiment_runs()
    runs = runs.assign(valid=False, invalid_kind="error", invalid_reason="HTTP 500")
    stats = analyze(runs, cfg)
    assert isinstance(stats, Stats) and stats.cells == () and stats.comparisons == () and stats.physics is None
    assert stats.findings[0].kind == F.FindingKind.NO_VALID_RUNS and stats.counts.valid == 0
    assert stats.k_model.verdict == "untested"


def test_every_reader_of_stats_json_reads_it_through_upgrade():
    """Outside the contract, nothing brings a stats.json up to date by hand: the article, the scripts, the benches
    and the studies read it through contract.upgrade into a Stats."""
    out = subprocess.run(
        ["git", "ls-files", "workflow/*.py", "bench/*.py", "studies/*.py", "notebooks/*.py", "tools/*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    by_hand = [
        p
        for p in out.stdout.split()
        if p != "workflow/bracket/stats/contract.py"
        and (ROOT / p).is_file()
        and ("contract.current(" in (text := (ROOT / p).read_text()) or "contract import current" in text)
    ]
    assert by_hand == []
