# Variants share finished outputs (hasfl.identity.shared_sources): a data-stage or run folder this preset
# lacks whose exact identity -- config slice, code, data-stage sha256s, matched run -- is finished in a folder
# beside this one (results_dir/<other name>/) is linked in (hard links: one copy on disk per identity)
# instead of recomputed, so a variant folder trains only the runs whose identity differs. The share rules
# outrank data_stage / train for the folders found; for every other folder their input cannot exist and
# Snakemake uses data_stage / train. Config key share_runs: false turns it off.

SHARED = (
    {}
)  # output folder relative to RESULTS -> source folder (hasfl.identity.shared_sources)
NOT_SHARED = (
    f"{RESULTS}/.hasfl/not-shared"  # a path no rule makes: the share rules do not apply
)


def share_input(folder):
    """The source's manifest (its job's input), or a path no rule makes when nothing is shared."""
    source = SHARED.get(folder)
    return (
        str(source / "manifest.json")
        if source is not None
        else f"{NOT_SHARED}/{folder}"
    )


rule share_data_stage:
    """Link a finished data stage of the same identity from another results folder."""
    input:
        source=lambda wc: share_input(f"data/{wc.dataset}/seed{wc.seed}"),
    output:
        partition=f"{RESULTS}/data/{{dataset}}/seed{{seed}}/partition.parquet",
        clients=f"{RESULTS}/data/{{dataset}}/seed{{seed}}/clients.parquet",
        manifest=f"{RESULTS}/data/{{dataset}}/seed{{seed}}/manifest.json",
    log:
        f"{RESULTS}/logs/share/data/{{dataset}}/seed{{seed}}.log",
    localrule: True
    params:
        source=lambda wc: str(SHARED.get(f"data/{wc.dataset}/seed{wc.seed}", "")),
    script:
        "../scripts/share_data_stage.py"


rule share_run:
    """Link a finished run of the same identity from another results folder."""
    input:
        source=lambda wc: share_input(f"runs/{wc.dataset}/{wc.method}/seed{wc.seed}"),
    output:
        **{name: f"{RUN_DIR}/{f}" for name, f in TRAIN_FILES.items()},
    log:
        f"{RESULTS}/logs/share/runs/{{dataset}}/{{method}}/seed{{seed}}.log",
    localrule: True
    params:
        source=lambda wc: str(
            SHARED.get(f"runs/{wc.dataset}/{wc.method}/seed{wc.seed}", "")
        ),
    script:
        "../scripts/share_run.py"


ruleorder: share_data_stage > data_stage
ruleorder: share_run > train
