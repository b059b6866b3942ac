"""Snakemake glue for the comparison, findings and report rules (hasfl.analysis.jobs)."""

from hasfl.analysis import jobs
from hasfl.logs import setup_logging

sm = snakemake  # noqa: F821 (injected by Snakemake)
log = setup_logging(sm.log[0])
kind, inp, out, par = sm.params.kind, sm.input, sm.output, sm.params
tables = {k: v for k, v in inp.items() if k.startswith(("table", "matched", "prop3"))}
try:
    if kind == "comparison":
        jobs.job_comparison(tables, inp.published, par.datasets, par.comparable, par.k_std, out.parquet, out.md)
    elif kind == "findings":
        jobs.job_findings(tables, par.datasets, par.thresholds, out.json)
    elif kind == "report":
        jobs.job_report(par.name, par.config_summary, tables, inp.comparison, inp.findings, par.figures, out.md)
    else:
        raise ValueError(f"unknown analysis kind {kind!r}")
    log.info("wrote %s", list(out))
except Exception:
    log.exception("analysis %s failed", kind)
    raise
