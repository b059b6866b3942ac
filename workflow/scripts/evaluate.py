"""Snakemake glue for rule evaluate (hasfl.dag.jobs.evaluate_run): the run's and its data stage's folders and,
per table that reads the run, its function, code digest, files and config values. On a packed GPU machine the job
takes a free GPU slot as a training job does (hasfl.dag.gpu.job_slot: CUDA_VISIBLE_DEVICES for the job); a link job
takes none."""

from pathlib import Path

from hasfl.dag.gpu import job_slot
from hasfl.dag.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
out = Path(sm.output[0])
link = sm.rule.startswith("link_")  # rule link_evaluation (workflow/rules/link.smk): no GPU slot
with job_slot({} if link else None):
    call("hasfl.dag.jobs:evaluate_run",
         {"tables": dict(sm.params.tables), "run_dir": str(Path(sm.input.run[0]).parent),
          "data_dir": str(Path(sm.input.stage[0]).parent), "out_dir": str(out), "results": str(out.parents[3]),
          "link": link},
         sm.log[0])
