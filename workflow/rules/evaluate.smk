# Run-level evaluations (hasfl.analysis.evaluations): what a table computes from one run alone (the tables whose
# registry entry names a per-run function, Artifact.per_run) is evaluated by one job per run, each table's rows an
# entry of the run store of its own (hasfl.dag.jobs.evaluate_run) linked into evals/<dataset>/<method>/seed<s>/<table>/;
# the table's own rule (analysis.smk) gathers the rows.

from hasfl.analysis.artifacts import ARTIFACTS
from hasfl.analysis.evaluations import eval_dir, evaluation_specs

PER_RUN = {name: art for name, art in ARTIFACTS.items() if art.per_run}


def eval_files(art, datasets, methods):
    """The evaluations folders of the runs table ``art`` reads: datasets x methods (the preset's) x seeds."""
    return [
        eval_dir(RESULTS, d, m, s)
        for d in datasets
        for m in methods
        if m in config["methods"]
        for s in config["seeds"]
    ]


def eval_inputs(wc):
    """The run files its tables read, the run's manifest, its data stage's manifest (and tables when a table reads
    them) and the raw files (when one evaluates models)."""
    specs = evaluation_specs(config, wc.dataset, wc.method, SESSION.eval_code)
    run = f"{RESULTS}/{run_folder(wc.dataset, wc.method, wc.seed)}"
    stage = f"{RESULTS}/{data_folder(wc.dataset, wc.seed)}"
    inputs = {
        "run": [f"{run}/manifest.json"]
        + [
            f"{run}/{f}"
            for f in sorted({f for s in specs.values() for f in s["run_files"]})
        ],
        "stage": [
            f"{stage}/{f}"
            for f in sorted({f for s in specs.values() for f in s["data_files"]})
        ],
    }
    # an evaluation that is not what this checkout and preset would make (hasfl.dag.outputs.audit, read from the
    # manifests, so without Snakemake's metadata too) gets a rerun token
    inputs.update(rerun_input(eval_folder(wc.dataset, wc.method, wc.seed)))
    if any(PER_RUN[name].raw for name in specs):
        inputs["raw"] = raw_files(
            wc.dataset, DATA_DIR, config["dataset_params"][wc.dataset]
        )
    return inputs


def eval_tables(wc):
    """What the job evaluates, per table: its function, code digest, files and config values."""
    return evaluation_specs(config, wc.dataset, wc.method, SESSION.eval_code)


rule evaluate:
    """One run's evaluations, one store entry per table that reads the run (hasfl.dag.jobs.evaluate_run)."""
    input:
        unpack(eval_inputs),
    output:
        directory(EVAL_WC),
    log:
        f"{RESULTS}/logs/evaluate/{{dataset}}/{{method}}/seed{{seed}}.log",
    # before the training jobs still waiting: a run is evaluated as soon as it ends, so that from an empty folder
    # the analysis left after the last training job is that run's evaluations and the gathers
    priority: 10
    # on the device a training job would use (hasfl.analysis.per_run.base.evaluation_device): a GPU slot as a
    # training job takes one (hasfl.dag.gpu), a SLURM job each on a cluster
    resources:
        mem_mb=lambda wc: {"emnist": 8000}.get(wc.dataset, 2000),
        runtime=lambda wc: 30 if config["name"] != "paper" else 4 * 60,
        gpu=1 if config["device"] == "cuda" else 0,
        gpu_slot=lambda wc: SESSION.gpu_slot(),
    params:
        tables=eval_tables,
    script:
        "../scripts/evaluate.py"
