"""Markdown primitives of every table file and of report.md: cells, tables, the files a table was
read from, atomic writes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hasfl.io import atomic_path

__all__ = ["ci", "fmt", "interval", "md_table", "measured", "num", "pm", "pm_sig", "rel", "render_parts", "results_root", "source_list",
           "write_text"]

PathLike = str | Path


def fmt(v: Any, digits: int = 4) -> str:
    """One cell: NaN -> "--", bools -> yes/no, floats to ``digits`` significant digits."""
    if v is None or v is pd.NA:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int,)) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") in "iu"):
        return str(int(v))
    if isinstance(v, float) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") == "f"):
        v = float(v)
        if not math.isfinite(v):
            return "--"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}g}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def pm(mean: float, std: float, decimals: int = 1) -> str:
    """``mean +- std`` with fixed decimals (std omitted when NaN, "--" when the mean is)."""
    if mean is None or not math.isfinite(float(mean)):
        return "--"
    s = f"{float(mean):.{decimals}f}"
    if std is not None and math.isfinite(float(std)):
        s += f" ± {float(std):.{decimals}f}"
    return s


def md_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of ``df`` (all cells through :func:`fmt`)."""
    if df.empty:
        return "_(no rows)_\n"
    cols = [str(c).replace("|", "\\|") for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def pm_sig(mean: float, std: float, sig: int = 3) -> str:
    """:func:`pm` with as many decimals as ``sig`` significant digits of the mean need (at least 2)."""
    if mean is None or not math.isfinite(float(mean)):
        return "--"
    m = abs(float(mean))
    decimals = 2 if m == 0 else max(2, sig - 1 - int(math.floor(math.log10(m))))
    return pm(mean, std, decimals)


def num(v: Any, digits: int = 3) -> str:
    if v is None:
        return "--"
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    return "--" if not math.isfinite(x) else f"{x:.{digits}g}"


def interval(low: Any, high: Any) -> str:
    """``[low, high]`` with :func:`num`'s digits; "--" when either end is missing: the one way a verdict's
    interval is written (report.md's findings tables, the results page, the reasons in findings.json)."""
    return "--" if low is None or high is None else f"[{num(low)}, {num(high)}]"


def measured(estimate: Any, low: Any, high: Any) -> str:
    """``estimate [low, high]``; the estimate alone without both ends, "" without an estimate."""
    if estimate is None:
        return ""
    return num(estimate) if low is None or high is None else f"{num(estimate)} {interval(low, high)}"


def ci(r: Any, low: Any, high: Any) -> str:
    """``+0.12 [-0.05, +0.28]`` ("--" when undefined)."""
    try:
        r, low, high = float(r), float(low), float(high)
    except (TypeError, ValueError):
        return "--"
    if not math.isfinite(r):
        return "--"
    return f"{r:+.2f} [{low:+.2f}, {high:+.2f}]" if math.isfinite(low) else f"{r:+.2f}"


def render_parts(parts: Sequence[tuple[str, Any]], level: str) -> str:
    out = []
    for title, item in parts:
        if title:
            out.append(f"\n{level} {title}\n\n")
        out.append(md_table(item) if isinstance(item, pd.DataFrame) else f"\n{item}\n")
    return "".join(out)


def write_text(path: PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def rel(path: PathLike, root: PathLike | None) -> str:
    """``path`` relative to the results folder ``root`` (for the "read from" lists)."""
    p = Path(path)
    if root is not None:
        try:
            return p.resolve().relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            pass
    return p.as_posix()


def source_list(paths: Sequence[PathLike], root: PathLike | None) -> list[str]:
    return sorted(rel(p, root) for p in paths)


def results_root(output: PathLike) -> Path:
    """``results/<name>`` from an output path under its ``tables/`` or ``figures/`` folder (or directly in it)."""
    p = Path(output).parent
    return p.parent if p.name in ("tables", "figures") else p
