"""What every step of the analysis is handed: the runs, the validated experiment and the analysis' settings."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from bracket.stats.cells import valid_rows
from bracket.stats.io import from_runs
from bracket.typed.experiment import Experiment


@dataclass(frozen=True)
class Setting:
    """One experiment's runs and settings, read once: `runs` as runs.csv holds them, `frame` tidied
    (bracket.stats.io.from_runs), `valid` its valid rows (the only ones that enter statistics)."""

    runs: pd.DataFrame
    frame: pd.DataFrame
    valid: pd.DataFrame
    experiment: Experiment
    reference: str
    seed: int
    confidence: float
    resamples: int
    threshold: float  # analysis.noise_threshold
    spread_warning: float

    @classmethod
    def of(cls, runs: pd.DataFrame, experiment: Experiment) -> Setting:
        if not isinstance(experiment, Experiment):
            raise TypeError(
                f"analyze needs the validated experiment (bracket.experiment.config.validate or load, or "
                f"bracket.experiment.resolved.read), got {type(experiment).__name__}."
            )
        a = experiment.analysis
        frame = from_runs(runs)
        return cls(
            runs=runs,
            frame=frame,
            valid=valid_rows(frame),
            experiment=experiment,
            reference=experiment.reference,
            seed=int(a.seed),
            confidence=float(a.confidence),
            resamples=int(a.bootstrap_resamples),
            threshold=float(a.noise_threshold),
            spread_warning=float(a.spread_warning),
        )

    @property
    def stats_kw(self) -> dict:
        """The keyword arguments every statistic of the cells takes: seed, confidence, n_resamples."""
        return {"seed": self.seed, "confidence": self.confidence, "n_resamples": self.resamples}

    @property
    def workloads(self) -> list[str]:
        """The workloads with a valid run, sorted."""
        return sorted(self.valid["workload"].unique())

    @property
    def experiment_name(self) -> str | None:
        """runs.csv's experiment column (None without one)."""
        runs = self.runs
        if "experiment" in runs and runs["experiment"].notna().any():
            return str(runs["experiment"].dropna().iloc[0])
        return None
