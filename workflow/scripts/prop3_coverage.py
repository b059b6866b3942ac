"""Snakemake glue for rule analysis_prop3_coverage (hasfl.analysis.jobs.job_prop3)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:job_prop3",
     {"run_files": list(sm.input.runs), "manifests": list(sm.input.manifests), "models": sm.params.models,
      "atol": sm.params.atol, "out_parquet": sm.output.parquet, "out_md": sm.output.md},
     sm.log[0])
