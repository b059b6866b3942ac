# hasfl-repro: one DAG from raw data to every table and figure of the HAS-FL paper.
#
#   snakemake --cores 4 all                                   # the paper preset (config.yaml)
#   snakemake --cores 2 all --configfile presets/quick.yaml   # offline quick preset
#
# The configuration is validated (workflow/schemas/config.schema.json plus
# cross-key rules in hasfl.config) when this file loads, before any job runs.

import os

from snakemake.utils import min_version

min_version("9.0")

from hasfl import worker as hasfl_worker
from hasfl.config import validate_config


configfile: os.path.join(workflow.basedir, "config.yaml")


validate_config(config)


# Local runs: one warm process (torch imported) forks the train and data-stage jobs
# (hasfl.worker); each is still its own Snakemake job with its own log and outputs.
WARM_WORKER = {"socket": None}


onstart:
    if config["warm_worker"] and workflow.local_exec and workflow.is_main_process:
        WARM_WORKER["socket"] = hasfl_worker.start_server(parent_pid=os.getpid())
        os.environ[hasfl_worker.ENV_SOCKET] = WARM_WORKER["socket"]


onsuccess:
    hasfl_worker.stop_server(WARM_WORKER["socket"])


onerror:
    hasfl_worker.stop_server(WARM_WORKER["socket"])


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/analysis.smk"


rule all:
    default_target: True
    input:
        data_outputs(),
        train_outputs(),
        analysis_outputs(),


rule data:
    """Only the data stage (partitions, capacities, TV) of every dataset x seed."""
    input:
        data_outputs(),


rule runs:
    """Only the data and training stages."""
    input:
        data_outputs(),
        train_outputs(),
