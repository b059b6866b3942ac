"""Snakemake glue for rule evaluate (hasfl.dag.store.evaluate_run): the run's and its data stage's folders and,
per table that reads the run, its function, code digest, files and config values."""

from pathlib import Path

from hasfl.dag.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
out = Path(sm.output[0])
call("hasfl.dag.store:evaluate_run",
     {"tables": dict(sm.params.tables), "run_dir": str(Path(sm.input.run[0]).parent),
      "data_dir": str(Path(sm.input.stage[0]).parent), "out_dir": str(out), "results": str(out.parents[3]),
      "link": sm.rule.startswith("link_")},
     sm.log[0])
