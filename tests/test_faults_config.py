"""A malformed experiment file stops `snakemake NAME` before any server starts, with a message that
names the key and the fix. Run for real in a copy of the workflow; the experiment's engine is a
sentinel that leaves a mark if it is ever launched."""

import pytest

from tests.support import faultkit as fk
from tests.support import snakemake

pytestmark = pytest.mark.integration  # processes, servers or Snakemake: the full tier, not make test-fast

CASES = {
    "bad_yaml": (
        "arms: {baseline: {}\ndesign: {rounds: 2\n",
        ["not valid YAML", "line 2, column 7", "Fix the brackets, quotes or indentation"],
    ),
    "unknown_key": (
        "arms: {baseline: {}}\ndesing: {rounds: 2}\n",
        ["unknown key 'desing'", "did you mean 'design'?", "Allowed keys:"],
    ),
    "wrong_type": (
        "arms: {baseline: {}}\ndesign: {rounds: two}\n",
        ["design.rounds is 'two', which is not allowed", "an integer (at least 1), or adaptive"],
    ),
    "undefined_reference": (
        "arms: {baseline: {}, ngram_4: {speculative: {method: ngram, draft_tokens: 4}}}\nreference: ngram_8\n",
        [
            "reference is 'ngram_8', but no arm has that name",
            "Defined arms: baseline, ngram_4",
            "Set reference to one of them or add the arm",
        ],
    ),
    "zero_draft_budget": (
        "arms: {baseline: {}, spec: {speculative: {method: ngram, draft_tokens: 0}}}\n",
        ["arms.spec.speculative.draft_tokens = 0 is out of range", "set it to at least 1"],
    ),
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = fk.repo_copy(tmp_path_factory.mktemp("repo"))
    sentinel = fk.sentinel_engine(root)
    engine = (
        f"engine: {{embedded: false, python: {sentinel}, model: {root}/no-model, port: 8035, startup_timeout_s: 5}}\n"
    )
    for name, (body, _) in CASES.items():
        (root / "experiments" / f"fault_{name}.yaml").write_text(engine + body)
    return root


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_malformed_experiment_is_named_with_its_fix_before_any_server_starts(repo, case):
    name = f"fault_{case}"
    for args in (["-n", name], [name]):  # the dry run says it, and the real run stops at it
        proc = snakemake(repo, *args)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0, out
        assert f"experiments/{name}.yaml" in out
        for phrase in CASES[case][1]:
            assert phrase in out, f"{phrase!r} missing from:\n{out[-3000:]}"
        assert "Traceback" not in out and "InputFunctionException" not in out, out[-3000:]  # one message
    assert not (repo / "LAUNCHED").exists()
    assert not (repo / "results" / name).exists() and not (repo / "logs" / name).exists()
