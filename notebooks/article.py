# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] tags=["remove_cell"]
# # The article
#
# Rendered by `snakemake report/NAME/article.html` (rule `report`, via `bracket.article.render.render`):
# papermill runs this notebook on one experiment's files, then nbconvert writes HTML and Markdown
# without code. Every section is built by `bracket.article`; this notebook only loads and displays. Every number
# and judgement comes from stats.json, which also states the experiment, the byte account and the ceiling; runs.csv
# gives the raw tables and figures, raw/ the models' outputs (stats.json states the blocks' provenance too).
# The defaults below point at the committed fixture, so the notebook also runs on its own.

# %% tags=["parameters"]
runs_csv = "../tests/data/report/probe/runs.csv"
stats_json = "../tests/data/report/probe/stats.json"
meta_dir = "../tests/data/report/probe/raw"
corrections_path = "../tests/data/report/probe/probe.corrections.yaml"
agreement_json = "../tests/data/report/probe/agreement.json"
arena_json = "../tests/data/report/probe/arena.json"
determinism_json = "../tests/data/report/probe/determinism.json"
verdict_paths = "[]"
block_files = ""
out_dir = "../report/fixture"

# %% tags=["remove_cell"]
# verdict_paths: a JSON list of reproductions' verdict.json files; block_files: a JSON list of the raw
# files the report rule names (empty: the notebook on its own reads meta_dir).
import json

from bracket import article
from IPython.display import display

d = article.load(
    runs_csv,
    stats_json,
    meta_dir,
    corrections_path,
    out_dir,
    block_files=json.loads(block_files) if block_files else None,
)
controls = article.load_controls(agreement_json, arena_json, determinism_json, json.loads(verdict_paths))
sections = []


def show(section):
    """Display a section and keep it, so its tables are written to out_dir/tables/ at the end."""
    if section is not None:
        sections.append(section)
        display(section)


# %%
show(article.section_headline(d))

# %%
show(article.section_ceiling(d))

# %%
show(article.section_results(d, article.figure_distributions(d)))

# %%
show(article.section_phases(d))

# %%
from bracket.article.many_users import section_load

show(section_load(d))

# %%
show(article.section_looks(d))

# %%
show(article.section_arena(d, controls))

# %%
show(article.section_speculative(d, article.figure_acceptance(d)))

# %%
show(article.section_agreement(d, controls))

# %%
show(article.section_determinism(d, controls))

# %%
show(article.section_drift(d, article.figure_run_sequence(d)))

# %%
show(article.section_hypotheses(d))

# %%
show(article.section_recommendations(d))

# %%
show(article.section_warnings(d))

# %%
show(article.section_method(d))

# %%
show(article.section_outputs(d))

# %%
show(article.section_reproductions(d, controls))

# %%
show(article.section_corrections(d))

# %%
show(article.section_raw(d))

# %% tags=["remove_cell"]
written = [p for s in sections for p in s.save_tables(d.out_dir)]
