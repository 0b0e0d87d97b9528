"""notebooks/design.py opens as a notebook in JupyterLab with the settings the project ships.

JupyterLab (4.x) opens a .py file with its default viewer, the text editor, unless a setting names
another; jupytext 1.19 registers the "Jupytext Notebook" viewer but sets no default. The project ships
notebooks/lab-settings/overrides.json, which the README's command hands to JupyterLab
(`jupyter lab --LabApp.app_settings_dir=notebooks/lab-settings`). Checked here with JupyterLab's own
readers: the settings server's override loader, the installed jupytext extension's viewer name, and
jupytext's contents manager (enabled as a server extension) reading design.py as a notebook. Not checked:
a click in a live JupyterLab in a browser.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

SETTINGS = ROOT / "notebooks" / "lab-settings"
VIEWER = "Jupytext Notebook"


def test_the_shipped_settings_make_jupytext_the_default_viewer_for_python_files():
    from jupyterlab_server.settings_utils import _get_overrides

    overrides, error = _get_overrides(str(SETTINGS))
    assert error == ""
    assert overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]["python"] == VIEWER


def test_the_viewer_named_is_the_one_the_installed_jupytext_extension_registers():
    ext = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "jupyterlab-jupytext" / "static"
    if not ext.is_dir():
        pytest.skip(f"jupytext's JupyterLab extension is not installed in {sys.prefix}")
    assert any(VIEWER in p.read_text(errors="replace") for p in ext.glob("*.js"))


@pytest.mark.integration  # starts `jupyter server extension list`
def test_the_readme_command_hands_the_settings_to_jupyterlab():
    readme = (ROOT / "README.md").read_text()
    assert "jupyter lab --LabApp.app_settings_dir=notebooks/lab-settings notebooks/design.py" in readme
    out = subprocess.run(
        [sys.executable, "-m", "jupyter", "server", "extension", "list"], capture_output=True, text=True, timeout=120
    )
    listing = out.stdout + out.stderr
    assert "jupytext" in listing and "enabled" in listing, listing[-2000:]


def test_jupytexts_contents_manager_reads_design_py_as_a_notebook():
    from jupytext import TextFileContentsManager

    cm = TextFileContentsManager(root_dir=str(ROOT / "notebooks"))
    model = cm.get("design.py")
    assert model["type"] == "notebook"
    cells = model["content"]["cells"]
    assert any("parameters" in c.get("metadata", {}).get("tags", []) for c in cells)
    header = "".join(c["source"] for c in cells[:2])
    assert ".venv/bin/" not in header and "papermill notebooks/design.ipynb" in header
    json.dumps(model["content"])  # a notebook JupyterLab can serialize
