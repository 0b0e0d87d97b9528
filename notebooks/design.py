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

# %% [markdown]
# # Design an experiment before you measure
#
# The loop: a **pilot** (a small experiment, e.g. `rounds: 2`), then this notebook (**design**),
# then the experiment it writes (**run**: `snakemake --cores 1 NAME`), then the **article**.
#
# From a pilot's `results/NAME/runs.csv` (or from noise you state when there is none) it shows
# how the noise splits between fresh servers and requests, the false-positive rate and the power
# of each choice of rounds and runs per block, simulated with the analysis the workflow itself
# runs (`bracket.stats.planning`), the schedule each design draws, and the wall time it will
# cost at the pilot's timings. The last cell writes the chosen design into an experiment file.
#
# Open it in JupyterLab (`jupytext` pairs it with `design.ipynb`), or run it with papermill:
#
#     papermill notebooks/design.ipynb /tmp/design.ipynb \
#         -p runs_csv results/draft_sweep/runs.csv -p experiment_path experiments/draft_sweep.yaml \
#         -p out_path experiments/draft_sweep_adaptive.yaml -p effect 1.05

# %% tags=["parameters"]
runs_csv = ""  # a pilot's runs.csv; "" to design from the stated noise below
meta_dir = ""  # the pilot's results/NAME/raw (server start times); "" for start_s
experiment_path = "../experiments/smoke.yaml"  # the experiment the design is for
out_path = ""  # where to write it with the chosen design; "" writes nothing
block_sd = 0.01  # stated noise, used where the pilot cannot measure it
run_sd = 0.01
drift = 0.01  # log change per block
start_s = 20.0  # seconds to start a server, when the pilot's metadata do not say
effect = 1.05  # the smallest ratio worth detecting (1.05: 5 % faster)
alpha = 0.05
rounds_options = [2, 3, 4, 6, 8]
runs_options = [3, 5, 10]
reps = 0  # simulated experiments per rate; 0: as many as put every power within +/- mc_half_width
mc_half_width = 0.03  # with reps 0: each simulated power runs until its 95 % Monte Carlo interval is this narrow
adaptive = True  # also simulate an adaptive design
min_rounds = 2
max_rounds = 8
margin = 0.0  # adaptive equivalence margin; 0: twice the noise band
choose = "adaptive"  # adaptive; fixed R N (R rounds of N runs); cheapest (fewest blocks at min_power or more)
seed = 1
pessimistic = True  # design for the upper end of the pilot's block-noise interval (else its point estimate)
min_power = 0.8  # below it, the design is written only with a warning in the file and here
table_csv = ""  # also write the designs' table (rates, rounds, wall time) here; "" writes nothing

# %%
from pathlib import Path

import pandas as pd
from bracket.experiment import config
from bracket.stats import planning
from IPython.display import Markdown, display

experiment = config.load(experiment_path)  # validated, as the workflow reads it
arms, workloads = list(experiment.arms), list(experiment.workloads)
d0 = experiment.design

# %% [markdown]
# ## 1. The noise: between fresh servers, within a server, and drift

# %%
runs = pd.read_csv(runs_csv) if runs_csv else None
stated = {"block_sd": block_sd, "run_sd": run_sd, "drift": drift}
components, noise = planning.design_noise(runs, experiment.reference, stated, pessimistic)
source_words = {
    "stated": "stated",
    "pilot": "pilot",
    "pilot_without_block_noise": "pilot (one block per arm: between-block noise stated, not measured)",
}
if components is not None:
    display(components.style.format({"between-block sd": "{:.2%}", "within-block sd": "{:.2%}"}, na_rep="n/a"))
timings = {"request_s": {w: 1.0 for w in workloads}, "start_s": start_s}
if runs is not None:
    timings = planning.pilot_timings(runs, meta_dir or None)
    timings["start_s"] = start_s if timings["start_s"] is None else timings["start_s"]
if noise.get("block_sd_high") is not None:
    display(
        Markdown(
            f"Between-block sd from the pilot: **{noise['block_sd_point']:.2%}** (pooled variances), "
            f"{planning.NOISE_LEVEL:.0%} interval **{noise['block_sd_low']:.2%} to {noise['block_sd_high']:.2%}** "
            f"on {noise['block_df']:g} degrees of freedom: a pilot of few blocks knows it only roughly. The "
            f"design uses the {'upper end' if pessimistic else 'point estimate'}; power is shown at both."
        )
    )
display(
    Markdown(
        f"Designing with a between-block sd of **{noise['block_sd']:.2%}**, a within-block sd of "
        f"**{noise['run_sd']:.2%}** and drift of **{noise['drift']:.2%} per block** ({source_words[noise['source']]}). "
        "Between-block noise is what rounds beat; within-block noise is what runs per block beat."
    )
)

# %% [markdown]
# ## 2. False positives and power for each design
#
# Each rate comes from simulated A/B experiments with this noise (`reps` of them; by default as many
# as put every power and false rate within +/- `mc_half_width`, its 95 % Monte Carlo interval shown
# beside it), analysed by the workflow's own analysis (block-level OLS with a drift term; the
# fixed-design verdict at 95 %). *false faster/slower*: with no true effect. *power*: the right direction with the true ratio `effect`.
# The adaptive design looks after every round from its first look on (repeated CIs,
# `bracket.stats.sequential`): the later of `min_rounds` and the first round whose block-level fit
# has two degrees of freedom (round 3 of A/B/A/B), and stops when the comparison settles; its mean
# rounds are what it spends.

# %%
kind = d0.kind if d0.kind != "sequential" else "abab"
table = planning.design_table(
    noise,
    effect=effect,
    rounds_options=rounds_options,
    runs_options=runs_options,
    adaptive=adaptive,
    min_rounds=min_rounds,
    max_rounds=max_rounds,
    margin=margin or None,
    alpha=alpha,
    reps=reps or None,
    half_width=mc_half_width,
    seed=seed,
    kind=kind,
)
point = noise.get("block_sd_point")

# %% [markdown]
# ## 3. What each design costs: blocks, schedule, wall time

# %%
n_cmp = (len(arms) - 1) * len(workloads)
table = planning.with_costs(table, timings, experiment)


def with_interval(p, lo, hi):
    return "n/a" if p is None or p != p else f"{p:.0%} ({lo:.0%}-{hi:.0%})"


shown = table.copy()
for col, low, high in (
    ("false faster/slower", "false low", "false high"),
    ("power", "power low", "power high"),
    ("power at the point estimate", "power at the point estimate low", "power at the point estimate high"),
):
    if col in shown:
        shown[col] = [with_interval(p, lo, hi) for p, lo, hi in zip(table[col], table[low], table[high])]
        shown = shown.drop(columns=[low, high])
if "power at the point estimate" in shown:
    cols = [c for c in shown.columns if c != "power at the point estimate"]
    cols.insert(cols.index("power") + 1, "power at the point estimate")
    shown = shown[cols]
display(
    Markdown(
        "Each rate is the share of the simulated experiments in `reps` ("
        + (
            f"{shown['reps'].min()}"
            if shown["reps"].min() == shown["reps"].max()
            else f"{shown['reps'].min()} to {shown['reps'].max()}"
        )
        + f" per design), with its {planning.MC_LEVEL:.0%} Monte Carlo interval in brackets "
        f"(Wilson). *power* is at a between-block sd of {noise['block_sd']:.2%}"
        + (
            f"; *power at the point estimate* at {point:.2%}, the pilot's point estimate: the power a design has "
            f"lies between the two as far as the pilot can tell"
            if "power at the point estimate" in shown
            else ""
        )
        + "."
    )
)
display(
    shown.style.format(
        {c: "{:.0%}" for c in ("no effect settled", "undetermined (effect)")}
        | {
            "mean rounds (effect)": "{:.1f}",
            "mean rounds (no effect)": "{:.1f}",
            "wall time (h)": "{:.2f}",
            "wall time at the budget (h)": "{:.2f}",
        }
    )
)
pilot_runs, pilot_warmups = planning.pilot_per_block(runs) if runs is not None else (0, 0)
pilot_estimate = (
    planning.wall_time(
        timings,
        arms=len(arms),
        blocks=timings["blocks"],
        runs_per_block=int(pilot_runs),
        warmup_runs=int(pilot_warmups),
        cooldown_s=d0.cooldown_s,
    )
    if timings.get("wall_s") and pilot_runs
    else None
)
display(
    Markdown(
        f"This experiment has {len(arms)} arms and {len(workloads)} workloads: {n_cmp} comparisons share alpha "
        f"(Holm for a fixed design, Holm-type recycling across the looks for an adaptive one), so each is tested a "
        f"little more strictly than the single comparison simulated here. Per request (mean): "
        + ", ".join(f"{w} {s:.2f} s" for w, s in timings["request_s"].items())
        + f"; per block a server start of {timings['start_s']:.0f} s and a teardown of "
        + (f"{timings['teardown_s']:.0f} s" if timings.get("teardown_s") is not None else "0 s (not recorded)")
        + (
            f"; between blocks {timings['gap_s']:.0f} s from one block's end to the next launch (cooldown and "
            f"orchestration)"
            if timings.get("gap_s") is not None
            else f"; between blocks the cooldown of {d0.cooldown_s} s"
        )
        + (
            f". The pilot itself, {timings['blocks']} blocks, took {timings['wall_s']:.0f} s; this estimate says "
            f"{pilot_estimate:.0f} s for it."
            if pilot_estimate
            else "."
        )
    )
)
if table_csv:
    table.to_csv(table_csv, index=False)
for r in rounds_options[:3]:
    display(Markdown(f"`{d0.kind}`, {r} rounds: " + planning.schedule(arms, kind, r, d0.seed)))

# %% [markdown]
# ## 4. The chosen design, written into an experiment file

# %%
choice = planning.choose_design(
    table,
    choose,
    block_sd=noise["block_sd"],
    kind=kind,
    min_rounds=min_rounds,
    max_rounds=max_rounds,
    margin=margin or None,
    min_power=min_power,
)
design, warning, c0 = choice.design, choice.warning, choice.row
said = ""
if c0 is not None:
    said = (
        f", power {with_interval(c0['power'], c0['power low'], c0['power high'])} at a between-block sd of "
        f"{noise['block_sd']:.2%} ({c0['reps']} simulated experiments, {planning.MC_LEVEL:.0%} Monte Carlo interval)"
    )
    if "power at the point estimate" in c0:
        at_pt = with_interval(
            c0["power at the point estimate"],
            c0["power at the point estimate low"],
            c0["power at the point estimate high"],
        )
        said += f" and {at_pt} at the point estimate, {point:.2%}"
display(Markdown(f"Chosen: `design: {design}`" + said + (f"\n\n**Warning: {warning}.**" if warning else "")))
if out_path:
    planning.write_design(experiment, out_path, design, warning=warning, source=Path(experiment_path).name)
    display(Markdown(f"Written to `{out_path}`; run it with `snakemake --cores 1 {Path(out_path).stem}`."))
