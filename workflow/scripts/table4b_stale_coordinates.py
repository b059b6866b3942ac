"""Snakemake glue for rule analysis_table4b_stale_coordinates (hasfl.analysis.jobs.job_table4b)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:job_table4b",
     {"run_files": list(sm.input.runs), "manifests": list(sm.input.manifests), "models": dict(sm.params.models),
      "data_dir": sm.params.data["data_dir"],
      "dataset_params": {k: dict(v) for k, v in sm.params.data["dataset_params"].items()},
      "atol": sm.params.atol, "out_parquet": sm.output.parquet, "out_md": sm.output.md},
     sm.log[0])
