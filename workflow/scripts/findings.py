"""Snakemake glue for rule analysis_findings (hasfl.analysis.jobs.job_findings)."""

from hasfl.dag.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:job_findings",
     {"table_paths": {name: sm.input[name] for name in sm.params.tables}, "datasets": sm.params.datasets, "thresholds": sm.params.thresholds,
      "out_json": sm.output.json, "seed_hours": dict(sm.params.seed_hours),
      "bn_sensitivity": sm.input.bn_sensitivity, "horizon": dict(sm.params.horizon)},
     sm.log[0])
