"""The article: an experiment's files turned into sections of prose, tables and figures.

The notebook (notebooks/article.py) only calls these functions and displays what they return.
Each section is a list of elements (heading, paragraph, table, figure, preformatted text) that
renders both to HTML and to Markdown, so the two outputs say the same thing.

Every string is escaped on the way out, in both outputs: model output, error text, version
strings and log tails come from a server and are untrusted (a model can emit ``<script>``).

Numbers follow seed 000: decode rates with two decimals, ranges with one, ratios as "5.28x",
spreads as percentages; every number in the headline is a median, count or extreme of the raw
table printed at the end, so a reader can check it.

The package, by theme (each module one idea; this file only gathers their names):

- text: escaping and number formats; elements: the element model; inputs: `Data`, read once.
- headline, results, looks (an adaptive design's stopping rule and looks), speculative, drift,
  hypotheses, ceiling, advice, caveats, method, raw, controls, phases (TTFT apart from decode, server
  state): one module per group of sections,
  each `section_*` returning a `Section`; served: the method section's sentences on what served the
  experiment, on what machine and launched how.
- figures: the figures the sections embed.

A new section goes in the module of its theme (or a new one), and into notebooks/article.py.
"""

from bracket.article.advice import *  # noqa: F401,F403
from bracket.article.caveats import *  # noqa: F401,F403
from bracket.article.ceiling import *  # noqa: F401,F403
from bracket.article.controls import *  # noqa: F401,F403
from bracket.article.drift import *  # noqa: F401,F403
from bracket.article.elements import *  # noqa: F401,F403
from bracket.article.figures import *  # noqa: F401,F403
from bracket.article.headline import *  # noqa: F401,F403
from bracket.article.hypotheses import *  # noqa: F401,F403
from bracket.article.inputs import *  # noqa: F401,F403
from bracket.article.looks import *  # noqa: F401,F403
from bracket.article.method import *  # noqa: F401,F403
from bracket.article.phases import *  # noqa: F401,F403
from bracket.article.raw import *  # noqa: F401,F403
from bracket.article.results import *  # noqa: F401,F403
from bracket.article.speculative import *  # noqa: F401,F403
from bracket.article.text import *  # noqa: F401,F403
from bracket.controls.corrections import CORRECTION_KEYS, CorrectionsError, load_corrections  # noqa: F401
