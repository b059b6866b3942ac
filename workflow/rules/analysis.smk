# Analysis stage: tables, figures, comparison with the paper, findings and the report
# (paper Sections 3.4 and 4). Every rule reads only data-stage and run files -- exactly
# the ones listed as its input -- and the code lives in hasfl.analysis (jobs.py has one
# function per rule; its script in workflow/scripts/ only forwards input/output/params).

from hasfl.analysis.published import PUBLISHED_PATH, comparability_map
from hasfl.analysis.specs import (
    BN_FINDINGS_TABLE,
    BN_RUN_FILES,
    BN_TABLE,
    ESTIMATOR_FIGURE,
    ESTIMATOR_PAIRS,
    FIGURES,
    MB_ESTIMATORS_TABLE,
    METHOD_TABLES,
    TABLE8,
    TABLE8_METHODS,
    TABLE8_PERMUTATIONS,
    TABLE8_PERMUTATION_SEED,
    figure_caption,
    table_caption,
    STALE_RUN_FILES,
    STALE_TABLE,
    resolve_thresholds,
    table_datasets,
)
from hasfl.config import load_config

ANALYSIS_THRESHOLDS = resolve_thresholds(config.get("analysis", {}))
# The numbers the figure captions quote (hasfl.analysis.specs.figure_caption): one caption
# per figure, shown in Snakemake's HTML report (workflow/report/figure.rst renders
# params.caption) and in report.md.
FIGURE_CONTEXT = {
    "n_seeds": len(config["seeds"]),
    "ci_level": ANALYSIS_THRESHOLDS["ci_level"],
    **{
        k: config["hasfl"][k] for k in ("p_min", "gamma", "warmup", "t_adapt", "t_norm")
    },
}
TABLES = f"{RESULTS}/tables"
FIGS = f"{RESULTS}/figures"
# Tables read by the comparison / findings / report (name -> file).
ANALYSIS_TABLES = {
    name: f"{TABLES}/{name}.parquet"
    for name in (
        "table1_cost",
        "table2_datasets",
        "table3_allocation",
        "table4_coverage",
        "table5_confound",
        "table6_full_model",
        "table7_shakespeare",
        "matched_budget",
        "prop3_coverage",
        STALE_TABLE,
        TABLE8,
        MB_ESTIMATORS_TABLE,
        BN_TABLE,
    )
}
# Each finding's verdict under the other batch-norm modes (written with BN_TABLE).
BN_FINDINGS = f"{TABLES}/{BN_FINDINGS_TABLE}.parquet"
# The tables the comparison reads.
COMPARISON_TABLES = [
    n
    for n in ANALYSIS_TABLES
    if n
    not in (
        "table2_datasets",
        "matched_budget",
        "prop3_coverage",
        STALE_TABLE,
        TABLE8,
        MB_ESTIMATORS_TABLE,
        BN_TABLE,
    )
]
# Tables with a per-seed (per-run) companion file <name>_seeds.parquet.
SEED_TABLES_OF = (*METHOD_TABLES, "matched_budget", TABLE8, MB_ESTIMATORS_TABLE)
# Per-seed tables the findings test on (paired by seed).
SEED_TABLES = {
    f"{name}_seeds": f"{TABLES}/{name}_seeds.parquet" for name in SEED_TABLES_OF
}
# Tables findings.json is computed from (hasfl.analysis.findings.REQUIRED_TABLES).
FINDINGS_TABLES = {
    **{
        k: v
        for k, v in ANALYSIS_TABLES.items()
        if k in ("table5_confound", "prop3_coverage", STALE_TABLE)
    },
    **SEED_TABLES,
}


wildcard_constraints:
    table="|".join(METHOD_TABLES),
    # Figure 9 has its own rule (analysis_figure9_estimators)
    fig="|".join(slug for slug in FIGURES if slug != ESTIMATOR_FIGURE),


def run_files(datasets, methods, files):
    """Run files of datasets x (methods the preset runs) x seeds."""
    return [
        f"{RESULTS}/runs/{d}/{m}/seed{s}/{f}"
        for d in datasets
        for m in methods
        if m in config["methods"]
        for s in config["seeds"]
        for f in files
    ]


def data_files(datasets, name, seeds=None):
    """Data-stage files ``name`` of datasets x seeds (all seeds by default)."""
    return [
        f"{RESULTS}/data/{d}/seed{s}/{name}"
        for d in datasets
        for s in (seeds or config["seeds"])
    ]


def model_blocks():
    """The preset's model config block per dataset (Table 1, Proposition 3)."""
    return {d: dict(config["dataset_params"][d]["model"]) for d in config["datasets"]}


def analysis_outputs():
    """Every analysis output of the preset (rule all)."""
    tabs = [f"{TABLES}/{n}.{ext}" for n in ANALYSIS_TABLES for ext in ("parquet", "md")]
    tabs += [f"{TABLES}/{n}_seeds.parquet" for n in SEED_TABLES_OF]
    tabs.append(BN_FINDINGS)
    figs = [f"{FIGS}/{slug}.{ext}" for slug in FIGURES for ext in ("png", "pdf")]
    return [
        *tabs,
        *figs,
        f"{RESULTS}/comparison.parquet",
        f"{RESULTS}/comparison.md",
        f"{RESULTS}/findings.json",
        f"{RESULTS}/report.md",
    ]


localrules:
    verify_runs,
    analysis_table1_cost,
    analysis_table2_datasets,
    analysis_method_table,
    analysis_table5_confound,
    analysis_matched_budget,
    analysis_table8_estimators,
    analysis_matched_budget_estimators,
    analysis_figure,
    analysis_figure9_estimators,
    analysis_comparison,
    analysis_findings,
    analysis_report,
    analysis_manifest,


def run_dirs():
    """Every run folder of the preset."""
    return [
        f"{RESULTS}/runs/{d}/{m}/seed{s}"
        for d in config["datasets"]
        for m in config["methods"]
        for s in config["seeds"]
    ]


VERIFIED = f"{RESULTS}/runs/verified.json"


rule verify_runs:
    """The gate before the analysis: every run matches its manifest (sha256 of each file), was
    trained with the config slice this preset expects and with the installed training code.
    """
    input:
        manifests=[f"{d}/manifest.json" for d in run_dirs()],
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
            f"{RESULTS}/runs/{d}/{m}/seed{s}": run_config(config, d, m, int(s))
            for d in config["datasets"]
            for m in config["methods"]
            for s in config["seeds"]
        },
    script:
        "../scripts/verify_runs.py"


rule analysis_table1_cost:
    """Table 1: params, MACs/sample, upload MB per width for the paper's models and the preset's."""
    input:
        manifests=data_files(config["datasets"], "manifest.json", config["seeds"][:1]),
    output:
        parquet=f"{TABLES}/table1_cost.parquet",
        md=report(
            f"{TABLES}/table1_cost.md",
            caption="../report/table.rst",
            category="Tables",
            subcategory="Table 1 cost",
        ),
    log:
        f"{RESULTS}/logs/analysis/table1_cost.log",
    params:
        caption=table_caption("table1_cost"),
        code=SRC_ANALYSIS,
        models=model_blocks(),
    script:
        "../scripts/table1_cost.py"


rule analysis_table2_datasets:
    """Table 2: dataset summaries of the data stage."""
    input:
        manifests=data_files(config["datasets"], "manifest.json"),
    output:
        parquet=f"{TABLES}/table2_datasets.parquet",
        md=report(
            f"{TABLES}/table2_datasets.md",
            caption="../report/table.rst",
            category="Tables",
            subcategory="Table 2 datasets",
        ),
    log:
        f"{RESULTS}/logs/analysis/table2_datasets.log",
    params:
        caption=table_caption("table2_datasets"),
        code=SRC_ANALYSIS,
    script:
        "../scripts/table2_datasets.py"


rule analysis_method_table:
    """Tables 3, 4, 6, 7: best/final accuracy, peak-to-final delta, avg p (mean and std over seeds), and the
    seeds at the accuracy floor (majority-class rate of the data-stage manifest)."""
    input:
        verified=VERIFIED,
        runs=lambda wc: run_files(
            table_datasets(METHOD_TABLES[wc.table], config["datasets"]),
            METHOD_TABLES[wc.table].methods,
            ("rounds.parquet", "run.json"),
        ),
        manifests=lambda wc: data_files(
            table_datasets(METHOD_TABLES[wc.table], config["datasets"]),
            "manifest.json",
            config["seeds"][:1],
        ),
    output:
        parquet=f"{TABLES}/{{table}}.parquet",
        seeds=f"{TABLES}/{{table}}_seeds.parquet",
        md=report(
            f"{TABLES}/{{table}}.md",
            caption="../report/table.rst",
            category="Tables",
            subcategory="{table}",
        ),
    log:
        f"{RESULTS}/logs/analysis/{{table}}.log",
    params:
        caption=lambda wc: table_caption(wc.table),
        code=SRC_ANALYSIS,
        datasets=config["datasets"],
        methods=config["methods"],
        seeds=config["seeds"],
    script:
        "../scripts/method_table.py"


rule analysis_table5_confound:
    """Table 5 (+ fedavg positive control): correlations and R^2 decomposition of the final H~."""
    input:
        verified=VERIFIED,
        data_clients=data_files(config["datasets"], "clients.parquet"),
        runs=run_files(
            config["datasets"], ("hasfl", "fedavg"), ("clients.parquet", "run.json")
        ),
    output:
        parquet=f"{TABLES}/table5_confound.parquet",
        md=report(
            f"{TABLES}/table5_confound.md",
            caption="../report/table.rst",
            category="Tables",
            subcategory="Table 5 confound",
        ),
    log:
        f"{RESULTS}/logs/analysis/table5_confound.log",
    params:
        caption=table_caption("table5_confound"),
        code=SRC_ANALYSIS,
        datasets=config["datasets"],
        methods=config["methods"],
        seeds=config["seeds"],
    script:
        "../scripts/table5_confound.py"


rule analysis_matched_budget:
    """Section 4.4: hasfl vs random_budget paired by seed (accuracy: t interval and paired test; average
    width: matched by construction, checked against the tolerance, not tested)."""
    input:
        verified=VERIFIED,
        runs=run_files(
            config["datasets"],
            ("hasfl", "random_budget"),
            ("rounds.parquet", "run.json"),
        ),
        manifests=data_files(config["datasets"], "manifest.json", config["seeds"][:1]),
    output:
        parquet=f"{TABLES}/matched_budget.parquet",
        seeds=f"{TABLES}/matched_budget_seeds.parquet",
        md=report(
            f"{TABLES}/matched_budget.md",
            caption="../report/table.rst",
            category="Tables",
            subcategory="Matched budget",
        ),
    log:
        f"{RESULTS}/logs/analysis/matched_budget.log",
    params:
        caption=table_caption("matched_budget"),
        code=SRC_ANALYSIS,
        datasets=config["datasets"],
        methods=config["methods"],
        seeds=config["seeds"],
        ci_level=ANALYSIS_THRESHOLDS["ci_level"],
        tolerance=config["method_params"]["random_budget"]["tolerance"],
    script:
        "../scripts/matched_budget.py"


rule analysis_prop3_coverage:
    """Proposition 3: never-covered coordinates per run and whether they kept their initial value."""
    input:
        verified=VERIFIED,
        runs=run_files(
            config["datasets"],
            config["methods"],
            ("clients.parquet", "init.pt", "final.pt", "run.json"),
        ),
        manifests=data_files(config["datasets"], "manifest.json", config["seeds"][:1]),
    output:
        parquet=f"{TABLES}/prop3_coverage.parquet",
        md=report(
            f"{TABLES}/prop3_coverage.md",
            caption="../report/table.rst",
            category="Tables",
            subcategory="Proposition 3",
        ),
    log:
        f"{RESULTS}/logs/analysis/prop3_coverage.log",
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        caption=table_caption("prop3_coverage"),
        code=SRC_ANALYSIS,
        models=model_blocks(),
        atol=ANALYSIS_THRESHOLDS["f5_atol"],
    script:
        "../scripts/prop3_coverage.py"


rule analysis_table4b_stale_coordinates:
    """Table 4b (Section 4.3): coordinates untrained since t0; accuracy of the capped runs' full model,
    stale coordinates reset to init, and sub-model; the F5 check warmup.pt -> final.pt.
    """
    input:
        verified=VERIFIED,
        runs=run_files(config["datasets"], config["methods"], STALE_RUN_FILES),
        manifests=data_files(config["datasets"], "manifest.json", config["seeds"][:1]),
        raw=[
            f
            for d in config["datasets"]
            for f in raw_files(d, DATA_DIR, config["dataset_params"][d])
        ],
    output:
        parquet=f"{TABLES}/{STALE_TABLE}.parquet",
        md=report(
            f"{TABLES}/{STALE_TABLE}.md",
            caption="../report/table.rst",
            category="Tables",
            subcategory="Table 4b stale coordinates",
        ),
    log:
        f"{RESULTS}/logs/analysis/{STALE_TABLE}.log",
    resources:
        mem_mb=8000 if "emnist" in config["datasets"] else 4000,
        runtime=30,
    params:
        caption=table_caption(STALE_TABLE),
        code=SRC_ANALYSIS,
        models=model_blocks(),
        # the dataset to evaluate on (a mapping, as the data stage's data_cfg)
        data={
            "data_dir": DATA_DIR,
            "dataset_params": {
                d: dict(config["dataset_params"][d]) for d in config["datasets"]
            },
        },
        atol=ANALYSIS_THRESHOLDS["f5_atol"],
    script:
        "../scripts/table4b_stale_coordinates.py"


rule analysis_bn_sensitivity:
    """Batch-norm sensitivity: every run's final model evaluated under each BN statistics mode (per width,
    mixed across widths, test-batch), and each finding's verdict with the final accuracies of the other modes.
    """
    input:
        **FINDINGS_TABLES,
        verified=VERIFIED,
        runs=run_files(config["datasets"], config["methods"], BN_RUN_FILES),
        manifests=data_files(config["datasets"], "manifest.json", config["seeds"][:1]),
        data_tables=data_files(config["datasets"], "partition.parquet")
        + data_files(config["datasets"], "clients.parquet"),
        raw=[
            f
            for d in config["datasets"]
            for f in raw_files(d, DATA_DIR, config["dataset_params"][d])
        ],
    output:
        parquet=f"{TABLES}/{BN_TABLE}.parquet",
        findings=BN_FINDINGS,
        md=report(
            f"{TABLES}/{BN_TABLE}.md",
            caption="../report/table.rst",
            category="Tables",
            subcategory="Batch-norm sensitivity",
        ),
    log:
        f"{RESULTS}/logs/analysis/{BN_TABLE}.log",
    resources:
        mem_mb=8000 if "emnist" in config["datasets"] else 4000,
        runtime=30,
    params:
        caption=table_caption(BN_TABLE),
        code=SRC_ANALYSIS,
        models=model_blocks(),
        data={
            "data_dir": DATA_DIR,
            "dataset_params": {
                d: dict(config["dataset_params"][d]) for d in config["datasets"]
            },
        },
        tables=list(FINDINGS_TABLES),
        datasets=config["datasets"],
        thresholds=ANALYSIS_THRESHOLDS,
    script:
        "../scripts/bn_sensitivity.py"


rule analysis_figure:
    """Figures 2-8 (PNG + PDF) from exactly the run files each one plots."""
    input:
        verified=VERIFIED,
        runs=lambda wc: run_files(
            config["datasets"], FIGURES[wc.fig].methods, FIGURES[wc.fig].run_files
        ),
        data_clients=lambda wc: (
            data_files(config["datasets"], "clients.parquet")
            if FIGURES[wc.fig].data_clients
            else []
        ),
        manifests=lambda wc: (
            data_files(config["datasets"], "manifest.json", config["seeds"][:1])
            if FIGURES[wc.fig].floors
            else []
        ),
    output:
        png=report(
            f"{FIGS}/{{fig}}.png",
            caption="../report/figure.rst",
            category="Figures",
            subcategory="{fig}",
        ),
        pdf=f"{FIGS}/{{fig}}.pdf",
    log:
        f"{RESULTS}/logs/analysis/{{fig}}.log",
    params:
        code=SRC_ANALYSIS,
        fig=lambda wc: {
            "datasets": config["datasets"],
            "methods": config["methods"],
            "seeds": config["seeds"],
            **(
                {"p_min": config["hasfl"]["p_min"], "gamma": config["hasfl"]["gamma"]}
                if wc.fig == "fig2_allocation_rule"
                else {}
            ),
            **(
                {k: config["hasfl"][k] for k in ("warmup", "t_adapt", "t_norm")}
                if wc.fig == "fig4_heterogeneity_allocation"
                else {}
            ),
        },
        caption=lambda wc: figure_caption(wc.fig, FIGURE_CONTEXT),
    script:
        "../scripts/figure.py"


rule analysis_table8_estimators:
    """Table 8 (the paper's Section 5 question): each per-client estimate E0-E3 of the hasfl, fedavg,
    hasfl_probe and hasfl_reported runs against TV and capacity, with the capacity-grouped check of
    hasfl diagnose (permutation test within tiers), per run and pooled over seeds."""
    input:
        verified=VERIFIED,
        data_clients=data_files(config["datasets"], "clients.parquet"),
        runs=run_files(
            config["datasets"],
            TABLE8_METHODS,
            ("clients.parquet", "rounds.parquet", "run.json"),
        ),
        manifests=data_files(config["datasets"], "manifest.json", config["seeds"][:1]),
    output:
        parquet=f"{TABLES}/{TABLE8}.parquet",
        seeds=f"{TABLES}/{TABLE8}_seeds.parquet",
        md=report(
            f"{TABLES}/{TABLE8}.md",
            caption="../report/table.rst",
            category="Tables",
            subcategory="Table 8 estimators",
        ),
    log:
        f"{RESULTS}/logs/analysis/{TABLE8}.log",
    params:
        caption=table_caption(TABLE8),
        code=SRC_ANALYSIS,
        datasets=config["datasets"],
        methods=config["methods"],
        seeds=config["seeds"],
        ci_level=ANALYSIS_THRESHOLDS["ci_level"],
        permutations=TABLE8_PERMUTATIONS,
        permutation_seed=TABLE8_PERMUTATION_SEED,
    script:
        "../scripts/table8_estimators.py"


rule analysis_matched_budget_estimators:
    """Allocation by E2 (hasfl_probe) and E3 (hasfl_reported) vs its matched random-budget control, paired
    by seed (accuracy: t interval and paired test; average width: matched by construction, not tested).
    """
    input:
        verified=VERIFIED,
        runs=run_files(
            config["datasets"],
            [
                m
                for _pair, alloc, control, _e in ESTIMATOR_PAIRS
                for m in (alloc, control)
            ],
            ("rounds.parquet", "run.json"),
        ),
        manifests=data_files(config["datasets"], "manifest.json", config["seeds"][:1]),
    output:
        parquet=f"{TABLES}/{MB_ESTIMATORS_TABLE}.parquet",
        seeds=f"{TABLES}/{MB_ESTIMATORS_TABLE}_seeds.parquet",
        md=report(
            f"{TABLES}/{MB_ESTIMATORS_TABLE}.md",
            caption="../report/table.rst",
            category="Tables",
            subcategory="Matched budget of the estimator methods",
        ),
    log:
        f"{RESULTS}/logs/analysis/{MB_ESTIMATORS_TABLE}.log",
    params:
        caption=table_caption(MB_ESTIMATORS_TABLE),
        code=SRC_ANALYSIS,
        datasets=config["datasets"],
        methods=config["methods"],
        seeds=config["seeds"],
        ci_level=ANALYSIS_THRESHOLDS["ci_level"],
        tolerances={
            control: config["method_params"][control]["tolerance"]
            for _pair, _alloc, control, _e in ESTIMATOR_PAIRS
        },
    script:
        "../scripts/matched_budget_estimators.py"


rule analysis_figure9_estimators:
    """Figure 9 (PNG + PDF): every estimate E0-E3 of the hasfl runs against TV, coloured by capacity tier."""
    input:
        verified=VERIFIED,
        runs=run_files(
            config["datasets"],
            FIGURES[ESTIMATOR_FIGURE].methods,
            FIGURES[ESTIMATOR_FIGURE].run_files,
        ),
        data_clients=data_files(config["datasets"], "clients.parquet"),
    output:
        png=report(
            f"{FIGS}/{ESTIMATOR_FIGURE}.png",
            caption="../report/figure.rst",
            category="Figures",
            subcategory=ESTIMATOR_FIGURE,
        ),
        pdf=f"{FIGS}/{ESTIMATOR_FIGURE}.pdf",
    log:
        f"{RESULTS}/logs/analysis/{ESTIMATOR_FIGURE}.log",
    params:
        code=SRC_ANALYSIS,
        fig={
            "datasets": config["datasets"],
            "methods": config["methods"],
            "seeds": config["seeds"],
            "ci_level": ANALYSIS_THRESHOLDS["ci_level"],
        },
        caption=figure_caption(ESTIMATOR_FIGURE, FIGURE_CONTEXT),
    script:
        "../scripts/fig9_estimators.py"


rule analysis_comparison:
    """comparison.parquet: ours vs the published Tables 1, 3-7 where the preset ran the paper's configuration."""
    input:
        **{n: ANALYSIS_TABLES[n] for n in COMPARISON_TABLES},
        published=str(PUBLISHED_PATH),
    output:
        parquet=f"{RESULTS}/comparison.parquet",
        md=report(
            f"{RESULTS}/comparison.md",
            caption="../report/table.rst",
            category="Comparison with the paper",
        ),
    log:
        f"{RESULTS}/logs/analysis/comparison.log",
    params:
        caption=table_caption("comparison"),
        code=SRC_ANALYSIS,
        tables=COMPARISON_TABLES,
        datasets=config["datasets"],
        comparable=comparability_map(config, load_config()),
        k_std=ANALYSIS_THRESHOLDS["comparison_k_std"],
    script:
        "../scripts/comparison.py"


rule analysis_findings:
    """findings.json: the paper's claims F1-F6, each in its scope, and the estimator findings F7 / F8, with
    a test, margin, power and a three-valued verdict."""
    input:
        **FINDINGS_TABLES,
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
        tables=list(FINDINGS_TABLES),
        datasets=config["datasets"],
        thresholds=ANALYSIS_THRESHOLDS,
    script:
        "../scripts/findings.py"


rule analysis_report:
    """report.md: findings, the estimator section, tables, comparison and figures, readable on its own."""
    input:
        **ANALYSIS_TABLES,
        **{BN_FINDINGS_TABLE: BN_FINDINGS},
        comparison=f"{RESULTS}/comparison.parquet",
        findings=f"{RESULTS}/findings.json",
        figures=[f"{FIGS}/{slug}.png" for slug in FIGURES],
    output:
        md=report(
            f"{RESULTS}/report.md", caption="../report/table.rst", category="Report"
        ),
    log:
        f"{RESULTS}/logs/analysis/report.log",
    params:
        caption="The stand-alone report of this preset: runs at the accuracy floor, findings, every table, the comparison with the paper per table and every figure with its caption.",
        code=SRC_ANALYSIS,
        tables=[*ANALYSIS_TABLES, BN_FINDINGS_TABLE],
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
    script:
        "../scripts/analysis_manifest.py"
