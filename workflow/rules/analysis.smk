# Analysis stage: tables, figures, comparison with the paper, findings and the report
# (paper Sections 3.4 and 4). One rule per artifact of the registry
# (hasfl.analysis.artifacts.ARTIFACTS), generated below: each reads exactly the files its entry
# names -- run files of its methods, data-stage files, other tables -- and runs its module's
# compute function through one glue script (workflow/scripts/artifact.py). findings.json,
# report.md and the analysis manifest have rules of their own.

from hasfl.analysis.artifacts import (
    ARTIFACTS,
    FIGURES,
    FINDING_TABLES,
    TABLES,
    artifact_methods,
    figure_caption,
    table_caption,
    table_datasets,
)
from hasfl.analysis.published import PUBLISHED_PATH, comparability_map
from hasfl.analysis.specs import (
    ESTIMATOR_PAIRS,
    TABLE8_PERMUTATIONS,
    TABLE8_PERMUTATION_SEED,
    resolve_table_settings,
    resolve_thresholds,
)
from hasfl.config import load_config, server_noise
from hasfl.dag import preflight
from hasfl.dag.identity import analysis_identity, canonical
import os

ANALYSIS_THRESHOLDS = resolve_thresholds(config.get("analysis", {}))
# The tables' integer settings of the same block (hasfl.analysis.specs.TABLE_SETTINGS).
TABLE_SETTINGS = resolve_table_settings(config.get("analysis", {}))
# The numbers the figure captions quote (hasfl.analysis.artifacts.figure_caption): one caption
# per figure, shown in Snakemake's HTML report (workflow/report/figure.rst renders
# params.caption) and in report.md.
FIGURE_CONTEXT = {
    "n_seeds": len(config["seeds"]),
    "ci_level": ANALYSIS_THRESHOLDS["ci_level"],
    **{
        k: config["hasfl"][k] for k in ("p_min", "gamma", "warmup", "t_adapt", "t_norm")
    },
    # Eq. 5's smoothing schedule (hasfl.analysis.confound.prior_weight)
    "attenuation": {
        "beta": config["hasfl"]["beta"],
        "rounds": config["federation"]["rounds"],
        "warmup": config["hasfl"]["warmup"],
        "t_adapt": config["hasfl"]["t_adapt"],
        "clients": config["federation"]["clients"],
        "clients_per_round": config["federation"]["clients_per_round"],
    },
}
# The config files this DAG was given, relative to the workflow where inside it: report.md states the
# command that reproduces each claim (hasfl.analysis.provenance).
TABLES_DIR = f"{RESULTS}/tables"
FIGS = f"{RESULTS}/figures"


def run_files(datasets, methods, files):
    """Run files of datasets x (methods the preset runs) x seeds."""
    return [
        f"{RESULTS}/{run_folder(d, m, s)}/{f}"
        for d in datasets
        for m in methods
        if m in config["methods"]
        for s in config["seeds"]
        for f in files
    ]


def data_files(datasets, name, seeds=None):
    """Data-stage files ``name`` of datasets x seeds (all seeds by default)."""
    return [
        f"{RESULTS}/{data_folder(d, s)}/{name}"
        for d in datasets
        for s in (seeds or config["seeds"])
    ]


def model_blocks():
    """The preset's model config block per dataset (Table 1, Proposition 3)."""
    return {d: dict(config["dataset_params"][d]["model"]) for d in config["datasets"]}


# The config values an artifact may take (hasfl.analysis.artifacts.PARAM_KEYS).
PARAMS = {
    "datasets": config["datasets"],
    "methods": config["methods"],
    "seeds": config["seeds"],
    "models": model_blocks(),
    # the datasets to evaluate on (a mapping, as the data stage's data_cfg)
    "data": {
        "data_dir": os.path.normpath(
            DATA_DIR
        ),  # a spelling of the same folder reruns nothing
        "dataset_params": {
            d: dict(config["dataset_params"][d]) for d in config["datasets"]
        },
    },
    "ci_level": ANALYSIS_THRESHOLDS["ci_level"],
    "atol": ANALYSIS_THRESHOLDS["f5_atol"],
    "thresholds": ANALYSIS_THRESHOLDS,
    "tolerance": config["method_params"]["random_budget"]["tolerance"],
    "tolerances": {
        control: config["method_params"][control]["tolerance"]
        for _pair, _alloc, control, _e in ESTIMATOR_PAIRS
    },
    "permutations": TABLE8_PERMUTATIONS,
    "permutation_seed": TABLE8_PERMUTATION_SEED,
    "comparable": comparability_map(config, load_config()),
    "k_std": ANALYSIS_THRESHOLDS["comparison_k_std"],
    # Table 4c: coverage over each run's last k rounds
    "last_rounds": TABLE_SETTINGS["table4c_last_rounds"],
    # Proposition 3: the methods of the preset whose server adds noise to every coordinate, with its scale
    "server_noise": server_noise(config),
    **{
        k: config["hasfl"][k] for k in ("p_min", "gamma", "warmup", "t_adapt", "t_norm")
    },
    # Eq. 5's smoothing schedule (hasfl.analysis.confound.prior_weight)
    "attenuation": {
        "beta": config["hasfl"]["beta"],
        "rounds": config["federation"]["rounds"],
        "warmup": config["hasfl"]["warmup"],
        "t_adapt": config["hasfl"]["t_adapt"],
        "clients": config["federation"]["clients"],
        "clients_per_round": config["federation"]["clients_per_round"],
    },
}


# Job-hours per seed of every dataset x method, from the pre-flight's cost model on the reference
# machine's rates (the same on every machine): what the extra seeds of an inconclusive finding cost.
SEED_HOURS = preflight.seed_hours(config)


def artifact_file(art, ext):
    """``<results>/<folder>/<name>.<ext>`` of artifact ``art``."""
    folder = f"{RESULTS}/{art.folder}" if art.folder else RESULTS
    return f"{folder}/{art.name}.{ext}"


def table_file(name):
    """The Parquet file of table ``name``, of its per-run companion ``<table>_seeds`` or of an extra output."""
    if name in TABLES:
        return artifact_file(TABLES[name], "parquet")
    return f"{TABLES_DIR}/{name}.parquet"


def artifact_inputs(art):
    """What artifact ``art`` reads: the files its registry entry names."""
    datasets = table_datasets(art, config["datasets"])
    methods = config["methods"] if art.all_methods else artifact_methods(art)
    if art.nested_only:
        methods = [m for m in methods if METHODS[m].nested]
    inputs = {}
    if art.run_files or art.kind == "figure":
        inputs["verified"] = VERIFIED
    if (
        art.per_run
    ):  # each run evaluated by a job of its own (rule evaluate): the table gathers
        inputs["evals"] = eval_files(art, datasets, methods)
    elif art.run_files:
        inputs["runs"] = run_files(datasets, methods, art.run_files)
    if art.data_clients:
        inputs["data_clients"] = data_files(config["datasets"], "clients.parquet")
    if art.data_tables and not art.per_run:
        inputs["data_tables"] = data_files(
            config["datasets"], "partition.parquet"
        ) + data_files(config["datasets"], "clients.parquet")
    if art.manifests:
        seeds = config["seeds"][:1] if art.manifests == "first" else None
        inputs["manifests"] = data_files(datasets, "manifest.json", seeds)
    if art.raw and not art.per_run:
        inputs["raw"] = [
            f
            for d in config["datasets"]
            for f in raw_files(d, DATA_DIR, config["dataset_params"][d])
        ]
    if art.published:
        inputs["published"] = str(PUBLISHED_PATH)
    for name in art.tables:
        inputs[name] = table_file(name)
    return inputs


def artifact_outputs(art):
    """What artifact ``art`` writes (the Markdown / PNG flagged for Snakemake's HTML report)."""
    if art.kind == "figure":
        return {
            "png": report(
                artifact_file(art, "png"),
                caption="../report/figure.rst",
                category="Figures",
                subcategory=art.name,
            ),
            "pdf": artifact_file(art, "pdf"),
        }
    out = {
        "parquet": artifact_file(art, "parquet"),
        "md": report(
            artifact_file(art, "md"),
            caption="../report/table.rst",
            category="Tables" if art.folder else "Comparison with the paper",
            subcategory=art.label or art.name,
        ),
    }
    if art.seeds_file:
        out["seeds"] = f"{TABLES_DIR}/{art.name}_seeds.parquet"
    for extra in art.extra_outputs:
        out[extra] = f"{TABLES_DIR}/{extra}.parquet"
    return out


def artifact_params(art):
    """The config values of artifact ``art`` (its entry's params, the tables it reads by name)."""
    args = {k: PARAMS[k] for k in art.params}
    if art.tables:
        args["tables"] = list(art.tables)
    return args


def artifact_caption(art):
    if art.kind == "figure":
        return figure_caption(art.name, FIGURE_CONTEXT)
    return table_caption(art.name)


def analysis_outputs():
    """Every analysis output of the preset (rule all)."""
    tables = [a for a in TABLES.values() if a.folder]
    files = [artifact_file(a, ext) for a in tables for ext in ("parquet", "md")]
    files += [f"{TABLES_DIR}/{a.name}_seeds.parquet" for a in tables if a.seeds_file]
    files += [f"{TABLES_DIR}/{x}.parquet" for a in tables for x in a.extra_outputs]
    files += [artifact_file(a, ext) for a in FIGURES.values() for ext in ("png", "pdf")]
    files += [
        artifact_file(a, ext)
        for a in TABLES.values()
        if not a.folder
        for ext in ("parquet", "md")
    ]
    return [*files, f"{RESULTS}/findings.json", f"{RESULTS}/report.md"]


def run_dirs():
    """Every run folder of the preset."""
    return [
        f"{RESULTS}/{run_folder(d, m, s)}"
        for d in config["datasets"]
        for m in config["methods"]
        for s in config["seeds"]
    ]


VERIFIED = f"{RESULTS}/{kind_dir('runs')}/verified.json"


localrules:
    verify_runs,
    analysis_findings,
    analysis_report,
    analysis_manifest,


rule verify_runs:
    """The gate before the analysis: every run matches its manifest (sha256 of each file), was
    trained with the config slice this preset expects and with the installed training code.
    """
    input:
        manifests=[f"{d}/manifest.json" for d in run_dirs()],
        rerun=lambda wc: rerun_input("analysis").get("rerun", []),
    output:
        VERIFIED,
    log:
        f"{RESULTS}/logs/analysis/verify_runs.log",
    params:
        code={
            f"{d}/{m}": train_code(m, d)
            for d in config["datasets"]
            for m in config["methods"]
        },
        expected={
            f"{RESULTS}/{run_folder(d, m, s)}": SESSION.run_cfg(d, m, s)
            for d in config["datasets"]
            for m in config["methods"]
            for s in config["seeds"]
        },
    script:
        "../scripts/verify_runs.py"


# One rule per table and figure of hasfl.analysis.artifacts.ARTIFACTS.
for art in ARTIFACTS.values():

    rule:
        name:
            f"analysis_{art.name}"
        input:
            **artifact_inputs(art),
        output:
            **artifact_outputs(art),
        log:
            f"{RESULTS}/logs/analysis/{art.name}.log",
        localrule: not art.heavy
        resources:
            mem_mb=(
                (8000 if "emnist" in config["datasets"] else 4000)
                if art.heavy
                else 1000
            ),
            runtime=30,
        params:
            artifact=art.name,
            args=canonical(artifact_params(art)),
            caption=artifact_caption(art),
            code=SRC_ANALYSIS,
        script:
            "../scripts/artifact.py"


rule analysis_findings:
    """findings.json: the paper's claims F1-F6, each in its scope, and the estimator findings F7 / F8, with
    a test, margin, power and a three-valued verdict; each run's final accuracy read under its method's
    declared batch-norm rule, from the batch-norm sensitivity."""
    input:
        **{n: table_file(n) for n in FINDING_TABLES},
        bn_sensitivity=table_file("bn_sensitivity"),
    output:
        json=report(
            f"{RESULTS}/findings.json",
            caption="../report/table.rst",
            category="Findings",
        ),
    log:
        f"{RESULTS}/logs/analysis/findings.log",
    params:
        caption="The paper's claims F1-F6, each tested in the scope the paper states it, and this project's estimator findings F7 (does each capacity-separable estimate recover TV once capacity is controlled) and F8 (does allocating by it beat its matched random budget), with statistic, test, margin, minimum detectable effect and a verdict (supported, contradicted or inconclusive) and the reason; report.md shows them as tables.",
        code=SRC_ANALYSIS,
        tables=list(FINDING_TABLES),
        datasets=config["datasets"],
        thresholds=canonical(ANALYSIS_THRESHOLDS),
        seed_hours=SEED_HOURS,
        horizon=canonical(
            {
                "rounds": config["federation"]["rounds"],
                "eval_every": config["federation"]["eval_every"],
                "seeds": config["seeds"],
            }
        ),
    script:
        "../scripts/findings.py"


# Every table the report reads, in registry order, then the extra outputs (the comparison included).
REPORT_TABLES = [*TABLES, *(x for a in TABLES.values() for x in a.extra_outputs)]


rule analysis_report:
    """report.md: findings, the estimator section, tables, comparison and figures, readable on its own."""
    input:
        **{n: table_file(n) for n in REPORT_TABLES},
        findings=f"{RESULTS}/findings.json",
        figures=[artifact_file(a, "png") for a in FIGURES.values()],
    output:
        md=report(
            f"{RESULTS}/report.md", caption="../report/table.rst", category="Report"
        ),
    log:
        f"{RESULTS}/logs/analysis/report.log",
    params:
        caption="The stand-alone report of this preset: runs at the accuracy floor, findings, every table, the comparison with the paper per table and every figure with its caption.",
        code=SRC_ANALYSIS,
        tables=REPORT_TABLES,
        name=config["name"],
        figures=list(FIGURES),
        figure_context=FIGURE_CONTEXT,
        config_summary={
            "preset": config["name"],
            "datasets": config["datasets"],
            "methods": config["methods"],
            "seeds": config["seeds"],
            "clients / per round": f"{config['federation']['clients']} / {config['federation']['clients_per_round']}",
            "rounds": config["federation"]["rounds"],
        },
    script:
        "../scripts/report.py"


ANALYSIS_MANIFEST = f"{RESULTS}/analysis.manifest.json"
# The analysis's own identity (config without where files live, analysis code): recorded in the
# manifest and compared by the identity check when the DAG is built (hasfl.dag.identity.audit).
ANALYSIS_IDENTITY = analysis_identity(SESSION.identity_config(), SRC_ANALYSIS)


rule analysis_manifest:
    """analysis.manifest.json, written last: the sha256 of every analysis output and the identity of
    every run they were computed from. `hasfl results-page` and `hasfl verify` check it, so an
    edited table or findings file stops them (hasfl.analysis.manifest.verify_analysis).
    """
    input:
        files=analysis_outputs(),
        verified=VERIFIED,
    output:
        ANALYSIS_MANIFEST,
    log:
        f"{RESULTS}/logs/analysis/analysis_manifest.log",
    params:
        identity=ANALYSIS_IDENTITY,
    script:
        "../scripts/analysis_manifest.py"
