"""`bracket weights` and `bracket ceiling`: the byte account and decode ceilings of a model directory."""

from __future__ import annotations

import argparse
import json

from bracket.physics import bandwidth, ceiling, modelsource, weights

GB = 1e9


def register(subparsers) -> None:
    w = subparsers.add_parser(
        "weights",
        help="bytes per component and bytes read per token, from tensor headers",
        description=weights.__doc__.splitlines()[0],
    )
    _model_args(w)
    w.set_defaults(func=run_weights)

    c = subparsers.add_parser(
        "ceiling", help="decode ceiling under each precision hypothesis", description=ceiling.__doc__.splitlines()[0]
    )
    _model_args(c)
    src = c.add_mutually_exclusive_group(required=True)
    src.add_argument("--bandwidth", type=float, metavar="GBPS", help="memory bandwidth in GB/s")
    src.add_argument("--device", metavar="NAME", help=f"bandwidth from the table: {', '.join(bandwidth.known_names())}")
    src.add_argument(
        "--probe", action="store_true", help="measure bandwidth with a copy probe (CUDA if present, else CPU)"
    )
    c.add_argument("--measured", type=float, metavar="TOKS", help="measured decode rate, tokens/s")
    c.set_defaults(func=run_ceiling)


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model_dir",
        metavar="MODEL_DIR",
        help="model directory (safetensors, sharded or not), .gguf file, or a hub id in the local HF cache",
    )
    p.add_argument("--speculative-method", metavar="METHOD", help="count the MTP head as read when METHOD is mtp")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="REGEX=COMPONENT",
        help="classify tensors matching REGEX as COMPONENT (backbone, embedding, output, vision, mtp, other)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _overrides(items: list[str]) -> dict:
    out = {}
    for item in items:
        pattern, sep, component = item.rpartition("=")
        if not sep or not pattern:
            raise ValueError(f"--override {item!r} must look like REGEX=COMPONENT, e.g. '^model\\.visual\\.=vision'.")
        out[pattern] = component
    return out


def _model_path(name: str) -> str:
    """A directory or file as given; a hub id (org/name) that is not a path here, from the local HF cache."""
    from pathlib import Path

    if Path(name).expanduser().exists() or not modelsource.is_hub_id(name):
        return name
    snap = modelsource.hf_cache_snapshot(name)
    if snap is None:
        raise FileNotFoundError(
            f"{name} is neither a path on this host nor a hub id in the local Hugging Face "
            f"cache ({modelsource.cache_dir()}); give the model's directory or .gguf file."
        )
    return snap


def _account(args) -> dict:
    return weights.account(
        _model_path(args.model_dir), speculative_method=args.speculative_method, overrides=_overrides(args.override)
    )


def run_weights(args) -> int:
    acct = _account(args)
    if args.json:
        print(json.dumps(acct, indent=1))
        return 0
    print(format_account(acct))
    return 0


def format_account(acct: dict) -> str:
    """The account as a short table, parts a token reads marked."""
    read = {"backbone", "output"} | ({"embedding"} if acct["tied_embeddings"] else set())
    if acct["per_token"].get("mtp"):
        read.add("mtp")
    lines = [
        f"{acct['model']}  ({acct['format']}, {len(acct['files'])} file(s), {acct['tensors']} tensors)",
        "",
        f"{'component':<11}{'GB':>9}{'bits/w':>8}  read per token   formats",
    ]
    for comp, nbytes in acct["components"].items():
        if not nbytes:
            continue
        how = "yes" if comp in read else ("one row" if comp == "embedding" else "no")
        if comp == "backbone" and acct.get("routed_experts"):
            how = f"experts at {acct['routed_experts']['active_fraction']:.3g}"
        fmts = ", ".join(
            f"{f} {r['bytes'] / nbytes:.0%}"
            for f, r in sorted(acct["formats"][comp].items(), key=lambda kv: -kv[1]["bytes"])
        )
        bits = acct["bits_per_weight"][comp]
        lines.append(f"{comp:<11}{nbytes / GB:>9.3f}{bits if bits is None else round(bits, 2):>8}  {how:<16} {fmts}")
    lines += [
        "",
        f"stored {acct['stored_bytes'] / GB:.3f} GB; read per token {acct['bytes_per_token'] / GB:.3f} GB"
        + (" (output tied to the embedding)" if acct["tied_embeddings"] else ""),
    ]
    if acct.get("draft_pass_bytes"):
        lines.append(f"each MTP draft token reads {acct['draft_pass_bytes'] / GB:.3f} GB (MTP head + output layer)")
    lines += [f"note: {n}" for n in acct["notes"]]
    return "\n".join(lines)


def run_ceiling(args) -> int:
    acct = _account(args)
    if args.bandwidth is not None:
        gbps, source = args.bandwidth, {"kind": "user", "detail": "--bandwidth"}
    elif args.device:
        gbps, source = bandwidth.resolve(device=args.device)
    else:
        gbps, source = bandwidth.resolve(probe_bandwidth=True)
    result = ceiling.build(acct, gbps, source, args.measured)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(format_ceiling(result))
    return 0


def format_ceiling(result: dict) -> str:
    src = result["bandwidth_source"]
    where = src.get("citation") or src.get("method") or src.get("detail") or src["kind"]
    lines = [
        f"bandwidth {result['bandwidth_gbps']:.1f} GB/s ({src['kind']}: {where})",
        "",
        f"{'hypothesis':<22}{'GB/token':>9}{'ceiling tok/s':>15}{'efficiency':>12}  verdict",
    ]
    for h in result["hypotheses"]:
        eff = "" if h["efficiency"] is None else f"{h['efficiency']:.0%}"
        verdict = "" if h["possible"] is None else ("possible" if h["possible"] else "impossible: measured exceeds it")
        lines.append(f"{h['name']:<22}{h['bytes_per_token'] / GB:>9.2f}{h['ceiling_tok_s']:>15.2f}{eff:>12}  {verdict}")
    return "\n".join(lines)
