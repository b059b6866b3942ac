"""Snakemake glue for rule verify_runs (hasfl.dag.jobs.verify_runs_job): the run folders, the config slice and the
training-code digest (the session's, hasfl.dag.session) each run must have."""

from pathlib import Path

from hasfl.dag.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.dag.jobs:verify_runs_job",
     {"run_dirs": [str(Path(m).parent) for m in sm.input.manifests], "expected": sm.params.expected,
      "out_json": sm.output[0], "code": dict(sm.params.code)},
     sm.log[0])
