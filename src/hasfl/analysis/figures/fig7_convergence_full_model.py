"""Paper Figure 7: test accuracy of HAS-FL vs the full-model methods (FedAvg,
SCAFFOLD, FedProx) over the rounds, one panel per dataset, with the accuracy floors.

Reads the runs' rounds.parquet and run.json and the data-stage manifests (the floors); the
line-with-band figure is :func:`hasfl.analysis.figures.trajectories.trajectory_figure`; title and
caption: ``hasfl.analysis.artifacts.FIGURES["fig7_convergence_full_model"]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hasfl.analysis.artifacts import FIGURES
from hasfl.analysis.figures.trajectories import compute_trajectories

__all__ = ["compute"]


SLUG = "fig7_convergence_full_model"


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """Write Figure 7 to ``outputs["png"]`` / ``outputs["pdf"]``."""
    compute_trajectories(inputs, outputs, params, y="test_acc_pct", ylabel="Test accuracy (%)",
                         title=FIGURES[SLUG].title, floor_lines_drawn=True)
