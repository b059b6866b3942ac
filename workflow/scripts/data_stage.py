"""Snakemake glue for rule data_stage (hasfl.dag.jobs.stage_data): exactly the job's config slice
``params.data_cfg`` (canonical, without ``data_dir``: where the raw files live is not part of the identity, their
sha256 are), the raw-data folder, its seed, its identity, its output folder and its results folder (hasfl.dag.store)."""

from pathlib import Path

from hasfl.dag.identity import data_identity
from hasfl.dag.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
data_cfg = {**sm.params.data_cfg, "data_dir": sm.config["data_dir"]}
out = Path(sm.output.manifest).parent
seed = int(out.name[len("seed"):])  # <dataset>/seed<s>: rule data_stage's or link_data's folder
call("hasfl.dag.jobs:stage_data",
     {"data_cfg": data_cfg, "seed": seed, "out_dir": str(out), "results": str(out.parents[2]),
      "identity": data_identity(data_cfg, seed, sm.params.code),
      "link": sm.rule.startswith("link_")},  # rule link_data (workflow/rules/link.smk)
     sm.log[0])
