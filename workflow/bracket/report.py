"""Render the article: papermill executes the notebook, nbconvert writes HTML and Markdown without code.

Re-rendering reads only files (raw records and what was computed from them); it never runs a server.
"""

from __future__ import annotations

import html
import logging
from pathlib import Path

import nbformat
import papermill
from nbconvert import HTMLExporter, MarkdownExporter
from nbconvert.writers import FilesWriter


def esc(value) -> str:
    """Escape anything that may have come from a server before it reaches HTML or Markdown."""
    return html.escape("" if value is None else str(value), quote=True)


def _export(nb, exporter, out_dir: Path, stem: str) -> Path:
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    body, resources = exporter.from_notebook_node(nb, resources={"output_files_dir": f"{stem}_files"})
    FilesWriter(build_directory=str(out_dir)).write(body, resources, notebook_name=stem)
    return out_dir / f"{stem}{resources.get('output_extension', '')}"


def render(notebook: str | Path, out_dir: str | Path, parameters: dict, log_path: str | Path | None = None,
           kernel_name: str = "python3") -> dict[str, Path]:
    """Execute `notebook` with `parameters` into out_dir/article.ipynb, then export article.html and article.md."""
    out_dir = Path(out_dir)
    (out_dir / "figures").mkdir(parents=True, exist_ok=True)
    (out_dir / "tables").mkdir(parents=True, exist_ok=True)
    if log_path:
        logging.basicConfig(filename=str(log_path), level=logging.INFO, force=True)
    executed = out_dir / "article.ipynb"
    papermill.execute_notebook(str(notebook), str(executed), parameters=parameters, kernel_name=kernel_name,
                               cwd=str(out_dir), progress_bar=False, log_output=bool(log_path))
    nb = nbformat.read(executed, as_version=4)
    html_exporter = HTMLExporter(template_name="lab")
    html_path = _export(nb, html_exporter, out_dir, "article")
    md_path = _export(nb, MarkdownExporter(), out_dir, "article")
    return {"ipynb": executed, "html": html_path, "md": md_path}
