# Run-level evaluations (hasfl.analysis.evaluations): what a table computes from one run alone (the tables whose
# registry entry names a per-run function, Artifact.per_run) is evaluated by one job per run, each table's rows an
# entry of the run store of its own (hasfl.dag.store.evaluate_run) linked into evals/<dataset>/<method>/seed<s>/<table>/;
# the table's own rule (analysis.smk) gathers the rows.

from hasfl.analysis.artifacts import ARTIFACTS, run_tables
from hasfl.analysis.evaluations import EVALS, PER_RUN_PARAMS, eval_dir

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


def _data_files(art):
    return ["manifest.json"] + (
        ["partition.parquet", "clients.parquet"] if art.data_tables else []
    )


def eval_inputs(wc):
    """The run files its tables' entries name, the run's manifest, its data stage's manifest (and tables when an
    entry reads them) and the raw files (when one evaluates models)."""
    arts = [
        PER_RUN[n]
        for n in run_tables(
            wc.dataset, wc.method, config["datasets"], config["methods"]
        )
    ]
    run = f"{RESULTS}/runs/{wc.dataset}/{wc.method}/seed{wc.seed}"
    stage = f"{RESULTS}/data/{wc.dataset}/seed{wc.seed}"
    names = sorted({f for art in arts for f in art.run_files})
    inputs = {
        "run": [f"{run}/manifest.json"] + [f"{run}/{f}" for f in names],
        "stage": [
            f"{stage}/{f}"
            for f in sorted({f for art in arts for f in _data_files(art)})
        ],
    }
    if any(art.raw for art in arts):
        inputs["raw"] = raw_files(
            wc.dataset, DATA_DIR, config["dataset_params"][wc.dataset]
        )
    return inputs


def _narrowed(art, dataset):
    """The table's config values a per-run evaluation takes, narrowed to the run's dataset."""
    out = {}
    for key in art.params:
        if key not in PER_RUN_PARAMS:
            continue
        value = PARAMS[key]
        if key == "models":
            value = {dataset: value[dataset]}
        elif key == "data":
            value = {
                "data_dir": value["data_dir"],
                "dataset_params": {dataset: value["dataset_params"][dataset]},
            }
        out[key] = value
    return out


def eval_tables(wc):
    """What the job evaluates, per table: its function, code digest, files and config values."""
    return canonical(
        {
            name: {
                "function": PER_RUN[name].per_run,
                "code": SESSION.eval_code(PER_RUN[name].per_run),
                "run_files": list(PER_RUN[name].run_files),
                "data_files": _data_files(PER_RUN[name]),
                "params": _narrowed(PER_RUN[name], wc.dataset),
            }
            for name in run_tables(
                wc.dataset, wc.method, config["datasets"], config["methods"]
            )
        }
    )


rule evaluate:
    """One run's evaluations, one store entry per table that reads the run (hasfl.dag.store.evaluate_run)."""
    input:
        unpack(eval_inputs),
    output:
        directory(f"{RESULTS}/{EVALS}/{{dataset}}/{{method}}/seed{{seed}}"),
    log:
        f"{RESULTS}/logs/evaluate/{{dataset}}/{{method}}/seed{{seed}}.log",
    resources:
        mem_mb=lambda wc: {"emnist": 8000}.get(wc.dataset, 2000),
        runtime=lambda wc: 30 if config["name"] != "paper" else 4 * 60,
    params:
        tables=eval_tables,
    script:
        "../scripts/evaluate.py"
