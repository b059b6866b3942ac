"""Snakemake glue for rule analysis_table5_confound (hasfl.analysis.jobs.job_table5)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:job_table5",
     {"data_clients": list(sm.input.data_clients), "run_files": list(sm.input.runs), "datasets": sm.params.datasets,
      "methods": sm.params.methods, "seeds": sm.params.seeds, "out_parquet": sm.output.parquet,
      "out_md": sm.output.md},
     sm.log[0])
