"""Snakemake glue for rule analysis_figure, Figures 2-8 (hasfl.analysis.jobs.job_figure)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:job_figure",
     {"slug": sm.wildcards.fig, "run_files": list(sm.input.runs), "data_clients": list(sm.input.data_clients),
      "params": dict(sm.params.fig), "out_png": sm.output.png, "out_pdf": sm.output.pdf,
      "manifests": list(sm.input.manifests)},
     sm.log[0])
