"""llama-benchy's coherence check: does the served model answer a plain question sensibly?

llama-benchy 0.4.0 (llama_benchy/client.py, run_coherence_test; called by runner.py after its warmup,
unless --skip-coherence; the Spark Arena runs it for a profile's first task) sends one chat request,

    {"model": MODEL, "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 100}

not streamed, with no sampling fields (the server's defaults), and passes when "paris" is in the
lower-cased content + reasoning (reasoning, else reasoning_content) of the first choice's message; no
choices, an error or an exception fail it, and a failure stops llama-benchy's whole run.

bracket sends the same body to the same route once per server, before its first arena run, and keeps
the answer in a raw record (`control: "coherence"`, `coherent` true / false, null when the check could not
be made); it does not stop the block, since a model that fails the question still has a speed worth
recording (bracket's embedded tiny model answers with code, not with "Paris"): the cell carries the
verdict and the article names a cell whose server failed it. The server's answer is untrusted: it is
kept bounded and only compared, never evaluated.
"""

from __future__ import annotations

import json
import time

QUESTION = "What is the capital of France? Please reply with one word only"
EXPECTED = "paris"
MAX_TOKENS = 100
NOT_EXPECTED = f"expected {EXPECTED!r} in the answer"
ANSWER_CHARS = 500  # of the answer kept in the record: 100 tokens fit; a server that sends more is cut


def body(model: str) -> dict:
    """llama-benchy's coherence request body, field for field."""
    return {"model": model, "messages": [{"role": "user", "content": QUESTION}], "max_tokens": MAX_TOKENS}


def verdict(response) -> tuple[bool, str, str | None]:
    """(coherent, answer, why it failed or None) of a parsed /v1/chat/completions response, as llama-benchy reads it.

    answer = content + reasoning of choices[0].message (llama-benchy's `content + (reasoning or
    reasoning_content)`); coherent when "paris" is in its lower-cased form. Anything that is not a
    response with a choice fails, with the reason llama-benchy prints.
    """
    if not isinstance(response, dict) or not isinstance(response.get("choices"), list) or not response["choices"]:
        return False, "", "no choices in the response"
    choice = response["choices"][0]
    msg = choice.get("message") if isinstance(choice, dict) else None
    msg = msg if isinstance(msg, dict) else {}
    content = msg.get("content") or ""
    reasoning = msg.get("reasoning") or msg.get("reasoning_content") or ""
    answer = (content if isinstance(content, str) else "") + (reasoning if isinstance(reasoning, str) else "")
    if EXPECTED in answer.lower():
        return True, answer, None
    return False, answer, NOT_EXPECTED


def check(http, base: str, model: str, timeout_s: float = 60.0) -> dict:
    """Send the question to `base`/v1/chat/completions; the fields of the control record.

    coherent is None (not checked) when the request itself failed (no route, a refused body, a
    timeout): llama-benchy counts that a failure, bracket says it could not ask.
    """
    import httpx

    t = time.time()
    try:
        r = http.post(base + "/v1/chat/completions", json=body(model), timeout=timeout_s)
        text = r.text
        if r.status_code != 200:
            return {
                "coherent": None,
                "started_at": t,
                "wall_s": time.time() - t,
                "output_text": None,
                "error": f"coherence check: HTTP {r.status_code} from /v1/chat/completions: {text[:200]!r}",
            }
        payload = json.loads(text)
    except (httpx.HTTPError, ValueError) as e:
        return {
            "coherent": None,
            "started_at": t,
            "wall_s": time.time() - t,
            "output_text": None,
            "error": f"coherence check: {type(e).__name__}: {str(e)[:200]}",
        }
    ok, answer, why = verdict(payload)
    return {
        "coherent": ok,
        "started_at": t,
        "wall_s": time.time() - t,
        "output_text": answer[:ANSWER_CHARS],
        "error": None if why in (None, NOT_EXPECTED) else f"coherence check: {why}",
    }


def of_cell(control_records: list[dict], server_ids: set) -> dict:
    """A cell's coherence from the checks of the servers that served it: checked, failed, not checked, answers.

    status: "passed" (every server checked passed), "failed" (one or more failed), "not checked" (no
    check, or none could be made), with the failing answers kept for the article to quote.
    """
    mine = [r for r in control_records if r.get("server_id") in server_ids]
    checked = [r for r in mine if r.get("coherent") is not None]
    failed = [r for r in checked if r["coherent"] is False]
    status = "failed" if failed else "passed" if checked else "not checked"
    return {
        "status": status,
        "servers": len(server_ids),
        "checked": len(checked),
        "failed": len(failed),
        "question": QUESTION,
        "answers": [r.get("output_text") or "" for r in failed],
        "errors": [r["error"] for r in mine if r.get("error")],
    }
