"""Snakemake glue for rule analysis_table8_estimators (hasfl.analysis.jobs.job_table8)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:job_table8",
     {"data_clients": list(sm.input.data_clients), "run_files": list(sm.input.runs), "datasets": sm.params.datasets,
      "methods": sm.params.methods, "seeds": sm.params.seeds, "level": sm.params.ci_level,
      "permutations": sm.params.permutations, "permutation_seed": sm.params.permutation_seed,
      "out_parquet": sm.output.parquet, "out_seeds": sm.output.seeds, "out_md": sm.output.md,
      "manifests": list(sm.input.manifests)},
     sm.log[0])
