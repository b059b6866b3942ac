"""Paper Figure 5: final per-client allocation p_i (blue) vs capacity pmax_i (grey) of the HAS-FL
runs, one panel per dataset x seed (Section 4.4: the allocations follow the capacity tiers).

Reads the hasfl runs' clients.parquet (``pmax``, ``p_final``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from hasfl.analysis.figures.reading import datasets_of, runs_of, seeds_of
from hasfl.analysis.figures.style import empty_panel, save_figure, set_style
from hasfl.analysis.labels import dataset_label

__all__ = ["compute", "figure"]


def figure(clients: Mapping[tuple[str, int], pd.DataFrame], datasets: Sequence[str], seeds: Sequence[int]) -> Figure:
    """Figure 5 from the hasfl runs' clients tables keyed (dataset, seed); a missing run: "not run"."""
    set_style()
    nr, nc = max(1, len(datasets)), max(1, len(seeds))
    fig, axes = plt.subplots(nr, nc, figsize=(3.6 * nc, 2.6 * nr), squeeze=False)
    for i, dataset in enumerate(datasets or [""]):
        for j, seed in enumerate(seeds or [0]):
            ax = axes[i][j]
            df = clients.get((dataset, int(seed)))
            if df is None:
                empty_panel(ax)
            else:
                df = df.sort_values("client_id")
                x = df["client_id"].to_numpy()
                ax.bar(x, df["pmax"].to_numpy(), color="0.75", width=0.8)
                ax.bar(x, df["p_final"].to_numpy(), color="#1f77b4", width=0.45)
                ax.set_ylim(0, 1.05)
                ax.set_xlabel("Client ID")
                ax.set_ylabel("Width p")
            ax.set_title(f"{dataset_label(dataset)}, seed {seed}", fontsize=9)
    handles = [Patch(facecolor="0.75", label=r"capacity $p^{max}_i$ (largest width the client can train)"),
               Patch(facecolor="#1f77b4", label=r"final allocated width $p_i$")]
    fig.suptitle("HAS-FL: final per-client allocated width vs capacity")
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=8, frameon=False)
    return fig


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """Write Figure 5 to ``outputs["png"]`` / ``outputs["pdf"]`` from ``inputs["runs"]`` (clients.parquet)."""
    clients = {(d, s): pd.read_parquet(f["clients.parquet"]) for (d, _m, s), f in runs_of(inputs).items()}
    save_figure(figure(clients, datasets_of(params), seeds_of(params)), outputs["png"], outputs["pdf"])
