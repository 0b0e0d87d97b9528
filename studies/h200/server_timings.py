"""bracket's per-request rates against llama-server's own timings, read from the server logs.

    python studies/h200/server_timings.py RESULTS_DIR LOGS_DIR [--out CSV]

llama-server logs, per request, `eval time = T ms / N tokens` (its decode time, the independent
truth) and, with speculation, `draft acceptance = a (A accepted / G generated)` (none for a request
that drafted nothing), both under the request's task id. Requests are served one at a time in the
order bracket sent them, so the k-th timing line of block b belongs to the k-th record of block b. Prints one row per request and a summary per arm.
"""

import argparse
import csv
import json
import re
import statistics
import sys
from pathlib import Path

EVAL = re.compile(r"\| task (\d+) \|\s+eval time =\s+([\d.]+) ms /\s+(\d+) tokens")
DRAFT = re.compile(r"\| task (\d+) \| draft acceptance = [\d.]+ \(\s*(\d+) accepted /\s*(\d+) generated\)")


def rows(results: Path, logs: Path):
    for raw in sorted((results / "raw").glob("block-*.jsonl"), key=lambda p: int(p.stem.split("-")[1])):
        k = raw.stem.split("-")[1]
        recs = [json.loads(x) for x in raw.read_text().splitlines() if x.strip()]
        text = (logs / "server" / f"block-{k}.log").read_text(errors="replace")
        evals = EVAL.findall(text)
        # by task id: a request that drafted nothing logs no acceptance line (0 of 0)
        drafts = {task: (acc, gen) for task, acc, gen in DRAFT.findall(text)}
        if len(evals) != len(recs):
            print(f"block {k}: {len(recs)} records, {len(evals)} timing lines; skipped", file=sys.stderr)
            continue
        for r, (task, ms, n) in zip(recs, evals):
            server = int(n) / (float(ms) / 1000)
            d = drafts.get(task, (0, 0) if r.get("draft_tokens") is not None else (None, None))
            yield {
                "block": int(k),
                "arm": r["arm"],
                "warmup": r["warmup"],
                "workload": r["workload"],
                "bracket_tg_tok_s": r["tg_tok_s"],
                "bracket_decode_tok_s": r["decode_tok_s"],
                "server_tok_s": server,
                "tg_over_server": r["tg_tok_s"] / server,
                "accepted_record": r.get("accepted_tokens"),
                "accepted_log": d[0] and int(d[0]),
                "drafted_record": r.get("draft_tokens"),
                "drafted_log": d[1] and int(d[1]),
            }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", type=Path)
    ap.add_argument("logs", type=Path)
    ap.add_argument("--out")
    a = ap.parse_args()
    out = list(rows(a.results, a.logs))
    if a.out:
        with open(a.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(out[0]))
            w.writeheader()
            w.writerows(out)
    print(
        "| arm | requests | bracket tg tok/s (median) | server tok/s (median) | bracket / server: median, min-max | acceptance counts equal to the log |"
    )
    print("|---|---|---|---|---|---|")
    for arm in dict.fromkeys(r["arm"] for r in out):
        rs = [r for r in out if r["arm"] == arm and not r["warmup"]]
        ratio = [r["tg_over_server"] for r in rs]
        spec = [r for r in rs if r["accepted_log"] is not None]
        same = sum(r["accepted_record"] == r["accepted_log"] and r["drafted_record"] == r["drafted_log"] for r in spec)
        print(
            f"| {arm} | {len(rs)} | {statistics.median(r['bracket_tg_tok_s'] for r in rs):.2f} | "
            f"{statistics.median(r['server_tok_s'] for r in rs):.2f} | {statistics.median(ratio):.4f}, "
            f"{min(ratio):.4f}-{max(ratio):.4f} | {f'{same}/{len(spec)}' if spec else '-'} |"
        )


if __name__ == "__main__":
    main()
