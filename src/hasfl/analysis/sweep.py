"""``hasfl compare A B C ...``: N results folders as the points of a sweep, one row per point.

Each folder is a point: the config keys in which its runs differ from the first folder's are read from the runs' own
recorded config slices (``runs/<dataset>/<method>/seed<s>/manifest.json``, ``identity.config``, dotted names), never
from folder names; a key that differs is the swept key and its value the point's coordinate. Per point and
(dataset, method): a metric (a column of the per-seed tables, ``tables/*_seeds.parquet``, e.g. ``final_acc_pct``)
as mean, sample sd and seed count; and every finding whose verdict is not the same at every point. :func:`plot`
draws the metric against the swept value, one line per (dataset, method), with the seeds' sd as error bars.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis.compare import CompareError, config_difference, finished_runs, flatten, folder_verdicts
from hasfl.integrity import read_manifest
from hasfl.layout import kind_root

__all__ = ["SEED_KEYS", "metric_rows", "plot", "points", "render", "sweep"]

#: The per-run keys a config slice holds that identify the run, not the point (they differ within a folder).
SEED_KEYS = ("seed", "method", "dataset")


def _configs(folder: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(dataset, method) -> the config slice one of its runs records (its first seed's), without its run keys."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for (dataset, method, _seed), run in sorted(finished_runs(folder).items()):
        if (dataset, method) not in out:
            cfg = ((read_manifest(run) or {}).get("identity") or {}).get("config") or {}
            out[dataset, method] = {k: v for k, v in cfg.items() if k not in SEED_KEYS}
    return out


def points(folders: Sequence[Path]) -> tuple[list[str], list[dict[str, Any]]]:
    """(the swept keys: dotted config keys whose value differs between folders for a (dataset, method) they share,
    in order; per folder, those keys' values). A key is read from the runs' recorded config slices
    (:func:`hasfl.analysis.compare.config_difference` against the first folder's)."""
    configs = [_configs(Path(f)) for f in folders]
    keys: list[str] = []
    for pair, first in configs[0].items():
        if any(pair not in c for c in configs[1:]):
            continue
        differ = sorted({k for c in configs[1:] for k in config_difference(first, c[pair])})
        keys += [k for k in differ if k not in keys]
    coords = []
    for c in configs:
        flat = [flatten(cfg) for cfg in c.values()]
        coords.append({key: next((f[key] for f in flat if key in f), None) for key in keys})
    return keys, coords


def metric_rows(folder: Path, metric: str) -> pd.DataFrame:
    """(dataset, method) -> mean, sample sd and seed count of ``metric`` over the completed runs of the per-seed tables
    of ``folder`` that carry it (a run several tables list is counted once)."""
    parts = []
    for path in sorted((Path(folder) / "tables").glob("*_seeds.parquet")):
        df = pd.read_parquet(path)
        if {"dataset", "method", "seed", metric} <= set(df.columns):
            if "status" in df.columns:
                df = df[df["status"] == "completed"]
            parts.append(df[["dataset", "method", "seed", metric]])
    if not parts:
        return pd.DataFrame(columns=["dataset", "method", "mean", "sd", "n"])
    runs = pd.concat(parts).drop_duplicates(["dataset", "method", "seed"])
    grouped = runs.groupby(["dataset", "method"], sort=True)[metric]
    return pd.DataFrame({"mean": grouped.mean(), "sd": grouped.std(ddof=1), "n": grouped.count()}).reset_index()


def sweep(folders: Sequence[str | Path], metric: str) -> dict[str, Any]:
    """The N folders as a sweep (module doc): swept keys, each point's coordinates, metric rows and verdicts.

    Raises:
        CompareError: a folder that is not a results folder, or no metric column in any folder's per-seed tables.
    """
    paths = [Path(f) for f in folders]
    for f in paths:
        if not f.is_dir() or not kind_root(f, "runs").is_dir():
            raise CompareError(f"hasfl compare: '{f}' is not a results folder with runs/ (e.g. results/quick)")
    keys, coords = points(paths)
    rows = {str(f): metric_rows(f, metric) for f in paths}
    if all(r.empty for r in rows.values()):
        raise CompareError(f"hasfl compare: no per-seed table (tables/*_seeds.parquet) of {', '.join(map(str, paths))} "
                           f"has the column '{metric}' (e.g. final_acc_pct, best_acc_pct, avg_p_trained)")
    verdicts = {str(f): folder_verdicts(f) for f in paths}
    ids = list(dict.fromkeys(i for v in verdicts.values() for i in v))
    moved = [i for i in ids if len({verdicts[str(f)].get(i) for f in paths}) > 1]
    return {"folders": [str(f) for f in paths], "keys": keys, "points": coords, "metric": metric,
            "rows": {k: v.to_dict("records") for k, v in rows.items()},
            "verdicts": {i: [verdicts[str(f)].get(i) for f in paths] for i in moved}}


def _fmt(x: Any) -> str:
    return "--" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.3g}"


def render(result: Mapping[str, Any]) -> str:
    """One row per point: the swept keys' values, the metric per (dataset, method) as mean +- sd (n), then the
    findings whose verdict moved across the points."""
    keys, metric = list(result["keys"]), result["metric"]
    pairs = sorted({(r["dataset"], r["method"]) for rows in result["rows"].values() for r in rows})
    lines = [f"# Sweep over {', '.join(f'`{k}`' for k in keys) or 'no config key (the folders run the same config)'}",
             "", f"{len(result['folders'])} results folders; `{metric}` per (dataset, method): mean +- sample sd over "
             "the completed seeds (n).", "",
             "| folder | " + " | ".join(keys) + " | " + " | ".join(f"{d} / {m}" for d, m in pairs) + " |",
             "|---|" + "---|" * len(keys) + "---:|" * len(pairs)]
    for folder, point in zip(result["folders"], result["points"], strict=True):
        got = {(r["dataset"], r["method"]): r for r in result["rows"][folder]}
        cells = [f"{_fmt(got[p]['mean'])} +- {_fmt(got[p]['sd'])} ({got[p]['n']})" if p in got else "--"
                 for p in pairs]
        lines.append(f"| `{folder}` | " + " | ".join(json.dumps(point[k]) for k in keys) + " | " + " | ".join(cells)
                     + " |")
    lines += ["", "Findings whose verdict moved across the points:" if result["verdicts"] else
              "No finding's verdict moved across the points.", ""]
    for fid, words in result["verdicts"].items():
        lines.append(f"- {fid}: " + " -> ".join(str(w) for w in words))
    return "\n".join(lines).rstrip() + "\n"


def plot(result: Mapping[str, Any], path: str | Path) -> list[str]:
    """The metric against the first numeric swept key, one line per (dataset, method), error bars the seeds' sd.
    Returns the lines drawn (``dataset / method``); none without a numeric swept key."""
    import matplotlib.pyplot as plt

    from hasfl.analysis.figures.style import set_style
    from hasfl.io import atomic_path

    numeric = [k for k in result["keys"] if all(isinstance(p.get(k), (int, float)) for p in result["points"])]
    if not numeric:
        return []
    key = numeric[0]
    set_style()
    fig, ax = plt.subplots(figsize=(6, 4))
    drawn = []
    pairs = sorted({(r["dataset"], r["method"]) for rows in result["rows"].values() for r in rows})
    for d, m in pairs:
        xs, ys, es = [], [], []
        for folder, point in zip(result["folders"], result["points"], strict=True):
            row = next((r for r in result["rows"][folder] if (r["dataset"], r["method"]) == (d, m)), None)
            if row is not None:
                xs.append(float(point[key]))
                ys.append(float(row["mean"]))
                es.append(0.0 if row["sd"] is None or not math.isfinite(float(row["sd"])) else float(row["sd"]))
        if xs:
            order = sorted(range(len(xs)), key=lambda i: xs[i])
            ax.errorbar([xs[i] for i in order], [ys[i] for i in order], yerr=[es[i] for i in order], marker="o",
                        capsize=3, label=f"{d} / {m}")
            drawn.append(f"{d} / {m}")
    ax.set_xlabel(key)
    ax.set_ylabel(f"{result['metric']} (mean +- sd over seeds)")
    if len({p[key] for p in result["points"]}) > 2 and min(p[key] for p in result["points"]) > 0:
        ax.set_xscale("log")
    ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, format="png", dpi=120, metadata={"Software": None})
    plt.close(fig)
    return drawn
