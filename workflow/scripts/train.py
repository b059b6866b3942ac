"""Snakemake glue for rule train: one method x dataset x seed (hasfl.fl.train.train_job).

Runs in a child of the warm worker when the workflow started one (hasfl.worker).
"""

from pathlib import Path

from hasfl.worker import call

wc = snakemake.wildcards  # noqa: F821 (injected by Snakemake)
hasfl_run = snakemake.input.get("hasfl_run")  # noqa: F821
call(
    "hasfl.fl.train:train_job",
    {
        "config": dict(snakemake.config),  # noqa: F821
        "dataset": wc.dataset,
        "method": wc.method,
        "seed": int(wc.seed),
        "out_dir": str(Path(snakemake.output.run).parent),  # noqa: F821
        "data_dir": str(Path(snakemake.input.partition).parent),  # noqa: F821
        "hasfl_run": None if hasfl_run is None else str(hasfl_run),
        "threads": int(snakemake.threads),  # noqa: F821
    },
    snakemake.log[0],  # noqa: F821
)
