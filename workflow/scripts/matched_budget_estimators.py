"""Snakemake glue for rule analysis_matched_budget_estimators (hasfl.analysis.jobs.job_matched_budget_estimators)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:job_matched_budget_estimators",
     {"run_files": list(sm.input.runs), "datasets": sm.params.datasets, "methods": sm.params.methods,
      "seeds": sm.params.seeds, "level": sm.params.ci_level, "out_parquet": sm.output.parquet,
      "out_seeds": sm.output.seeds, "out_md": sm.output.md, "manifests": list(sm.input.manifests),
      "tolerances": dict(sm.params.tolerances)},
     sm.log[0])
