"""Experiment files: load, fill defaults, validate, explain what is wrong, and build the typed experiment.

The schema (workflow/schemas/experiment.schema.yaml) is the one description of every key.
Validation happens before anything runs, and an error names the key, the value and the fix; what
passes is built once into an Experiment (bracket.typed.experiment, generated from the schema), a
frozen value every stage reads by attribute.
"""

from __future__ import annotations

import copy
import difflib
import math
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

# jsonschema imports rfc3987_syntax, where installed (jupyterlab's jupyter-events brings it), only for its
# "iri" format checker, and that module builds a Lark grammar as it loads: about 1.8 s of CPU in every
# process that validates an experiment (each Snakemake script, each `bracket` command, the test session).
# The schema checks no formats and no format checker is passed, so the module is marked absent before
# jsonschema loads, unless something in this process has loaded it already.
if "jsonschema" not in sys.modules:
    sys.modules.setdefault("rfc3987_syntax", None)
import jsonschema  # noqa: E402

from bracket import engines  # noqa: E402
from bracket.cluster import placement  # noqa: E402
from bracket.engines.base import server_settings  # noqa: E402
from bracket.experiment import arena_grid, arena_workload, load_workload, paths, prompts, yaml_file  # noqa: E402
from bracket.experiment.design import ADAPTIVE_KINDS  # noqa: E402
from bracket.experiment.schema import load_schema, schema_at  # noqa: E402
from bracket.secrets import FIX as SECRET_FIX  # noqa: E402
from bracket.secrets import argument_problem, looks_secret, value_problem  # noqa: E402
from bracket.typed.experiment import Arm, Experiment, Node  # noqa: E402


def as_data(value: Any) -> Any:
    """A part of the experiment as plain JSON data (mappings, lists, numbers, strings), keys as validated:
    a key the file and the schema's defaults left out stays out."""
    if isinstance(value, Node):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, dict):
        return {k: as_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_data(v) for v in value]
    return value


class ExperimentError(ValueError):
    """An experiment file that cannot be run; the message says what to change."""


def _fill_defaults(instance: Any, schema: dict) -> Any:
    """Fill `default:` values of the schema into `instance`, recursively.

    Objects that are absent get their default (often {}) and are then filled themselves,
    so `design: {}` becomes the full default design.
    """
    if not isinstance(instance, dict) or schema.get("type") != "object":
        return instance
    for key, sub in schema.get("properties", {}).items():
        if key not in instance and "default" in sub:
            instance[key] = copy.deepcopy(sub["default"])
        if key in instance:
            instance[key] = _fill_defaults(instance[key], sub)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key in instance:
            if key not in schema.get("properties", {}):
                instance[key] = _fill_defaults(instance[key], extra)
    return instance


def _explain(error: jsonschema.ValidationError, schema: dict, source: str) -> str:
    where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
    if error.validator == "additionalProperties":
        node = schema_at(schema, list(error.absolute_path))
        allowed = sorted(node.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, allowed, n=1)
            hints.append(f"'{key}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
        return f"{source}: unknown key {', '.join(hints)} under {where}. Allowed keys: {', '.join(allowed)}."
    if error.validator == "enum":
        return (
            f"{source}: {where} is {error.instance!r}; allowed values: {', '.join(map(repr, error.validator_value))}."
        )
    if error.validator == "type":
        node = schema_at(schema, list(error.absolute_path))
        desc = node.get("description", "")
        return (
            f"{source}: {where} must be of type {error.validator_value}, got "
            f"{error.instance!r} ({type(error.instance).__name__}). {desc}"
        ).strip()
    if error.validator in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        node = schema_at(schema, list(error.absolute_path))
        bound = {
            "minimum": "at least",
            "exclusiveMinimum": "more than",
            "maximum": "at most",
            "exclusiveMaximum": "less than",
        }[error.validator]
        return (
            f"{source}: {where} = {error.instance!r} is out of range ({error.validator} "
            f"{error.validator_value}); set it to {bound} {error.validator_value}. "
            f"{node.get('description', '')}"
        ).strip()
    if error.validator == "maxProperties":
        node = schema_at(schema, list(error.absolute_path))
        return _too_many(source, where, len(error.instance), error.validator_value, node)
    if error.validator in ("anyOf", "oneOf"):
        node = schema_at(schema, list(error.absolute_path))
        first = node.get("description", "").split(". ")[0].strip().rstrip(".")
        return f"{source}: {where} is {error.instance!r}, which is not allowed. {first}."
    if error.validator == "required":
        return f"{source}: {where} is missing a required key: {error.message}."
    return f"{source}: {where}: {error.message}"


def _too_many(source: str, where: str, n: int, most: int, node: dict) -> str:
    return (
        f"{source}: {where} has {n:,} entries, more than the {most:,} an experiment may hold; keep at most "
        f"{most:,}, or split the experiment. {' '.join(node.get('description', '').split())}"
    ).strip()


def _check_counts(raw: dict, schema: dict, source: str) -> None:
    """The top level's mappings (arms, workloads) longer than the schema's maxProperties, refused before any default
    is filled or entry checked: 15,000 workloads would take seconds to check one by one, to say what their number
    says at once."""
    for key, node in schema.get("properties", {}).items():
        most, value = node.get("maxProperties"), raw.get(key)
        if most is not None and isinstance(value, dict) and len(value) > most:
            raise ExperimentError(_too_many(source, key, len(value), most, node))


def without_defaults(value: Any, schema: dict) -> Any:
    """`value` with every key that equals its schema default removed, recursively.

    What a measurement depends on, stated so that adding a new key with a default to the schema
    (a new bracket release) does not look like a change to every existing experiment.
    """
    if isinstance(value, Node):
        value = as_data(value)
    if not isinstance(value, dict) or schema.get("type") != "object":
        return value
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    out = {}
    for key, v in value.items():
        sub = props.get(key, extra if isinstance(extra, dict) else {})
        if "default" in sub and v == sub["default"]:
            continue
        v = without_defaults(v, sub)
        if isinstance(v, dict) and not v and "default" in sub and sub["default"] == {}:
            continue
        out[key] = v
    return out


def validate(raw: dict, source: str = "experiment", measured: bool = False) -> Experiment:
    """Return the experiment with defaults filled, or raise ExperimentError naming the problem.

    The file's mapping is filled with the schema's defaults and checked against the schema (whose errors name the
    key and the fix), then built once into the typed, frozen Experiment, whose meaning is checked last.

    measured: the experiment already ran (re-rendering its records): checks of what an arm would do
    when launched (an arm that can never draft) are left to the analysis, which finds it in the records."""
    if not isinstance(raw, dict):
        raise ExperimentError(
            f"{source}: expected a mapping of keys at the top level, got "
            f"{type(raw).__name__}. Start from experiments/draft_sweep.yaml."
        )
    schema = load_schema()
    _check_counts(raw, schema, source)
    data = copy.deepcopy(raw)
    eng = data.get("engine")
    if isinstance(eng, dict) and eng.get("launch") == "attach" and "kind" not in eng:
        eng["kind"] = "auto"  # the schema's default is a launch's; an attached server is asked what it is
    if isinstance(eng, dict) and eng.get("kind") == "reference" and "embedded" not in eng:
        eng["embedded"] = False  # the reference server serves no model: nothing embedded to build
    data = _fill_defaults(data, schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))
    if errors:
        raise ExperimentError("\n".join(_explain(e, schema, source) for e in errors[:5]))
    _settle(data)
    exp = Experiment.model_validate(data)
    _check_grid_cells(exp, schema, source)
    try:
        exp = arena_grid.expand(exp, source)
    except ValueError as exc:
        raise ExperimentError(str(exc)) from None
    _check_meaning(exp, source, measured)
    return exp


def _check_grid_cells(exp: Experiment, schema: dict, source: str) -> None:
    """The workloads an arena grid expands to (every combination of its lists), counted before they are made: the
    schema's bound on workloads holds for the cells, each an ordinary workload once expanded."""
    most = schema["properties"]["workloads"]["maxProperties"]
    cells = {}
    for name, wl in exp.workloads.items():
        if wl.grid is not None:
            cells[name] = math.prod(len(getattr(wl.grid, axis) or [0]) for axis in arena_grid.AXES)
    total = len(exp.workloads) - len(cells) + sum(cells.values())
    if total > most:  # a grid is among them: the workloads as written are within the schema's bound
        name = max(cells, key=cells.get)
        raise ExperimentError(
            f"{source}: the workloads expand to {total:,} (workloads.{name}.grid makes {cells[name]:,} cells, one "
            f"per combination of its lists), more than the {most:,} an experiment may hold: every block runs every "
            f"workload. Shorten the grid's lists, or split the experiment."
        )


def _settle(data: dict) -> None:
    """The values the schema cannot default, set on the filled mapping before the experiment is built: a launch's
    engine.kind auto (auto is told from an attached server's answers; a launch needs a kind), the reference (the
    first arm), and an adaptive design's min_rounds, max_rounds and target (filled here, not in the schema, so a
    fixed design's parameters stay as they were)."""
    eng = data["engine"]
    if eng["kind"] == "auto" and eng["launch"] != "attach":
        eng["kind"] = "vllm"
    if not data["reference"]:
        data["reference"] = next(iter(data["arms"]))
    design = data["design"]
    if design["rounds"] == "adaptive":
        design.setdefault("min_rounds", 2)
        design.setdefault("max_rounds", 8)
        design.setdefault("target", "decisive")


def _check_meaning(exp: Experiment, source: str, measured: bool = False) -> None:
    arms = list(exp.arms)
    if exp.reference not in exp.arms:
        raise ExperimentError(
            f"{source}: reference is {exp.reference!r}, but no arm has that name. "
            f"Defined arms: {', '.join(arms)}. Set reference to one of them or add the arm."
        )
    check_names(exp, source)
    refused = paths.problems(exp)
    if refused:
        raise ExperimentError("\n".join(f"{source}: {p}" for p in refused))
    check_engine_env(exp, source)
    for name, arm in exp.arms.items():
        spec = arm.speculative
        if spec is not None and spec.method == "ngram" and spec.prompt_lookup_min > spec.prompt_lookup_max:
            raise ExperimentError(
                f"{source}: arms.{name}.speculative.prompt_lookup_min ({spec.prompt_lookup_min}) is "
                f"larger than prompt_lookup_max ({spec.prompt_lookup_max}); swap them."
            )
        if (
            spec is not None
            and spec.method in ("draft_model", "eagle", "eagle3", "dflash")
            and not spec.model
            and exp.engine.kind != "ollama"
        ):  # Ollama's draft model is in its Modelfile
            raise ExperimentError(
                f"{source}: arms.{name}.speculative.method {spec.method!r} needs a draft model: "
                f"set arms.{name}.speculative.model."
            )
    if exp.engine.embedded and exp.engine.kind not in ("vllm", "llamacpp"):
        raise ExperimentError(
            f"{source}: engine.embedded is true, which serves with vllm (or llamacpp, from the "
            f"llama.cpp the workflow builds); set engine.kind: vllm or llamacpp, or "
            f"engine.embedded: false."
        )
    c = exp.controls
    if not c.neutrality and not c.neutrality_off.strip():
        raise ExperimentError(
            f"{source}: controls.neutrality is false without a reason: the neutrality control "
            f"is what shows bracket's request costs the server no more than a plain client's. "
            f"Say why it is off in controls.neutrality_off, or remove controls.neutrality."
        )
    _check_design(exp, source)
    _check_engine(exp, source, measured)
    refused = arena_workload.problems(exp) + load_workload.problems(exp) + placement.problems(exp.cluster)
    if refused:
        raise ExperimentError(f"{source}: " + "\n  ".join(refused))


# Each block is a fresh server for minutes: 500 is days of measuring, and past it the workflow's own plan
# (a dry run) takes minutes; an experiment that needs more is several experiments.
MAX_BLOCKS = 500
# What one host's sequence of blocks may ask, so that a design can finish in a week: its requests (at about a
# second each, 256 tokens at 250 tokens/s, 500,000 are six days) and its idle time between blocks.
MAX_REQUESTS = 500_000
MAX_IDLE_S = 7 * 24 * 3600
ADAPTIVE_ONLY = ("min_rounds", "max_rounds", "target", "margin")


def _check_design(exp: Experiment, source: str) -> None:
    """An adaptive design's rounds and kind; keys that only an adaptive design reads, named when set without it;
    a design of more blocks than MAX_BLOCKS."""
    d = exp.design
    adaptive = d.rounds == "adaptive"
    rounds = d.max_rounds if adaptive else d.rounds
    n = rounds * len(exp.arms) * max(1, len(exp.hosts))
    if n > MAX_BLOCKS:
        key = "design.max_rounds" if adaptive else "design.rounds"
        raise ExperimentError(
            f"{source}: {key} is {rounds}, which makes at least {n:,} blocks ({len(exp.arms)} arm(s)"
            f"{' on ' + str(len(exp.hosts)) + ' hosts' if exp.hosts else ''}), more than "
            f"{MAX_BLOCKS}, each a fresh server for minutes; lower {key} (5 is the default) or "
            f"split the experiment."
        )
    per_host = rounds * len(exp.arms)  # the hosts run side by side, each its own sequence
    per_block = len(exp.workloads) * (d.runs_per_block + d.warmup_runs)
    per_block += 2 * exp.controls.neutrality_pairs if exp.controls.neutrality else 0
    if per_host * per_block > MAX_REQUESTS:
        raise ExperimentError(
            f"{source}: the design sends {per_host * per_block:,} requests in one sequence of blocks ({per_host} "
            f"blocks x {per_block:,}: {len(exp.workloads)} workload(s) x ({d.runs_per_block} design.runs_per_block "
            f"+ {d.warmup_runs} design.warmup_runs){' + the neutrality pairs' if exp.controls.neutrality else ''}), "
            f"more than {MAX_REQUESTS:,} (six days at a second a request); lower design.runs_per_block, the "
            f"rounds or the workloads, or split the experiment."
        )
    idle = d.cooldown_s * (per_host - 1)
    if idle > MAX_IDLE_S:
        raise ExperimentError(
            f"{source}: design.cooldown_s is {d.cooldown_s:g} s before each of {per_host - 1} blocks: "
            f"{idle / 86400:.1f} days idle in one sequence of blocks, more than a week; lower design.cooldown_s "
            f"(a machine settles in minutes) or the rounds."
        )
    if not adaptive:
        adaptive_only = [k for k in ADAPTIVE_ONLY if getattr(d, k) is not None]
        if adaptive_only:
            raise ExperimentError(
                f"{source}: design.{adaptive_only[0]} is set, but design.rounds is {d.rounds!r}: "
                f"it tells an adaptive design when to stop; set design.rounds: adaptive or remove "
                f"{', '.join(adaptive_only)}."
            )
        return
    if d.kind not in ADAPTIVE_KINDS:
        raise ExperimentError(
            f"{source}: design.rounds is adaptive, but design.kind is {d.kind!r}, which runs "
            f"each arm in one stretch of time and so confounds arm with time at every look; set "
            f"design.kind to one of {', '.join(ADAPTIVE_KINDS)}."
        )
    if d.min_rounds > d.max_rounds:
        raise ExperimentError(
            f"{source}: design.min_rounds ({d.min_rounds}) is larger than design.max_rounds "
            f"({d.max_rounds}); the first look must come before the budget is spent."
        )


def _check_engine(exp: Experiment, source: str, measured: bool = False) -> None:
    """What the chosen engine and launch mode cannot do with these arms, named before anything runs."""
    eng = exp.engine
    launch = eng.launch
    if eng.embedded and launch != "native":
        raise ExperimentError(
            f"{source}: engine.embedded is true, which runs the embedded engine natively; set "
            f"engine.launch: native, or engine.embedded: false with engine.model for {launch}."
        )
    adapter = engines.get(eng.kind)
    if eng.kind == "reference" and launch == "docker":
        raise ExperimentError(
            f"{source}: engine.kind reference runs bracket's own server on this host; set engine.launch: "
            f"native (or attach, to one you started with python -m bracket.engines.reference_server)."
        )
    if not adapter.launchable and launch != "attach":
        raise ExperimentError(
            f"{source}: engine.kind {eng.kind!r} attaches to a server you run and launches "
            f"none; set engine.launch: attach and engine.base_url."
        )
    if launch == "docker" and (eng.docker is None or not eng.docker.image):
        raise ExperimentError(
            f"{source}: engine.launch is docker, but engine.docker.image is not set; name the "
            f"image, e.g. engine.docker: {{image: lmsysorg/sglang:v0.5.23}}."
        )
    if eng.base_url and launch != "attach":
        raise ExperimentError(
            f"{source}: engine.base_url is only used under engine.launch: attach; remove it, or "
            f"set launch: attach to use the server running there."
        )
    problem = url_problem(eng.base_url)
    if problem:
        raise ExperimentError(f"{source}: engine.base_url {problem}")
    problems = [p for name, arm in exp.arms.items() for p in adapter.check_arm(name, arm)]
    if not measured:
        problems += [p for name, arm in exp.arms.items() for p in adapter.check_drafts(name, arm)]
    if problems:
        raise ExperimentError(
            f"{source}: engine.kind {eng.kind} cannot run these arms as written:\n  - " + "\n  - ".join(problems)
        )
    if launch == "attach":
        _check_attach(exp, source)


def _check_attach(exp: Experiment, source: str) -> None:
    """Under attach the server keeps the flags it was started with: no arm may ask for others."""
    eng = exp.engine
    unused = [k for k in ("args", "env", "secret_env") if getattr(eng, k)]
    if unused:
        raise ExperimentError(
            f"{source}: engine.launch is attach, so bracket starts no server and "
            f"engine.{unused[0]} would be ignored; remove {', '.join('engine.' + k for k in unused)}."
        )
    arms = list(exp.arms)
    first = server_settings(exp.arms[arms[0]])
    for name in arms[1:]:
        other = server_settings(exp.arms[name])
        if other != first:
            keys = [k for k in first if first[k] != other[k]]
            raise ExperimentError(
                f"{source}: engine.launch is attach, so one server, started by you, serves every block and its "
                f"flags cannot change between blocks; arms {arms[0]!r} and {name!r} differ in server settings "
                f"({', '.join(keys)}). Give every arm the same settings, or let bracket launch the server "
                f"(engine.launch: native or docker) so each arm gets its own."
            )


def check_prompt_files(
    exp: Experiment, root: Path, source: str = "experiment", model_dir: str | Path | None = None
) -> None:
    """Before any server starts: every prompt file parses, holds prompts, and (where the model's files
    are here) its prompts fit each arm's context (bracket.experiment.prompts.check)."""
    try:
        prompts.check(exp, root, model_dir=model_dir, source=source)
    except prompts.PromptError as exc:
        raise ExperimentError(str(exc)) from None


def url_problem(url: str) -> str | None:
    """Why `url` cannot be engine.base_url, or None: credentials in it (user:key@host) or a query string
    (?key=...) would be written to the block's settings, provenance and logs, where redaction cannot
    know them; bracket appends paths to it, so a query or fragment would also break every request.
    The message shows the URL without them, never the value."""
    if not url:
        return None
    try:
        u = urlsplit(url)
        u.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:  # the message would quote the part that failed, which may be a key
        return "is not a URL; give scheme, host and port, for example http://10.0.0.5:30000."
    bare = urlunsplit((u.scheme, u.hostname or "" if u.port is None else f"{u.hostname}:{u.port}", u.path, "", ""))
    if u.username is not None or u.password is not None:
        return (
            f"holds credentials before its host ({u.scheme}://***@{bare.split('://', 1)[-1]}); a URL is "
            f"written to the block's settings, provenance and logs. Remove them (engine.base_url: {bare}), "
            f"export the key in an environment variable and name it in engine.api_key_env: it is sent as "
            f'"Authorization: Bearer" and never written.'
        )
    if u.query or u.fragment:
        return (
            f"has a {'query string' if u.query else 'fragment'} ({bare}?***); bracket appends the API's paths "
            f"to the base URL, and a key in it would be written to the block's settings, provenance and logs. "
            f"Remove it (engine.base_url: {bare}); give an API key by engine.api_key_env."
        )
    if u.scheme not in ("http", "https") or not u.hostname:
        return f"is {url!r}; give an http:// or https:// URL with a host, for example http://10.0.0.5:30000."
    return None


# Names that become file and folder names (results/NAME/, raw_{workload}.csv, container names): one
# path component, never '.', '..' or hidden, never an option.
# Matched whole (re.fullmatch): `$` alone also matches before a trailing newline, and `code\n` would pass.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
_NAME = re.compile(NAME_PATTERN.removeprefix("^").removesuffix("$"))


def name_problem(kind: str, name: str) -> str | None:
    """Why `name` cannot be an experiment, arm or workload name, or None when it can."""
    if isinstance(name, str) and _NAME.fullmatch(name) and len(name) <= 100:
        return None
    return (
        f"{kind} name {name!r} is not allowed: names become file and folder names, so they must match "
        f"{NAME_PATTERN} (letters, digits, '_' and '-', starting with a letter or digit, no spaces, newlines "
        f"or other control characters, at most 100 characters); rename it."
    )


def check_names(exp: Experiment, source: str = "experiment") -> None:
    """Arm and workload names, checked once, before anything uses them in a path."""
    problems = [
        p
        for kind, names in (("arm", exp.arms), ("workload", exp.workloads))
        for p in (name_problem(kind, n) for n in names)
        if p
    ]
    if problems:
        raise ExperimentError("\n".join(f"{source}: {p}" for p in problems))


def check_engine_env(exp: Experiment, source: str = "experiment") -> None:
    """Literal values of engine.env and arms.*.env are written to settings, provenance and the article,
    so a variable whose name says it holds a secret may not be one of them."""
    places = [("engine.env", exp.engine.env)]
    places += [(f"arms.{name}.env", arm.env) for name, arm in exp.arms.items()]
    arg_places = [("engine.args", exp.engine.args)]
    arg_places += [(f"arms.{name}.args", arm.args) for name, arm in exp.arms.items()]
    names = [n for n in (exp.engine.api_key_env, *exp.engine.secret_env) if n]
    for where, args in arg_places:
        for arg in args:
            if why := argument_problem(str(arg), names):  # as the engine's parser reads it (bracket.secrets)
                raise ExperimentError(f"{source}: {where} {why}. {SECRET_FIX}, and remove it from {where}.")
    for where, env in places:
        for key in env:
            if why := value_problem(str(env[key]), names):
                raise ExperimentError(f"{source}: {where}.{key} {why}. {SECRET_FIX}, and remove it from {where}.")
            if looks_secret(key):
                raise ExperimentError(
                    f"{source}: {where} sets {key}, whose name says it holds a secret; values in {where} are "
                    f"literal and written to the block's settings, its provenance and the article. Use "
                    f"secret_env instead: remove {key} from {where}, add engine.secret_env: [{key}], and export "
                    f"{key} in the environment that runs the workflow."
                )


def read_yaml(path: str | Path):
    """The experiment file's YAML (bracket.experiment.yaml_file.read: its size, its aliases' expansion and no key
    written twice in one mapping bounded); ExperimentError naming the file otherwise, yaml.YAMLError where it is
    not YAML."""
    try:
        return yaml_file.read(path)
    except yaml_file.FileRefused as exc:
        raise ExperimentError(str(exc)) from None


MAX_FILE_BYTES, MAX_NODES = yaml_file.MAX_FILE_BYTES, yaml_file.MAX_NODES


_read_yaml = read_yaml  # the name tests/test_hostile_secrets.py reads


def load(path: str | Path, measured: bool = False) -> Experiment:
    """Read and validate an experiment file (measured: it already ran; see validate)."""
    path = Path(path)
    if not path.is_file():
        raise ExperimentError(f"no experiment file at {path}; experiments live in experiments/NAME.yaml.")
    try:
        raw = read_yaml(path)
    except yaml.YAMLError as exc:
        raise ExperimentError(
            f"{path}: not valid YAML: {exc}\nFix the brackets, quotes or indentation at the "
            f"line shown; experiments/draft_sweep.yaml is a working example."
        ) from None
    return validate(raw if raw is not None else {}, source=str(path), measured=measured)


def draft_budget(arm: Arm) -> int | None:
    """The arm's draft tokens per verify step; None for an arm that does not draft."""
    return arm.speculative.draft_tokens if arm.speculative is not None else None
