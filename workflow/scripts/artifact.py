"""Snakemake glue for every generated analysis rule, one per table / figure (hasfl.analysis.jobs.run_artifact)."""

from hasfl.dag.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:run_artifact",
     {"name": sm.params.artifact,
      "inputs": {k: [v] if isinstance(v, str) else list(v) for k, v in sm.input.items()},
      "outputs": {k: str(v) for k, v in sm.output.items()}, "params": dict(sm.params.args)},
     sm.log[0])
