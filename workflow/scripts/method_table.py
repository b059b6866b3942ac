"""Snakemake glue for rule analysis_method_table, Tables 3, 4, 6, 7 (hasfl.analysis.jobs.job_method_table)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:job_method_table",
     {"table": sm.wildcards.table, "run_files": list(sm.input.runs), "datasets": sm.params.datasets,
      "methods": sm.params.methods, "seeds": sm.params.seeds, "out_parquet": sm.output.parquet,
      "out_seeds": sm.output.seeds, "out_md": sm.output.md, "manifests": list(sm.input.manifests)},
     sm.log[0])
