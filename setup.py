"""The build step that records which bracket a `pip install .` installs (bracket.version).

Everything else about the package is declared in pyproject.toml. build_py writes bracket/_build.json into the
built package: the commit of the tree it was built from and whether the instrument's files differed from it,
asked of git exactly as bracket.version asks a clone; a tree without git (an sdist, a copy of the files)
records the commit as unknown, and why.
"""

import json
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithRecord(build_py):
    def run(self):
        super().run()
        sys.path.insert(0, str(HERE / "workflow"))
        try:
            from bracket import version
        finally:
            sys.path.pop(0)
        rec = (
            version.from_git(HERE)
            if (HERE / ".git").exists()
            else version.unknown(f"built from {HERE}, a tree without git (an sdist or a copy of the files)")
        )
        target = Path(self.build_lib) / "bracket" / version.BUILD_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(rec, indent=1) + "\n")


setup(cmdclass={"build_py": BuildPyWithRecord})
