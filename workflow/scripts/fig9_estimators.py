"""Snakemake glue for rule analysis_figure9_estimators, Figure 9 (hasfl.analysis.jobs.job_figure)."""

from hasfl.analysis.specs import ESTIMATOR_FIGURE
from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:job_figure",
     {"slug": ESTIMATOR_FIGURE, "run_files": list(sm.input.runs), "data_clients": list(sm.input.data_clients),
      "params": dict(sm.params.fig), "out_png": sm.output.png, "out_pdf": sm.output.pdf},
     sm.log[0])
