# hasfl-repro: one DAG from raw data to every table and figure of the HAS-FL paper.
#
#   snakemake --cores 4 all                                   # the paper preset (config.yaml)
#   snakemake --cores 2 all --configfile presets/quick.yaml   # offline quick preset
#
# Everything around the rules is one object, hasfl.dag.session.Session: it validates the config
# (workflow/schemas/config.schema.json plus cross-key rules), checks every finished folder against its
# manifest, reruns what is not what this preset would make (hasfl.dag.outputs.audit), counts what the run
# store holds (hasfl.dag.store), prints the pre-flight and plans the GPU packing; a run (not a dry run)
# takes the results lock and adopts a folder written before the store; onstart starts MPS and the warm worker.

from snakemake.utils import min_version

from hasfl.dag.session import Session, base_config

min_version("9.0")


configfile: base_config(workflow.basedir)


SESSION = Session(workflow, config)


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/identity.smk"
include: "workflow/rules/link.smk"


onstart:
    SESSION.on_start()


onsuccess:
    SESSION.on_exit(success=True)


onerror:
    SESSION.on_exit(success=False)


rule all:
    default_target: True
    input:
        data_outputs(),
        train_outputs(),
        analysis_outputs(),
        ANALYSIS_MANIFEST,
        SESSION.rerun_tokens(),


rule data:
    """Only the data stage (partitions, capacities, TV) of every dataset x seed."""
    input:
        data_outputs(),
        SESSION.rerun_tokens("data"),


rule runs:
    """Only the data and training stages."""
    input:
        data_outputs(),
        train_outputs(),
        SESSION.rerun_tokens("data", "runs"),
