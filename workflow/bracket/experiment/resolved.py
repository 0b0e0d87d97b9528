"""The resolved experiment as a file: what the workflow's DAG validated, handed to every stage.

The DAG validates experiments/NAME.yaml once per invocation (workflow/rules/common.smk `load_experiment`)
and writes the result, defaults filled and meaning checked, to results/NAME/experiment.resolved.json; each
rule's script reads that file instead of validating the YAML again. The file is rewritten only when its
content changes, so its timestamp says when the experiment last changed: a comment or a reformatted YAML
changes nothing, and a moved checkout keeps it as it was.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pydantic

from bracket.typed.experiment import Experiment

#: results/NAME/FILE_NAME; apart from results/NAME--repro-ID/experiment.yaml, a reproduction's recorded config.
FILE_NAME = "experiment.resolved.json"


class ResolvedError(ValueError):
    """A resolved-experiment file that cannot be read; the message says how to make it again."""


def dumps(exp: Experiment) -> str:
    """The experiment as the file holds it: JSON, keys as validated (a key the file and the schema's defaults
    left out stays out), in the model's order, and arms, workloads and hosts in the experiment's order, which
    means something (the first arm is the default reference; the design draws arms in order). So two equal
    experiments give the same text."""
    return json.dumps(exp.model_dump(mode="json", exclude_unset=True), indent=1) + "\n"


def write(exp: Experiment, path: str | Path) -> bool:
    """Write `exp` to `path` unless the file already holds it; True when written.

    The new text replaces the old in one rename, so a job that reads the file meanwhile sees either."""
    path = Path(path)
    text = dumps(exp)
    try:
        if path.read_text() == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def read(path: str | Path) -> Experiment:
    """The experiment a resolved file holds (written by `write`), as the frozen Experiment."""
    path = Path(path)
    try:
        return Experiment.model_validate_json(path.read_bytes())
    except (OSError, pydantic.ValidationError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else f"{exc.error_count()} problem(s), first: {_first(exc)}"
        raise ResolvedError(
            f"{path}: not a resolved experiment ({why}). The workflow writes it from experiments/NAME.yaml when "
            f"it builds its DAG: delete it and run the same snakemake command again."
        ) from None


def _first(exc: pydantic.ValidationError) -> str:
    e = exc.errors()[0]
    return f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}"
