"""The client's error paths: every failure becomes Measurement.error with a clear message, never an exception.

Faults come from bracket/engines/reference_server.py, chosen per request with the X-Reference-Fault header.
Timing does not matter here, so the server runs on a thread of this process at a high rate.
"""

import hashlib

import pytest
from bracket.engines.reference_server import WORDS, ReferenceServer, free_port  # noqa: E402
from bracket.engines.vllm import VLLM  # noqa: E402
from bracket.experiment import config  # noqa: E402
from bracket.wire.client import get_text, stream_completion  # noqa: E402  # noqa: E402
from bracket.wire.transport import timed_client

GREEDY = config.validate({"arms": {"a": {}}, "request": {"temperature": 0.0}}).request


def greedy_request(max_tokens: int):
    """The experiment's request, greedy, for `max_tokens` tokens."""
    return GREEDY.model_copy(update={"max_tokens": max_tokens})


N = 12


@pytest.fixture(scope="module")
def server():
    with ReferenceServer(rate=20000, ttft=0.0, tokens_per_event=3) as srv:
        yield srv


def run(server, fault=None, n=N, timeout_s=10.0, path="/v1/completions", body=None):
    headers = {"X-Reference-Fault": fault} if fault else {}
    with timed_client(headers=headers) as c:
        body = body or VLLM().request_body("reference-model", "one two three", greedy_request(n), 1)
        return stream_completion(c, server.url + path, body, timeout_s)


def test_a_good_stream_fills_every_field(server):
    m = run(server)
    text = "".join(" " + WORDS[i % len(WORDS)] for i in range(N))
    assert m.error is None
    assert (m.completion_tokens, m.prompt_tokens, m.cached_tokens, m.finish_reason) == (N, 3, 0, "length")
    assert m.stream_events == 4  # 12 tokens, 3 per event
    assert m.output_text == text and m.output_sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert m.decode_tok_s == pytest.approx(N / m.wall_s)
    # Every event carries the time of the read that brought it; this fast a stream may arrive in one read,
    # which leaves no first -> last window (tests/test_client_reads.py checks tg on reads it controls).
    assert m.ttft_s is not None and (m.tg_tok_s is None or m.tg_tok_s > 0)


def test_http_500_is_recorded_with_its_body(server):
    m = run(server, "http500")
    assert m.error.startswith("HTTP 500:") and "injected internal error" in m.error
    assert m.decode_tok_s is None and m.completion_tokens is None and m.wall_s is not None


def test_http_4xx_is_recorded_with_its_body(server):
    m = run(server, "http400")
    assert m.error.startswith("HTTP 400:") and "injected bad request" in m.error
    assert m.decode_tok_s is None


def test_a_real_4xx_from_a_bad_request(server):
    m = run(server, n=0)  # max_tokens 0 is refused
    assert m.error.startswith("HTTP 400:") and "max_tokens must be >= 1" in m.error


def test_unknown_route_is_a_404(server):
    m = run(server, path="/v1/nothing")
    assert m.error.startswith("HTTP 404:")


def test_malformed_event(server):
    m = run(server, "malformed")
    assert m.error.startswith("malformed stream event:") and "oops" in m.error
    assert m.decode_tok_s is None  # no usage arrived after the bad event


def test_error_event_in_the_stream(server):
    m = run(server, "error_event")
    assert m.error.startswith("server error in stream:") and "injected engine failure" in m.error
    assert m.decode_tok_s is None


def test_stream_that_ends_before_done(server):
    m = run(server, "truncate")
    assert m.error == "stream ended before [DONE]"
    assert m.stream_events == 2 and m.decode_tok_s is None


def test_connection_dropped_mid_stream(server):
    m = run(server, "disconnect")
    assert m.error is not None and m.error.startswith("RemoteProtocolError:")
    assert m.decode_tok_s is None and m.wall_s is not None


def test_response_without_usage(server):
    m = run(server, "no_usage")
    assert m.error.startswith("no usage in the response")
    assert "stream_options.include_usage" in m.error
    # Counting events instead would give a number; bracket gives none rather than guess.
    assert m.stream_events == 4 and m.completion_tokens is None and m.decode_tok_s is None


def test_request_without_include_usage_gets_no_usage(server):
    body = VLLM().request_body("reference-model", "x", greedy_request(N), 1)
    body.pop("stream_options")
    m = run(server, body=body)
    assert m.error.startswith("no usage in the response")


def test_a_stalled_server_times_out(server):
    m = run(server, "stall", timeout_s=0.3)
    assert m.error == "timed out after 0.3 s without data from the server (request.timeout_s)"
    assert 0.3 <= m.wall_s < 5


def test_nothing_listening():
    url = f"http://127.0.0.1:{free_port()}/v1/completions"
    with timed_client() as c:
        m = stream_completion(c, url, {"prompt": "x"}, 2.0)
    assert m.error.startswith("ConnectError:")
    assert get_text(timed_client(), url.replace("/v1/completions", "/metrics")) is None


def test_chat_stream_and_finish_reason_stop():
    with ReferenceServer(rate=20000, ttft=0.0, tokens_per_event=2, eos_after=5) as srv, timed_client() as c:
        chat = {
            "model": "reference-model",
            "messages": [{"role": "user", "content": "a b"}],
            "max_tokens": 9,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        m = stream_completion(c, srv.url + "/v1/chat/completions", chat, 10.0)
        assert m.error is None and m.completion_tokens == 5 and m.finish_reason == "stop"
        assert m.stream_events == 3  # the role-only opening chunk is not an event with text
        chat["ignore_eos"] = True
        m = stream_completion(c, srv.url + "/v1/chat/completions", chat, 10.0)
        assert m.completion_tokens == 9 and m.finish_reason == "length"


def test_server_endpoints(server):
    with timed_client() as c:
        assert c.get(server.url + "/health").status_code == 200
        assert "version" in c.get(server.url + "/version").json()
        assert c.get(server.url + "/v1/models").json()["data"][0]["id"] == "reference-model"
        counters = VLLM().spec_counters(get_text(c, server.url + "/metrics"))
        assert counters is not None and counters.drafts >= 0
