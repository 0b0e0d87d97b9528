"""`bracket export`: bracket's cells in the community's formats (llama-benchy JSON, vllm bench serve JSON)."""

from __future__ import annotations

import json
from pathlib import Path

from bracket import interop, records


def export_cmd(args) -> int:
    if args.format == "llama-benchy":
        src = Path(args.source[0])
        if len(args.source) != 1 or not src.is_file():
            raise ValueError(f"llama-benchy export reads one results/NAME/arena.json; got {args.source}")
        arena = json.loads(src.read_text(encoding="utf-8"))
        arms = sorted({c["arm"] for c in arena.get("cells", [])})
        arm = args.arm or (arms[0] if len(arms) == 1 else None)
        if arm is None:
            raise ValueError(f"{src} has cells of several arms ({', '.join(arms)}); name one with --arm")
        doc = interop.export_arena(arena, arm, model=args.model)
    else:
        recs = [
            r
            for r in records.read([Path(p) for p in args.source])
            if not r.get("control")  # the neutrality control's requests are no arm's
            and (args.arm is None or r.get("arm") == args.arm)
            and (args.workload is None or r.get("workload") == args.workload)
        ]
        doc = interop.export_vllm(recs, max_concurrency=args.concurrency, model=args.model or "bracket-model")
    interop.write(doc, args.output)
    print(f"wrote {args.output} ({args.format} schema)")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "export",
        help="write cells as llama-benchy JSON (from arena.json) or vllm bench serve JSON (from raw .jsonl)",
        description="Export bracket's cells for the community's tools; `bracket summarize` reads both back.",
    )
    p.add_argument("format", choices=["llama-benchy", "vllm"])
    p.add_argument("source", nargs="+", help="results/NAME/arena.json (llama-benchy) or raw .jsonl files (vllm)")
    p.add_argument("-o", "--output", required=True, help="JSON file to write")
    p.add_argument("--arm", help="the arm to export (needed when the source has several)")
    p.add_argument("--workload", help="vllm: the workload to export")
    p.add_argument("--concurrency", type=int, default=1, help="vllm: max_concurrency to record (default 1)")
    p.add_argument("--model", help="model name to record")
    p.set_defaults(func=export_cmd)
