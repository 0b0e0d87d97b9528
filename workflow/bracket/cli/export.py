"""`bracket export`: bracket's cells in the community's formats (llama-benchy JSON, vllm bench serve JSON)."""

from __future__ import annotations

import json
from pathlib import Path

from bracket import interop, records


def export_cmd(args) -> int:
    if args.format == "llama-benchy":
        src = Path(args.source[0])
        if len(args.source) != 1 or not src.is_file():
            raise ValueError(
                f"llama-benchy export reads one results/NAME/arena.json or one llama-benchy report; got {args.source}"
            )
        doc = _llama_benchy(json.loads(src.read_text(encoding="utf-8")), src, args)
    else:
        recs = [
            r
            for r in records.read([Path(p) for p in args.source])
            if not r.get("control")  # the neutrality control's requests are no arm's
            and (args.arm is None or r.get("arm") == args.arm)
            and (args.workload is None or r.get("workload") == args.workload)
            and (args.phase is None or r.get("arena_phase") == args.phase)
        ]
        doc = interop.export_vllm(recs, max_concurrency=args.concurrency, model=args.model or "bracket-model")
    interop.write(doc, args.output)
    print(f"wrote {args.output} ({args.format} schema)")
    return 0


def _llama_benchy(doc: dict, src: Path, args) -> dict:
    """A llama-benchy report from arena.json (one arm's cells), or a llama-benchy report read and written back:
    its cells, metadata and timestamp as they were (what `bracket summarize` and llama-benchy's own code read)."""
    if isinstance(doc, dict) and "benchmarks" in doc:
        meta = {**interop.benchy_metadata(doc), **({"model": args.model} if args.model else {})}
        return interop.export_llama_benchy(interop.benchy_cells(doc), model=meta.get("model") or "model", metadata=meta)
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise ValueError(
            f"{src} is neither bracket's results/NAME/arena.json ('cells') nor a llama-benchy report ('benchmarks')"
        )
    arms = sorted({c["arm"] for c in doc["cells"]})
    arm = args.arm or (arms[0] if len(arms) == 1 else None)
    if arm is None:
        raise ValueError(f"{src} has cells of several arms ({', '.join(arms)}); name one with --arm")
    return interop.export_arena(doc, arm, model=args.model)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "export",
        help="write cells as llama-benchy JSON (from arena.json) or vllm bench serve JSON (from raw .jsonl)",
        description="Export bracket's cells for the community's tools; `bracket summarize` reads both back.",
    )
    p.add_argument("format", choices=["llama-benchy", "vllm"])
    p.add_argument(
        "source",
        nargs="+",
        help="results/NAME/arena.json or a llama-benchy report (llama-benchy), or raw .jsonl files (vllm)",
    )
    p.add_argument("-o", "--output", required=True, help="JSON file to write")
    p.add_argument("--arm", help="the arm to export (needed when the source has several)")
    p.add_argument("--workload", help="vllm: the workload to export")
    p.add_argument("--concurrency", type=int, default=1, help="vllm: max_concurrency to record (default 1)")
    p.add_argument(
        "--phase",
        choices=["ctx", "inference"],
        help="vllm: an Arena cell's phase to export (its context loads or its inference requests; one at a time)",
    )
    p.add_argument("--model", help="model name to record")
    p.set_defaults(func=export_cmd)
