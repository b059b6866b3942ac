"""Snakemake glue for rule analysis_table2_datasets (hasfl.analysis.jobs.job_table2)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:job_table2",
     {"manifests": list(sm.input.manifests), "out_parquet": sm.output.parquet, "out_md": sm.output.md}, sm.log[0])
