"""The element model: headings, paragraphs, tables, figures, preformatted text, sections.

Each renders to HTML and to Markdown, escaped on the way out."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bracket.article.text import esc, md_esc


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2

    def html(self) -> str:
        return f"<h{self.level}>{esc(self.text)}</h{self.level}>"

    def markdown(self) -> str:
        return f"{'#' * self.level} {md_esc(self.text)}"


@dataclass(frozen=True)
class Para:
    text: str
    kind: str = ""  # "lead" (the headline), "note" (smaller), "warn"

    def html(self) -> str:
        cls = f' class="{self.kind}"' if self.kind else ""
        return f"<p{cls}>{esc(self.text)}</p>"

    def markdown(self) -> str:
        body = md_esc(self.text)
        if self.kind == "lead":
            return f"**{body}**"
        if self.kind == "warn":
            return f"> \u26a0\ufe0f {body}"
        return body


@dataclass(frozen=True)
class Bullets:
    items: tuple

    def html(self) -> str:
        return "<ul>" + "".join(f"<li>{esc(i)}</li>" for i in self.items) + "</ul>"

    def markdown(self) -> str:
        return "\n".join(f"- {md_esc(i)}" for i in self.items)


@dataclass(frozen=True, eq=False)
class Table:
    """A table; columns whose name starts with "_" carry numbers for the prose and are not shown."""

    frame: pd.DataFrame
    caption: str = ""
    csv: str | None = None  # file name under tables/, written by `Section.save`

    def __post_init__(self):
        object.__setattr__(self, "frame", self.frame[[c for c in self.frame.columns if not str(c).startswith("_")]])

    def html(self) -> str:
        cap = f'<p class="caption">{esc(self.caption)}</p>' if self.caption else ""
        body = self.frame.to_html(index=False, escape=True, border=0, na_rep="", classes="data")
        return f'<div class="table">{cap}{body}</div>'

    def markdown(self) -> str:
        cols = [md_esc(c) for c in self.frame.columns]
        lines = ["| " + " | ".join(cols) + " |", "|" + "|".join(" --- " for _ in cols) + "|"]
        for row in self.frame.itertuples(index=False):
            lines.append("| " + " | ".join(md_esc("" if _blank(v) else v) for v in row) + " |")
        cap = f"*{md_esc(self.caption)}*\n\n" if self.caption else ""
        return cap + "\n".join(lines)


def _blank(v) -> bool:
    try:
        return v is None or bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class Figure:
    path: str  # relative to the article (figures/NAME.png)
    alt: str
    caption: str = ""

    def html(self) -> str:
        cap = f"<figcaption>{esc(self.caption)}</figcaption>" if self.caption else ""
        return f'<figure><img src="{esc(self.path)}" alt="{esc(self.alt)}">{cap}</figure>'

    def markdown(self) -> str:
        cap = f"\n\n*{md_esc(self.caption)}*" if self.caption else ""
        return f"![{md_esc(self.alt)}]({self.path}){cap}"


@dataclass(frozen=True)
class Pre:
    text: str

    def html(self) -> str:
        return f"<pre>{esc(self.text)}</pre>"

    def markdown(self) -> str:
        # A fence longer than any run of backticks inside, so the text cannot close it.
        longest = max((len(m) for m in re.findall(r"`+", self.text)), default=0)
        fence = "`" * max(3, longest + 1)
        return f"{fence}text\n{self.text}\n{fence}"


@dataclass
class Section:
    """What one notebook cell displays: both text/html and text/markdown, from the same elements."""

    items: list = field(default_factory=list)

    def add(self, *items) -> "Section":
        self.items.extend(i for i in items if i is not None)
        return self

    def _repr_html_(self) -> str:
        return "\n".join(i.html() for i in self.items)

    def _repr_markdown_(self) -> str:
        return "\n\n".join(i.markdown() for i in self.items)

    def __repr__(self) -> str:
        heads = [i.text for i in self.items if isinstance(i, Heading)]
        return f"<Section {heads[0] if heads else ''}>"

    def save_tables(self, out_dir: Path) -> list[Path]:
        """Write each table that names a CSV to out_dir/tables/; return the paths."""
        paths = []
        for item in self.items:
            if isinstance(item, Table) and item.csv:
                p = Path(out_dir) / "tables" / item.csv
                p.parent.mkdir(parents=True, exist_ok=True)
                item.frame.to_csv(p, index=False)
                paths.append(p)
        return paths
