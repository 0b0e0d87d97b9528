"""No module of bracket.article replaces a name the package exports when it is imported: a submodule named as an
exported function takes its place on the package (article/load.py once did that to `article.load`, the function
that reads an experiment's files, and every later call in the process failed)."""

from __future__ import annotations

import importlib
from pathlib import Path

import bracket.article as article

PACKAGE = Path(article.__file__).parent


def test_importing_every_module_leaves_the_packages_names_as_they_were():
    before = {name: value for name, value in vars(article).items() if not name.startswith("_")}
    for p in sorted(PACKAGE.glob("*.py")):
        if p.stem != "__init__":
            importlib.import_module(f"bracket.article.{p.stem}")
    changed = sorted(n for n, v in before.items() if getattr(article, n) is not v)
    assert changed == [], f"importing an article module replaced {changed} on the package; rename the module"
    assert callable(article.load) and not isinstance(article.load, type(article))
