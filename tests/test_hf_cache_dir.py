"""physics.modelsource.cache_dir equals huggingface_hub's own cache folder for every way the environment names it.

modelsource finds a model's snapshot with huggingface_hub (snapshot_download, local_files_only) and keeps one
helper of its own, cache_dir: huggingface_hub reads HF_HUB_CACHE, HF_HOME and XDG_CACHE_HOME once, when it is
imported (huggingface_hub.constants), so a process (or a test) that sets them later would get the folder of
before. Here each environment is given to a fresh interpreter before huggingface_hub is imported, and its
constants.HF_HUB_CACHE must equal cache_dir() in the same process.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.support import python_env

CASES = [
    {},
    {"HF_HOME": "/data/hf"},
    {"HF_HOME": "~/hf-home"},
    {"XDG_CACHE_HOME": "/var/cache/x"},
    {"XDG_CACHE_HOME": "/var/cache/x", "HF_HOME": "/data/hf"},
    {"HF_HUB_CACHE": "/models/hub"},
    {"HF_HUB_CACHE": "~/hub", "HF_HOME": "/data/hf"},
    {"HUGGINGFACE_HUB_CACHE": "/old/name/hub"},
    {"HUGGINGFACE_HUB_CACHE": "/old/name/hub", "HF_HOME": "/data/hf", "XDG_CACHE_HOME": "/x"},
]
NAMES = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME")
PROBE = (
    "import json\n"
    "from bracket.physics.modelsource import cache_dir\n"
    "from huggingface_hub import constants\n"
    "print(json.dumps([cache_dir(), constants.HF_HUB_CACHE]))\n"
)


@pytest.mark.integration  # a fresh interpreter per environment
def test_cache_dir_equals_huggingface_hubs_for_every_environment(tmp_path):
    for case in CASES:
        env = {k: v for k, v in python_env().items() if k not in NAMES}
        env.update(case, HOME=str(tmp_path / "home"))
        out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        ours, theirs = json.loads(out.stdout)
        assert os.path.normpath(ours) == os.path.normpath(os.path.expanduser(theirs)), (case, ours, theirs)
