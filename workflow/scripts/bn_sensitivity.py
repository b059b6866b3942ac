"""Snakemake glue for rule analysis_bn_sensitivity (hasfl.analysis.jobs.job_bn_sensitivity)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:job_bn_sensitivity",
     {"run_files": list(sm.input.runs), "manifests": list(sm.input.manifests), "models": dict(sm.params.models),
      "data_dir": sm.params.data["data_dir"],
      "dataset_params": {k: dict(v) for k, v in sm.params.data["dataset_params"].items()},
      "table_paths": {name: sm.input[name] for name in sm.params.tables}, "datasets": sm.params.datasets,
      "thresholds": sm.params.thresholds, "out_parquet": sm.output.parquet, "out_md": sm.output.md,
      "out_findings": sm.output.findings, "data_tables": list(sm.input.data_tables)},
     sm.log[0])
