"""One server session (bracket.measure.session): every caller gets the same credentials rule."""

import pytest
from bracket import engines
from bracket.cli import launch
from bracket.experiment.config import validate
from bracket.measure import session


def _cfg(kind: str, **engine) -> dict:
    return validate(
        {
            "engine": {"kind": kind, "launch": "native", "embedded": False, "model": "/m", "port": 8123, **engine},
            "arms": {"a": {}},
        }
    )


def test_api_key_goes_by_environment_and_header_and_is_redacted(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-session-test-0123456789")
    cfg = _cfg("vllm", api_key_env="MY_KEY")
    creds = session.credentials(cfg, engines.get("vllm"))
    assert creds.env == {"VLLM_API_KEY": "sk-session-test-0123456789"}
    assert creds.headers == {"Authorization": "Bearer sk-session-test-0123456789"}
    from bracket import secrets

    assert "sk-session-test" not in secrets.redact("key sk-session-test-0123456789 echoed")
    # the printed command names the key, never its value
    cmd = launch.launch_command(cfg, "a")
    assert "VLLM_API_KEY=$MY_KEY" in cmd and "sk-session" not in cmd


def test_an_api_key_the_adapter_cannot_take_is_refused_everywhere(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-x")
    cfg = _cfg("sglang", api_key_env="MY_KEY")
    with pytest.raises(session.BlockFailed, match="takes no API key by environment"):
        session.credentials(cfg, engines.get("sglang"))
    with pytest.raises(ValueError, match="takes no API key by environment"):
        launch.launch_command(cfg, "a")


def test_missing_secret_names_the_variable_and_the_fix(monkeypatch):
    monkeypatch.delenv("HF_TOKEN_FOR_TEST", raising=False)
    cfg = _cfg("vllm", secret_env=["HF_TOKEN_FOR_TEST"])
    with pytest.raises(session.BlockFailed, match="'HF_TOKEN_FOR_TEST'.*export it"):
        session.plan(cfg, "a", model="/m", python="python", name="x")
