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

from hasfl.config import validate_config


configfile: os.path.join(workflow.basedir, "config.yaml")


validate_config(config)


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
