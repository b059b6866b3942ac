"""One function per analysis rule: read the listed files, compute, write the outputs.

The Snakemake scripts (workflow/scripts/analysis_*.py) only forward ``snakemake.input``,
``output`` and ``params`` to these functions, so every job can be run and tested
without Snakemake. Every job reads exactly the files it is given and writes
atomically (hasfl.io).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis import (
    confound,
    estimators,
    findings as findings_mod,
    floors as floors_mod,
    published as pub,
    report,
    tables,
)
from hasfl.analysis.runs import group_data_files, group_run_files, load_run_metrics, read_json
from hasfl.analysis.specs import (
    ESTIMATOR_FIGURE,
    ESTIMATORS,
    FIGURES,
    MB_ESTIMATORS_TABLE,
    METHOD_TABLES,
    TABLE8,
    TABLE8_PERMUTATION_SEED,
    TABLE8_PERMUTATIONS,
    STALE_RUN_FILES,
    STALE_TABLE,
    resolve_thresholds,
    table_datasets,
)
from hasfl.io import atomic_path, write_json, write_parquet

log = logging.getLogger("hasfl.analysis")

PathLike = str | Path


def _write_text(path: PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def _rel(path: PathLike, root: PathLike | None) -> str:
    """``path`` relative to the results folder ``root`` (for the "read from" lists)."""
    p = Path(path)
    if root is not None:
        try:
            return p.resolve().relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            pass
    return p.as_posix()


def _source_list(paths: Sequence[PathLike], root: PathLike | None) -> list[str]:
    return sorted(_rel(p, root) for p in paths)


def results_root(output: PathLike) -> Path:
    """``results/<name>`` from an output path under its ``tables/`` or ``figures/`` folder (or directly in it)."""
    p = Path(output).parent
    return p.parent if p.name in ("tables", "figures") else p


def _manifest_summaries(manifests: Sequence[PathLike]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for (dataset, _seed), files in group_data_files(manifests).items():
        out.setdefault(dataset, []).append(read_json(files["manifest.json"])["summary"])
    return out


def preset_models(manifests: Sequence[PathLike], models: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{dataset: {model, in_shape, num_classes}}`` from the manifests and the config model blocks."""
    summaries = _manifest_summaries(manifests)
    out = {}
    for dataset, model in models.items():
        if dataset not in summaries:
            raise ValueError(f"no data-stage manifest for dataset '{dataset}' among the inputs")
        s = summaries[dataset][0]
        out[dataset] = {"model": dict(model), "in_shape": list(s["input_shape"]), "num_classes": int(s["classes"])}
    return out


def dataset_floors(manifests: Sequence[PathLike]) -> dict[str, dict[str, float]]:
    """``{dataset: {majority_pct, chance_pct, floor_tol_pct}}`` from data-stage manifests
    (:mod:`hasfl.analysis.floors`); a dataset whose manifests predate the floors is left out."""
    out = {}
    for dataset, summaries in _manifest_summaries(manifests).items():
        f = floors_mod.summary_floors(summaries)
        if f is not None:
            out[dataset] = f
    return out


def _flagged_metrics(metrics: pd.DataFrame, manifests: Sequence[PathLike]) -> pd.DataFrame:
    return floors_mod.add_floor_flags(metrics, dataset_floors(manifests)) if manifests else metrics


# --- tables -------------------------------------------------------------------------


def job_table1(manifests: Sequence[PathLike], models: Mapping[str, Mapping[str, Any]], out_parquet: PathLike,
               out_md: PathLike) -> pd.DataFrame:
    """Table 1 for the paper's three models and the preset's (``models``: dataset -> config model block)."""
    df = tables.table1_cost(preset_models(manifests, models))
    write_parquet(df, out_parquet)
    root = results_root(out_parquet)
    _write_text(out_md, report.table_markdown("table1_cost", df, _source_list(manifests, root)))
    return df


def job_table2(manifests: Sequence[PathLike], out_parquet: PathLike, out_md: PathLike) -> pd.DataFrame:
    """Table 2 from the data-stage manifests."""
    df = tables.table2_datasets(_manifest_summaries(manifests))
    write_parquet(df, out_parquet)
    _write_text(out_md, report.table_markdown("table2_datasets", df, _source_list(manifests, results_root(out_parquet))))
    return df


def job_method_table(table: str, run_files: Sequence[PathLike], datasets: Sequence[str], methods: Sequence[str],
                     seeds: Sequence[int], out_parquet: PathLike, out_seeds: PathLike, out_md: PathLike,
                     manifests: Sequence[PathLike] = ()) -> pd.DataFrame:
    """Tables 3, 4, 6, 7: aggregate (``out_parquet``) and per-seed rows (``out_seeds``).

    ``manifests`` (data-stage manifest.json of the table's datasets) give the accuracy
    floors; without them the floor flags are NA (unknown).
    """
    spec = METHOD_TABLES[table]
    metrics = _flagged_metrics(_metrics_with_costs(group_run_files(run_files)), manifests)
    df = tables.method_table(spec, metrics, datasets, methods, seeds)
    per_seed = tables.seed_rows(metrics, table_datasets(spec, datasets), spec.methods)
    write_parquet(df, out_parquet)
    write_parquet(per_seed, out_seeds)
    root = results_root(out_parquet)
    md = report.table_markdown(table, df, _source_list([*run_files, *manifests], root),
                               extra={f"Per seed (`{_rel(out_seeds, root)}`)": per_seed})
    _write_text(out_md, md)
    return df


def _metrics_with_costs(files: Mapping[tuple[str, str, int], Mapping[str, Path]]) -> pd.DataFrame:
    """Per-run metrics (:func:`load_run_metrics`) plus the costs as paid (:func:`tables.run_costs`).

    Raises:
        ValueError: naming the run file and the key / column a run that predates the costs as paid lacks.
    """
    metrics = load_run_metrics(files)
    rows = []
    for (dataset, method, seed), f in files.items():
        source = f["run.json"].parent.as_posix()
        costs = tables.run_costs(pd.read_parquet(f["rounds.parquet"]), read_json(f["run.json"]), source)
        rows.append({"dataset": dataset, "method": method, "seed": int(seed), **costs})
    cost_df = pd.DataFrame.from_records(rows, columns=["dataset", "method", "seed", *tables.COST_METRICS])
    if metrics.empty:
        return metrics.assign(**{c: pd.Series(dtype="float64") for c in tables.COST_METRICS})
    return metrics.merge(cost_df.astype({"seed": "int64"}), on=["dataset", "method", "seed"], how="left")


def _run_status(files: Mapping[tuple[str, str, int], Mapping[str, Path]]) -> dict[tuple[str, str, int], str]:
    return {k: str(read_json(f["run.json"]).get("status", "completed")) for k, f in files.items() if "run.json" in f}


def job_table5(data_clients: Sequence[PathLike], run_files: Sequence[PathLike], datasets: Sequence[str],
               methods: Sequence[str], seeds: Sequence[int], out_parquet: PathLike, out_md: PathLike) -> pd.DataFrame:
    """Table 5 and the fedavg positive control from the data and run clients tables."""
    data = {k: pd.read_parquet(f["clients.parquet"]) for k, f in group_data_files(data_clients).items()}
    runs = group_run_files(run_files)
    clients = {k: pd.read_parquet(f["clients.parquet"]) for k, f in runs.items()}
    df = confound.table5_confound(data, clients, _run_status(runs), datasets, methods, seeds)
    write_parquet(df, out_parquet)
    root = results_root(out_parquet)
    summary = confound.summarize(df)
    _write_text(out_md, report.table_markdown("table5_confound", df, _source_list([*data_clients, *run_files], root),
                                              extra={"Mean and sample std over seeds": summary}))
    return df


def job_matched_budget(run_files: Sequence[PathLike], datasets: Sequence[str], methods: Sequence[str],
                       seeds: Sequence[int], level: float, out_parquet: PathLike, out_seeds: PathLike,
                       out_md: PathLike, manifests: Sequence[PathLike] = (),
                       tolerance: float | None = None) -> pd.DataFrame:
    """hasfl vs random_budget paired by seed (``tolerance``: method_params.random_budget.tolerance)."""
    metrics = _flagged_metrics(load_run_metrics(group_run_files(run_files)), manifests)
    summary, per_seed = tables.matched_budget(metrics, datasets, methods, seeds, level, tolerance)
    write_parquet(summary, out_parquet)
    write_parquet(per_seed, out_seeds)
    root = results_root(out_parquet)
    _write_text(out_md, report.table_markdown("matched_budget", summary, _source_list([*run_files, *manifests], root),
                                              extra={f"Per seed (`{_rel(out_seeds, root)}`)": per_seed}))
    return summary


def job_table8(data_clients: Sequence[PathLike], run_files: Sequence[PathLike], datasets: Sequence[str],
               methods: Sequence[str], seeds: Sequence[int], level: float, permutations: int, permutation_seed: int,
               out_parquet: PathLike, out_seeds: PathLike, out_md: PathLike,
               manifests: Sequence[PathLike] = ()) -> pd.DataFrame:
    """Table 8 (:mod:`hasfl.analysis.estimators`): per run x estimate the capacity-grouped check of
    :mod:`hasfl.analysis.diagnose` (``out_seeds``) and, pooled over seeds, per dataset x method x
    estimate (``out_parquet``).

    ``run_files``: clients.parquet, rounds.parquet and run.json of the runs of
    :data:`hasfl.analysis.specs.TABLE8_METHODS`; ``manifests`` (data-stage manifest.json) give the
    accuracy floors that mark the runs at the floor (NA without them).
    """
    data = {k: pd.read_parquet(f["clients.parquet"]) for k, f in group_data_files(data_clients).items()}
    runs = group_run_files(run_files)
    info: dict[tuple[str, str, int], dict[str, Any]] = {k: {"status": v} for k, v in _run_status(runs).items()}
    if runs and all("rounds.parquet" in f and "run.json" in f for f in runs.values()):
        for r in _flagged_metrics(load_run_metrics(runs), manifests).to_dict("records"):
            key = (r["dataset"], r["method"], int(r["seed"]))
            info[key].update(at_floor=r.get("at_floor", pd.NA), final_at_floor=r.get("final_at_floor", pd.NA))
    clients = {k: pd.read_parquet(f["clients.parquet"]) for k, f in runs.items()}
    sources = {k: f["clients.parquet"].as_posix() for k, f in runs.items()}
    alpha = 1.0 - float(level)
    per_seed = estimators.table8(data, clients, info, datasets, methods, seeds, alpha=alpha,
                                 permutations=int(permutations), seed=int(permutation_seed), sources=sources)
    pooled = estimators.pool(per_seed, float(level))
    write_parquet(pooled, out_parquet)
    write_parquet(per_seed, out_seeds)
    root = results_root(out_parquet)
    _write_text(out_md, report.table_markdown(TABLE8, pooled, _source_list([*data_clients, *run_files, *manifests],
                                                                           root),
                                              extra={f"Per run (`{_rel(out_seeds, root)}`)": report.table8_seed_display(
                                                  per_seed)}))
    return pooled


def job_matched_budget_estimators(run_files: Sequence[PathLike], datasets: Sequence[str], methods: Sequence[str],
                                  seeds: Sequence[int], level: float, out_parquet: PathLike, out_seeds: PathLike,
                                  out_md: PathLike, manifests: Sequence[PathLike] = (),
                                  tolerances: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Allocation by E2 / E3 (hasfl_probe, hasfl_reported) vs its random-budget control, paired by seed
    (``tolerances``: control method -> method_params.<control>.tolerance); F8 tests the accuracy."""
    runs = group_run_files(run_files)
    metrics = _flagged_metrics(load_run_metrics(runs), manifests) if runs else load_run_metrics(runs)
    summary, per_seed = estimators.matched_budget_pairs(metrics, datasets, methods, seeds, level, tolerances)
    write_parquet(summary, out_parquet)
    write_parquet(per_seed, out_seeds)
    root = results_root(out_parquet)
    _write_text(out_md, report.table_markdown(MB_ESTIMATORS_TABLE, summary,
                                              _source_list([*run_files, *manifests], root),
                                              extra={f"Per seed (`{_rel(out_seeds, root)}`)": per_seed}))
    return summary


def job_prop3(run_files: Sequence[PathLike], manifests: Sequence[PathLike], models: Mapping[str, Mapping[str, Any]],
              atol: float, out_parquet: PathLike, out_md: PathLike) -> pd.DataFrame:
    """Proposition 3 check of every run (needs clients.parquet, init.pt, final.pt, run.json)."""
    from hasfl.analysis import coverage
    from hasfl.models import family_from_config

    specs = preset_models(manifests, models)
    families = {}
    rows = []
    for (dataset, method, seed), f in group_run_files(run_files).items():
        if dataset not in families:
            s = specs[dataset]
            families[dataset] = family_from_config(s["model"], s["in_shape"], s["num_classes"])
        clients = pd.read_parquet(f["clients.parquet"])
        p_hi = coverage.max_trained_width(clients)
        res = coverage.prop3_run(coverage.load_state(str(f["init.pt"])), coverage.load_state(str(f["final.pt"])),
                                 families[dataset], p_hi, atol)
        status = str(read_json(f["run.json"]).get("status", "completed"))
        rows.append({"dataset": dataset, "method": method, "seed": int(seed), "status": status, **res})
    df = pd.DataFrame.from_records(rows, columns=coverage.COLUMNS)
    df = df.astype({"seed": "int64", "capped": "bool", "prop3_holds": "bool", "n_coords": "int64",
                    "n_never_covered": "int64", "n_never_covered_changed": "int64", "n_covered_changed": "int64"})
    write_parquet(df, out_parquet)
    root = results_root(out_parquet)
    _write_text(out_md, report.table_markdown("prop3_coverage", df, _source_list([*run_files, *manifests], root)))
    return df


def job_table4b(run_files: Sequence[PathLike], manifests: Sequence[PathLike], models: Mapping[str, Mapping[str, Any]],
                data_dir: PathLike, dataset_params: Mapping[str, Mapping[str, Any]], atol: float,
                out_parquet: PathLike, out_md: PathLike) -> pd.DataFrame:
    """Table 4b (Section 4.3): coordinates untrained since t0 in every run, and for capped runs
    the accuracy of the full model, of the model with them reset to init.pt, and of the sub-model.

    Needs, per run, clients.parquet (with ``p_max_trained_after_warmup``), init.pt, warmup.pt,
    final.pt and run.json (with ``t0``); raises a ValueError naming the file (and column) a
    run lacks.
    """
    from hasfl.analysis import stale
    from hasfl.analysis.coverage import load_global_state, load_state
    from hasfl.data import load_dataset
    from hasfl.models import family_from_config
    from hasfl.models.bn import split_state

    specs = preset_models(manifests, models)
    families: dict[str, Any] = {}
    bundles: dict[str, Any] = {}
    rows = []
    for (dataset, method, seed), f in group_run_files(run_files).items():
        missing = [name for name in STALE_RUN_FILES if name not in f]
        if missing:
            where = next(iter(f.values())).parent.as_posix()
            raise ValueError(f"table4b: run {where} lacks {', '.join(missing)} among the inputs (warmup.pt "
                             "is the global state at the end of round t0 = hasfl.warmup)")
        if dataset not in families:
            s = specs[dataset]
            families[dataset] = family_from_config(s["model"], s["in_shape"], s["num_classes"])
        summary = read_json(f["run.json"])
        if summary.get("t0") is None:
            raise ValueError(f"table4b: {f['run.json'].as_posix()} lacks 't0' (the warm-up round index); the run "
                             "predates the warm-up checkpoint -- rerun its training job")
        p_hi = stale.max_trained_width_after_warmup(pd.read_parquet(f["clients.parquet"]),
                                                    f["clients.parquet"].as_posix())
        status = str(summary.get("status", "completed"))
        evaluate = p_hi < 1.0 and status == "completed"
        if evaluate and dataset not in bundles:
            bundles[dataset] = load_dataset(dataset, data_dir, dataset_params[dataset])
        final, final_bn = split_state(load_global_state(str(f["final.pt"])))
        res = stale.stale_row(init=load_state(str(f["init.pt"])), warmup=load_state(str(f["warmup.pt"])),
                              final=final, family=families[dataset], p_hi_after_t0=p_hi,
                              bundle=bundles.get(dataset), evaluate=evaluate, atol=atol, final_bn=final_bn,
                              bn_mode=specs[dataset]["model"].get("bn_stats", "per_width"))
        acc = summary.get("final_test_acc")
        rows.append({"dataset": dataset, "method": method, "seed": int(seed), "status": status,
                     "t0": int(summary["t0"]), "acc_logged_pct": float(acc) * 100.0 if acc is not None else math.nan,
                     **res})
    df = pd.DataFrame.from_records(rows, columns=stale.COLUMNS)
    df = df.astype({"seed": "int64", "t0": "int64", "capped_after_t0": "bool", "frozen_since_t0": "bool",
                    "n_coords": "int64", "n_stale": "int64", "n_stale_changed": "int64"})
    # whether the run's own final accuracy is at the majority-class floor (NA when the floors are unknown)
    flagged = floors_mod.add_floor_flags(df.assign(best_acc_pct=math.nan, final_acc_pct=df["acc_logged_pct"]),
                                         dataset_floors(manifests))
    df["final_at_floor"] = flagged["final_at_floor"]
    write_parquet(df, out_parquet)
    root = results_root(out_parquet)
    _write_text(out_md, report.table_markdown(STALE_TABLE, df, _source_list([*run_files, *manifests], root)))
    return df


# --- figures ------------------------------------------------------------------------


def _floor_flags(metrics: pd.DataFrame) -> dict[tuple[str, str], tuple[int, int]]:
    """``{(dataset, method): (completed runs at the floor, completed runs with a known flag)}``."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    if metrics.empty or "at_floor" not in metrics.columns:
        return out
    done = metrics[(metrics["status"] == "completed") & metrics["at_floor"].notna()]
    for (dataset, method), g in done.groupby(["dataset", "method"], sort=True):
        out[(dataset, method)] = (int(g["at_floor"].astype(bool).sum()), int(len(g)))
    return out


def job_figure(slug: str, run_files: Sequence[PathLike], data_clients: Sequence[PathLike], params: Mapping[str, Any],
               out_png: PathLike, out_pdf: PathLike, manifests: Sequence[PathLike] = ()) -> None:
    """Figure ``slug`` (see hasfl.analysis.specs.FIGURES) from exactly its run files.

    ``manifests`` (data-stage manifest.json) give the accuracy floors the figures mark;
    ``params`` the preset's datasets, methods and seeds, and for Figure 2 ``p_min`` /
    ``gamma``, for Figure 4 ``warmup`` / ``t_adapt`` / ``t_norm``.
    """
    from hasfl.analysis import figures as F

    spec = FIGURES[slug]
    datasets, seeds = list(params.get("datasets", [])), [int(s) for s in params.get("seeds", [])]
    runs = group_run_files(run_files)
    status = _run_status(runs)
    methods = [m for m in spec.methods if m in params.get("methods", spec.methods)]
    floors = dataset_floors(manifests) if manifests else {}
    flags = (_floor_flags(_flagged_metrics(load_run_metrics(runs), manifests))
             if floors and all("rounds.parquet" in f and "run.json" in f for f in runs.values()) else {})
    n_seeds = len(seeds) or None
    if slug == "fig2_allocation_rule":
        fig = F.fig2_allocation_rule(float(params["p_min"]), float(params["gamma"]))
    elif slug in ("fig3_convergence_allocation", "fig7_convergence_full_model", "fig8_test_loss"):
        traj = F.trajectories({k: pd.read_parquet(f["rounds.parquet"]) for k, f in runs.items()})
        if slug == "fig8_test_loss":
            fig = F.trajectory_figure(traj, status, datasets, methods, "test_loss", "Test loss (cross-entropy)",
                                      spec.title, flags=flags, n_seeds=n_seeds)
        else:
            fig = F.trajectory_figure(traj, status, datasets, methods, "test_acc_pct", "Test accuracy (%)", spec.title,
                                      floors=floors, flags=flags, n_seeds=n_seeds)
    elif slug == "fig4_heterogeneity_allocation":
        traj = F.trajectories({k: pd.read_parquet(f["rounds.parquet"]) for k, f in runs.items()})
        pmax: dict[str, list[float]] = {}
        for (dataset, _seed), f in group_data_files(data_clients).items():
            pmax.setdefault(dataset, []).append(float(pd.read_parquet(f["clients.parquet"])["pmax"].mean()))

        def opt_int(key: str) -> int | None:
            return int(params[key]) if params.get(key) is not None else None

        fig = F.fig4_heterogeneity_allocation(traj, {d: sum(v) / len(v) for d, v in pmax.items()}, datasets,
                                              warmup=opt_int("warmup"), t_adapt=opt_int("t_adapt"),
                                              t_norm=opt_int("t_norm"), n_seeds=n_seeds)
    elif slug == "fig5_final_allocation":
        clients = {(d, s): pd.read_parquet(f["clients.parquet"]) for (d, _m, s), f in runs.items()}
        fig = F.fig5_final_allocation(clients, datasets, seeds)
    elif slug == ESTIMATOR_FIGURE:
        data = {k: pd.read_parquet(f["clients.parquet"]) for k, f in group_data_files(data_clients).items()}
        done = {(d, s): pd.read_parquet(f["clients.parquet"]) for (d, _m, s), f in runs.items()
                if status.get((d, _m, s), "completed") == "completed"}
        level = float(params.get("ci_level", 0.95))
        stats = {}
        full = {k: c for k, c in done.items() if all(e.column in c.columns for e in ESTIMATORS)}
        if full:  # the panel titles: the same numbers and checks as Table 8's hasfl rows
            per_seed = estimators.table8(data, {(d, "hasfl", s): c for (d, s), c in full.items()},
                                         {}, datasets, ["hasfl"], sorted({s for _d, s in full}),
                                         alpha=1.0 - level, permutations=TABLE8_PERMUTATIONS,
                                         seed=TABLE8_PERMUTATION_SEED)
            pooled = estimators.pool(per_seed[per_seed["method"] == "hasfl"], level)
            stats = {(r["dataset"], r["estimator"]): r for r in pooled.to_dict("records")}
        fig = F.fig9_estimators(estimators.figure_points(data, done), datasets, stats, level=level,
                                n_runs={d: sum(1 for dd, _s in done if dd == d) for d in datasets})
    elif slug == "fig6_frontier":
        rows = []
        for (d, m, s), f in runs.items():
            j = read_json(f["run.json"])
            acc = j.get("final_test_acc")
            costs = tables.run_costs(pd.read_parquet(f["rounds.parquet"]), j, f["run.json"].parent.as_posix())
            rows.append({"dataset": d, "method": m, "seed": s, "status": str(j.get("status", "completed")),
                         "final_acc_pct": float(acc) * 100.0 if acc is not None else math.nan,
                         "avg_p": float(j["avg_p"]) if j.get("avg_p") is not None else math.nan, **costs})
        fig = F.fig6_frontier(pd.DataFrame.from_records(
            rows, columns=["dataset", "method", "seed", "status", "final_acc_pct", "avg_p", *tables.COST_METRICS]),
            datasets, methods, floors=floors, flags=flags, n_seeds=n_seeds)
    else:  # pragma: no cover - guarded by the wildcard constraint
        raise ValueError(f"unknown figure '{slug}'")
    F.save_figure(fig, out_png, out_pdf)


# --- comparison, findings, report ----------------------------------------------------


def job_bn_sensitivity(run_files: Sequence[PathLike], manifests: Sequence[PathLike],
                       models: Mapping[str, Mapping[str, Any]], data_dir: PathLike,
                       dataset_params: Mapping[str, Mapping[str, Any]], table_paths: Mapping[str, PathLike],
                       datasets: Sequence[str], thresholds: Mapping[str, Any], out_parquet: PathLike,
                       out_md: PathLike, out_findings: PathLike,
                       data_tables: Sequence[PathLike] = ()) -> pd.DataFrame:
    """Every run's final model under every batch-norm mode, and each finding's verdict under the other
    modes (:mod:`hasfl.analysis.bn_sensitivity`). Needs, per run, final.pt and run.json; the finding
    tables as findings.json reads them; for the ``static`` mode, the data stage's partition.parquet and
    clients.parquet of every dataset x seed (``data_tables``)."""
    from hasfl.analysis import bn_sensitivity as bns
    from hasfl.analysis.coverage import load_global_state
    from hasfl.analysis.stale import evaluate_accuracy
    from hasfl.data import load_dataset
    from hasfl.models import family_from_config
    from hasfl.models.bn import model_at

    specs = preset_models(manifests, models)
    stage = group_data_files(data_tables)
    capable: dict[tuple[str, int], list[Any]] = {}  # the static mode's batches, one list per dataset x seed
    families: dict[str, Any] = {}
    bundles: dict[str, Any] = {}
    rows = []
    for (dataset, method, seed), f in group_run_files(run_files).items():
        missing = [n for n in ("final.pt", "run.json") if n not in f]
        if missing:
            where = next(iter(f.values())).parent.as_posix()
            raise ValueError(f"bn_sensitivity: run {where} lacks {', '.join(missing)} among the inputs")
        model = specs[dataset]["model"]
        if model.get("arch") != "cnn":
            continue  # no batch norm: every mode is the same model
        if dataset not in families:
            families[dataset] = family_from_config(model, specs[dataset]["in_shape"], specs[dataset]["num_classes"])
            bundles[dataset] = load_dataset(dataset, data_dir, dataset_params[dataset])
        summary = read_json(f["run.json"])
        status = str(summary.get("status", "completed"))
        logged = summary.get("final_test_acc")
        run_mode = str(model.get("bn_stats", "per_width"))
        state = load_global_state(str(f["final.pt"])) if status == "completed" else None
        for mode in bns.modes_of(run_mode):
            acc = math.nan
            if state is not None and mode == bns.STATIC:
                key = (dataset, int(seed))
                if key not in capable:
                    tables = stage.get(key, {})
                    if not {"partition.parquet", "clients.parquet"} <= set(tables):
                        raise ValueError(f"bn_sensitivity: the static mode of {dataset}/{method}/seed{seed} needs "
                                         "the data stage's partition.parquet and clients.parquet among the inputs")
                    capable[key] = bns.capable_batches(bundles[dataset], pd.read_parquet(tables["partition.parquet"]),
                                                       pd.read_parquet(tables["clients.parquet"]), 1.0,
                                                       int(dataset_params[dataset]["optim"]["batch_size"]))
                batches = capable[key]
                if batches:
                    net = bns.static_statistics(model_at(families[dataset], 1.0, state, run_mode), batches)
                    acc = 100.0 * evaluate_accuracy(net, bundles[dataset], 512)
            elif state is not None:
                net = model_at(families[dataset], 1.0, state, mode)
                acc = 100.0 * evaluate_accuracy(net, bundles[dataset], bns.EVAL_BATCH if mode == "batch" else 512)
            rows.append({"dataset": dataset, "method": method, "seed": int(seed), "status": status,
                         "run_mode": run_mode, "mode": mode, "final_acc_pct": acc,
                         "logged_final_acc_pct": float(logged) * 100.0 if logged is not None else math.nan})
    df = pd.DataFrame.from_records(rows, columns=bns.COLUMNS).astype({"seed": "int64"})
    names = [*findings_mod.REQUIRED_TABLES, *(n for n in findings_mod.ESTIMATOR_TABLES if n in table_paths)]
    verdicts = bns.findings_under_modes(df, _read_tables({n: table_paths[n] for n in names}), datasets,
                                        resolve_thresholds(thresholds))
    write_parquet(df, out_parquet)
    write_parquet(verdicts, out_findings)
    root = results_root(out_parquet)
    sources = _source_list([*run_files, *manifests, *data_tables, *table_paths.values()], root)
    _write_text(out_md, "# Batch-norm sensitivity\n\n" + bns.markdown(df, verdicts)
                + "\n## Read from\n\n" + "\n".join(f"- `{s}`" for s in sources) + "\n")
    return df


def _read_tables(paths: Mapping[str, PathLike]) -> dict[str, pd.DataFrame]:
    return {name: pd.read_parquet(p) for name, p in paths.items()}


def job_comparison(table_paths: Mapping[str, PathLike], published_path: PathLike, datasets: Sequence[str],
                   comparable: Mapping[str, Mapping[str, Any]], k_std: float, out_parquet: PathLike,
                   out_md: PathLike) -> pd.DataFrame:
    """comparison.parquet from our tables and published.yaml."""
    ours = pub.ours_long(_read_tables(table_paths))
    comp = {tuple(k.split("/", 1)): (bool(v["comparable"]), str(v["reason"])) for k, v in comparable.items()}
    df = pub.comparison(pub.load_published(published_path), ours, datasets, comp, k_std)
    write_parquet(df, out_parquet)
    root = results_root(out_parquet)
    _write_text(out_md, report.table_markdown("comparison", df, _source_list(list(table_paths.values()), root),
                                              file_name="comparison.parquet"))
    return df


def job_findings(table_paths: Mapping[str, PathLike], datasets: Sequence[str], thresholds: Mapping[str, Any],
                 out_json: PathLike) -> dict[str, Any]:
    """findings.json from the tables (``table_paths`` keyed by table name)."""
    missing = [n for n in findings_mod.REQUIRED_TABLES if n not in table_paths]
    if missing:
        raise ValueError(f"findings: the tables {', '.join(missing)} are not among the inputs")
    # F7 / F8 (the estimator findings) are evaluated when their tables are given (the workflow always
    # gives them); one of them without the other is an error.
    names = [*findings_mod.REQUIRED_TABLES, *(n for n in findings_mod.ESTIMATOR_TABLES if n in table_paths)]
    t = _read_tables({n: table_paths[n] for n in names})
    th = resolve_thresholds(thresholds)
    items = findings_mod.evaluate_findings(t, datasets=datasets, thresholds=th)
    doc = {"thresholds": th, "alpha": findings_mod.alpha_of(th), "verdicts": list(findings_mod.VERDICTS),
           "findings": items}
    # Round-trip through json to fail here (not in the report) on anything non-serialisable.
    json.dumps(doc, allow_nan=False)
    write_json(out_json, doc)
    return doc


def job_report(name: str, config_summary: Mapping[str, Any], table_paths: Mapping[str, PathLike],
               comparison_path: PathLike, findings_path: PathLike, figure_slugs: Sequence[str],
               out_md: PathLike, figure_context: Mapping[str, Any] | None = None) -> str:
    """report.md (relative links to figures/ and tables/ beside it); ``figure_context``: the
    preset's numbers the figure captions quote (:func:`hasfl.analysis.specs.figure_caption`)."""
    text = report.report_markdown(name=name, config_summary=config_summary, tables=_read_tables(table_paths),
                                  comparison=pd.read_parquet(comparison_path), findings=read_json(findings_path),
                                  figures=figure_slugs, figure_context=figure_context)
    _write_text(out_md, text)
    return text
