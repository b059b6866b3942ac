# Outputs the run store already holds: a job of a rule of its own, so that the dry run's job table says
# what will happen (the README's variant recipe: 6 train and 48 link_run). The session found the entry finished by
# its key (the status walk's in_store, reading manifests: SESSION.linked); each link rule is its twin's rule (same
# inputs, same params, same job function, so the same key and the same check of the entry against it) with the
# folder as one wildcard constrained to those folders, on the main process, one thread, no GPU. The job function
# links a finished entry under its lock; were the entry gone by then, it computes it and says so in the log.


def _wildcards(kind, folder):
    """The twin rule's wildcards of a link job's folder of ``kind`` ("<dataset>/seed<s>" or
    "<dataset>/<method>/seed<s>": hasfl.layout.parse_folder of "<kind>/<folder>")."""
    named = parse_folder(f"{kind}/{folder}")
    return SimpleNamespace(
        dataset=named.dataset, method=named.method, seed=str(named.seed)
    )


def _run(wc):
    return _wildcards("runs", wc.linked)


use rule data_stage as link_data with:
    input:
        raw=lambda wc: raw_files(
            _wildcards("data", wc.linked).dataset,
            DATA_DIR,
            config["dataset_params"][_wildcards("data", wc.linked).dataset],
        ),
        preset_raw=preset_raw_files(),
    output:
        partition=f"{RESULTS}/{kind_dir('data')}/{{linked}}/partition.parquet",
        clients=f"{RESULTS}/{kind_dir('data')}/{{linked}}/clients.parquet",
        manifest=f"{RESULTS}/{kind_dir('data')}/{{linked}}/manifest.json",
    log:
        f"{RESULTS}/logs/link/data/{{linked}}.log",
    wildcard_constraints:
        linked=SESSION.link_pattern("data"),
    localrule: True
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        data_cfg=lambda wc: data_slice(config, _wildcards("data", wc.linked).dataset),
        code=SRC_DATA,


use rule train as link_run with:
    input:
        unpack(lambda wc: train_inputs(_run(wc))),
    output:
        **{
            name: f"{RESULTS}/{kind_dir('runs')}/{{linked}}/{f}"
            for name, f in TRAIN_FILES.items()
        },
    log:
        f"{RESULTS}/logs/link/runs/{{linked}}.log",
    wildcard_constraints:
        linked=SESSION.link_pattern("runs"),
    localrule: True
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
        gpu=0,
        gpu_slot=0,
    params:
        run_cfg=lambda wc: SESSION.run_cfg(
            _run(wc).dataset, _run(wc).method, _run(wc).seed
        ),
        data_cfg=lambda wc: data_slice(config, _run(wc).dataset),
        code=lambda wc: train_code(_run(wc).method, _run(wc).dataset),


use rule evaluate as link_evaluation with:
    input:
        unpack(lambda wc: eval_inputs(_run(wc))),
    output:
        directory(f"{RESULTS}/{kind_dir('evals')}/{{linked}}"),
    log:
        f"{RESULTS}/logs/link/evals/{{linked}}.log",
    wildcard_constraints:
        linked=SESSION.link_pattern("evals"),
    priority: 10
    localrule: True
    resources:
        mem_mb=1000,
        runtime=5,
        gpu=0,
        gpu_slot=0,
    params:
        tables=lambda wc: eval_tables(_run(wc)),


ruleorder: link_data > data_stage
ruleorder: link_run > train
ruleorder: link_evaluation > evaluate
