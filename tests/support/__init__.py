"""What the tests share, imported as `from tests.support import ...` (pyproject's [tool.pytest.ini_options]
pythonpath puts the checkout's root and workflow/ on the path, so no test touches sys.path):

- paths: ROOT, WORKFLOW, and python_env(), the environment a child Python needs to import bracket and tests.support
  from this checkout;
- net: free_port(), listener(port);
- workflow: repo_copy() (the workflow alone in a folder) and snakemake(), the one Snakemake runner;
- processes: wait_for(), alive(), group_members(), engine_processes(), kill_group(), as_from_a_terminal();
- servers: RawServer, a server on a thread of the test's own process that answers with raw bytes;
- faultkit: the block-level fault tests' pieces (an experiment aimed at tests/data/faults/fake_engine.py, a block
  run, its records).
"""

from tests.support.net import free_port, listener
from tests.support.paths import ROOT, WORKFLOW, python_env
from tests.support.workflow import EMBEDDED_ENGINE, EMBEDDED_MODEL, repo_copy, snakemake, snakemake_argv, snakemake_env

__all__ = [
    "EMBEDDED_ENGINE",
    "EMBEDDED_MODEL",
    "ROOT",
    "WORKFLOW",
    "free_port",
    "listener",
    "python_env",
    "repo_copy",
    "snakemake",
    "snakemake_argv",
    "snakemake_env",
]
