"""Paper Figure 2: the HAS-FL allocation rule p_i = min(pmax_i, p_min + gamma H_i / H_bar)
(Definition 2) at the preset's ``p_min`` and ``gamma``, for capacities 1.0 / 0.6 / 0.3.

Not a result of training: reads no files, only ``params["p_min"]`` and ``params["gamma"]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.figure import Figure

from hasfl.analysis.figures.style import save_figure, set_style

__all__ = ["compute", "figure"]


def figure(p_min: float, gamma: float, pmaxes: Sequence[float] = (1.0, 0.6, 0.3), h_max: float = 3.0) -> Figure:
    """Figure 2: p_i = min(pmax_i, p_min + gamma H_i / H_bar) against H_i / H_bar."""
    set_style()
    h = np.linspace(0.0, h_max, 301)
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    for pm, color in zip(pmaxes, sns.color_palette("deep", len(pmaxes)), strict=True):
        ax.plot(h, np.minimum(pm, p_min + gamma * h), color=color, lw=2, label=f"capacity $p^{{max}}$ = {pm:.1f}")
    ax.axhline(p_min, color="0.4", ls="--", lw=1, label=f"$p_{{min}}$ = {p_min:g}")
    ax.set_xlabel(r"Heterogeneity estimate relative to the mean, $H_i / \bar H$")
    ax.set_ylabel(r"Allocated width $p_i$")
    ax.set_xlim(0, h_max)
    ax.set_ylim(0, 1.05)
    ax.set_title(f"HAS-FL allocation rule ($\\gamma$ = {gamma:g})")
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """Write Figure 2 to ``outputs["png"]`` / ``outputs["pdf"]`` (``inputs`` unused)."""
    save_figure(figure(float(params["p_min"]), float(params["gamma"])), outputs["png"], outputs["pdf"])
