"""Snakemake glue for rule data_stage (hasfl.data.stage.stage_job): exactly the job's config
slice ``params.data_cfg``, its seed and its output folder."""

from pathlib import Path

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.data.stage:stage_job",
     {"data_cfg": sm.params.data_cfg, "seed": int(sm.wildcards.seed), "out_dir": str(Path(sm.output.manifest).parent)},
     sm.log[0])
