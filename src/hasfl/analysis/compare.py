"""``hasfl compare A B``: what differs between two results folders, run by run, cell by cell, verdict by verdict.

The researcher's loop (change one thing, run it beside the baseline, compare): two folders of finished DAG runs
(``results/<name>/``) are compared on three levels:

A folder whose links point into a run store that is not there (a ``cp -r`` copy of ``results/<name>`` away from
``results/.store``: its runs could not be found, and would read as runs of the other folder only) is refused
first, naming its dangling links and how to copy or pack a folder as real files.

* **runs** (``runs/<dataset>/<method>/seed<s>/manifest.json``): first each run folder's files against its own
  manifest (:func:`hasfl.integrity.folder_problems`): a run with a missing file (or a dangling symlink) or a file
  changed after its manifest was written is "failed verification", whatever its manifest says, and the command
  exits non-zero naming it; then, for runs that pass, the same identity and the same bytes; the same
  identity but other bytes (then the device and CPU instruction set each run recorded in ``timings.json``, the
  usual cause: floating-point kernels differ across instruction sets); another identity (which config keys, by
  dotted name, or which other component: training code, data-stage files, matched run, device); or a run of one
  folder only;
* **tables** (``tables/*.parquet``): the cells that differ beyond rounding (relative 1e-9), matched on the
  table's non-float columns;
* **findings** (``findings.json``): each verdict, old -> new.

:func:`compare` returns the result as plain data; :func:`render` writes Markdown, and :func:`plot` overlays the
accuracy curves of the methods whose runs differ.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hasfl.errors import HasflError
from hasfl.integrity import STORE_NAME, folder_problems, identity_difference
from hasfl.layout import finished_folders, kind_root, parse_folder, run_folder

__all__ = ["CompareError", "FAILED", "RTOL", "compare", "config_difference", "finished_runs", "flatten",
           "folder_verdicts", "plot", "render", "verification_error"]

#: Two floats are the same cell when |a - b| <= RTOL * max(1, |a|, |b|) (or both NaN).
RTOL = 1e-9
#: Examples of differing cells listed per table.
EXAMPLES = 5
#: The status of a run whose files do not match its own manifest (in A, in B or both).
FAILED = "failed verification"
#: Dangling links named in the error on a folder copied away from its run store.
LINKS_SHOWN = 3


class CompareError(HasflError, ValueError):
    """A folder that cannot be compared; the message names it."""


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as ``{dotted key: leaf value}``."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: value}


def config_difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The dotted keys whose values differ between two config slices (a key of one only included)."""
    fa, fb = flatten(a), flatten(b)
    return sorted(k for k in set(fa) | set(fb) if fa.get(k, _MISSING) != fb.get(k, _MISSING))


_MISSING = object()


def finished_runs(folder: Path) -> dict[tuple[str, str, int], Path]:
    """The finished run folders of a results folder by (dataset, method, seed), from the layout's walk."""
    out = {}
    for run in finished_folders(folder, "runs"):
        named = parse_folder(run.relative_to(folder))
        if named is not None:
            out[(named.dataset, str(named.method), named.seed)] = run
    return out


def _dangling_links(folder: Path) -> list[Path]:
    """Every symbolic link under ``folder``'s ``runs/`` and ``data/`` whose target is gone, in path order (the walk
    does not follow links)."""
    out = []
    for sub in ("runs", "data"):
        for root, dirs, files in os.walk(folder / sub):
            for name in sorted([*dirs, *files]):
                path = Path(root, name)
                if path.is_symlink() and not path.exists():
                    out.append(path)
    return sorted(out)


def _missing_store(link: Path) -> Path | None:
    """The run store (a ``.store`` folder, :data:`hasfl.integrity.STORE_NAME`) that dangling ``link`` points into,
    when that store folder is not there; None for a link elsewhere, or into a store that exists."""
    target = Path(os.path.normpath(link.parent / os.readlink(link)))
    for parent in target.parents:
        if parent.name == STORE_NAME:
            return None if parent.is_dir() else parent
    return None


def _refuse_copy_without_store(folder: Path) -> None:
    """Raise :class:`CompareError` when ``folder`` holds links into a run store that is not there: a ``cp -r`` copy
    of a results folder away from ``results/.store`` keeps its links, which then dangle, so its runs would not be
    found and compare would call them "only in" the other folder (exit 0)."""
    into_missing = [(link, store) for link in _dangling_links(folder) if (store := _missing_store(link)) is not None]
    if not into_missing:
        return
    shown = "\n  - ".join(f"{link.relative_to(folder).as_posix()} -> {os.readlink(link)}"
                          for link, _ in into_missing[:LINKS_SHOWN])
    more = f"\n  ... and {len(into_missing) - LINKS_SHOWN} more" if len(into_missing) > LINKS_SHOWN else ""
    stores = sorted({str(store) for _, store in into_missing})
    raise CompareError(
        f"hasfl compare: '{folder}' holds {len(into_missing)} dangling symbolic link(s) into the run store "
        f"{', '.join(repr(s) for s in stores)}, which is not there:\n  - {shown}{more}\n"
        f"A results folder holds links into the {STORE_NAME} folder beside it; a copy made with `cp -r` keeps the "
        f"links but not the files. Compare the folder where it lies (beside its results/{STORE_NAME}), copy the "
        "files themselves with `cp -rL results/<name> <copy>`, or pack it with `tar -chf <name>.tar -C results "
        "<name>` (docs/guide/variants.md)")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CompareError(f"{path}: not readable JSON ({exc})") from exc


def _machine(run: Path) -> dict[str, Any]:
    """What the run recorded of where it computed (``timings.json``; absent keys: not recorded)."""
    t = run / "timings.json"
    if not t.is_file():
        return {}
    info = _read_json(t)
    return {k: info[k] for k in ("device", "cpu", "cpu_capability", "isa_env", "threads", "precision") if k in info}


def _compare_run(ra: Path, rb: Path) -> dict[str, Any]:
    ma, mb = _read_json(ra / "manifest.json"), _read_json(rb / "manifest.json")
    ia, ib = ma.get("identity", {}), mb.get("identity", {})
    fa = {k: v.get("sha256") for k, v in ma.get("files", {}).items()}
    fb = {k: v.get("sha256") for k, v in mb.get("files", {}).items()}
    differ = sorted(k for k in set(fa) | set(fb) if fa.get(k) != fb.get(k))
    if ia.get("digest") == ib.get("digest"):
        if not differ:
            return {"status": "identical"}
        return {"status": "same identity, different bytes", "files": differ,
                "machine_a": _machine(ra), "machine_b": _machine(rb)}
    parts = identity_difference(ia, ib)
    keys = config_difference(ia.get("config", {}), ib.get("config", {}))
    common = sorted(set(fa) & set(fb))
    same = sorted(k for k in common if fa[k] == fb[k])
    return {"status": "different identity", "components": parts, "config_keys": keys, "files_differ": differ,
            "files_same": same}


def _float_cols(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if pd.api.types.is_float_dtype(df[c])]


def _row_keys(df: pd.DataFrame, keys: Sequence[str]) -> pd.Series:
    """Each row's values of the ``keys`` columns as one string (the row number without key columns)."""
    if not keys:
        return pd.Series([str(i) for i in range(len(df))])
    return pd.Series(["|".join(map(str, row)) for row in df[list(keys)].itertuples(index=False, name=None)])


def _compare_table(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, Any]:
    if list(a.columns) != list(b.columns):
        return {"status": "different columns", "only_a": sorted(set(a.columns) - set(b.columns)),
                "only_b": sorted(set(b.columns) - set(a.columns))}
    floats = _float_cols(a)
    keys = [c for c in a.columns if c not in floats]
    ka, kb = _row_keys(a, keys), _row_keys(b, keys)
    if ka.duplicated().any() or kb.duplicated().any():  # no unique key: compare row by row in file order
        ka, kb = pd.Series(map(str, range(len(a)))), pd.Series(map(str, range(len(b))))
    ia, ib = a.set_axis(ka.to_numpy()), b.set_axis(kb.to_numpy())
    common = [k for k in ia.index if k in set(ib.index)]
    only_a, only_b = len(ia) - len(common), len(ib.index.difference(ia.index))
    cells, examples = 0, []
    for col in floats:
        x = ia.loc[common, col].to_numpy(dtype=np.float64)
        y = ib.loc[common, col].to_numpy(dtype=np.float64)
        both_nan = np.isnan(x) & np.isnan(y)
        with np.errstate(invalid="ignore"):
            close = np.abs(x - y) <= RTOL * np.maximum(1.0, np.maximum(np.abs(x), np.abs(y)))
        bad = ~(both_nan | close)
        cells += int(bad.sum())
        for j in np.flatnonzero(bad)[: max(0, EXAMPLES - len(examples))]:
            examples.append({"row": common[j], "column": col, "a": float(x[j]), "b": float(y[j])})
    status = "identical" if not cells and not only_a and not only_b else "different"
    return {"status": status, "cells": cells, "rows_only_a": only_a, "rows_only_b": int(only_b),
            "examples": examples}


def compare(a: str | Path, b: str | Path) -> dict[str, Any]:
    """Runs, tables and findings of results folder ``a`` against ``b`` (see the module doc)."""
    fa, fb = Path(a), Path(b)
    for f in (fa, fb):
        if not f.is_dir():
            raise CompareError(f"hasfl compare: '{f}' is not a folder (expected a results folder, e.g. results/quick)")
        if not kind_root(f, "runs").is_dir() and not (f / "tables").is_dir():
            raise CompareError(f"hasfl compare: '{f}' has neither runs/ nor tables/ (not a results folder)")
        _refuse_copy_without_store(f)
    runs_a, runs_b = finished_runs(fa), finished_runs(fb)
    runs, failed = [], []
    for key in sorted(set(runs_a) | set(runs_b)):
        d, m, s = key
        problems = {side: folder_problems(found[key]) for side, found in (("A", runs_a), ("B", runs_b)) if key in found}
        problems = {side: lines for side, lines in problems.items() if lines}
        if problems:
            row: dict[str, Any] = {"status": FAILED, "verification": problems,
                                   "in": "both" if key in runs_a and key in runs_b else ("A" if key in runs_a else "B")}
            failed += [{"folder": side, "run": run_folder(d, m, s), "problems": lines}
                       for side, lines in problems.items()]
        elif key not in runs_b:
            row = {"status": "only in A"}
        elif key not in runs_a:
            row = {"status": "only in B"}
        else:
            row = _compare_run(runs_a[key], runs_b[key])
        runs.append({"dataset": d, "method": m, "seed": s, **row})
    tables = []
    names = sorted({p.stem for p in (fa / "tables").glob("*.parquet")} | {p.stem for p in (fb / "tables").glob("*.parquet")})
    for name in names:
        pa, pb = fa / "tables" / f"{name}.parquet", fb / "tables" / f"{name}.parquet"
        if not pa.is_file() or not pb.is_file():
            tables.append({"table": name, "status": "only in A" if pa.is_file() else "only in B"})
            continue
        tables.append({"table": name, **_compare_table(pd.read_parquet(pa), pd.read_parquet(pb))})
    findings = []
    va, vb = folder_verdicts(fa), folder_verdicts(fb)
    for fid in list(dict.fromkeys([*va, *vb])):
        findings.append({"id": fid, "a": va.get(fid), "b": vb.get(fid), "moved": va.get(fid) != vb.get(fid)})
    return {"a": str(fa), "b": str(fb), "verification_failed": failed, "runs": runs, "tables": tables,
            "findings": findings}


def verification_error(result: Mapping[str, Any]) -> CompareError | None:
    """The error naming every run of ``result`` (:func:`compare`) whose files do not match its manifest, or None
    when every run verified (``hasfl compare`` then exits 0)."""
    failed = result.get("verification_failed") or []
    if not failed:
        return None
    where = {"A": result["a"], "B": result["b"]}
    lines = [f"{f['folder']} {Path(where[f['folder']], f['run']).as_posix()}: {'; '.join(f['problems'])}"
             for f in failed]
    return CompareError(f"hasfl compare: {len(failed)} run folder(s) failed verification against their "
                        "manifest.json, so their comparison says nothing about their results:\n  - "
                        + "\n  - ".join(lines) + "\n(restore the files, or delete the run folder and rerun the "
                        "preset's DAG to train it again)")


def folder_verdicts(folder: Path) -> dict[str, str]:
    """Each finding's verdict in ``folder``'s findings.json ({} without one); a malformed file is refused, named."""
    path = folder / "findings.json"
    if not path.is_file():
        return {}
    doc = _read_json(path)
    items = doc.get("findings") if isinstance(doc, Mapping) else doc
    if not isinstance(items, list) or not all(isinstance(f, Mapping) and "id" in f and "verdict" in f
                                              for f in items):
        raise CompareError(f"{path}: not a findings.json (expected a list 'findings' of objects with 'id' and "
                           "'verdict'); rerun the preset's DAG to remake it")
    return {str(f["id"]): str(f["verdict"]) for f in items}


def _count(rows: Sequence[Mapping[str, Any]], status: str) -> int:
    return sum(1 for r in rows if r["status"] == status)


def render(result: Mapping[str, Any]) -> str:
    """The comparison as Markdown."""
    runs, tables, findings = result["runs"], result["tables"], result["findings"]
    lines = [f"# hasfl compare: A = `{result['a']}`, B = `{result['b']}`", ""]
    failed = result.get("verification_failed") or []
    if failed:
        lines += [f"## Verification: {len(failed)} run folder(s) FAILED (their files do not match their "
                  "manifest.json; not compared)", ""]
        lines += [f"- {f['folder']} `{f['run']}`: {'; '.join(f['problems'])}" for f in failed]
        lines.append("")
    statuses = ((FAILED,) if failed else ()) + ("identical", "same identity, different bytes", "different identity",
                                                "only in A", "only in B")
    lines.append("## Runs: " + ", ".join(f"{_count(runs, s)} {s}" for s in statuses))
    lines.append("")
    odd = [r for r in runs if r["status"] != "identical"]
    if odd:
        lines += ["| dataset | method | seed | status | what differs |", "|---|---|---|---|---|"]
        for r in odd:
            if r["status"] == "different identity":
                what = "; ".join(x for x in r["components"] if not x.startswith("config")) or ""
                keys = ", ".join(r["config_keys"])
                what = "; ".join(x for x in (f"config: {keys}" if keys else "", what) if x)
                if not r["files_differ"]:
                    what += " (every file byte-identical)"
                elif r["files_same"]:
                    what += f" (byte-identical: {', '.join(r['files_same'])})"
            elif r["status"] == "same identity, different bytes":
                what = (f"files {', '.join(r['files'])}; A computed on {_where(r['machine_a'])}, B on "
                        f"{_where(r['machine_b'])}")
                if r["machine_a"] == r["machine_b"]:
                    what += " (the same: a nondeterminism to report)"
            elif r["status"] == FAILED:
                what = "; ".join(f"{side}: {'; '.join(p)}" for side, p in r["verification"].items())
            else:
                what = ""
            lines.append(f"| {r['dataset']} | {r['method']} | {r['seed']} | {r['status']} | {what} |")
        lines.append("")
    n_diff = [t for t in tables if t["status"] != "identical"]
    lines += [f"## Tables: {len(tables) - len(n_diff)} identical, {len(n_diff)} different (cells beyond a relative "
              f"{RTOL:g})", ""]
    if n_diff:
        lines += ["| table | status | cells | rows only in A / B | examples |", "|---|---|---|---|---|"]
        for t in n_diff:
            ex = "; ".join(f"{e['row']} `{e['column']}`: {e['a']:.6g} -> {e['b']:.6g}" for e in t.get("examples", []))
            rows = f"{t.get('rows_only_a', '')} / {t.get('rows_only_b', '')}" if "cells" in t else ""
            lines.append(f"| {t['table']} | {t['status']} | {t.get('cells', '')} | {rows} | {ex} |")
        lines.append("")
    moved = [f for f in findings if f["moved"]]
    lines += [f"## Findings: {len(findings) - len(moved)} verdicts unchanged, {len(moved)} moved", ""]
    if moved:
        lines += ["| finding | A | B |", "|---|---|---|"]
        lines += [f"| {f['id']} | {f['a'] or 'absent'} | {f['b'] or 'absent'} |" for f in moved]
        lines.append("")
    return "\n".join(lines)


def _where(machine: Mapping[str, Any]) -> str:
    if not machine:
        return "an unrecorded machine"
    return ", ".join(f"{k} {v}" for k, v in machine.items())


def _bytes_differ(run: Mapping[str, Any]) -> bool:
    """Whether a run's result files differ between the folders (or it is in one only): another identity whose
    files are all byte-identical computed the same curve. A run that failed verification is not plotted."""
    if run["status"] == FAILED:
        return False
    if run["status"] == "different identity":
        return bool(run["files_differ"])
    return run["status"] != "identical"


def plot(result: Mapping[str, Any], path: str | Path) -> list[str]:
    """Overlay the mean accuracy curves of A (solid) and B (dashed) for every (dataset, method) whose run files
    differ (none of whose runs failed verification), one colour per method (the registry's); returns those pairs
    as ``dataset/method``. Written to ``path`` (PNG) through a temporary file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from hasfl.analysis.figures.style import legend_below
    from hasfl.analysis.labels import method_color, method_label
    from hasfl.io import atomic_path

    unverified = {(r["dataset"], r["method"]) for r in result["runs"] if r["status"] == FAILED}
    pairs = sorted({(r["dataset"], r["method"]) for r in result["runs"] if _bytes_differ(r)} - unverified)
    datasets = sorted({d for d, _ in pairs})
    fig, axes = plt.subplots(1, max(1, len(datasets)), figsize=(5.5 * max(1, len(datasets)), 4.6), squeeze=False)
    for ax, d in zip(axes[0], datasets or [""], strict=False):
        handles = []
        for _, m in [p for p in pairs if p[0] == d]:
            for folder, style in ((result["a"], "-"), (result["b"], "--")):
                curves = [pd.read_parquet(f)[["round", "test_acc"]]
                          for f in sorted(Path(folder, "runs", d, m).glob("seed*/rounds.parquet"))]
                if curves:
                    mean = pd.concat(curves).groupby("round")["test_acc"].mean()
                    ax.plot(mean.index, 100 * mean.to_numpy(), style, color=method_color(m))
            handles.append(Line2D([], [], color=method_color(m), label=method_label(m)))
        ax.set_title(d or "no run differs")
        ax.set_xlabel("round")
        ax.set_ylabel("test accuracy (%), mean over seeds")
        if handles:
            handles += [Line2D([], [], color="0.3", ls="-", label="A"), Line2D([], [], color="0.3", ls="--", label="B")]
            legend_below(ax, handles, ncol=3)
    fig.suptitle(f"A = {result['a']} (solid), B = {result['b']} (dashed): the methods whose runs differ")
    fig.tight_layout()
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return [f"{d}/{m}" for d, m in pairs]

