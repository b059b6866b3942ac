"""Snakemake glue for the analysis table rules (hasfl.analysis.jobs.job_*)."""

from hasfl.analysis import jobs
from hasfl.logs import setup_logging

sm = snakemake  # noqa: F821 (injected by Snakemake)
log = setup_logging(sm.log[0])
kind, inp, out, par = sm.params.kind, sm.input, sm.output, sm.params
try:
    if kind == "table1":
        jobs.job_table1(inp.manifests, par.models, out.parquet, out.md)
    elif kind == "table2":
        jobs.job_table2(inp.manifests, out.parquet, out.md)
    elif kind == "method":
        jobs.job_method_table(sm.wildcards.table, inp.runs, par.datasets, par.methods, par.seeds, out.parquet,
                              out.seeds, out.md)
    elif kind == "table5":
        jobs.job_table5(inp.data_clients, inp.runs, par.datasets, par.methods, par.seeds, out.parquet, out.md)
    elif kind == "matched_budget":
        jobs.job_matched_budget(inp.runs, par.datasets, par.methods, par.seeds, par.ci_level, out.parquet,
                                out.seeds, out.md)
    elif kind == "prop3":
        jobs.job_prop3(inp.runs, inp.manifests, par.models, par.atol, out.parquet, out.md)
    else:
        raise ValueError(f"unknown analysis table kind {kind!r}")
    log.info("wrote %s", list(out))
except Exception:
    log.exception("analysis table %s failed", kind)
    raise
