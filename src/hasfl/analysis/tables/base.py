"""The table kernel: a table's Markdown file and its reader-facing parts, from its registry entry
(:data:`hasfl.analysis.artifacts.TABLES`) and its module's ``display`` / ``preamble`` / ``summary``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pandas as pd

from hasfl.analysis.artifacts import ARTIFACTS, STD_NOTE
from hasfl.analysis.labels import dataset_label, method_label
from hasfl.analysis.markdown import md_table, render_parts
from hasfl.analysis.per_run.stale_coordinates import refuse_unnested

__all__ = ["ReportContext", "capped_only", "display_parts", "left_out", "module_of", "preamble", "refuse_unnested",
           "table_markdown", "without_left_out"]


@dataclass(frozen=True)
class ReportContext:
    """What a table's report.md section (its module's ``summary``) may read: every table of the report
    (the comparison too), findings.json's findings, the configured power, the published values, the
    settings shown at the top."""

    tables: Mapping[str, pd.DataFrame]
    findings: Sequence[Mapping[str, Any]] = ()
    power: Any = None
    published: pd.DataFrame | None = None
    config_summary: Mapping[str, Any] = field(default_factory=dict)


def module_of(name: str) -> ModuleType:
    """The module of artifact ``name`` (its compute function's)."""
    return importlib.import_module(ARTIFACTS[name].compute.partition(":")[0])


def display_parts(name: str, df: pd.DataFrame) -> list[tuple[str, Any]]:
    """What a reader sees of table ``name``: (subtitle, frame or paragraph) in order (its module's
    ``display``; the frame itself when it has none or is empty)."""
    if df.empty:
        return [("", df)]
    show = getattr(module_of(name), "display", None)
    return show(df) if show is not None else [("", df)]


def preamble(name: str, df: pd.DataFrame) -> str:
    """Text between table ``name``'s note and its rows (its module's ``preamble``), or ""."""
    fn = getattr(module_of(name), "preamble", None)
    return fn(df) if fn is not None else ""


def table_markdown(name: str, df: pd.DataFrame, sources: Sequence[str] = (), extra: Mapping[str, pd.DataFrame] | None = None,
                   file_name: str | None = None) -> str:
    """The Markdown rendering written beside ``tables/<name>.parquet``."""
    art = ARTIFACTS[name]
    parts = [f"# {art.title}\n\n"]
    parts.append(f"Data: `{file_name or f'tables/{name}.parquet'}`.")
    note = art.note or (STD_NOTE if art.method_table else "")
    if note:
        parts.append(" " + note)
    parts.append("\n\n")
    pre = preamble(name, df)
    if pre:
        parts.append(pre + "\n\n")
    parts.append(render_parts(display_parts(name, df), level="##"))
    for title, frame in (extra or {}).items():
        parts.append(f"\n## {title}\n\n{md_table(frame)}")
    if sources:
        parts.append("\n## Read from\n\n" + "\n".join(f"- `{s}`" for s in sources) + "\n")
    return "".join(parts)


def capped_only(df: pd.DataFrame, flag: str) -> tuple[pd.DataFrame, str]:
    """The rows whose ``flag`` is true, and one line counting the others per method."""
    capped = df[df[flag].astype(bool)].drop(columns=[flag])  # all "yes": the line below counts the others
    rest = df[~df[flag].astype(bool)]
    if rest.empty:
        return capped, f"All {len(df)} runs are capped."
    by = ", ".join(f"{method_label(m)} {len(g)}" for m, g in rest.groupby("method", sort=False))
    what = ("reached full width (p_hi = 1): no coordinate was left untrained, nothing to check" if flag == "capped"
            else "trained full width after t0: no stale coordinate, nothing to evaluate")
    return capped, (f"{len(capped)} of {len(df)} runs are capped; the other {len(rest)} {what} ({by}).")


def left_out(df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The rows of a Proposition 3 table (Proposition 3, Table 4b) whose run is read (``status`` completed)
    and one line naming the others with their reason (their ``status``: diverged, never passed t0;
    :func:`hasfl.analysis.coverage.left_out_reason`), or "" when no run is left out."""
    if "status" not in df.columns:
        return df, ""
    out = df["status"].astype(str) != "completed"
    if not out.any():
        return df, ""
    names = "; ".join(f"{dataset_label(str(r['dataset']))} / {method_label(str(r['method']))} seed {int(r['seed'])}: "
                      f"{r['status']}" for r in df[out].to_dict("records"))
    return df[~out], (f"{int(out.sum())} of {len(df)} runs left out (they cannot show Proposition 3, and F5 does "
                      f"not read them): {names}.")


def without_left_out(df: pd.DataFrame, show: Callable[[pd.DataFrame], tuple[pd.DataFrame, str]]
                     ) -> list[tuple[str, Any]]:
    """``show`` (e.g. :func:`capped_only`) of the runs read, then the line naming the runs left out (if any)."""
    kept, line = left_out(df)
    if not line:
        shown, text = show(df)
        return [("", shown), ("", text)]
    if kept.empty:
        return [("", line)]
    shown, text = show(kept)
    return [("", shown), ("", text), ("", line)]
