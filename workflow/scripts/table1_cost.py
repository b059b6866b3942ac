"""Snakemake glue for rule analysis_table1_cost (hasfl.analysis.jobs.job_table1)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:job_table1", {"manifests": list(sm.input.manifests), "models": sm.params.models,
                                        "out_parquet": sm.output.parquet, "out_md": sm.output.md}, sm.log[0])
