"""Snakemake glue for rule data_stage: load the dataset, write the partition tables.

Runs in a child of the warm worker when the workflow started one (hasfl.worker).
"""

from pathlib import Path

from hasfl.worker import call

call(
    "hasfl.data.stage:stage_job",
    {
        "data_cfg": snakemake.params.data_cfg,  # noqa: F821 (injected by Snakemake)
        "seed": int(snakemake.wildcards.seed),  # noqa: F821
        "out_dir": str(Path(snakemake.output.manifest).parent),  # noqa: F821
    },
    snakemake.log[0],  # noqa: F821
)
