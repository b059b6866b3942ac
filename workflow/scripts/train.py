"""Snakemake glue for rule train: one method x dataset x seed (hasfl.fl.train.train_job)."""

from pathlib import Path

from hasfl.fl.train import train_job
from hasfl.logs import setup_logging

log = setup_logging(snakemake.log[0])  # noqa: F821 (injected by Snakemake)
wc = snakemake.wildcards  # noqa: F821
try:
    train_job(
        snakemake.config,  # noqa: F821
        wc.dataset,
        wc.method,
        int(wc.seed),
        Path(snakemake.output.run).parent,  # noqa: F821
        data_dir=Path(snakemake.input.partition).parent,  # noqa: F821
        hasfl_run=snakemake.input.get("hasfl_run"),  # noqa: F821
        threads=snakemake.threads,  # noqa: F821
    )
except Exception:
    log.exception("training failed")
    raise
