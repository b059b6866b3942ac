"""comparison.parquet: ours against the published values of Tables 1, 3-7 (src/hasfl/analysis/published.yaml),
cell by cell where the preset ran the paper's configuration (:mod:`hasfl.analysis.published`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis import published as pub
from hasfl.analysis.inputs import read_tables
from hasfl.analysis.labels import dataset_label
from hasfl.analysis.markdown import md_table, results_root, source_list, write_text
from hasfl.analysis.tables.base import ReportContext, table_markdown
from hasfl.io import write_parquet

PathLike = str | Path


def job(table_paths: Mapping[str, PathLike], published_path: PathLike, datasets: Sequence[str],
                   comparable: Mapping[str, Mapping[str, Any]], k_std: float, out_parquet: PathLike,
                   out_md: PathLike) -> pd.DataFrame:
    """comparison.parquet from our tables and published.yaml."""
    ours = pub.ours_long(read_tables(table_paths))
    comp = {tuple(k.split("/", 1)): (bool(v["comparable"]), str(v["reason"])) for k, v in comparable.items()}
    df = pub.comparison(pub.load_published(published_path), ours, datasets, comp, k_std)
    write_parquet(df, out_parquet)
    root = results_root(out_parquet)
    write_text(out_md, table_markdown("comparison", df, source_list(list(table_paths.values()), root),
                                              file_name="comparison.parquet"))
    return df


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """The DAG's entry: our tables and published.yaml."""
    job({n: inputs[n][0] for n in params["tables"]}, inputs["published"][0], params["datasets"], params["comparable"],
        params["k_std"], outputs["parquet"], outputs["md"])


def display_table(df: pd.DataFrame) -> pd.DataFrame:
    """The comparison's reader-facing columns."""
    out = df[["table", "dataset", "method", "metric", "status", "published_mean", "published_std", "ours_mean",
              "ours_std", "ours_n", "within", "criterion", "reason"]].copy()
    return out


def display(df: pd.DataFrame) -> list[tuple[str, Any]]:
    """Every compared cell."""
    return [("", display_table(df))]


def preamble(df: pd.DataFrame) -> str:
    """The overview per paper table, before the cells."""
    return comparison_overview(df).removesuffix("\n")


#: What each paper table reports (the comparison overview).
PAPER_TABLE_WHAT = {
    1: "per-client cost (params, MACs, upload) of the paper's three models at p = 0.25-1",
    3: "accuracy and average width of the allocation strategies",
    4: "coverage ablation: accuracy and peak-to-final decay",
    5: "correlations of the heterogeneity estimate with TV and capacity",
    6: "accuracy of HAS-FL against the full-model methods",
    7: "allocation strategies on Shakespeare",
}


def _reason_keys(reason: str, limit: int = 4) -> str:
    """The config keys a "not the paper's configuration: ..." reason names (at most ``limit``)."""
    import re

    keys = list(dict.fromkeys(re.findall(r"([A-Za-z_][\w.]*)(?:=| unset)", reason)))
    if not keys:
        return reason
    return ", ".join(keys[:limit]) + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def comparison_overview(comparison: pd.DataFrame, published: pd.DataFrame | None = None) -> str:
    """Per paper table: what it reports, whether this preset's cells are comparable with it, and why not.

    Table 1's cells are a property of the model definitions and are comparable at any
    preset; a result cell (Tables 3-7) only when its (dataset, method) ran at the paper's
    configuration. No count mixes the two.
    """
    from hasfl.analysis.published import load_published

    pub = load_published() if published is None else published
    rows = []
    result_compared = 0
    for table in sorted(set(pub["table"]) | set(comparison["table"] if len(comparison) else [])):
        p_t = pub[pub["table"] == table]
        c_t = comparison[comparison["table"] == table] if len(comparison) else comparison
        paper_ds = sorted(set(p_t["dataset"]))
        names = ", ".join(dataset_label(d) for d in paper_ds)
        compared = c_t[c_t["status"] == "compared"] if len(c_t) else c_t
        judged = compared[compared["within"].notna()] if len(compared) else compared
        n_in = int(judged["within"].astype(bool).sum()) if len(judged) else 0
        if table == 1:
            verdict = "yes, at any preset: a property of the model definitions, not of training"
        else:
            result_compared += len(compared)
            why = []
            missing = [d for d in paper_ds if d not in set(c_t["dataset"] if len(c_t) else [])]
            if missing:
                why.append("not run at this preset: " + ", ".join(dataset_label(d) for d in missing))
            nc = c_t[c_t["status"] == "not comparable"] if len(c_t) else c_t
            for dataset, g in (nc.groupby("dataset", sort=True) if len(nc) else []):
                why.append(f"{dataset_label(dataset)} run with another configuration "
                           f"({_reason_keys(str(g['reason'].iloc[0]))})")
            other = c_t[~c_t["status"].isin(["compared", "not comparable"])] if len(c_t) else c_t
            if len(other):
                why.append(", ".join(f"{k}: {len(g)} cells" for k, g in other.groupby("status", sort=True)))
            verdict = ("yes" if len(compared) else "no") + (f" ({len(compared)} cells); " if len(compared) else "; ")
            verdict += "; ".join(why) if why else "every cell"
            verdict = verdict.rstrip("; ")
        rows.append({"Paper table": str(table), "Reports": PAPER_TABLE_WHAT.get(int(table), ""),
                     "Paper's datasets": names, "Comparable at this preset": verdict,
                     "Cells compared": str(len(compared)),
                     "Within the published range": (f"{n_in} of {len(judged)}" if len(judged) else "--")})
    text = ("Which of the paper's numbers this preset can be held against, table by table. \"Within\": ours inside "
            "the published mean ± k std (Table 1: ours rounds to the printed value).\n\n")
    text += md_table(pd.DataFrame.from_records(rows))
    if result_compared == 0:
        text += ("\nAt this preset no result of the paper (Tables 3-7: accuracies, widths, correlations) is comparable "
                 "with ours: the agreement in Table 1 shows that the models are built as the paper describes, not "
                 "that its results reproduce.\n")
    else:
        text += (f"\n{result_compared} result cells (Tables 3-7) ran at the paper's configuration and are compared "
                 "below; Table 1's agreement is about the models only.\n")
    return text


def summary(ctx: ReportContext) -> str:
    """report.md's comparison section: the overview, the Table 1 cells off the printed value, the compared
    result cells, and the datasets the paper does not have."""
    comparison, published, config_summary = ctx.tables["comparison"], ctx.published, ctx.config_summary
    out: list[str] = []
    out.append("From `comparison.parquet` (every cell: `comparison.md`); "
               "published values from `src/hasfl/analysis/published.yaml` (typed in from the paper).\n\n")
    out.append(comparison_overview(comparison, published))
    if len(comparison):
        t1 = comparison[comparison["table"] == 1]
        off = t1[~t1["within"].fillna(False).astype(bool)] if len(t1) else t1
        if len(off):
            out.append("\nTable 1 cells that do not round to the printed value:\n\n"
                       + md_table(display_table(off).drop(columns=["reason"])))
        shown = comparison[(comparison["status"] == "compared") & (comparison["table"] != 1)]
        if len(shown):
            out.append("\nResult cells compared (paper configuration):\n\n"
                       + md_table(display_table(shown).drop(columns=["reason"])))
    in_paper = set(comparison.loc[comparison["table"] != 1, "dataset"]) if len(comparison) else set()
    absent = [d for d in config_summary.get("datasets", []) if d not in in_paper]
    if absent:
        out.append(f"\nNot in the paper's Tables 3-7 (nothing to compare): "
                   f"{', '.join(dataset_label(d) for d in absent)}.\n")
    return "".join(out)
