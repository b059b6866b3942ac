"""The tables of the analysis: one entry each (paper Tables 1-7, Proposition 3, Tables 4b and 4c, Table 8,
the matched-budget comparisons, the batch-norm sensitivity, the comparison with the published values)
with its inputs, config values, title and note."""

from __future__ import annotations

from hasfl.analysis.artifacts.spec import Artifact, method_table_entry, table_entry
from hasfl.analysis.specs import ESTIMATOR_PAIRS, FLOOR_TOL_PCT, TABLE8_METHODS, nested_scope_note
from hasfl.registry import METHODS

__all__ = ["FINDING_TABLES", "FLOOR_NOTE", "PERSONAL_METHODS", "STD_NOTE", "SUBMODEL_METHODS", "TABLE_ENTRIES"]

#: The tables findings.json reads (hasfl.analysis.findings: each finding's tables); the batch-norm
#: sensitivity recomputes the findings from the same files.
FINDING_TABLES = ("table5_confound", "prop3_coverage", "table4b_stale_coordinates", "table3_allocation_seeds",
                  "table4_coverage_seeds", "table6_full_model_seeds", "table7_shakespeare_seeds",
                  "matched_budget_seeds", "table8_estimators_seeds", "matched_budget_estimators_seeds",
                  "submodel_accuracy", "table10_inheritance")

#: The methods whose runs' sub-models are evaluated (F9's sub-model unit): Table 4's, the registry methods shown in
#: it (the rolling and sampled windows), and Uniform.
SUBMODEL_METHODS = tuple(dict.fromkeys(("hasfl", "hasfl_nocov", "heterofl",
                                        *(m for m, i in METHODS.items() if "table4_coverage" in i.shown_in),
                                        "uniform")))

#: The methods whose clients keep local models that their authors evaluate client by client on each client's own
#: test split (FedLPS: :mod:`hasfl.analysis.per_run.personal_accuracy`).
PERSONAL_METHODS = ("fedlps",)

#: Titles and notes of the tables (report.md, the table .md files and Snakemake's HTML report).
STD_NOTE = ("Mean +- sample standard deviation (ddof = 1) over the completed seeds; accuracies and the "
            "peak-to-final delta (final - best) in percentage points.")


#: The floor column of the method tables, in one sentence.
FLOOR_NOTE = (f"Floor: in how many seeds the best accuracy of any round stayed within {FLOOR_TOL_PCT:g} points "
              "(or one test example) of the test set's majority-class rate (Table 2), i.e. the run never predicted "
              "better than the most common class.")

#: The tables, in report order (report.md's table section; the comparison last).
TABLE_ENTRIES: tuple[Artifact, ...] = (
    table_entry(
        "table1_cost", "hasfl.analysis.tables.table1_cost:compute",
        title='Table 1 -- Per-client cost as a function of sub-model width p',
        note=('Exact counts from the models (hasfl.models): params = trainable parameters of the width-p '
              'sub-model, MACs per sample (conv + linear), upload = one float32 copy of the sub-model (1 MB = 10^6 '
              'bytes); k = thousand, M = million, each model in the unit of its full width. `paper` rows are the '
              "paper's three models; `preset` rows the preset's own model configuration."),
        manifests="first",
        params=("models",),
        label="Table 1 cost",
    ),
    table_entry(
        "table2_datasets", "hasfl.analysis.tables.table2_datasets:compute",
        title='Table 2 -- Datasets',
        note=("From the data stage's manifest.json summaries. Majority class: accuracy of always predicting the "
              "test set's most common class; chance: 1 / classes. A run that never beats the majority class rate "
              'by more than the floor tolerance is flagged `at floor` in every table and figure.'),
        manifests="all",
        label="Table 2 datasets",
    ),
    method_table_entry("table3_allocation", 3, "Table 3 -- Sub-model allocation strategies", ("hasfl", "fjord", "uniform"), "image", results_page=1),
    method_table_entry("table4_coverage", 4, "Table 4 -- Coverage-guarantee ablation", ("hasfl", "hasfl_nocov", "heterofl"), "all", results_page=2),
    table_entry(
        "table5_confound", "hasfl.analysis.tables.table5_confound:compute",
        title='Table 5 -- Correlations of the final estimates H~ with TV and pmax (+ fedavg control)',
        note=('Per run, over the clients: Pearson r, partial r given pmax (correlation of OLS residuals), and the '
              'OLS R^2 / adjusted R^2 of log H~ on the capacity tier (categorical), on TV and on both. fedavg rows '
              '(equal widths) are the positive control.'),
        methods=("hasfl", "fedavg"),
        run_files=("clients.parquet", "run.json"),
        data_clients=True,
        params=("datasets", "methods", "seeds", "attenuation"),
        results_page=3,
        label="Table 5 confound",
    ),
    table_entry(
        "table10_inheritance", "hasfl.analysis.tables.table10_inheritance:compute",
        title="Table 10 -- Who inherits the confound: E0 against capacity and the data, every method (Section 4.7)",
        note=("Per run of every method, over the clients: r(E0, pmax), partial r(E0, TV | pmax) and r(E0, TV), E0 the "
              "paper's update divergence (Eqs. 4-5; every run logs it, whatever trained it). Population: sub-model "
              "(widths follow capacity) or equal widths (every client trains the full model). Read by F10a / F10b; "
              "no run is trained or evaluated for it."),
        methods=tuple(METHODS),
        run_files=("clients.parquet", "run.json"),
        data_clients=True,
        params=("datasets", "methods", "seeds"),
        label="Table 10 inheritance",
    ),
    method_table_entry("table6_full_model", 6, "Table 6 -- Comparison with full-model methods", ("fedavg", "scaffold", "fedprox", "hasfl", "random_budget"), "all", results_page=4),
    method_table_entry("table7_shakespeare", 7, "Table 7 -- Allocation strategies on Shakespeare", ("hasfl", "fjord", "uniform"), "text", results_page=5),
    table_entry(
        "matched_budget", "hasfl.analysis.tables.matched_budget:compute",
        title='Matched budget -- HAS-FL vs random-budget, paired by seed (Section 4.4)',
        note=('Differences hasfl - random_budget over the seeds where both completed. Final accuracy: Student-t '
              'interval and paired t-test. Average width: random_budget draws its widths to match the hasfl run of '
              'the same seed, so equal widths are a property of the design, not a result; the difference is '
              'checked against the matching tolerance (`method_params.random_budget.tolerance`) and not tested.'),
        methods=("hasfl", "random_budget"),
        run_files=("rounds.parquet", "run.json"),
        manifests="first",
        params=("datasets", "methods", "seeds", "ci_level", "tolerance"),
        seeds_file=True,
        results_page=6,
        label="Matched budget",
    ),
    table_entry(
        "prop3_coverage", "hasfl.analysis.tables.prop3_coverage:compute",
        title='Proposition 3 -- never-covered coordinates of the capped runs',
        note=('Only runs capped below full width are shown: p_hi = largest width any client trained '
              '(clients.parquet p_max_trained) < 1. Coordinates outside the width-p_hi mask were trained by no '
              'client; prop3_holds: all of them equal init.pt. A run with p_hi = 1 has no such coordinate and '
              'nothing to check (counted below the table; every run is in the Parquet file). A run whose server '
              'adds noise to every coordinate each round (FedLPS with method_params.fedlps.noise > 0) cannot show '
              'it and is left out, named below the table. ' + nested_scope_note()),
        all_methods=True,
        run_files=("clients.parquet", "init.pt", "final.pt", "run.json"),
        manifests="first",
        params=("models", "atol", "server_noise"),
        heavy=True,
        nested_only=True,
        label="Proposition 3",
    ),
    table_entry(
        "table4b_stale_coordinates", "hasfl.analysis.tables.table4b_stale_coordinates:compute",
        title='Table 4b -- coordinates untrained since the warm-up, capped runs (Section 4.3)',
        note=('Only runs capped after t0 are shown (every run is in the Parquet file). Per run: p_hi_after_t0 = '
              'largest width any participant trained after the warm-up round t0 (clients.parquet '
              'p_max_trained_after_warmup); coordinates outside that width (stale) were trained by no one since '
              't0. frozen_since_t0: all of them equal in warmup.pt and final.pt (F5). For runs capped after t0, '
              'test accuracy (%) of the full final model, of the same model with the stale coordinates reset to '
              'init.pt, and of its sub-model at width p_hi_after_t0 (stale coordinates dropped); acc_logged_pct is '
              "the run's own final evaluation; final_at_floor: it is within the floor tolerance of the test set's "
              'majority-class rate. ' + nested_scope_note()),
        all_methods=True,
        run_files=("clients.parquet", "init.pt", "warmup.pt", "final.pt", "run.json"),
        manifests="first",
        raw=True,
        params=("models", "data", "atol"),
        heavy=True,
        nested_only=True,
        summary="hasfl.analysis.tables.table4b_stale_coordinates:summary",
        section="What the coverage ablation shows (Table 4b)",
        results_page=7,
        label="Table 4b stale coordinates",
        per_run="hasfl.analysis.per_run.stale_coordinates:evaluate_run",
    ),
    table_entry(
        "table4c_coverage_over_time", "hasfl.analysis.tables.table4c_coverage_over_time:compute",
        title="Table 4c -- coordinates trained in the last k rounds, per method (this project's extension)",
        note=("Every method, rolling windows included (Sections 4.2-4.3's coverage, Proposition 3's untrained "
              "coordinates). Per run, from its participation.parquet (each participant's trained width p_trained "
              "and window per round): the fraction of the global model's parameter coordinates (the full model's "
              "named_parameters(); batch-norm running statistics are no trained coordinates) inside the slice of at "
              "least one participant of the last k rounds (rounds R-k+1 .. R, R the run's last round; all R rounds "
              "when R < k, named below the table) and of any round after the warm-up round t0 (run.json t0; "
              "ledger rounds r >= t0 + 2, Algorithm 1's rounds t > t0). A prefix window (Algorithm 2) trains the "
              "leading ceil(p C) units of every layer, a rolling one (FedRolex) the units from (C - shift mod C) "
              "mod C on, wrapping around, a sampled one (FedEcover) the participant's own units, replayed from the "
              "run's seed and draws. Shown per dataset and method: means over the completed seeds of the "
              "overall fractions, the mean of each run's smallest block fraction in the last k rounds and the "
              "block with the smallest mean (a block: one layer's parameters, e.g. convs.0 = its weight and "
              "bias, bns.0, fc1, embed, lstm.l0), Zhou et al.'s (NeurIPS 2023) minimum coverage index (the fewest "
              "participants of one round holding a parameter coordinate, over every round and coordinate) and "
              "the largest per-layer coefficient of variation of how many participants held each unit over the "
              "run. A FIARSE run (window masked: a magnitude mask per participant, recomputed from the weights) "
              "has its per-round columns from the kept counts in its ledger; which coordinates a mask held is not "
              "in the ledger and cannot be replayed, so its fractions over the last k rounds and after t0, its "
              "blocks and its unit counts are shown as --. A shuffled-partition run (window partition/K: each "
              "participant holds one of K blocks of coordinates fixed from the seed, Deng et al. 2025) has every "
              "coverage column exact from its ledger and K; a block is coordinates, not units, so its unit counts "
              "are shown as --. Per-run and per-block rows, with the counts, are in the Parquet file."),
        all_methods=True,
        run_files=("participation.parquet", "run.json", "init.pt"),
        manifests="first",
        params=("models", "last_rounds"),
        results_page=8,
        label="Table 4c coverage over time",
        per_run="hasfl.analysis.per_run.coverage_over_time:evaluate_run",
    ),
    table_entry(
        "submodel_accuracy", "hasfl.analysis.tables.submodel_accuracy:compute",
        title="Sub-model accuracy -- the sub-models the last round's participants held (this project's extension)",
        note=("Per run of a method of Table 4 or of Uniform: the mean over the participants of the run's last round "
              "(participation.parquet) of the test accuracy (%) of the sub-model each held -- its trained width "
              "p_trained and its window (prefix: the leading units; rolling: FedRolex's window at its shift; sampled: "
              "FedEcover's units replayed from the run's seed; masked: FIARSE's magnitude mask at its share; "
              "partition/K: its block of the shuffled partition, the other coordinates 0) -- cut from the final global"
              " model (final.pt) and evaluated under the method's declared batch-norm rule (registry eval_bn: "
              "per_width uses that width's statistics, gathered at the window's channels for a non-nested run; batch "
              "the test batch's; static recomputes them over the train data of the clients allowed that width). bn "
              "used: the rule applied (batch where the declared one cannot apply, named below the table). Each "
              "participant counts once. F9b-F9g's sub-model units read this table (docs/decisions.md, the section on "
              "F9's sub-model unit); per-run rows, with min / max over the participants, are in the Parquet file."),
        methods=SUBMODEL_METHODS,
        run_files=("participation.parquet", "final.pt", "run.json"),
        manifests="first",
        data_tables=True,
        raw=True,
        params=("models", "data"),
        heavy=True,
        label="Sub-model accuracy",
        per_run="hasfl.analysis.per_run.submodel_accuracy:evaluate_run",
    ),
    table_entry(
        "personal_accuracy", "hasfl.analysis.tables.personal_accuracy:compute",
        title="FedLPS's own evaluation -- each client's own model on its own test split (Xue et al. 2025)",
        note=("Per run of a method whose clients keep local models (FedLPS): every client of the federation with "
              "the local model it kept (its last local training at a rate above 1/4, local_models.pt), else the "
              "final global model, on its own test split, with test-batch statistics in batches of the local batch "
              "size, as FedLPS's official code evaluates (FedLPS.py:240-275, Hetero_Client.py:113-115, 258-267). A "
              "client's split: its own test samples where the data stage has them (Shakespeare's roles); on an image "
              "dataset, for each label of its train split as many test samples of that label as it has train "
              "samples of it, drawn from the run's seed and its id (clients may share test samples, as in the "
              "official split). Each run's number is the unweighted mean over its clients (the official report), "
              "then mean +- sd over the completed seeds; beside it, the final global model on the same splits and "
              "the difference. This is a personalized estimand: it is not compared with any method's global model "
              "on the full test set (Tables 3-7, 4c and the findings compare global models only). Per-client rows "
              "are in the Parquet file."),
        methods=PERSONAL_METHODS,
        run_files=("local_models.pt", "final.pt", "run.json"),
        manifests="first",
        data_tables=True,
        raw=True,
        params=("models", "data"),
        heavy=True,
        results_page=11,
        label="FedLPS own evaluation",
        per_run="hasfl.analysis.per_run.personal_accuracy:evaluate_run",
    ),
    table_entry(
        "table8_estimators", "hasfl.analysis.tables.table8_estimators:compute",
        title="Table 8 -- Capacity-separable estimators against TV and capacity (this project's extension)",
        note=('Per dataset, run method and estimate E (E0 update divergence, E1 its within-tier z-score, E2 '
              'fixed-width probe divergence, E3 reported label histograms), over the clients of each run and '
              "pooled over the seeds in Fisher's z (fixed effect; weights n - 3, n - 4 for the partial "
              'correlation) with intervals at the configured level: r(E, TV), r(E, pmax), partial r(E, TV | pmax), '
              'and the within-tier r(E, TV) (pooled over tiers, then seeds); adjusted R^2 of E on the capacity '
              'tier (categorical) and on TV (mean over seeds); the verdicts of the capacity-grouped check (hasfl '
              'diagnose: permutation test of TV within tiers) per run. hasfl runs: sub-model widths follow '
              'capacity; fedavg runs: every client trains the full model (the positive control). Per-run rows in '
              'the _seeds file.'),
        methods=TABLE8_METHODS,
        run_files=("clients.parquet", "rounds.parquet", "run.json"),
        data_clients=True,
        manifests="first",
        params=("datasets", "methods", "seeds", "ci_level", "permutations", "permutation_seed"),
        seeds_file=True,
        summary="hasfl.analysis.tables.table8_estimators:summary",
        section="Capacity-separable estimators (Table 8, F7, F8, Figure 9)",
        results_page=9,
        label="Table 8 estimators",
    ),
    table_entry(
        "matched_budget_estimators", "hasfl.analysis.tables.matched_budget_estimators:compute",
        title=('Matched budget of the estimator methods -- allocation by E2 / E3 vs its random-budget control, '
               'paired by seed'),
        note=('Differences (allocating method - its random-budget control) over the seeds where both completed, '
              'per dataset and pair: hasfl_probe vs random_budget_probe (Eq. 6 fed by E2) and hasfl_reported vs '
              'random_budget_reported (fed by E3). Final accuracy: Student-t interval and paired t-test (F8 tests '
              'it); average width: matched by construction within method_params.<control>.tolerance, not tested.'),
        methods=tuple(m for _pair, alloc, control, _e in ESTIMATOR_PAIRS for m in (alloc, control)),
        run_files=("rounds.parquet", "run.json"),
        manifests="first",
        params=("datasets", "methods", "seeds", "ci_level", "tolerances"),
        seeds_file=True,
        label="Matched budget of the estimator methods",
    ),
    table_entry(
        "bn_sensitivity", "hasfl.analysis.tables.bn_sensitivity:compute",
        title='Batch-norm sensitivity -- final accuracy of every run under each BN statistics mode',
        all_methods=True,
        run_files=("final.pt", "run.json"),
        manifests="first",
        data_tables=True,
        raw=True,
        tables=FINDING_TABLES,
        extra_outputs=("bn_sensitivity_findings",),
        params=("models", "data", "datasets", "thresholds"),
        heavy=True,
        in_tables_section=False,
        summary="hasfl.analysis.tables.bn_sensitivity:summary",
        section="Batch-norm sensitivity",
        results_page=10,
        label="Batch-norm sensitivity",
        per_run="hasfl.analysis.per_run.bn_sensitivity:evaluate_run",
    ),
    table_entry(
        "comparison", "hasfl.analysis.tables.comparison:compute",
        title='Comparison with the published values (Tables 1, 3-7)',
        note=("One row per published value (Tables 1, 3-7) of a dataset this preset ran: ours, the paper's, and "
              'whether ours lies within the published mean +- k std (Table 1: rounds to the printed value). Table '
              "1's model costs are comparable at any preset; the results of Tables 3-7 only where the preset ran "
              "the paper's configuration (the others are listed as not comparable, with the config keys that "
              'differ).'),
        folder="",
        published=True,
        tables=("table1_cost", "table3_allocation", "table4_coverage", "table5_confound", "table6_full_model", "table7_shakespeare"),
        params=("datasets", "comparable", "k_std"),
        in_tables_section=False,
        summary="hasfl.analysis.tables.comparison:summary",
        section="Comparison with the published values",
        summary_after=True,
        label="Comparison with the paper",
    ),
)
