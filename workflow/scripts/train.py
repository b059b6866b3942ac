"""Snakemake glue for rule train (hasfl.dag.jobs.train_run): exactly the job's config slices
``params.run_cfg`` / ``params.data_cfg`` (canonical; ``data_dir``, where the raw files live, is added
from the config: it is not part of any identity), its paths and its results folder (whose run store it
uses: hasfl.dag.store). The glue imports nothing heavy (pandas, torch): the job imports them in the warm worker.

``execution.checkpoint_every`` is read from the config, not passed as a param: it changes no byte of
the results (tests/test_resume.py), so changing it must not rerun finished jobs.
"""

from pathlib import Path

from hasfl.dag.gpu import job_slot
from hasfl.dag.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
budget_run = sm.input.get("budget_run")
out = Path(sm.output.run).parent
link = sm.rule.startswith("link_")  # rule link_run (workflow/rules/link.smk): no GPU slot
# on a packed GPU machine: a free slot, CUDA_VISIBLE_DEVICES for the job (hasfl.dag.gpu)
with job_slot({} if link else None):
    call("hasfl.dag.jobs:train_run",
         {"run_cfg": sm.params.run_cfg, "data_cfg": {**sm.params.data_cfg, "data_dir": sm.config["data_dir"]},
          "out_dir": str(out), "results": str(out.parents[3]), "link": link,
          "data_dir": str(Path(sm.input.partition).parent),
          "hasfl_run": None if budget_run is None else str(budget_run),
          "checkpoint_every": int(sm.config["execution"]["checkpoint_every"]), "code": sm.params.code},
         sm.log[0])
