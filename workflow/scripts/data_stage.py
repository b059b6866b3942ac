"""Snakemake glue for rule data_stage: load the dataset, write the partition tables."""

from pathlib import Path

from hasfl.data import load_dataset
from hasfl.data.stage import run_data_stage
from hasfl.logs import setup_logging

log = setup_logging(snakemake.log[0])  # noqa: F821 (injected by Snakemake)
cfg = snakemake.params.data_cfg  # noqa: F821
seed = int(snakemake.wildcards.seed)  # noqa: F821
try:
    bundle = load_dataset(cfg["dataset"], cfg["data_dir"], cfg["dataset_params"])
    manifest = run_data_stage(bundle, cfg, seed, Path(snakemake.output.manifest).parent)  # noqa: F821
    log.info("wrote %s", manifest)
except Exception:
    log.exception("data stage failed")
    raise
