# Training stage: one job per method x dataset x seed (paper Section 4.1).


def train_inputs(wc):
    """The data-stage tables of the job's dataset x seed, plus, for a random-budget control,
    the finished run whose budget it matches (hasfl.registry.MethodInfo.budget_of)."""
    inputs = {
        "partition": f"{RESULTS}/{data_folder(wc.dataset, wc.seed)}/partition.parquet",
        "clients": f"{RESULTS}/{data_folder(wc.dataset, wc.seed)}/clients.parquet",
        "raw": raw_files(wc.dataset, DATA_DIR, config["dataset_params"][wc.dataset]),
    }
    inputs.update(rerun_input(run_folder(wc.dataset, wc.method, wc.seed)))
    budget_of = METHODS[wc.method].budget_of
    if budget_of is not None:
        inputs["budget_run"] = (
            f"{RESULTS}/{run_folder(wc.dataset, budget_of, wc.seed)}/run.json"
        )
    return inputs


rule train:
    """Train one method on one dataset x seed; writes the run files the analysis reads."""
    input:
        unpack(train_inputs),
    output:
        **{name: f"{RUN_DIR}/{f}" for name, f in TRAIN_FILES.items()},
    log:
        f"{RESULTS}/logs/train/{{dataset}}/{{method}}/seed{{seed}}.log",
    threads: config["threads_per_job"]
    resources:
        mem_mb=lambda wc: {"emnist": 12000, "cifar10": 6000}.get(wc.dataset, 2000),
        runtime=lambda wc: 30 if config["name"] != "paper" else 24 * 60,
        gpu=1 if config["device"] == "cuda" else 0,
        # one of the G x K local GPU slots (hasfl.dag.gpu; registered by the Snakefile when it packs jobs)
        gpu_slot=lambda wc: SESSION.gpu_slot(),
    params:
        run_cfg=lambda wc: SESSION.run_cfg(wc.dataset, wc.method, wc.seed),
        data_cfg=lambda wc: data_slice(config, wc.dataset),
        code=lambda wc: train_code(wc.method, wc.dataset),
    script:
        "../scripts/train.py"
