"""Snakemake glue for rule analysis_comparison (hasfl.analysis.jobs.job_comparison)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:job_comparison",
     {"table_paths": {name: sm.input[name] for name in sm.params.tables}, "published_path": sm.input.published, "datasets": sm.params.datasets,
      "comparable": sm.params.comparable, "k_std": sm.params.k_std, "out_parquet": sm.output.parquet,
      "out_md": sm.output.md},
     sm.log[0])
