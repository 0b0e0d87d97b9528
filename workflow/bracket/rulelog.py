"""Logs of the workflow's scripts: everything a rule's script says, and its error, lands in the log
file Snakemake names for the rule (the one it points at when the job fails), and still reaches the
terminal.

    with rule_log(snakemake.log[0]) as log:
        log.info("...")
        ...   # an exception here is written to the log with its traceback, then re-raised

Inside the block, sys.stdout and sys.stderr are copied to the log as well (library warnings,
progress printed by the package), and a ``logging`` handler writes records of every logger.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from pathlib import Path

# Libraries whose INFO lines are one per HTTP request: held at WARNING inside a rule's log.
QUIET_LOGGERS = ("httpx", "httpcore")


class _Tee:
    """A text stream that writes to the original stream and the log file."""

    def __init__(self, stream, log):
        self._stream, self._log = stream, log

    def write(self, text):
        self._log.write(text)
        self._log.flush()
        return self._stream.write(text)

    def flush(self):
        self._log.flush()
        self._stream.flush()

    def isatty(self):
        return False

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def rule_log(path, *, mode: str = "w", name: str = "bracket.rule"):
    """Copy the script's output to ``path``; write an uncaught exception there, then re-raise it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    log_file = open(path, mode, encoding="utf-8")
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Tee(out, log_file), _Tee(err, log_file)
    handler = logging.StreamHandler(sys.stderr)  # through the tee: terminal and file
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # httpx and httpcore log every request at INFO ("HTTP Request: POST ... 200 OK"): a third of an attach
    # run's console. Each request is a record in raw/; the console and the log say bracket's progress.
    quiet = {name: logging.getLogger(name) for name in QUIET_LOGGERS}
    quiet_levels = {name: lg.level for name, lg in quiet.items()}
    for lg in quiet.values():
        lg.setLevel(logging.WARNING)
    logger = logging.getLogger(name)
    try:
        yield logger
    except SystemExit as exc:
        if exc.code not in (None, 0):
            log_file.write(f"exited with status {exc.code}\n")
        raise
    except BaseException:
        log_file.write("".join(traceback.format_exc()))
        raise
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        for name, lg in quiet.items():
            lg.setLevel(quiet_levels[name])
        sys.stdout, sys.stderr = out, err
        log_file.close()
