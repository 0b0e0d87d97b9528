"""The article: an experiment's files turned into sections of prose, tables and figures.

The notebook (notebooks/article.py) only calls these functions and displays what they return.
Each section is a list of elements (heading, paragraph, table, figure, preformatted text) that
renders both to HTML and to Markdown, so the two outputs say the same thing.

Every string is escaped on the way out, in both outputs: model output, error text, version
strings and log tails come from a server and are untrusted (a model can emit ``<script>``).

Numbers follow seed 000: decode rates with two decimals, ranges with one, ratios as "5.28x",
spreads as percentages; every number in the headline is a median, count or extreme of the raw
table printed at the end, so a reader can check it.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import math
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from bracket import ceiling as _ceiling
from bracket import config, records

DASH = "\u2013"
TIMES = "\u00f7"


# ---------------------------------------------------------------- escaping and numbers

def esc(value) -> str:
    """HTML-escape anything (None becomes the empty string)."""
    return html.escape("" if value is None else str(value), quote=True)


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~$])")  # $ too: $$x$$ would render as math on GitHub
_MD_LINE_START = re.compile(r"^(\s*)(\d+)?([#>+\-=.)])(?=\s|$|#)")


def md_esc(value) -> str:
    """Markdown-escape text for a paragraph or a table cell, so it renders as the same text.

    HTML is neutralised with entities (``<`` becomes ``&lt;``), Markdown punctuation gets a
    backslash, and line breaks become spaces (a table row is one line).
    """
    text = "" if value is None else str(value)
    text = html.escape(text, quote=False)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    text = re.sub(r"[\r\n]+", " ", text)
    # A leading "#", ">", "-", "+", "=" or "1." would start a heading, quote or list.
    return _MD_LINE_START.sub(lambda m: m.group(1) + (m.group(2) or "") + "\\" + m.group(3), text)


def rate(x) -> str:
    """A decode rate, two decimals (seed 000: "65.02")."""
    return "n/a" if _missing(x) else f"{x:.2f}"


def span(lo, hi, digits: int = 1) -> str:
    """A range, "56.6–69.3"."""
    if _missing(lo) or _missing(hi):
        return "n/a"
    return f"{lo:.{digits}f}{DASH}{hi:.{digits}f}"


def ratio(x) -> str:
    return "n/a" if _missing(x) else f"{x:.2f}x"


def pct(x, digits: int = 1, sign: bool = False) -> str:
    if _missing(x):
        return "n/a"
    return f"{100 * x:+.{digits}f}%" if sign else f"{100 * x:.{digits}f}%"


def size(nbytes) -> str:
    """Bytes in decimal units, as the seeds write them (18.77 GB, 8.39 MB)."""
    if _missing(nbytes):
        return "n/a"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes:.0f} B"


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def _n(k, noun: str) -> str:
    return f"{k} {noun}{'' if k == 1 else 's'}"


def runs_phrase(n, lo, hi) -> str:
    """ "(10 runs, 56.6–69.3)" as in seed 000."""
    return f"({int(n)} run{'s' if int(n) != 1 else ''}, {span(lo, hi)})"


# ---------------------------------------------------------------- elements

@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2

    def html(self) -> str:
        return f"<h{self.level}>{esc(self.text)}</h{self.level}>"

    def markdown(self) -> str:
        return f"{'#' * self.level} {md_esc(self.text)}"


@dataclass(frozen=True)
class Para:
    text: str
    kind: str = ""  # "lead" (the headline), "note" (smaller), "warn"

    def html(self) -> str:
        cls = f' class="{self.kind}"' if self.kind else ""
        return f"<p{cls}>{esc(self.text)}</p>"

    def markdown(self) -> str:
        body = md_esc(self.text)
        if self.kind == "lead":
            return f"**{body}**"
        if self.kind == "warn":
            return f"> \u26a0\ufe0f {body}"
        return body


@dataclass(frozen=True)
class Bullets:
    items: tuple

    def html(self) -> str:
        return "<ul>" + "".join(f"<li>{esc(i)}</li>" for i in self.items) + "</ul>"

    def markdown(self) -> str:
        return "\n".join(f"- {md_esc(i)}" for i in self.items)


@dataclass(frozen=True, eq=False)
class Table:
    frame: pd.DataFrame
    caption: str = ""
    csv: str | None = None  # file name under tables/, written by `Section.save`

    def html(self) -> str:
        cap = f"<p class=\"caption\">{esc(self.caption)}</p>" if self.caption else ""
        body = self.frame.to_html(index=False, escape=True, border=0, na_rep="", classes="data")
        return f"<div class=\"table\">{cap}{body}</div>"

    def markdown(self) -> str:
        cols = [md_esc(c) for c in self.frame.columns]
        lines = ["| " + " | ".join(cols) + " |", "|" + "|".join(" --- " for _ in cols) + "|"]
        for row in self.frame.itertuples(index=False):
            lines.append("| " + " | ".join(md_esc("" if _blank(v) else v) for v in row) + " |")
        cap = f"*{md_esc(self.caption)}*\n\n" if self.caption else ""
        return cap + "\n".join(lines)


def _blank(v) -> bool:
    try:
        return v is None or bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class Figure:
    path: str  # relative to the article (figures/NAME.png)
    alt: str
    caption: str = ""

    def html(self) -> str:
        cap = f"<figcaption>{esc(self.caption)}</figcaption>" if self.caption else ""
        return f"<figure><img src=\"{esc(self.path)}\" alt=\"{esc(self.alt)}\">{cap}</figure>"

    def markdown(self) -> str:
        cap = f"\n\n*{md_esc(self.caption)}*" if self.caption else ""
        return f"![{md_esc(self.alt)}]({self.path}){cap}"


@dataclass(frozen=True)
class Pre:
    text: str

    def html(self) -> str:
        return f"<pre>{esc(self.text)}</pre>"

    def markdown(self) -> str:
        # A fence longer than any run of backticks inside, so the text cannot close it.
        longest = max((len(m) for m in re.findall(r"`+", self.text)), default=0)
        fence = "`" * max(3, longest + 1)
        return f"{fence}text\n{self.text}\n{fence}"


@dataclass
class Section:
    """What one notebook cell displays: both text/html and text/markdown, from the same elements."""

    items: list = field(default_factory=list)

    def add(self, *items) -> "Section":
        self.items.extend(i for i in items if i is not None)
        return self

    def _repr_html_(self) -> str:
        return "\n".join(i.html() for i in self.items)

    def _repr_markdown_(self) -> str:
        return "\n\n".join(i.markdown() for i in self.items)

    def __repr__(self) -> str:
        heads = [i.text for i in self.items if isinstance(i, Heading)]
        return f"<Section {heads[0] if heads else ''}>"

    def save_tables(self, out_dir: Path) -> list[Path]:
        """Write each table that names a CSV to out_dir/tables/; return the paths."""
        paths = []
        for item in self.items:
            if isinstance(item, Table) and item.csv:
                p = Path(out_dir) / "tables" / item.csv
                p.parent.mkdir(parents=True, exist_ok=True)
                item.frame.to_csv(p, index=False)
                paths.append(p)
        return paths


# ---------------------------------------------------------------- the inputs

@dataclass
class Data:
    """Everything the article reads; nothing else is consulted and no server is contacted."""

    name: str
    cfg: dict
    runs: pd.DataFrame
    stats: dict
    weights: dict | None
    ceiling: dict | None
    schedule: pd.DataFrame
    metas: dict  # block position -> meta dict
    raw: list  # raw records (with output_text)
    corrections: list | None
    corrections_path: str
    model_dir: str | None
    model_build: dict | None
    out_dir: Path
    failed_attempts: list = field(default_factory=list)  # meta of attempts set aside in raw/failed/

    @property
    def reference(self) -> str:
        return self.stats.get("reference") or self.cfg.get("reference")

    @property
    def workloads(self) -> list[str]:
        """Workloads in the experiment's order, then any others found in the runs."""
        seen = list(self.cfg.get("workloads", {}))
        return [w for w in seen if w in set(self.runs["workload"])] + \
            sorted(set(self.runs["workload"].astype(str)) - set(seen))

    @property
    def arms(self) -> list[str]:
        seen = list(self.cfg.get("arms", {}))
        return seen + sorted(set(self.runs["arm"].astype(str)) - set(seen))

    def cell(self, arm: str, workload: str) -> dict | None:
        return next((c for c in self.stats.get("cells", []) if c["arm"] == arm and c["workload"] == workload), None)

    def comparison(self, arm: str, workload: str) -> dict | None:
        return next((c for c in self.stats.get("comparisons", [])
                     if c["candidate"] == arm and c["workload"] == workload), None)

    def label(self, arm: str) -> str:
        lab = (self.cfg.get("arms", {}).get(arm) or {}).get("label")
        return f"{arm} ({lab})" if lab and lab != arm else arm


class CorrectionsError(ValueError):
    """A corrections ledger that cannot be read; the message says which entry and what to fix."""


CORRECTION_KEYS = ("date", "claim", "correction", "evidence")


def load_corrections(path) -> list[dict] | None:
    """The corrections ledger: a YAML list of {date, claim, correction, evidence}; None if absent.

    Entries are appended, never rewritten; the article shows them in file order. A missing file
    means no corrections. An empty file or an empty list is also "none".
    """
    p = Path(path) if path else None
    if p is None or not p.is_file():
        return None
    data = yaml.safe_load(p.read_text(encoding="utf-8"))
    if data is None:
        return []
    if not isinstance(data, list):
        raise CorrectionsError(f"{p}: a corrections ledger is a YAML list of entries with keys "
                               f"{', '.join(CORRECTION_KEYS)}; got a {type(data).__name__}.")
    out = []
    for i, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise CorrectionsError(f"{p}: entry {i + 1} is a {type(entry).__name__}, not a mapping with keys "
                                   f"{', '.join(CORRECTION_KEYS)}.")
        missing = [k for k in CORRECTION_KEYS if not entry.get(k)]
        unknown = sorted(set(entry) - set(CORRECTION_KEYS))
        if missing or unknown:
            raise CorrectionsError(
                f"{p}: entry {i + 1} " + (f"lacks {', '.join(missing)}" if missing else "") +
                ("; " if missing and unknown else "") + (f"has unknown keys {', '.join(unknown)}" if unknown else "") +
                f". Each entry needs exactly: {', '.join(CORRECTION_KEYS)}.")
        out.append({k: str(entry[k]) for k in CORRECTION_KEYS})
    return out


def model_dir_from_argv(argv) -> str | None:
    """The model directory a launch command served (vLLM --model / SGLang --model-path / llama.cpp -m)."""
    argv = list(argv or [])
    # "-m" last, and never the interpreter's "python -m module".
    for flag in ("--model", "--model-path", "-m"):
        for i, a in enumerate(argv):
            if a == flag and i + 1 < len(argv) and not (flag == "-m" and i > 0 and "python" in Path(argv[i - 1]).name):
                return argv[i + 1]
            if a.startswith(flag + "=") and flag != "-m":
                return a.split("=", 1)[1]
    return None


def _read_json(path) -> dict | None:
    p = Path(path) if path else None
    return json.loads(p.read_text()) if p and p.is_file() else None


def load(experiment_path, runs_csv, stats_json, weights_json, ceiling_json, schedule_csv, meta_dir,
         corrections_path, out_dir) -> Data:
    """Read one experiment's files (the report rule's inputs) into a `Data`."""
    cfg = config.load(experiment_path)
    runs = pd.read_csv(runs_csv)
    for col in ("valid", "warmup"):
        if col in runs:
            runs[col] = runs[col].map(lambda v: str(v).strip().lower() in ("true", "1"))
    meta_dir = Path(meta_dir)
    metas = {}
    for p in sorted(meta_dir.glob("block-*.meta.json")):
        m = json.loads(p.read_text())
        metas[int(m.get("block", p.name.split("-")[1].split(".")[0]))] = m
    raw = records.read(sorted(meta_dir.glob("block-*.jsonl"), key=lambda q: int(q.stem.split("-")[1])))
    failed_attempts = []
    for p in sorted((meta_dir / "failed").glob("*.meta.json")):
        m = json.loads(p.read_text())
        jsonl = p.with_name(p.name.replace(".meta.json", ".jsonl"))
        m["records_kept"] = len(records.read([jsonl])) if jsonl.is_file() else 0
        m["file"] = f"raw/failed/{jsonl.name}"
        failed_attempts.append(m)
    model_dir = next((model_dir_from_argv(m.get("argv")) for m in metas.values() if m.get("argv")), None)
    build = None
    # A relative model path in the launch command is relative to the workflow's root (experiments/..).
    roots = [Path(experiment_path).resolve().parent.parent, Path.cwd()]
    dirs = [Path(model_dir)] if model_dir and Path(model_dir).is_absolute() else \
        [r / model_dir for r in roots] if model_dir else []
    for cand in [p / "build.json" for p in dirs] + [meta_dir / "model-build.json"]:
        if cand.is_file():
            build = json.loads(cand.read_text())
            break
    name = Path(experiment_path).stem
    return Data(name=name, cfg=cfg, runs=runs, stats=json.loads(Path(stats_json).read_text()),
                weights=_read_json(weights_json), ceiling=_read_json(ceiling_json),
                schedule=pd.read_csv(schedule_csv), metas=metas, raw=raw,
                corrections=load_corrections(corrections_path), corrections_path=str(corrections_path or ""),
                model_dir=model_dir, model_build=build, out_dir=Path(out_dir), failed_attempts=failed_attempts)


# ---------------------------------------------------------------- the headline

def headline_rows(d: Data) -> list[dict]:
    """Per workload: the best arm, its median, runs and range, and its ratio to the reference.

    From stats.json `best`; the reference's numbers come from the same session's cells.
    """
    rows = []
    for wl in d.workloads:
        b = d.stats.get("best", {}).get(wl)
        if not b:
            continue
        ref = d.cell(d.reference, wl)
        comp = d.comparison(b["arm"], wl)
        rows.append({"workload": wl, "arm": b["arm"], "median": b["median"], "n": b["n"], "min": b["min"],
                     "max": b["max"], "ratio": b.get("ratio_to_reference"), "ci_low": b.get("ci_low"),
                     "ci_high": b.get("ci_high"), "verdict": b.get("verdict"),
                     "ci_level": b.get("ci_level"), "ci_basis": b.get("ci_basis"),
                     "picked_from": b.get("picked_from"),
                     "comparisons": (d.stats.get("multiplicity") or {}).get("comparisons"),
                     "method": (d.stats.get("multiplicity") or {}).get("method"),
                     "is_reference": b["arm"] == d.reference,
                     "ref_median": ref["median"] if ref else None, "ref_n": ref["n"] if ref else None,
                     "ref_min": ref["min"] if ref else None, "ref_max": ref["max"] if ref else None,
                     "test": comp.get("test") if comp else None})
    return rows


def headline_sentence(row: dict, reference: str) -> str:
    """Seed 000's form: "65.02 tok/s (10 runs, 56.6–69.3), 5.28x the baseline".

    The wording follows the verdict: only a "faster" verdict names the arm as the winner; otherwise
    the sentence says no arm was shown faster and gives the highest median as a measurement.
    """
    best = f"{rate(row['median'])} tok/s {runs_phrase(row['n'], row['min'], row['max'])}"
    if row["is_reference"]:
        return f"{row['workload']}: the reference {reference} was fastest, {best}; no other arm beat it."
    if row["verdict"] == "faster":
        text = f"{row['workload']}: {row['arm']}, {best}, {ratio(row['ratio'])} the {reference}"
    else:
        text = (f"{row['workload']}: no arm was shown faster than the {reference}; the highest median, "
                f"{row['arm']}'s {best}, is {ratio(row['ratio'])} the {reference}")
    if row["ci_low"] is not None:
        basis = f"{row['ci_basis']}, " if row.get("ci_basis") else ""
        text += (f" ({basis}{ci_label(row.get('ci_level'), row.get('comparisons'), row.get('method'))} "
                 f"{span(row['ci_low'], row['ci_high'], 2)}; verdict: {row['verdict']})")
    if row["ref_median"] is not None:
        text += (f". The {reference}, same session: {rate(row['ref_median'])} tok/s "
                 f"{runs_phrase(row['ref_n'], row['ref_min'], row['ref_max'])}")
    return text + "."


def _join(items) -> str:
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def title_line(d: Data) -> str | None:
    """The subtitle, following the verdicts: a seed-000 line ("ngram_8 reaches 653 tok/s on code, 188
    with baseline") for the largest ratio among arms shown faster; otherwise that no arm was shown
    faster than the reference, never a ratio the verdict did not carry."""
    rows = headline_rows(d)
    if not rows:
        return None
    ref = d.label(d.reference)
    shown = [r for r in rows if not r["is_reference"] and r["ratio"] and r["verdict"] == "faster"]
    if shown:
        top = max(shown, key=lambda r: r["ratio"])
        line = (f"{top['arm']} reaches {top['median']:.0f} tok/s on {top['workload']}, "
                f"{top['ref_median']:.0f} with {ref}")
        rest = [r["workload"] for r in rows if r not in shown]
        return line + (f"; on {_join(rest)} no arm was shown faster" if rest else "")
    others = [r for r in rows if not r["is_reference"] and r["ratio"]]
    if not others:
        return f"{ref} was the fastest on every workload measured"
    top = max(others, key=lambda r: r["ratio"])
    verdict = top["verdict"] or "no verdict at this run count"
    return (f"No arm was shown faster than {ref}: the largest ratio, {top['arm']}'s {ratio(top['ratio'])} on "
            f"{top['workload']}, reads '{verdict}'")


def unmeasured(d: Data) -> list[str]:
    """Errors for the article's first lines: each arm and each workload without one valid timed run."""
    runs = d.runs
    if runs is None or "valid" not in runs or "arm" not in runs:
        return []
    valid = runs.loc[runs["valid"].fillna(False).astype(bool)]
    out = []
    for kind, col, names in (("arm", "arm", list(d.cfg.get("arms") or [])),
                             ("workload", "workload", [w for w, spec in (d.cfg.get("workloads") or {}).items()
                                                       if (spec or {}).get("kind", "single") == "single"])):
        for name in names:
            if not (valid[col] == name).any():
                tried = runs.loc[(runs[col] == name) & ~runs.get("warmup", False).fillna(False).astype(bool)]
                reasons = tried["invalid_reason"].fillna("").str.split("; ").str[0].value_counts()
                why = ", ".join(f"{n} {r}" for r, n in reasons.items()) or "no timed request ran"
                out.append(f"Error: {kind} {name} has no valid run ({why}); nothing below measures it.")
    return out


def section_headline(d: Data) -> Section:
    s = Section([Heading(d.cfg.get("title") or d.name, 1)])
    sub = title_line(d)
    if sub:
        s.add(Para(sub, "lead"))
    if d.cfg.get("question"):
        s.add(Para(f"The question: {d.cfg['question']}"))
    for problem in unmeasured(d):  # before any number: what could not be measured at all
        s.add(Para(problem, "warn"))
    rows = headline_rows(d)
    if not rows:
        return s.add(Para("No arm produced a valid run, so there is no headline; see the warnings and "
                          "the raw values below."))
    s.add(Para("The fastest arm per workload, as the median decode rate (completion tokens divided by the "
               "request's wall time), with its run count and range, and its ratio to the reference measured "
               "in the same session. Ratios survive drift between sessions; absolute numbers don't."))
    s.add(Bullets(tuple(headline_sentence(r, d.reference) for r in rows)))
    weak: dict = {}
    for r in rows:
        if not r["is_reference"] and r["verdict"] and r["verdict"] != "faster":
            weak.setdefault((r["verdict"], r["test"]), []).append(r["workload"])
    for (verdict, test), wls in weak.items():
        s.add(Para(f"Read the verdict before the ratio: on {_join(wls)} it is '{verdict}'"
                   + (f" ({test})" if test else "") + ". A ratio without a verdict is a number, not a result.",
                   "warn"))
    return s


# ---------------------------------------------------------------- the ceiling

READ_EVERY_TOKEN = {
    "backbone": "yes",
    "embedding": "one row per token",
    "output": "yes",
    "vision": "only with images",
    "mtp": "only with MTP speculation on",
    "other": "no (audio and other encoders)",
}
COMPONENT_NAMES = {"backbone": "Language backbone", "embedding": "Token embedding", "output": "Output layer",
                   "vision": "Vision tower", "mtp": "MTP head", "other": "Other encoders"}


def byte_account(weights: dict) -> pd.DataFrame:
    """Component, size, and whether a text token reads it (seed 000's table)."""
    tied = weights.get("tied_embeddings")
    rows = []
    for comp, nbytes in (weights.get("components") or {}).items():
        if not nbytes:
            continue
        read = READ_EVERY_TOKEN.get(comp, "?")
        if comp == "embedding" and tied:
            read = "yes (tied: it is also the output layer)"
        rows.append({"Component": COMPONENT_NAMES.get(comp, comp), "Size": size(nbytes), "Read every token?": read,
                     "bytes": int(nbytes)})
    return pd.DataFrame(rows, columns=["Component", "Size", "Read every token?", "bytes"])


def efficiency_reading(eff: float) -> str:
    if eff > 1:
        return ("above the ceiling: more than one token per weight read, which only speculative decoding "
                "(or a wrong byte count) can do")
    if eff >= 0.7:
        return "bandwidth-bound: the clock mostly measures how long it takes to read the weights"
    if eff >= 0.3:
        return "a large share of each token's time goes to something other than reading weights"
    return ("far below the ceiling: the time goes to scheduling, sampling and framework overhead, "
            "not to reading weights, so bandwidth is not what limits this model on this machine")


def efficiency_table(d: Data) -> pd.DataFrame:
    """Measured median of each workload's reference and best arm against the plain ceiling."""
    c = d.ceiling or {}
    rows = []
    if not c.get("ceiling_tok_s"):
        return pd.DataFrame()
    for wl in d.workloads:
        # Only arms without speculation: with it, one weight read yields several tokens and the
        # plain ceiling does not bound the rate.
        arms = [a for a in d.arms if not (d.cfg.get("arms", {}).get(a) or {}).get("speculative")]
        for arm in arms:
            cell = d.cell(arm, wl)
            if not cell:
                continue
            ev = _ceiling.evaluate([{"bytes_per_token": c["bytes_per_token"], "ceiling_tok_s": c["ceiling_tok_s"]}],
                                   cell["median"])[0]
            rows.append({"workload": wl, "arm": arm, "median tok/s": rate(cell["median"]),
                         "ceiling tok/s": rate(c["ceiling_tok_s"]), "of the ceiling": pct(ev["efficiency"], 0),
                         "implied GB/s": f"{ev['implied_gbps']:.2f}", "efficiency": ev["efficiency"]})
    return pd.DataFrame(rows)


def hypotheses_table(d: Data) -> pd.DataFrame:
    """Seed 000's "bandwidth, not logs" table for the reference's median (across workloads)."""
    c = d.ceiling or {}
    cells = [d.cell(d.reference, wl) for wl in d.workloads]
    meds = [x["median"] for x in cells if x]
    if not c.get("hypotheses") or not meds:
        return pd.DataFrame()
    measured = float(pd.Series(meds).median())
    rows = []
    for h in _ceiling.evaluate(c["hypotheses"], measured):
        rows.append({"Assumption": h["name"], "Bytes per token": size(h["bytes_per_token"]),
                     "Ceiling tok/s": rate(h["ceiling_tok_s"]),
                     f"Measured {rate(measured)} is": pct(h["efficiency"], 0),
                     "Physically possible?": "yes" if h["possible"] else "no: falsified"})
    return pd.DataFrame(rows)


def section_ceiling_unknown(w: dict, c: dict) -> Section:
    """No headers were found: the ceiling is unknown; say why and which key would give it."""
    s = Section([Heading("The ceiling is unknown: no byte account of the model")])
    reason = w.get("reason") or c.get("reason") or "no tensor headers of the model were found"
    key = w.get("key") or c.get("key") or "engine.model"
    s.add(Para("Every token a model emits requires reading the weights it uses from memory, so single-stream "
               "decoding has a physical ceiling: bandwidth " + TIMES + " bytes read per token. The bytes come "
               "from the model's tensor headers, and none could be read for this experiment, so the ceiling is "
               "unknown and the measured rates below stand without it."))
    s.add(Para(f"Why: {reason}.", "warn"))
    s.add(Para(f"To get it, set {key}; bracket reads the headers from a local directory or .gguf file, the "
               "local Hugging Face cache for a hub id, a container path mapped through engine.docker.volumes, "
               "or the hub itself where it is reachable. `bracket weights DIR` prints the account for any "
               "directory."))
    bw = c.get("bandwidth_gbps")
    if bw:
        s.add(Para(f"Memory bandwidth was found ({bw:g} GB/s); with the bytes per token, the ceiling would be "
                   f"{bw:g} GB/s {TIMES} bytes per token.", "note"))
    return s


def section_ceiling(d: Data) -> Section | None:
    w, c = d.weights, d.ceiling or {}
    if not w:
        return None
    if w.get("status") == "unknown" or not w.get("bytes_per_token"):
        return section_ceiling_unknown(w, c)
    bpt, bw, ceil = w.get("bytes_per_token"), c.get("bandwidth_gbps"), c.get("ceiling_tok_s")
    head = (f"{bw:g} GB/s {TIMES} {size(bpt)} = {ceil:.2f} tok/s: the ceiling, computed before any measurement"
            if ceil else "The byte account")
    s = Section([Heading(head)])
    s.add(Para("Every token a model emits requires reading the weights it uses from memory. That gives "
               "single-stream decoding a hard physical ceiling: bandwidth " + TIMES + " bytes read per token = "
               "tokens per second. The denominator comes from the tensor headers, not the file size: parts a "
               "text token never reads are left out, and the embedding table counts one row per token."))
    acct = byte_account(w)
    s.add(Table(acct.drop(columns="bytes"), f"Byte account of {w.get('model', 'the model')}, from tensor headers",
                "byte_account.csv"))
    stored = w.get("stored_bytes") or acct["bytes"].sum()
    if stored and abs(stored - bpt) > 0.005 * stored:
        s.add(Para(f"The denominator for text-only work is {size(bpt)}, not the {size(stored)} stored."))
    else:
        s.add(Para(f"A text token reads {size(bpt)}: everything stored"
                   + (", because the output layer is the embedding matrix itself (tied), read in full once."
                      if w.get("tied_embeddings") else ".")))
    for note in w.get("notes") or []:
        s.add(Para(f"Note from the account: {note}", "note"))
    if not ceil:
        src = (c.get("bandwidth_source") or {}).get("detail", "")
        return s.add(Para(f"No memory bandwidth was stated or measured ({src}), so there is no ceiling to "
                          f"compare against: set hardware.device or hardware.bandwidth_gbps."))
    src = c.get("bandwidth_source") or {}
    src_text = {"user": "stated in the experiment (hardware.bandwidth_gbps)",
                "table": f"from the datasheet table: {src.get('citation') or src.get('source') or ''}",
                "probe": f"measured by a copy probe: {src.get('method', '')}"}.get(src.get("kind"), src.get("detail", ""))
    s.add(Para(f"Memory bandwidth: {bw:g} GB/s, {src_text.strip().rstrip(':')}."))
    s.add(Para(f"{bw:g} GB/s {TIMES} {size(bpt)} = {ceil:.2f} tok/s. That's the wall for this model on this machine "
               f"without speculative decoding."))
    eff = efficiency_table(d)
    if not eff.empty:
        ref = eff[eff["arm"] == d.reference]
        if not ref.empty:
            e = float(ref["efficiency"].median())
            s.add(Heading(f"Measured: {rate(float(pd.to_numeric(ref['median tok/s']).median()))} tok/s, "
                          f"or {pct(e, 0)} of the ceiling", 3))
            s.add(Para(f"The reference, {d.label(d.reference)}, as the median of its workloads' medians: "
                       f"{efficiency_reading(e)}."))
            meds = pd.to_numeric(ref["median tok/s"])
            if len(meds) > 1:
                flat = (meds.max() - meds.min()) / meds.median()
                s.add(Para(f"Across workloads the reference's medians differ by {pct(flat)} "
                           f"({', '.join(f'{w} {m}' for w, m in zip(ref['workload'], ref['median tok/s']))}). "
                           + ("That flatness is itself evidence: compute-bound throughput moves when the work "
                              "changes; a rate set by the weight read doesn't." if flat < 0.05 else
                              "The rate moves with the work, so something other than the weight read sets it.")))
        if (eff["efficiency"] > 1).any():
            s.add(Para("An arm without speculation above the ceiling cannot be: check the byte account and the "
                       "bandwidth before believing either number.", "warn"))
        if any((d.cfg.get("arms", {}).get(a) or {}).get("speculative") for a in d.arms):
            s.add(Para("Speculative arms are left out of this table: one weight read verifies several drafted "
                       "tokens, so they are not bound by this ceiling; their section below reads tokens per step.",
                       "note"))
        s.add(Table(eff.drop(columns="efficiency"), "Measured medians against the ceiling", "efficiency.csv"))
    hyp = hypotheses_table(d)
    if not hyp.empty:
        s.add(Heading("Is the engine reading the weights at their stored width? Bandwidth, not logs", 3))
        s.add(Para("If the engine secretly widened the weights before the math, it would read more bytes per "
                   "token, and the ceiling would fall. A hypothesis whose ceiling lies below the measured rate "
                   "is physically impossible."))
        s.add(Table(hyp, "Ceilings under each precision hypothesis", "precision_hypotheses.csv"))
        if len(set(hyp["Bytes per token"])) == 1:
            s.add(Para("Here the weights are stored at 16 bits or wider, so the three hypotheses read the same "
                       "bytes: this check cannot tell them apart on this model.", "note"))
    return s


# ---------------------------------------------------------------- results

def ci_label(level, comparisons, method: str | None = None) -> str:
    """ "95% CI", or "98.3% CI (Holm, 3 comparisons)" when multiplicity widened it; an adaptive design's
    repeated CI names itself (its nominal level is that of its look's boundary)."""
    if _missing(level):
        return "95% CI"
    text = f"{level * 100:.3g}% CI"
    if method and method.startswith("group-sequential"):
        return f"repeated CI (nominal {level * 100:.3g}%, {comparisons} comparisons)"
    return text + (f" (Holm, {comparisons} comparisons)" if comparisons and comparisons > 1 else "")


def verdict_cell(comp: dict) -> str:
    """The verdict; an undetermined one with its rounds needed; an adaptive design's with the round it settled."""
    sq = comp.get("sequential")
    if sq:
        if sq.get("settled_round") and comp["verdict"] != "undetermined":
            return f"{comp['verdict']} (settled after round {sq['settled_round']})"
        return "undetermined (" + ("budget spent" if sq.get("status") == "settled" else "still open") + ")"
    if comp["verdict"] != "undetermined":
        return comp["verdict"]
    r = comp.get("rounds_needed")
    return "undetermined" + (f" (run {r} rounds)" if r else " (more than 200 rounds)")


def results_table(d: Data, workload: str) -> pd.DataFrame:
    """Per arm: runs, blocks, median, CI, range, spread; ratio to the reference (raw and drift-adjusted,
    each with its CI), the CI the verdict rests on (adjusted for multiplicity), and the verdict."""
    rows = []
    for arm in d.arms:
        c = d.cell(arm, workload)
        if not c:
            continue
        comp = d.comparison(arm, workload)
        rows.append({
            "arm": arm, "runs": c["n"], "blocks": "" if c.get("blocks") is None else c["blocks"],
            "median tok/s": rate(c["median"]),
            "95% CI": span(c.get("ci_low"), c.get("ci_high"), 2), "min–max": span(c["min"], c["max"], 2),
            "spread": pct(c.get("spread")),
            f"ratio to {d.reference}": "1 (reference)" if arm == d.reference else ratio(comp["ratio"]) if comp else "n/a",
            "raw 95% CI": span(comp["ci_low"], comp["ci_high"], 2) if comp else "",
            "drift-adjusted (95% CI)": (f"{ratio(comp['drift_adjusted_ratio'])} "
                                        f"({span(comp.get('drift_adjusted_ci_low'), comp.get('drift_adjusted_ci_high'), 2)})"
                                        if comp and not _missing(comp.get("drift_adjusted_ratio")) else ""),
            "verdict rests on": (f"{comp.get('basis', 'raw')}, {ci_label(comp.get('verdict_ci_level'), (comp.get('multiplicity') or {}).get('comparisons'), (comp.get('multiplicity') or {}).get('method'))} "
                                 f"{span(comp['verdict_ci_low'], comp['verdict_ci_high'], 2)}"
                                 if comp and not _missing(comp.get("verdict_ci_low")) else ""),
            "verdict": verdict_cell(comp) if comp else ("reference" if arm == d.reference else "not compared"),
        })
    return pd.DataFrame(rows)


def section_results(d: Data, figure: Figure | None = None) -> Section | None:
    if not d.stats.get("cells"):
        return None
    s = Section([Heading("Results per workload")])
    s.add(Para("Median of the valid timed runs, its CI, the range, and spread = (max " + DASH + " min) / median. "
               "Each block is a fresh server, so the block is the unit: with two blocks or more the CI of an arm's "
               "median and of each ratio come from the blocks' medians (OLS on their logs, Student t on the "
               "blocks' degrees of freedom, pooled with the request noise only when blocks agree); with one block "
               "a CI covers request noise only. The raw ratio and the drift-adjusted one (a linear trend in "
               "time removed) are both shown; 'verdict rests on' names the one the verdict uses and gives its CI "
               "at the level multiplicity leaves it. 'Faster' or 'slower' needs that CI wholly outside the noise band; "
               "'no measurable effect' needs it within twice the band on both sides, so that it rules out any "
               "effect larger than that; 'undetermined' means the data support neither (one block per arm, arm "
               "confounded with time, too few blocks, or a CI reaching past twice the band) and says how many "
               "rounds would."))
    mult = d.stats.get("multiplicity") or {}
    if mult.get("comparisons"):
        m = mult["comparisons"]
        s.add(Para(f"{m} comparison{'s' if m != 1 else ''} with a test ({mult.get('family', 'arms x workloads')})"
                   + ((f"; the design was adaptive: verdicts rest on repeated CIs that stay valid at every look "
                       f"(group-sequential, each comparison at alpha / {m}), so the chance of any wrong verdict "
                       f"among them, over every look, is at most {pct(1 - mult.get('confidence', 0.95), 0)}; see the looks")
                      if str(mult.get("method", "")).startswith("group-sequential") else
                      (f"; verdicts and their CIs are adjusted with Holm's step-down method, so the chance of any "
                       f"false 'faster' or 'slower' among them is at most {pct(1 - mult.get('confidence', 0.95), 0)}"
                       if m > 1 else ""))
                   + (f"; {mult['untested']} more could not be tested (undetermined)" if mult.get("untested") else "")
                   + ".", "note"))
    for wl in d.workloads:
        t = results_table(d, wl)
        if t.empty:
            continue
        s.add(Heading(wl, 3), Table(t, f"{wl}: decode rate per arm", f"results_{wl}.csv"))
        tests = sorted({c["test"] for c in d.stats.get("comparisons", []) if c["workload"] == wl and c.get("test")})
        if tests:
            s.add(Para("Test: " + "; ".join(tests) + ".", "note"))
        for c in d.stats.get("comparisons", []):
            if c["workload"] == wl and c["verdict"] == "undetermined" and c.get("undetermined_reason"):
                s.add(Para(f"{c['candidate']}: undetermined: {c['undetermined_reason']}.", "warn"))
        for c in d.stats.get("cells", []):
            m2 = c.get("modes")
            if c["workload"] == wl and m2:
                s.add(Para(f"{c['arm']} has two modes ({m2['where']}): {m2['low_n']} runs near "
                           f"{rate(m2['low_median'])} and {m2['high_n']} near {rate(m2['high_median'])} tok/s; its "
                           f"median depends on how many runs took each path, so read both.", "warn"))
    if figure:
        s.add(figure)
    return s


# ---------------------------------------------------------------- speculative decoding

def speculative_table(d: Data) -> pd.DataFrame:
    rows = []
    for r in d.stats.get("speculative", []):
        rows.append({"arm": r["arm"], "workload": r["workload"], "draft budget": r["draft_budget"],
                     "acceptance length": "n/a" if r["acceptance_length"] is None else f"{r['acceptance_length']:.2f}",
                     "acceptance rate": pct(r["acceptance_rate"]), "saturation": pct(r["saturation"]),
                     "reading": r.get("reading") or ""})
    return pd.DataFrame(rows)


def tokens_per_event(d: Data) -> pd.DataFrame:
    """Mean completion tokens per stream event of each speculative arm (valid runs)."""
    r = d.runs[d.runs["valid"] & d.runs["draft_budget"].notna()] if "draft_budget" in d.runs else d.runs.iloc[0:0]
    if r.empty or "stream_events" not in r:
        return pd.DataFrame()
    g = r.assign(tpe=r["completion_tokens"] / r["stream_events"]).groupby("arm")["tpe"].mean()
    return g.reset_index().rename(columns={"tpe": "tokens per event"})


def budget_table(d: Data) -> pd.DataFrame:
    """Seed 000's "same flag, different workloads" table: median per draft budget, and the change
    from the smallest to the largest budget, for arms of one speculative method."""
    spec = {a: (d.cfg.get("arms", {}).get(a) or {}).get("speculative") for a in d.arms}
    by_method: dict = {}
    for a, sp in spec.items():
        if sp:
            by_method.setdefault(sp["method"], []).append((int(sp["draft_tokens"]), a))
    rows = []
    for method, arms in by_method.items():
        arms = sorted(arms)
        if len({k for k, _ in arms}) < 2:
            continue
        for wl in d.workloads:
            cells = [(k, a, d.cell(a, wl)) for k, a in arms]
            if any(c is None for _, _, c in cells):
                continue
            row = {"workload": wl, "method": method}
            row.update({f"budget {k} ({a})": rate(c["median"]) for k, a, c in cells})
            first, last = cells[0][2]["median"], cells[-1][2]["median"]
            row[f"change {cells[0][0]} \u2192 {cells[-1][0]}"] = pct(last / first - 1, 1, True)
            rows.append(row)
    return pd.DataFrame(rows)


def section_speculative(d: Data, figure: Figure | None = None) -> Section | None:
    t = speculative_table(d)
    if t.empty:
        return None
    s = Section([Heading("Speculative decoding: saturation, not acceptance rate")])
    s.add(Para("Acceptance length is the tokens produced per verify step, the target's own token included; "
               "acceptance rate is accepted / proposed draft tokens; saturation is acceptance length / draft "
               "budget. Read saturation: a high acceptance rate can just mean the budget is so small there is "
               "barely anything to get wrong."))
    s.add(Table(t, "Pooled over the valid runs of each cell (sums of counters, not means of ratios)",
                "speculative.csv"))
    sat = [r for r in d.stats.get("speculative", []) if r.get("saturation") is not None]
    if sat:
        hi = max(sat, key=lambda r: r["saturation"])
        lo = min(sat, key=lambda r: r["saturation"])
        s.add(Para(f"Fullest: {hi['arm']} on {hi['workload']}, {hi['acceptance_length']:.2f} of a budget of "
                   f"{hi['draft_budget']} ({pct(hi['saturation'])}): {hi['reading']}. Emptiest: {lo['arm']} on "
                   f"{lo['workload']}, {lo['acceptance_length']:.2f} of {lo['draft_budget']} ({pct(lo['saturation'])}): "
                   f"{lo['reading']}."))
        over = [r for r in sat if r["saturation"] > 1]
        if over:
            s.add(Para("Saturation above 100% is possible: the acceptance length counts the target's own token, "
                       "so a step that accepts all K drafts yields K + 1 tokens.", "note"))
    bt = budget_table(d)
    if not bt.empty:
        change = bt.columns[-1]
        signs = {float(str(v).rstrip("%")) > 0 for v in bt[change]}
        s.add(Heading("The same flag on different workloads", 3))
        s.add(Para("Raising the draft budget " + ("helps on some workloads and hurts on others: "
                                                   if len(signs) > 1 else "moves every workload the same way: ")
                   + "; ".join(f"{w} {c}" for w, c in zip(bt["workload"], bt[change]))
                   + ". Medians; their verdicts against the reference are in the results above."))
        s.add(Table(bt, "Median decode rate per draft budget", "draft_budget.csv"))
    tpe = tokens_per_event(d)
    if not tpe.empty and (tpe["tokens per event"] > 1.05).any():
        s.add(Para("A stream event carries several tokens under speculation (" + ", ".join(
            f"{a}: {v:.2f} tokens per event" for a, v in zip(tpe["arm"], tpe["tokens per event"]))
            + "). Count events and the rate looks that many times lower; every rate here is completion_tokens "
              "divided by wall time."))
    if figure:
        s.add(figure)
    return s


# ---------------------------------------------------------------- drift

def drift_table(d: Data) -> pd.DataFrame:
    rows = []
    for wl in d.workloads:
        x = (d.stats.get("drift") or {}).get(wl)
        if not x:
            continue
        ref = x.get("reference_blocks") or {}
        rounds = "; ".join(f"{a} {pct(v['change'], 2, True)}" for a, v in (x.get("rounds") or {}).items()
                           if v.get("change") is not None)
        rows.append({"workload": wl,
                     f"{d.reference} first vs last block": pct(x.get("reference_first_vs_last"), 2, True),
                     "first / last median": span(ref.get("first_median"), ref.get("last_median"), 2) if ref else "",
                     "trend per block": pct(_expm1(x.get("slope_per_block")), 2, True),
                     "trend CI": (f"{pct(_expm1(x['slope_ci'][0]), 2, True)} to {pct(_expm1(x['slope_ci'][1]), 2, True)}"
                                  + (f" ({x['blocks']} blocks, t {x['df']:g} df)" if x.get("blocks") else "")
                                  if x.get("slope_ci") else ""),
                     "robust trend (Theil-Sen)": pct(_expm1(x.get("slope_theil_sen")), 2, True),
                     "round-to-round change": rounds})
    return pd.DataFrame(rows)


def _expm1(x):
    return None if _missing(x) else math.expm1(x)


def section_drift(d: Data, figure: Figure | None = None) -> Section:
    s = Section([Heading("Drift: the same configuration, measured again later")])
    s.add(Para("Alternating blocks instead of running one configuration to completion means drift hits every "
               "arm alike, and the gap between two visits to the same arm measures the drift itself."))
    t = drift_table(d)
    measured = not t.empty and (t.drop(columns="workload") != "n/a").to_numpy().any() and any(
        (d.stats.get("drift") or {}).get(w, {}).get("reference_first_vs_last") is not None
        or (d.stats.get("drift") or {}).get(w, {}).get("slope_per_block") is not None for w in d.workloads)
    if measured:
        s.add(Table(t, "Drift per workload (changes of the decode rate)", "drift.csv"))
        thr = d.stats.get("noise_threshold")
        worst = max((abs(v) for w in d.workloads for v in [((d.stats.get("drift") or {}).get(w) or {})
                     .get("reference_first_vs_last")] if v is not None), default=None)
        if worst is not None and thr is not None:
            s.add(Para(f"The reference moved by up to {pct(worst, 2)} between its first and last blocks, against a "
                       f"noise threshold of {pct(thr, 0)}: " + ("effects smaller than that cannot be told from drift."
                                                               if worst > thr else "drift stayed inside the threshold.")))
    else:
        s.add(Para("Each arm ran in one block only, so drift is not measurable here and time is confounded with "
                   "arm: a difference between arms could be the machine changing. Run two rounds or more "
                   "(design.rounds) to measure it."
                   if d.cfg.get("design", {}).get("rounds", 1) != "adaptive" and d.cfg.get("design", {}).get("rounds", 1) < 2 else
                   "The design could not separate time from arm for any workload; see the warnings."))
    hosts = d.stats.get("hosts")
    if hosts:
        s.add(*host_parts(hosts))
    if figure:
        s.add(figure)
    return s


def host_parts(hosts: dict) -> list:
    """Hosts as a factor: each host against the first, and each host's own drift."""
    base = hosts.get("baseline")
    rows = [{"arm": c["arm"], "workload": c["workload"], "host": c["candidate"], "against": c["baseline"],
             "ratio": f"{c['ratio']:.3f}x", "raw 95% CI": span(c.get("ci_low"), c.get("ci_high"), 3),
             "verdict rests on": (f"{c.get('basis', 'raw')}, {ci_label(c.get('verdict_ci_level'), (c.get('multiplicity') or {}).get('comparisons'))} "
                                  f"{span(c['verdict_ci_low'], c['verdict_ci_high'], 3)}"
                                  if not _missing(c.get("verdict_ci_low")) else ""),
             "p": "" if c.get("p_value") is None else f"{c['p_value']:.3g}", "verdict": verdict_cell(c)}
            for c in hosts.get("comparisons", [])]
    out = [Heading("Hosts", 3),
           Para(f"The whole design ran on each of {len(hosts.get('names', []))} hosts ({', '.join(hosts.get('names', []))}) "
                f"side by side. Each host is compared with {base} on the same arm and workload, like any two arms: "
                "a ratio from block medians with its CI, a test, and a verdict against the noise band, Holm-adjusted "
                "across the host comparisons.")]
    if rows:
        out.append(Table(pd.DataFrame(rows), f"Each host against {base}", "hosts.csv"))
    drift_rows = []
    for host, per_wl in (hosts.get("drift") or {}).items():
        for wl, v in per_wl.items():
            fl = v.get("reference_first_vs_last")
            drift_rows.append({"host": host, "workload": wl,
                               "reference first vs last": "n/a" if fl is None else pct(fl, 2, sign=True),
                               "trend per block": "n/a" if v.get("slope_per_block") is None
                               else pct(v["slope_per_block"], 2, sign=True)})
    if drift_rows:
        out.append(Table(pd.DataFrame(drift_rows), "Drift on each host, in that host's own blocks", "hosts_drift.csv"))
    return out


# ---------------------------------------------------------------- hypotheses

def k_table(d: Data) -> pd.DataFrame:
    k = d.stats.get("k_model") or {}
    band = k.get("band")
    rows = []
    for r in k.get("rows", []):
        rows.append({"arm": r["arm"], "workload": r["workload"], "k": f"{r['k']:.3f}", "role": r["role"],
                     "in band?": r["in_band"] if r["role"] == "test" else "sets the band"})
    t = pd.DataFrame(rows)
    if band and not t.empty:
        t.attrs["band"] = band
    return t


def section_hypotheses(d: Data) -> Section | None:
    k = d.stats.get("k_model") or {}
    hyp = hypotheses_table(d)
    if not k.get("rows") and hyp.empty:
        return None
    s = Section([Heading("Hypotheses tested")])
    outcomes = []
    if k.get("rows") or k.get("verdict"):
        verdict = k.get("verdict", "untested")
        band = k.get("band")
        outcomes.append({"hypothesis": "decode = k x baseline x acceptance length, one k for every arm",
                         "test": f"k of the other arms inside the band {span(band[0], band[1], 3)} set by "
                                 f"{', '.join(k.get('calibration', []))}" if band else "needs acceptance data",
                         "outcome": verdict + (f" ({k['reason']})" if k.get("reason") else "")})
    for _, h in hyp.iterrows():
        outcomes.append({"hypothesis": f"the engine reads the weights {h['Assumption']}",
                         "test": "measured rate below that hypothesis' ceiling",
                         "outcome": "possible" if h["Physically possible?"] == "yes" else "falsified"})
    s.add(Table(pd.DataFrame(outcomes), "Each hypothesis, its test and its outcome", "hypotheses.csv"))
    if k.get("rows"):
        s.add(Heading("The k model", 3))
        s.add(Para(f"Seed 000's model: decode {chr(8776)} k x baseline x acceptance length, with the baseline the "
                   f"non-speculative arm {k.get('baseline')} on the same workload. The first half of the speculative "
                   f"arms set the band; the others test it (within {pct(k.get('tolerance', 0.02), 0)} of an edge is "
                   f"marginal)."))
        s.add(Table(k_table(d), "k per arm and workload", "k_model.csv"))
        if k.get("verdict") == "falsified":
            s.add(Para("Falsified: acceptance length alone does not predict the decode rate here. The estimate's "
                       "job was to design the experiment, not to cancel one; the falsification is a result."))
        elif k.get("verdict") == "held":
            s.add(Para("Held: every tested arm's k fell inside the band, so acceptance length predicted the decode "
                       "rate within it on this experiment."))
    return s


# ---------------------------------------------------------------- recommendations

def arm_flags(d: Data, arm: str) -> str:
    """The launch flags that distinguish this arm, as they ran (from a block's launch command)."""
    for pos in sorted(d.metas):
        m = d.metas[pos]
        if m.get("arm") != arm or not m.get("argv"):
            continue
        argv = list(m["argv"])
        extra = [a for a in (d.cfg["arms"].get(arm, {}) or {}).get("args", [])]
        out = []
        for i, a in enumerate(argv):
            if a.startswith("--speculative") and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                out += [a, argv[i + 1]]
        return shlex.join(out + extra) if (out or extra) else "(no speculative flags)"
    spec = (d.cfg.get("arms", {}).get(arm) or {}).get("speculative")
    return f"{_spec_words(spec)} (from the experiment: no launch record)" if spec else "(no speculative flags)"


def recommendations(d: Data) -> tuple[pd.DataFrame, bool]:
    """Per workload: what to use, its flags and its measurement; and whether the choice splits."""
    rows = []
    for r in headline_rows(d):
        faster = r["verdict"] == "faster"
        use = r["arm"] if (r["is_reference"] or faster) else d.reference
        note = ("the reference was fastest" if r["is_reference"] else
                f"{ratio(r['ratio'])} the {d.reference}" if faster else
                f"{r['arm']} measured {ratio(r['ratio'])} but '{r['verdict']}': keep {d.reference} until more runs "
                f"confirm it")
        cell = d.cell(use, r["workload"])
        rows.append({"workload": r["workload"], "use": use, "flags": arm_flags(d, use),
                     "measured": f"{rate(cell['median'])} {runs_phrase(cell['n'], cell['min'], cell['max'])}" if cell else "",
                     "fastest measured": f"{r['arm']}, {rate(r['median'])}", "why": note})
    t = pd.DataFrame(rows)
    split = not t.empty and t["use"].nunique() > 1
    fastest_split = len({r["arm"] for r in headline_rows(d)}) > 1
    return t, split or fastest_split


def section_recommendations(d: Data) -> Section | None:
    t, split = recommendations(d)
    if t.empty:
        return None
    s = Section([Heading("Recommendation")])
    fastest = [str(x).split(",")[0] for x in t["fastest measured"]]
    if t["use"].nunique() > 1:
        s.add(Para("The best arm is not the same on every workload, so the recommendation splits by workload "
                   "rather than shipping one global default:"))
    elif split:
        s.add(Para(f"The fastest arm differs by workload ({'; '.join(f'{a} on {w}' for a, w in zip(fastest, t['workload']))}), "
                   f"but none was shown faster than the reference at this run count, so the recommendation is "
                   f"{t['use'].iloc[0]} everywhere until more runs settle it:"))
    elif (t["use"] == d.reference).all():
        s.add(Para(f"Keep {t['use'].iloc[0]}: no arm was shown faster than it on any workload measured"
                   + ("" if not fastest or set(fastest) == {d.reference} else
                      ", so the highest medians below are measurements, not reasons to switch") + "."))
    else:
        s.add(Para(f"The same choice holds on every workload measured: {t['use'].iloc[0]}."))
    s.add(Table(t, "What to run, per workload", "recommendations.csv"))
    if (t["use"] != t["fastest measured"].str.split(",").str[0]).any():
        s.add(Para("Where the fastest arm is not the one to use, its advantage was not shown at this run count: "
                   "the verdict, not the median, decides.", "note"))
    return s


# ---------------------------------------------------------------- warnings

_PREFIX = re.compile(r"^(?P<who>[A-Za-z0-9_\-]+(?: vs [A-Za-z0-9_\-]+)? / [A-Za-z0-9_\-]+): (?P<msg>.*)$", re.S)


def group_warnings(warnings: list[str]) -> list[str]:
    """Identical messages about several cells, merged: "message (baseline / code, ngram_4 / chat)"."""
    groups: dict[str, list[str]] = {}
    for w in warnings:
        m = _PREFIX.match(w)
        key, who = (m["msg"], m["who"]) if m else (w, None)
        groups.setdefault(key, [])
        if who:
            groups[key].append(who)
    return [f"{msg} ({', '.join(who)})" if who else msg for msg, who in groups.items()]


def section_warnings(d: Data) -> Section:
    s = Section([Heading("Warnings the analysis raised")])
    c = d.stats.get("counts") or {}
    s.add(Para(f"{c.get('total', len(d.runs))} requests: {c.get('valid', 0)} valid, {c.get('warmups', 0)} warmups "
               f"(kept and marked, left out of the statistics), {c.get('invalid', 0)} invalid."))
    reasons = c.get("invalid_by_reason") or {}
    if reasons:
        s.add(Table(pd.DataFrame({"reason": list(reasons), "runs": list(reasons.values())}),
                    "Invalid runs by reason (never dropped: each is in the raw table, marked)", "invalid.csv"))
    ws = group_warnings(d.stats.get("warnings") or [])
    s.add(Bullets(tuple(ws)) if ws else Para("None."))
    return s


# ---------------------------------------------------------------- method and provenance

def _utc(t) -> str:
    if _missing(t) or t is None:
        return ""
    return _dt.datetime.fromtimestamp(float(t), _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def schedule_table(d: Data) -> pd.DataFrame:
    rows = []
    seq = d.stats.get("sequential") or {}
    ran = max((x["blocks"] for x in seq.get("looks") or []), default=None)
    for b in d.schedule.itertuples(index=False):
        if ran is not None and int(b.position) >= ran:
            continue  # an adaptive design's planned round that its looks did not ask for
        m = d.metas.get(int(b.position), {})
        n = int((d.runs["position"] == b.position).sum()) if "position" in d.runs else 0
        rows.append({"position": int(b.position), "arm": b.arm, "round": int(b.round), "seed": int(b.seed),
                     "status": m.get("status", "not run"), "ready (s)": m.get("ready_s", ""),
                     "started (UTC)": _utc(m.get("started_at")), "server": m.get("server_id", ""), "requests": n})
    return pd.DataFrame(rows)


def _versions(d: Data) -> list[str]:
    vs = []
    for m in d.metas.values():
        v = m.get("version")
        try:
            v = json.loads(v).get("version", v) if isinstance(v, str) and v.startswith("{") else v
        except (ValueError, AttributeError):
            pass
        if v and str(v) not in vs:
            vs.append(str(v))
    return vs


def _spec_words(sp: dict | None) -> str:
    if not sp:
        return "off"
    words = f"{sp.get('method')}, draft budget {sp.get('draft_tokens')}"
    if sp.get("method") == "ngram":
        words += f", lookup {sp.get('prompt_lookup_min')}{DASH}{sp.get('prompt_lookup_max')} tokens"
    return words + (f", draft model {sp['model']}" if sp.get("model") else "")


def launch_sentence(d: Data) -> str:
    """How the server was started, from the blocks' provenance (attach mode changes what a block means)."""
    launches = {m.get("launch") for m in d.metas.values()} or {d.cfg.get("engine", {}).get("launch")}
    if launches == {"attach"}:
        return ("The server was started by hand and only attached to: it was not restarted between blocks, so "
                "every arm ran with the same server flags, and each block flushed the prefix cache where the "
                "engine allows it" + ("" if not any(m.get("warnings") for m in d.metas.values())
                                      else " (see the warnings below: a flush failed)") + ".")
    if launches == {"docker"}:
        return "A fresh container was started for each block and removed after it."
    return "A fresh server process was launched for each block and stopped after it."


def _span3(x: dict | None, digits: int = 0) -> str:
    if not x:
        return ""
    lo, med, hi = (x.get(k) for k in ("min", "median", "max"))
    if lo == hi:
        return f"{lo:.{digits}f}"
    return f"{lo:.{digits}f}–{med:.{digits}f}–{hi:.{digits}f}"


def telemetry_table(d: Data) -> pd.DataFrame:
    """Per block: what the accelerator did while it was measured (NVML samples in each block's meta)."""
    rows = []
    for pos in sorted(d.metas):
        m = d.metas[pos]
        tel = m.get("telemetry")
        if not isinstance(tel, dict) or not tel.get("n"):
            continue
        power = tel.get("power_w") or {}
        rows.append({"block": pos, "arm": m.get("arm"), "round": m.get("round"), "device": tel.get("name"),
                     "samples": tel.get("n"), "SM clock MHz (min–median–max)": _span3(tel.get("sm_clock_mhz")),
                     "memory clock MHz": _span3(tel.get("mem_clock_mhz")),
                     "temperature °C (min–median–max)": _span3(tel.get("temp_c")),
                     "power W, median (max)": f"{power['median']:.0f} ({power['max']:.0f})" if power else "",
                     "GPU busy %, median": (tel.get("util_gpu_pct") or {}).get("median"),
                     "throttle reasons": ", ".join(tel.get("throttle_reasons_seen") or []) or "none",
                     "sm_min": (tel.get("sm_clock_mhz") or {}).get("min"),
                     "sm_max": (tel.get("sm_clock_mhz") or {}).get("max")})
    return pd.DataFrame(rows)


def section_telemetry(d: Data) -> Section | None:
    """The accelerator's clocks, temperature and power in every block: drift that is the machine's."""
    t = telemetry_table(d)
    if t.empty:
        return None
    s = Section([Heading("The accelerator during each block", 3)])
    lo, hi = t["sm_min"].min(), t["sm_max"].max()
    busy = [r for r in t["throttle reasons"] if r not in ("none", "gpu_idle")]
    if lo == hi and not busy:
        s.add(Para(f"The SM clock held at {lo:.0f} MHz in every block, with no throttle reason other than idle: the "
                   "differences between blocks are not the clock's."))
    else:
        s.add(Para(f"The SM clock ranged {lo:.0f}–{hi:.0f} MHz across blocks"
                   + (f", and the GPU reported throttling ({', '.join(sorted(set(busy)))})" if busy else "")
                   + ": blocks ran at different speeds of the machine itself; read the drift section with this in "
                   "mind.", "warn"))
    s.add(Table(t.drop(columns=["sm_min", "sm_max"]), "NVML samples per block, taken while the block ran",
                "telemetry.csv"))
    return s


def section_method(d: Data) -> Section:
    cfg, des = d.cfg, d.cfg.get("design", {})
    s = Section([Heading("How these numbers were taken")])
    n_blocks = len(schedule_table(d))
    seq = d.stats.get("sequential")
    rounds = (f"adaptive: {_n(seq['rounds_run'], 'round')} run of {des.get('min_rounds')} to {des.get('max_rounds')} "
              f"(see the looks)" if seq else _n(des.get('rounds'), 'round'))
    s.add(Para(f"Design: {des.get('kind')}, {rounds}, {n_blocks} blocks in the order below, drawn "
               f"once with seed {des.get('seed')} and recorded. Each block served one arm and ran, per workload, "
               f"{_n(des.get('warmup_runs'), 'warmup run')} and {_n(des.get('runs_per_block'), 'timed run')}; "
               f"{des.get('cooldown_s')} s of cooldown between blocks. " + launch_sentence(d)))
    req = cfg.get("request", {})
    s.add(Para(f"Requests: max_tokens {req.get('max_tokens')}, temperature {req.get('temperature')}, seed "
               f"{req.get('seed')}; " + ("each prompt carried a unique prefix, so the prefix cache could not engage. "
                                         if req.get("unique_prefix") else
                                         "prompts were sent without a unique prefix, so the prefix cache could engage. ")
               + "Decode rate = completion_tokens / wall time of the request, never stream events."))
    s.add(Table(schedule_table(d), "The schedule as it ran", "schedule.csv"))
    tel = section_telemetry(d)
    if tel is not None:
        s.add(*tel.items)
    eng = cfg.get("engine", {})
    vs = _versions(d)
    plat = sorted({str(m.get("platform")) for m in d.metas.values() if m.get("platform")})
    s.add(Para(f"Engine: {eng.get('kind')}" + (" (embedded: vLLM's CPU build serving a tiny model built locally)"
                                                 if eng.get("embedded") else "")
               + (f", version {', '.join(vs)}" if vs else "") + (f", on {', '.join(plat)}" if plat else "") + "."))
    arm_rows = []
    for arm in d.arms:
        a = cfg.get("arms", {}).get(arm) or {}
        sp = a.get("speculative")
        arm_rows.append({"arm": arm, "label": a.get("label", ""), "speculative": _spec_words(sp),
                         "extra args": shlex.join(a.get("args") or []), "flags as launched": arm_flags(d, arm)})
    s.add(Table(pd.DataFrame(arm_rows), "Arms", "arms.csv"))
    first = {}
    for pos in sorted(d.metas):
        first.setdefault(d.metas[pos].get("arm"), d.metas[pos])
    for arm, m in first.items():
        if m.get("argv"):
            env = " ".join(f"{k}={v}" for k, v in (m.get("env") or {}).items())
            s.add(Para(f"Launch command of {arm} (block {m.get('block')}):", "note"),
                  Pre((env + " \\\n  " if env else "") + shlex.join(m["argv"])))
    failed = [m for m in d.metas.values() if m.get("status") not in (None, "complete")]
    for m in failed:
        s.add(Para(f"Block {m.get('block')} ended with status {m.get('status')}; the last lines of its log:", "warn"),
              Pre(str(m.get("log_tail") or "")))
    if d.failed_attempts:
        s.add(Para(f"{len(d.failed_attempts)} block attempt(s) failed and were run again in a fresh server; "
                   "their records are kept beside the raw values but left out of every statistic:", "warn"))
        rows = [{"block": m.get("block"), "arm": m.get("arm"), "records kept": m.get("records_kept"),
                 "file": m.get("file"), "error": str(m.get("error") or m.get("status"))[:300]}
                for m in d.failed_attempts]
        s.add(Table(pd.DataFrame(rows), "Failed block attempts", "failed_attempts.csv"))
    if d.model_dir or d.model_build:
        s.add(Heading("The model", 3))
        s.add(Para(f"Served from {d.model_dir}." if d.model_dir else "The model directory is not named in the "
                   "launch commands."))
        if d.model_build:
            b = d.model_build
            s.add(Para(f"Built locally (build.json): {b.get('layers')} layers, hidden {b.get('hidden')}, vocabulary "
                       f"{b.get('vocab')}, {b.get('steps')} training steps of batch {b.get('batch')} x "
                       f"{b.get('seq_len')} tokens at lr {b.get('lr')} on {b.get('corpus', 'its corpus')}, final loss "
                       f"{b.get('final_loss', float('nan')):.2f}, seed {b.get('seed')}, {b.get('build_seconds')} s "
                       f"with torch {b.get('torch')}."
                       if "layers" in b else "Build record (build.json):"))
            if "layers" not in b:
                s.add(Pre(json.dumps(b, indent=1)))
    a = cfg.get("analysis", {})
    s.add(Para(f"Analysis: medians with {d.stats.get('resamples', a.get('bootstrap_resamples'))} bootstrap resamples "
               f"at {pct(d.stats.get('confidence', 0.95), 0)} confidence, analysis seed {d.stats.get('seed')} (each "
               f"statistic derives its own stream from it), noise threshold {pct(d.stats.get('noise_threshold'), 0)}, "
               f"spread warning above {pct(d.stats.get('spread_warning'), 0)}."))
    return s


# ---------------------------------------------------------------- outputs, corrections, raw values

def output_excerpts(d: Data, chars: int = 160) -> pd.DataFrame:
    """The first timed output of each arm and workload, cut to `chars` characters (untrusted text)."""
    rows, seen = [], set()
    for r in d.raw:
        key = (r.get("arm"), r.get("workload"))
        if r.get("warmup") or key in seen or r.get("output_text") is None:
            continue
        seen.add(key)
        text = str(r["output_text"]).replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
        rows.append({"arm": r.get("arm"), "workload": r.get("workload"), "prompt": r.get("prompt_id"),
                     "output (first characters)": text[:chars] + ("..." if len(text) > chars else "")})
    t = pd.DataFrame(rows)
    if not t.empty:
        order = {w: i for i, w in enumerate(d.workloads)}
        t = t.sort_values(["workload", "arm"], key=lambda s: s.map(order) if s.name == "workload" else s)
    return t


def section_outputs(d: Data) -> Section | None:
    t = output_excerpts(d)
    if t.empty:
        return None
    s = Section([Heading("What the model generated")])
    s.add(Para("The first timed output of each arm and workload, as the server returned it (shown as text). "
               "Prompt-lookup drafts are accepted when the output repeats what is already in the context, so "
               "repetitive output is what makes ngram speculation pay."))
    return s.add(Table(t, "Output excerpts", "outputs.csv"))


def section_corrections(d: Data) -> Section:
    s = Section([Heading("Corrections")])
    if not d.corrections:
        return s.add(Para(f"None. Corrections are appended to {Path(d.corrections_path).name or 'NAME.corrections.yaml'} "
                          f"(date, claim, correction, evidence) and shown here; the article is re-rendered, "
                          f"never edited by hand."))
    s.add(Para("Claims this article made and later had to correct. They stay here, in the order they were made: "
               "the reasoning that went wrong is more useful preserved than quietly fixed."))
    for c in d.corrections:
        s.add(Heading(f"{c['date']}: {c['claim']}", 3), Para(f"Correction: {c['correction']}"),
              Para(f"Evidence: {c['evidence']}", "note"))
    return s


RAW_COLUMNS = {"position": "block", "arm": "arm", "round": "round", "run": "run", "prompt_id": "prompt",
               "decode_tok_s": "decode tok/s", "wall_s": "wall s", "ttft_s": "ttft s",
               "completion_tokens": "tokens", "cached_tokens": "cached", "finish_reason": "finish",
               "acceptance_length": "acc. length", "server_id": "server", "error": "error"}


def status(row) -> str:
    if row.get("warmup"):
        return "warmup"
    if row.get("valid"):
        return "valid"
    return "INVALID: " + str(row.get("invalid_reason") or "unknown")


def raw_table(runs: pd.DataFrame, workload: str) -> pd.DataFrame:
    """Every request of one workload in schedule order, warmups and invalid rows marked, nothing dropped."""
    sub = runs[runs["workload"].astype(str) == workload].copy()
    sub = sub.sort_values([c for c in ("position", "started_at") if c in sub], kind="stable")
    out = pd.DataFrame({new: sub[old] for old, new in RAW_COLUMNS.items() if old in sub})
    if "decode tok/s" in out:
        out["decode tok/s"] = sub["decode_tok_s"].map(rate)
    for col in ("wall s", "ttft s"):
        if col in out:
            out[col] = out[col].map(lambda v: "" if _blank(v) else f"{v:.3f}")
    if "acc. length" in out:
        out["acc. length"] = out["acc. length"].map(lambda v: "" if _blank(v) else f"{v:.2f}")
    if {"accepted_tokens", "draft_tokens"} <= set(sub):
        out.insert(out.columns.get_loc("acc. length"), "accepted / proposed",
                   [("" if _blank(a) else f"{int(a)} / {int(p)}") for a, p in zip(sub["accepted_tokens"], sub["draft_tokens"])])
    out["status"] = [status(r) for r in sub.to_dict("records")]
    for col in ("round", "run", "tokens", "cached", "block"):
        if col in out:
            out[col] = out[col].map(lambda v: "" if _blank(v) else str(int(v)))
    return out.reset_index(drop=True)


def guards(runs: pd.DataFrame) -> list[str]:
    """Seed 000's statements about the raw values, each checked, not assumed."""
    out = []
    timed = runs[~runs["warmup"]] if "warmup" in runs else runs
    cached = pd.to_numeric(timed.get("cached_tokens"), errors="coerce")
    if cached.notna().all() and (cached == 0).all():
        out.append("Every timed response had cached_tokens at 0: the prefix cache never engaged.")
    elif cached.isna().any():
        out.append(f"{int(cached.isna().sum())} timed responses did not report cached tokens: the cache guard "
                   f"could not be checked for them.")
    else:
        out.append(f"{int((cached > 0).sum())} timed responses hit the prefix cache; they are marked invalid.")
    toks = pd.to_numeric(timed.get("completion_tokens"), errors="coerce").dropna()
    fin = timed.get("finish_reason")
    if len(toks) and toks.nunique() == 1 and fin is not None and (fin == "length").all():
        out.append(f"Output length was pinned at {int(toks.iloc[0])} tokens per run (finish_reason was length "
                   f"every time), so the only variable is elapsed time.")
    else:
        out.append("Output length was not the same for every timed run; runs that stopped early are marked invalid.")
    out.append("Throughput is always completion_tokens divided by wall time, never stream events.")
    return out


def section_raw(d: Data) -> Section:
    s = Section([Heading("Every raw value")])
    for g in guards(d.runs):
        s.add(Para(g))
    s.add(Para("Every request, in the order it ran. Warmups and invalid runs are shown and marked, never dropped; "
               "only rows marked valid enter the statistics above. The same values are in "
               + ", ".join(f"tables/raw_{wl}.csv" for wl in d.workloads)
               + f", and the raw records (with the full output text) in results/{d.name}/raw/."))
    for wl in d.workloads:
        s.add(Heading(wl, 3), Table(raw_table(d.runs, wl), f"{wl}: every run", f"raw_{wl}.csv"))
    return s


# ---------------------------------------------------------------- figures

def _figure_setup():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.9)
    return plt, sns


def _palette(d: Data):
    _, sns = _figure_setup()
    return dict(zip(d.arms, sns.color_palette("colorblind", len(d.arms))))


def _save(fig, d: Data, name: str) -> str:
    """Write the figure under out_dir/figures/ and return its path as the page sees it: relative to
    where the notebook runs (papermill runs it in out_dir, so figures/NAME.png in the article; opened
    in JupyterLab from notebooks/, ../report/NAME/figures/NAME.png)."""
    path = d.out_dir / "figures" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return Path(os.path.relpath(path.resolve(), Path.cwd().resolve())).as_posix()


def figure_run_sequence(d: Data) -> Figure | None:
    """Every run in schedule order: blocks shaded, arms coloured, warmups and invalid runs hollow."""
    runs = d.runs.sort_values([c for c in ("position", "started_at") if c in d.runs], kind="stable").reset_index(drop=True)
    if runs.empty:
        return None
    plt, sns = _figure_setup()
    runs = runs.assign(order=range(len(runs)), kind=["valid" if v else "warmup / invalid" for v in runs["valid"]])
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for i, (pos, blk) in enumerate(runs.groupby("position", sort=True)):
        lo, hi = blk["order"].min() - 0.5, blk["order"].max() + 0.5
        if i % 2 == 0:
            ax.axvspan(lo, hi, color="0.92", zorder=0)
        ax.text((lo + hi) / 2, 1.0, f"block {int(pos)}", transform=ax.get_xaxis_transform(), ha="center",
                va="bottom", fontsize=7, color="0.35")
    pal = _palette(d)
    valid = runs[runs["valid"]]
    sns.scatterplot(data=valid, x="order", y="decode_tok_s", hue="arm", style="workload", palette=pal,
                    hue_order=[a for a in d.arms if a in set(runs["arm"])], ax=ax, s=36, zorder=3)
    other = runs[~runs["valid"]]
    if not other.empty:
        ax.scatter(other["order"], other["decode_tok_s"], facecolors="none",
                   edgecolors=[pal.get(a, "0.5") for a in other["arm"]], s=36, zorder=2, label="warmup / invalid")
    ax.set_xlabel("run, in the order it ran")
    ax.set_ylabel("decode tok/s")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7, frameon=False)
    return Figure(_save(fig, d, "run_sequence"), "Every run in schedule order",
                  "Every request in the order it ran. Shaded bands are blocks; colour is the arm, marker the "
                  "workload; hollow markers are warmups and invalid runs (not in the statistics).")


def figure_distributions(d: Data) -> Figure | None:
    valid = d.runs[d.runs["valid"]]
    if valid.empty:
        return None
    plt, sns = _figure_setup()
    wls = [w for w in d.workloads if w in set(valid["workload"])]
    arms = [a for a in d.arms if a in set(valid["arm"])]
    fig, axes = plt.subplots(1, len(wls), figsize=(3.2 * len(wls) + 0.6, 3.4), squeeze=False)
    pal = _palette(d)
    for ax, wl in zip(axes[0], wls):
        sub = valid[valid["workload"] == wl]
        sns.boxplot(data=sub, x="arm", y="decode_tok_s", order=arms, hue="arm", hue_order=arms, palette=pal,
                    ax=ax, showfliers=False, boxprops={"alpha": 0.35}, legend=False, width=0.6)
        sns.stripplot(data=sub, x="arm", y="decode_tok_s", order=arms, hue="arm", hue_order=arms, palette=pal,
                      ax=ax, size=5, jitter=0.15, legend=False)
        ax.set_title(wl)
        ax.set_xlabel("")
        ax.set_ylabel("decode tok/s" if ax is axes[0][0] else "")
        ax.tick_params(axis="x", labelrotation=30)
    fig.tight_layout()
    return Figure(_save(fig, d, "distributions"), "Decode rate per arm and workload",
                  "Every valid run per arm and workload (points) over its box (quartiles).")


def figure_acceptance(d: Data) -> Figure | None:
    if "draft_budget" not in d.runs or "acceptance_length" not in d.runs:
        return None
    r = d.runs[d.runs["valid"] & d.runs["draft_budget"].notna() & d.runs["acceptance_length"].notna()]
    if r.empty:
        return None
    plt, sns = _figure_setup()
    fig, ax = plt.subplots(figsize=(5.6, 3.6))
    wls = [w for w in d.workloads if w in set(r["workload"])]
    # Workloads side by side around each budget, a fixed offset apart, so no point moves to another budget.
    offset = {w: 0.2 * (i - (len(wls) - 1) / 2) for i, w in enumerate(wls)}
    r = r.assign(x=r["draft_budget"] + r["workload"].map(offset))
    sns.scatterplot(data=r, x="x", y="acceptance_length", hue="workload", hue_order=wls, ax=ax, s=30)
    budgets = sorted(r["draft_budget"].unique())
    ax.set_xticks(budgets)
    ax.plot(budgets, [b + 1 for b in budgets], "--", color="0.4", lw=1, label="every draft accepted (K + 1)")
    ax.plot(budgets, budgets, ":", color="0.4", lw=1, label="saturation 100% (K)")
    ax.set_xlabel("draft budget K")
    ax.set_ylabel("acceptance length")
    ax.legend(fontsize=7, frameon=False)
    return Figure(_save(fig, d, "acceptance"), "Acceptance length against draft budget",
                  "Acceptance length (tokens per verify step) of each valid run against the draft budget, by workload.")


# ---------------------------------------------------------------- reproductions and controls

@dataclass
class Controls:
    """What the reproduction and control rules wrote beside the experiment's results (each may be absent)."""

    verdicts: list  # results/NAME--repro-*/verdict.json, oldest first
    determinism: dict | None  # results/NAME/determinism.json
    agreement: dict | None  # results/NAME/agreement.json
    arena: dict | None  # results/NAME/arena.json


def load_controls(name: str, agreement_json, arena_json, determinism_json, results_dir) -> Controls:
    from bracket.reproduce import load_verdicts

    return Controls(verdicts=load_verdicts(results_dir, name) if results_dir and Path(results_dir).is_dir() else [],
                    determinism=_read_json(determinism_json), agreement=_read_json(agreement_json),
                    arena=_read_json(arena_json))


def _yes(x) -> str:
    return "n/a" if x is None else ("yes" if x else "no")


def reproduction_table(v: dict) -> pd.DataFrame:
    rows = []
    for c in v.get("cells", []):
        for who in ("original", "reproduction"):
            f = c.get(who)
            if not f:
                continue
            rows.append({"workload": c["workload"], "session": who, "runs": f["n"], "median": rate(f["median"]),
                         "median CI": span(f.get("ci_low"), f.get("ci_high"), 2), "range": span(f["min"], f["max"]),
                         "spread": pct(f["spread"]), f"ratio to {f.get('reference')}": ratio(f.get("ratio")),
                         "ratio CI": (f"{ratio(f['ratio_ci_low'])}{DASH}{ratio(f['ratio_ci_high'])}"
                                      if not _missing(f.get("ratio_ci_low")) else ""),
                         "verdict": c["verdict"] if who == "reproduction" else ""})
    return pd.DataFrame(rows)


def section_reproductions(d: Data, c: Controls) -> Section | None:
    if not c.verdicts:
        return None
    s = Section([Heading("Reproductions")])
    s.add(Para("Each reproduction ran one arm again in fresh servers, bracketed by the reference (reference, arm, "
               "reference), and compared it with the figures above. Ratios to the reference from the same session "
               "survive thermal drift; absolute numbers don't, so both are checked."))
    s.add(Para(f"Rule: {c.verdicts[0].get('rule', '')}.", "note"))
    for v in c.verdicts:
        s.add(Heading(f"{v.get('arm')}: {v.get('verdict')} ({v.get('name')}, {v.get('runs')} runs per block, "
                      f"{str(v.get('created', ''))[:16].replace('T', ' ')})", 3))
        s.add(Table(reproduction_table(v), f"{v.get('arm')}: published vs reproduced",
                    f"reproduction_{v.get('id')}.csv"))
        from bracket.reproduce import sentence
        for cell in v.get("cells", []):
            if cell.get("original") and cell.get("reproduction"):
                s.add(Para(f"{cell['workload']}: {sentence(cell)}. Original median inside the reproduction's CI: "
                           f"{_yes(cell.get('median_inside_ci'))}; original ratio inside its ratio CI: "
                           f"{_yes(cell.get('ratio_inside_ci'))}.",
                           "warn" if cell["verdict"] == "does not hold" else ""))
            elif cell.get("note"):
                s.add(Para(f"{cell['workload']}: undecided: {cell['note']}.", "note"))
        if v.get("ledger", {}).get("entries"):
            s.add(Para("The figures that did not hold are entered in the corrections ledger (below).", "note"))
    return s


def determinism_table(arm: dict) -> pd.DataFrame:
    rows = [{"config": r["config"], "repeat": r["repeat"] + 1, "request": r["request"],
             "output sha256": (r["output_sha256"] or "")[:16] + "...", "tokens": r["completion_tokens"],
             "cached": r["cached_tokens"], "error": r["error"] or ""} for r in arm.get("rows", [])]
    return pd.DataFrame(rows)


def section_determinism(d: Data, c: Controls) -> Section | None:
    det = c.determinism
    if not det:
        return None
    s = Section([Heading("Determinism control: batch 1 vs batch 2")])
    s.add(Para(f"The same request ({det['workload']} prompt {det['prompt_id']}, {det['max_tokens']} tokens, temperature 0) "
               f"sent alone (batch 1) and together with an identical second request (batch 2, requests A and B), "
               f"each repeated {det['repeats']} times in one fresh server, prefix cache {det['prefix_cache']}. "
               f"No arm's feature is needed to change the batch shape, so this tells whether batching alone "
               f"changes greedy output."))
    for a in det.get("arms", []):
        s.add(Heading(f"{a['arm']}: {a['verdict']}", 3), Para(a.get("reading", "")))
        s.add(Table(determinism_table(a), f"Output hashes of {a['arm']}", f"determinism_{a['arm']}.csv"))
    return s


def agreement_table(agr: dict) -> pd.DataFrame:
    rows = []
    for r in agr.get("cells", []):
        rows.append({"arm": r["arm"], "workload": r["workload"], "against": r["against"],
                     "exact matches": f"{r['exact']} / {r['pairs']}", "rate": pct(r["exact_match_rate"], 0),
                     "first difference (char), min": "" if r["first_difference_min"] is None else int(r["first_difference_min"]),
                     "median": "" if r["first_difference_median"] is None else f"{r['first_difference_median']:g}",
                     "should be lossless": _yes(r["lossless_expected"]), "flag": "FLAG" if r["flag"] else ""})
    return pd.DataFrame(rows)


def section_agreement(d: Data, c: Controls) -> Section | None:
    agr = c.agreement
    if not agr or not agr.get("cells"):
        return None
    s = Section([Heading("Greedy agreement with the reference")])
    s.add(Para(f"Each arm's output compared with the {agr['reference']} arm's on the same prompt (same workload, prompt "
               f"and run index, so the same unique prefix): the share that is byte-identical, and where the first "
               f"difference falls, counted in characters of the output. The reference's later blocks are compared "
               f"with its first, which shows whether a fresh server reproduces itself."))
    if not agr.get("judged"):
        s.add(Para(f"Requests ran at temperature {agr['temperature']}: outputs are sampled, so disagreement is "
                   f"expected and nothing is flagged.", "note"))
    s.add(Table(agreement_table(agr), "Greedy agreement per arm and workload", "agreement.csv"))
    for f in agr.get("flags", []):
        s.add(Para(f.replace("NAME", getattr(d, "name", "NAME")), "warn"))
    det = c.determinism
    if agr.get("flags") and det:
        verdicts = {a["arm"]: a["verdict"] for a in det.get("arms", [])}
        s.add(Para("The determinism control above found: " + "; ".join(f"{k}: {v}" for k, v in verdicts.items())
                   + (". Batch shape alone changes greedy output here, which explains a lossless arm's divergence "
                      "without blaming the arm." if any("paths" in v for v in verdicts.values()) else ".")))
    return s


def arena_table(ar: dict) -> pd.DataFrame:
    rows = []
    for cell in ar.get("cells", []):
        sm = cell.get("summary") or {}
        rows.append({"arm": cell["arm"], "workload": cell["workload"], "depth (asked / served)":
                     f"{cell['depth']} / {cell.get('depth_measured')}", "users": cell["users"],
                     "tokens per user": cell["tokens"], "runs": sm.get("n", 0),
                     "window rate, median": rate(sm.get("median")),
                     "CI": span(sm.get("ci_low"), sm.get("ci_high"), 2) if sm else "",
                     "range": span(sm.get("min"), sm.get("max")) if sm else "",
                     "spread": pct(sm.get("spread")) if sm else ""})
    return pd.DataFrame(rows)


def section_arena(d: Data, c: Controls) -> Section | None:
    ar = c.arena
    if not ar or not ar.get("cells"):
        return None
    s = Section([Heading("The Spark Arena cell")])
    s.add(Para("Spark Arena ranks one cell, measured by llama-benchy: concurrent users at a fixed context depth, "
               "decode only. The rate is the decode tokens of all users (each user's tokens after its first) over "
               "the window from the first user's first token to the last user's last token; prefill sits outside "
               "that window. Set beside that leaderboard only at the same depth, users and tokens."))
    s.add(Table(arena_table(ar), "Window decode rate per arm", "arena.csv"))
    return s
