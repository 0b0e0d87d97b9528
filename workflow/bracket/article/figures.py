"""Figures: run sequence, distributions, acceptance."""

from __future__ import annotations

import os
from pathlib import Path

from bracket.article.elements import Figure
from bracket.article.inputs import Data


def _figure_setup():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.9)
    return plt, sns


def _palette(d: Data):
    _, sns = _figure_setup()
    return dict(zip(d.arms, sns.color_palette("colorblind", len(d.arms))))


def _save(fig, d: Data, name: str) -> str:
    """Write the figure under out_dir/figures/ and return its path as the page sees it: relative to
    where the notebook runs (papermill runs it in out_dir, so figures/NAME.png in the article; opened
    in JupyterLab from notebooks/, ../report/NAME/figures/NAME.png)."""
    path = d.out_dir / "figures" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return Path(os.path.relpath(path.resolve(), Path.cwd().resolve())).as_posix()


def figure_run_sequence(d: Data) -> Figure | None:
    """Every run in schedule order: blocks shaded, arms coloured, warmups and invalid runs hollow."""
    runs = d.runs.sort_values([c for c in ("position", "started_at") if c in d.runs], kind="stable").reset_index(
        drop=True
    )
    if runs.empty:
        return None
    plt, sns = _figure_setup()
    runs = runs.assign(order=range(len(runs)), kind=["valid" if v else "warmup / invalid" for v in runs["valid"]])
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for i, (pos, blk) in enumerate(runs.groupby("position", sort=True)):
        lo, hi = blk["order"].min() - 0.5, blk["order"].max() + 0.5
        if i % 2 == 0:
            ax.axvspan(lo, hi, color="0.92", zorder=0)
        ax.text(
            (lo + hi) / 2,
            1.0,
            f"block {int(pos)}",
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="bottom",
            fontsize=7,
            color="0.35",
        )
    pal = _palette(d)
    valid = runs[runs["valid"]]
    sns.scatterplot(
        data=valid,
        x="order",
        y="decode_tok_s",
        hue="arm",
        style="workload",
        palette=pal,
        hue_order=[a for a in d.arms if a in set(runs["arm"])],
        ax=ax,
        s=36,
        zorder=3,
    )
    other = runs[~runs["valid"]]
    if not other.empty:
        ax.scatter(
            other["order"],
            other["decode_tok_s"],
            facecolors="none",
            edgecolors=[pal.get(a, "0.5") for a in other["arm"]],
            s=36,
            zorder=2,
            label="warmup / invalid",
        )
    ax.set_xlabel("run, in the order it ran")
    ax.set_ylabel("decode tok/s")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7, frameon=False)
    return Figure(
        _save(fig, d, "run_sequence"),
        "Every run in schedule order",
        "Every request in the order it ran. Shaded bands are blocks; colour is the arm, marker the "
        "workload; hollow markers are warmups and invalid runs (not in the statistics).",
    )


def figure_distributions(d: Data) -> Figure | None:
    valid = d.runs[d.runs["valid"]]
    if valid.empty:
        return None
    plt, sns = _figure_setup()
    wls = [w for w in d.workloads if w in set(valid["workload"])]
    arms = [a for a in d.arms if a in set(valid["arm"])]
    fig, axes = plt.subplots(1, len(wls), figsize=(3.2 * len(wls) + 0.6, 3.4), squeeze=False)
    pal = _palette(d)
    for ax, wl in zip(axes[0], wls):
        sub = valid[valid["workload"] == wl]
        sns.boxplot(
            data=sub,
            x="arm",
            y="decode_tok_s",
            order=arms,
            hue="arm",
            hue_order=arms,
            palette=pal,
            ax=ax,
            showfliers=False,
            boxprops={"alpha": 0.35},
            legend=False,
            width=0.6,
        )
        sns.stripplot(
            data=sub,
            x="arm",
            y="decode_tok_s",
            order=arms,
            hue="arm",
            hue_order=arms,
            palette=pal,
            ax=ax,
            size=5,
            jitter=0.15,
            legend=False,
        )
        ax.set_title(wl)
        ax.set_xlabel("")
        ax.set_ylabel("decode tok/s" if ax is axes[0][0] else "")
        ax.tick_params(axis="x", labelrotation=30)
    fig.tight_layout()
    return Figure(
        _save(fig, d, "distributions"),
        "Decode rate per arm and workload",
        "Every valid run per arm and workload (points) over its box (quartiles).",
    )


def figure_acceptance(d: Data) -> Figure | None:
    if "draft_budget" not in d.runs or "acceptance_length" not in d.runs:
        return None
    r = d.runs[d.runs["valid"] & d.runs["draft_budget"].notna() & d.runs["acceptance_length"].notna()]
    if r.empty:
        return None
    plt, sns = _figure_setup()
    fig, ax = plt.subplots(figsize=(5.6, 3.6))
    wls = [w for w in d.workloads if w in set(r["workload"])]
    # Workloads side by side around each budget, a fixed offset apart, so no point moves to another budget.
    offset = {w: 0.2 * (i - (len(wls) - 1) / 2) for i, w in enumerate(wls)}
    r = r.assign(x=r["draft_budget"] + r["workload"].map(offset))
    # Arms that share a budget (ngram-simple and ngram-mod at 8, say) get a marker each.
    arms = [a for a in d.arms if a in set(r["arm"])]
    shared = r.groupby("draft_budget")["arm"].nunique().max() > 1
    style = {"style": "arm", "style_order": arms} if shared else {}
    sns.scatterplot(data=r, x="x", y="acceptance_length", hue="workload", hue_order=wls, ax=ax, s=30, **style)
    budgets = sorted(r["draft_budget"].unique())
    ax.set_xticks(budgets)
    ax.plot(budgets, [b + 1 for b in budgets], "--", color="0.4", lw=1, label="every draft accepted (K + 1)")
    ax.plot(budgets, budgets, ":", color="0.4", lw=1, label="saturation 100% (K)")
    ax.set_xlabel("draft budget K")
    ax.set_ylabel("acceptance length")
    # with arms as markers the legend is long: beside the axes, not over the points
    ax.legend(fontsize=7, frameon=False, **({"loc": "upper left", "bbox_to_anchor": (1.01, 1)} if shared else {}))
    return Figure(
        _save(fig, d, "acceptance"),
        "Acceptance length against draft budget",
        "Acceptance length (tokens per verify step) of each valid run against the draft budget, by workload"
        + (" (colour) and arm (marker)." if shared else "."),
    )
