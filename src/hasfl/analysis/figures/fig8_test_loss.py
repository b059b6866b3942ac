"""Paper Figure 8: test loss (cross-entropy) of the methods of Figure 7 over the rounds, one
panel per dataset; runs at the accuracy floor are marked, the floor lines are not drawn.

Reads the runs' rounds.parquet and run.json and the data-stage manifests (the floors); the
line-with-band figure is :func:`hasfl.analysis.figures.trajectories.trajectory_figure`; title and
caption: ``hasfl.analysis.artifacts.FIGURES["fig8_test_loss"]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hasfl.analysis.artifacts import FIGURES
from hasfl.analysis.figures.trajectories import compute_trajectories

__all__ = ["compute"]


SLUG = "fig8_test_loss"


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """Write Figure 8 to ``outputs["png"]`` / ``outputs["pdf"]``."""
    compute_trajectories(inputs, outputs, params, y="test_loss", ylabel="Test loss (cross-entropy)",
                         title=FIGURES[SLUG].title, floor_lines_drawn=False)
