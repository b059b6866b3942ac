"""Snakemake glue for rule analysis_figure (hasfl.analysis.jobs.job_figure)."""

from hasfl.analysis import jobs
from hasfl.logs import setup_logging

sm = snakemake  # noqa: F821 (injected by Snakemake)
log = setup_logging(sm.log[0])
try:
    jobs.job_figure(sm.wildcards.fig, sm.input.runs, sm.input.data_clients, dict(sm.params.fig), sm.output.png,
                    sm.output.pdf)
    log.info("wrote %s", list(sm.output))
except Exception:
    log.exception("figure %s failed", sm.wildcards.fig)
    raise
