"""The forms a path or model name in an experiment may take, checked when the experiment is validated.

An experiment file is untrusted text that travels (pasted from an issue, committed to a fork, run again by
the reproduction target). Its model, draft and prompt paths become Snakemake inputs, and an input the
workflow builds itself becomes a rule's wildcards: before this check a draft model named
`resources/models/tiny-qwen3-s1$(touch PWNED)-l2-h64-v512-t10.gguf` reached rule embedded_model's shell
command. The rules quote every field and constrain every wildcard (workflow/rules/engine.smk); this is the
line before them, so such a file is refused with its key named before the DAG is built, on every host.

What is refused, in every field that names a file, a program or a model:
- control characters (a newline ends a shell command and starts another; none belongs in a path);
- the characters a shell gives meaning to inside or around a word: `$`, a backtick, `;`, `|`, `&`, `<`,
  `>`, quotes and the backslash, and Snakemake's `{`/`}` (an input holding them reads as a wildcard);
- a leading `-`: the engine's own parser would read the path as an option (`--api-key=...` as a model);
- under resources/models/, a name that reads as the embedded model (`tiny-qwen3-...`) without its exact
  grammar (bracket.embedded.EMBEDDED_NAME): the workflow would try to build it.
A real path with such a character is rare; the fix is a symbolic link without it.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from bracket.embedded import EMBEDDED_NAME, EMBEDDED_PREFIX
from bracket.typed.experiment import Experiment

# Characters with a meaning to a shell or to Snakemake's file patterns, and no place in a model's path.
SHELL_CHARS = "$`;|&<>'\"\\{}"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Long enough for any real path (Linux's PATH_MAX is 4,096 bytes); a longer one is not a path.
MAX_PATH = 4096


def path_problem(key: str, value: str) -> str | None:
    """Why `value`, the experiment's `key`, cannot name a file, program or model; None when it can."""
    if not value:
        return None
    shown = repr(value if len(value) <= 200 else value[:200] + "...")
    if len(value) > MAX_PATH:
        return f"{key} is {len(value):,} characters long ({shown}), longer than any path ({MAX_PATH:,}); give the real path."
    found = sorted({c for c in value if c in SHELL_CHARS})
    if _CONTROL.search(value):
        what = "a control character (a newline, a tab or another)"
    elif found:
        what = "the character" + ("s " if len(found) > 1 else " ") + " ".join(repr(c) for c in found)
    elif value.startswith("-"):
        return (
            f"{key} is {shown}, which starts with '-': the engine would read it as an option, not a path; "
            f"give the path as ./{value} or an absolute path."
        )
    else:
        tail = value.removeprefix("./")
        if tail.startswith(EMBEDDED_PREFIX) and not _is_embedded_form(tail):
            return (
                f"{key} is {shown}, which names an embedded model the workflow would build, but not in its "
                f"form resources/models/{EMBEDDED_NAME}[.gguf] (five numbers: seed, layers, hidden, vocab, "
                f"training steps); write it in that form, or move your own model out of resources/models/."
            )
        return None
    return (
        f"{key} is {shown}, which holds {what}: a path that reaches the workflow's rules may hold none "
        f"(they mean something to a shell or to Snakemake's file patterns); rename the file or give a "
        f"symbolic link without them."
    )


def _is_embedded_form(path: str) -> bool:
    return re.fullmatch(rf"resources/models/{EMBEDDED_NAME}(\.gguf|/?)", path) is not None


# Programs that run whatever text they are handed: no engine's server is one of them, and an experiment that
# names one as its server (with `-c` among its arguments) would run a command of the file's choosing.
INTERPRETERS = frozenset(
    {
        "sh",
        "bash",
        "dash",
        "zsh",
        "ksh",
        "csh",
        "tcsh",
        "fish",
        "busybox",
        "env",
        "xargs",
        "perl",
        "ruby",
        "node",
        "php",
        "lua",
        "awk",
        "gawk",
        "sudo",
        "su",
        "nohup",
        "setsid",
        "timeout",
        "nice",
        "exec",
        "eval",
        "sshpass",
        "ssh",
    }
)
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")


def program_problems(exp: Experiment) -> list[str]:
    """engine.executable, the server's program, is no shell or interpreter (by its file name). A wrapper script
    of the user's own is still a program the experiment names: `bracket check` prints the launch before it runs."""
    exe = exp.engine.executable or ""
    name = PurePath(exe).name
    if exe and (name in INTERPRETERS or _PYTHON.fullmatch(name)):
        return [
            f"engine.executable is {exe!r}, a program that runs whatever text it is handed, not an engine's "
            f"server; name the server's own program (llama-server, ollama), or a Python in engine.python."
        ]
    return []


def fields(exp: Experiment) -> list[tuple[str, str]]:
    """(key, value) for every field of `exp` that names a file, a program or a model."""
    eng = exp.engine
    out = [
        ("engine.model", eng.model or ""),
        ("engine.executable", eng.executable or ""),
        ("engine.python", eng.python or ""),
    ]
    if eng.docker is not None:
        out += [(f"engine.docker.volumes[{i}]", v) for i, v in enumerate(eng.docker.volumes or ())]
    for name, arm in exp.arms.items():
        if arm.speculative is not None:
            out.append((f"arms.{name}.speculative.model", arm.speculative.model or ""))
    for name, wl in exp.workloads.items():
        out.append((f"workloads.{name}.prompts", wl.prompts or ""))
    return out


def problems(exp: Experiment) -> list[str]:
    """One sentence per field of `exp` whose path cannot reach the workflow (see the module's docstring)."""
    found = [p for key, value in fields(exp) if (p := path_problem(key, value))]
    return found or program_problems(exp)
