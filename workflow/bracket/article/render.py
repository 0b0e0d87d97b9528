"""Render the article: papermill executes the notebook, nbconvert writes HTML and Markdown without code.

Re-rendering reads only files (raw records and what was computed from them); it never runs a server.

The HTML page is static: nbconvert's "basic" template (cell outputs, no JavaScript) inside a
page of our own whose Content-Security-Policy forbids every script, so even a model output that
slipped past escaping could not run. Figures are PNG files under figures/, beside the page.
"""

from __future__ import annotations

import html
import logging
import re
from pathlib import Path

import nbformat
import papermill
from nbconvert import HTMLExporter, MarkdownExporter
from nbconvert.preprocessors import TagRemovePreprocessor

# No script may run, whatever the page contains; images only from the article's own folder.
CSP = (
    "default-src 'none'; img-src 'self' file: data:; style-src 'unsafe-inline'; "
    "script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'"
)

STYLE = """
body { font: 16px/1.55 Georgia, "Times New Roman", serif; color: #1b1b1b; max-width: 60rem;
       margin: 2.5rem auto; padding: 0 1.2rem; }
h1 { font-size: 1.9rem; line-height: 1.25; margin-bottom: .4rem; }
h2 { font-size: 1.35rem; margin-top: 2.6rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
h3 { font-size: 1.1rem; margin-top: 1.6rem; }
p.lead { font-size: 1.2rem; font-style: italic; color: #333; }
p.note { font-size: .92rem; color: #444; }
p.warn { background: #fff6e0; border-left: 4px solid #e0a400; padding: .5rem .8rem; }
p.caption, figcaption { font-size: .88rem; color: #555; font-style: italic; }
/* Tables: cells and headers wrap between words (never inside one), so most tables fit the text column; one
   still wider (the raw values) scrolls inside its own box, no taller than the window, so its horizontal
   scrollbar is always on screen and its header row stays in view. */
div.table { overflow: auto; max-height: 85vh; margin: .8rem 0 1.2rem; }
table.data { border-collapse: collapse; font: 13px/1.35 "DejaVu Sans Mono", Menlo, monospace; }
table.data th, table.data td { padding: .2rem .45rem; border-bottom: 1px solid #e4e4e4; text-align: left;
       vertical-align: top; max-width: 24rem; overflow-wrap: break-word; word-break: normal; hyphens: none; }
table.data th { border-bottom: 2px solid #bbb; position: sticky; top: 0; background: #fff; }
p.caption { position: sticky; left: 0; }
pre { background: #f6f6f6; padding: .7rem; overflow-x: auto; font-size: 12.5px; white-space: pre-wrap;
      word-break: break-all; }
figure { margin: 1.2rem 0; }
figure img { max-width: 100%; height: auto; }
ul li { margin: .25rem 0; }
"""


def esc(value) -> str:
    """Escape anything that may have come from a server before it reaches HTML or Markdown."""
    return html.escape("" if value is None else str(value), quote=True)


def _strip(nb):
    """Drop cells tagged remove_cell, and stderr (library warnings go to the log, not the article)."""
    nb, _ = TagRemovePreprocessor(remove_cell_tags={"remove_cell"}, enabled=True).preprocess(nb, {})
    for cell in nb.cells:
        kept = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                logging.getLogger(__name__).warning("notebook stderr: %s", out.get("text", "").strip())
            else:
                kept.append(out)
        if "outputs" in cell:
            cell["outputs"] = kept
    return nb


def _title(nb) -> str:
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            m = re.search(r"<h1>(.*?)</h1>", out.get("data", {}).get("text/html", ""), re.S)
            if m:
                return m.group(1)  # already escaped by the article
    return "bracket article"


def page(body: str, title: str) -> str:
    """A complete static HTML page around `body` (already-escaped HTML)."""
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="bracket">\n<title>{title}</title>\n'
        f"<style>{STYLE}</style>\n</head>\n<body>\n<article>\n{body}\n</article>\n</body>\n</html>\n"
    )


def export_html(nb) -> str:
    exporter = HTMLExporter(
        template_name="basic", exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True
    )
    body, _ = exporter.from_notebook_node(nb)
    # The basic template wraps outputs in Jupyter's divs; they carry no script. Anything that
    # does is removed (the CSP would block it anyway).
    body = re.sub(r"<script\b.*?</script>", "", body, flags=re.S | re.I)
    return page(body, _title(nb))


def export_markdown(nb) -> str:
    exporter = MarkdownExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    # Prefer the article's own Markdown over its HTML, so the .md reads as Markdown.
    exporter.config.NbConvertBase.display_data_priority = ["text/markdown", "image/png", "text/plain"]
    exporter = MarkdownExporter(
        config=exporter.config, exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True
    )
    body, _ = exporter.from_notebook_node(nb)
    return re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"


def render(
    notebook: str | Path,
    out_dir: str | Path,
    parameters: dict,
    log_path: str | Path | None = None,
    kernel_name: str = "python3",
) -> dict[str, Path]:
    """Execute `notebook` with `parameters` into out_dir/article.ipynb, then export article.html and article.md."""
    out_dir = Path(out_dir)
    (out_dir / "figures").mkdir(parents=True, exist_ok=True)
    (out_dir / "tables").mkdir(parents=True, exist_ok=True)
    if log_path:
        logging.basicConfig(filename=str(log_path), level=logging.INFO, force=True)
    executed = out_dir / "article.ipynb"
    papermill.execute_notebook(
        str(notebook),
        str(executed),
        parameters=parameters,
        kernel_name=kernel_name,
        cwd=str(out_dir),
        progress_bar=False,
        log_output=bool(log_path),
    )
    nb = _strip(nbformat.read(executed, as_version=4))
    html_path, md_path = out_dir / "article.html", out_dir / "article.md"
    html_path.write_text(export_html(nb), encoding="utf-8")
    md_path.write_text(export_markdown(nb), encoding="utf-8")
    return {"ipynb": executed, "html": html_path, "md": md_path}
