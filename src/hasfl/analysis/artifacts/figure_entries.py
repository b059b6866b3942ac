"""The figures of the analysis: one entry each (paper Figures 2-8, this project's Figure 9) with its
caption template (:func:`hasfl.analysis.artifacts.figure_caption` fills in the preset's numbers)."""

from __future__ import annotations

from hasfl.analysis.artifacts.spec import Artifact, figure_entry
from hasfl.registry import METHODS

#: The paper's methods in Figure 6, then every other method of the registry: a page's frontier draws every method
#: its folder ran (the figure's job keeps those the preset runs).
_FRONTIER = ("fedavg", "scaffold", "fedprox", "hasfl", "random_budget", "fjord", "heterofl", "uniform", "hasfl_nocov")
#: The paper's three allocation strategies in Figure 3, then the extraction methods of finding F9 (not nested).
_CONVERGENCE = ("hasfl", "fjord", "uniform")

__all__ = ["FIGURE_ENTRIES"]

_BAND = ("Lines: mean over the {n_seeds} seeds; shaded band: plus or minus one sample standard deviation over "
         "the seeds (the seed-to-seed spread, not a confidence interval). ")
_FLOOR_LINES = ("Grey dashed line: the majority-class rate of the test set (always predicting its most common "
                "class); grey dotted line: the chance rate (1 / number of classes). ")
_FLOOR_LABEL = ("A legend entry ending in \"at floor, k of n seeds\" marks a method whose best accuracy in any round "
                "stayed within {floor_tol} points of the majority-class rate in k of its n seeds: those runs learned "
                "nothing beyond the class frequencies. Dashed curve with hollow markers: every seed at the floor; "
                "half-filled markers: some seeds. ")
_MARKERS = ("Each method has its own marker shape, placed on different rounds for different methods, so that "
            "coinciding curves stay visible. ")


#: The paper's Figures 2-8 and this project's Figure 9, in report order.
FIGURE_ENTRIES: tuple[Artifact, ...] = (
    figure_entry(
        "fig2_allocation_rule", 2, "HAS-FL allocation rule", (), (),
        "The allocation rule of HAS-FL (Definition 2) at this preset's settings, not a result of training: the "
        "width a client is allocated, p = min(pmax, p_min + gamma H / H_bar), against its heterogeneity estimate "
        "relative to the population mean, H / H_bar, for three capacities pmax (the largest width the client's "
        "device can train). The width grows linearly with the estimate and stops at the client's capacity. "
        "Dashed line: p_min = {p_min}; gamma = {gamma}. Not shown: the coverage guarantee, which keeps the "
        "highest-capacity clients at full width.",
        params=("p_min", "gamma")),
    figure_entry(
        "fig3_convergence_allocation", 3, "Convergence of allocation strategies",
        (*_CONVERGENCE, *(m for m, info in METHODS.items() if not info.nested and m not in _CONVERGENCE)),
        ("rounds.parquet", "run.json"),
        "Test accuracy after every evaluated round of the three sub-model allocation strategies, one panel per "
        "dataset: HAS-FL (allocation by heterogeneity estimate and capacity), FjORD (random capacity tier) and "
        "Uniform (p = min(0.5, pmax) for every client), and of the extraction methods of finding F9 (FedRolex, "
        "Uniform (rolling), FedEcover, FIARSE) where the preset runs them. " + _BAND + _FLOOR_LINES + _FLOOR_LABEL + _MARKERS
        + "The paper (Section 4.2, CIFAR-10 and EMNIST, 200 rounds) reports HAS-FL and FjORD indistinguishable "
        "and Uniform falling from its peak; this preset's datasets, models and rounds differ, so the curves "
        "show this preset's behaviour, not a reproduction of the paper's numbers.",
        floors=True, results_page=2),
    figure_entry(
        "fig4_heterogeneity_allocation", 4, "Mean heterogeneity estimate and allocation",
        ("hasfl",), ("rounds.parquet",),
        "What HAS-FL's estimator and allocation do over the rounds, one column per dataset. Top: the smoothed "
        "heterogeneity estimate H~ (Eq. 5) averaged over all clients. Bottom: the mean allocated width p of the "
        "round's participants; dashed: the mean capacity pmax over all clients, the width every client would "
        "get at its cap. " + _BAND + "Grey shading at the left: the warm-up, rounds 1 to t0 = {warmup}, in "
        "which every client trains at its capacity and the estimate is not updated. After it the estimate is "
        "updated, and the widths reallocated, only every T_adapt = {t_adapt} rounds (thin vertical lines), so "
        "the estimate moves in steps; every T_norm = {t_norm} rounds it is rescaled to mean 1 (dotted vertical "
        "lines), which makes it fall back. The mean width moves from round to round even between "
        "reallocations because a different subset of clients takes part in each round.",
        data_clients=True, params=("warmup", "t_adapt", "t_norm")),
    figure_entry(
        "fig5_final_allocation", 5, "Final per-client allocation vs capacity", ("hasfl",), ("clients.parquet",),
        "Final allocation of every client in the HAS-FL runs, one panel per dataset and seed. Grey bar: the "
        "client's capacity pmax (the largest width its device can train); blue bar: the width HAS-FL allocated "
        "to it after the last reallocation. Where the blue bar fills the grey one the client sits at its "
        "capacity. Clients are in ID order; capacities are assigned per seed. The paper (Section 4.4) reports "
        "that the allocations follow the capacity tiers rather than the clients' data."),
    figure_entry(
        "fig6_frontier", 6, "Accuracy-capacity frontier",
        (*_FRONTIER, *(m for m in METHODS if m not in _FRONTIER)), (),
        "Final test accuracy of every method (each run's final model under its method's declared batch-norm rule, "
        "as the findings read it: tables/bn_sensitivity.parquet) against what it costs a client, one column per "
        "dataset. Top: "
        "against the average width trained and uploaded per client-round (filled marker); a cross joined to it "
        "by a thin line marks the average width allocated, which differs for FjORD (its clients train at "
        "their capacity and distil the allocated width) and for FIARSE where a preset runs it (it trains the whole "
        "model under a magnitude mask of the allocated share). Bottom: against the mean upload per client-round in "
        "MB (cost model of Table 1). Error bars: plus or minus one sample standard deviation over the "
        "{n_seeds} seeds, on both axes. Hollow marker: every seed failed to train as the findings read it (its "
        "accuracy never rose more than {floor_tol} points above the majority-class rate, grey dashed line, and its "
        "final model under the declared rule not above it either; dotted: chance rate); half-filled: some "
        "seeds. Points that would "
        "hide each other (same cost, nearly the same accuracy: e.g. the full-model methods at width 1) are spread "
        "sideways by 3% of the axis width per point; that offset is not part of the data.",
        tables=("table3_allocation_seeds", "table4_coverage_seeds", "table6_full_model_seeds",
                "table7_shakespeare_seeds", "bn_sensitivity"), results_page=1),
    figure_entry(
        "fig7_convergence_full_model", 7, "Convergence vs full-model methods",
        ("hasfl", "fedavg", "scaffold", "fedprox"), ("rounds.parquet", "run.json"),
        "Test accuracy after every evaluated round of HAS-FL (sub-models, about half the width on average) and "
        "of three full-model methods: FedAvg, SCAFFOLD (control variates) and FedProx (proximal term), one "
        "panel per dataset. " + _BAND + _FLOOR_LINES + _FLOOR_LABEL + _MARKERS
        + "The paper (Section 4.5) reports full-model training above HAS-FL on CIFAR-10 and EMNIST; this "
        "preset's datasets, models and rounds differ.",
        floors=True),
    figure_entry(
        "fig8_test_loss", 8, "Test-loss trajectories",
        ("hasfl", "fedavg", "scaffold", "fedprox"), ("rounds.parquet", "run.json"),
        "Test loss (mean cross-entropy on the test set) after every evaluated round of the methods of Figure 7, "
        "one panel per dataset. " + _BAND + _FLOOR_LABEL.replace("best accuracy", "best test accuracy")
        + _MARKERS + "A loss that falls while the accuracy stays at the floor means the model is learning the "
        "class frequencies, not the task.",
        floors=True),
    figure_entry(
        "fig10_inheritance", 10, "Who inherits the confound: E0 of every method against capacity and the data",
        tuple(METHODS), (),
        "Section 4.7 (who inherits the confound). One row per method the preset ran, one row of panels per dataset. "
        "Left: each run's correlation, over its clients, of the update-divergence estimate E0 (Eqs. 4-5, which "
        "every run logs whatever method trained it) with the client's capacity pmax (small dots, one per seed) and "
        "the mean over the seeds (diamond); the grey band is the equivalence margin inside which F10a / F10b call "
        "a method uncoupled from capacity. Right: the partial correlation of E0 with the client's true label "
        "heterogeneity TV given pmax, the data signal left once capacity is held fixed. Colour: sub-model methods "
        "(a client's width follows its capacity) or equal widths (every client trains the full model). The "
        "verdicts, pooled over the seeds with intervals, are F10a and F10b's.",
        tables=("table10_inheritance",), params=("thresholds",), results_page=4),
    figure_entry(
        "fig9_estimators", 9, "Which estimate tracks the data and which tracks capacity",
        ("hasfl",), ("clients.parquet", "run.json"),
        "This project's extension (the paper's Section 5 asks which data statistics can be recovered when "
        "sub-model width varies with the device). Every point is one client of a HAS-FL run (all {n_seeds} "
        "seeds in one panel): horizontal axis, the client's true label heterogeneity (total-variation "
        "distance of its label distribution from the global one, computed from the partition); vertical "
        "axis, one estimate of it, one column per estimate and one row per dataset. E0: the paper's update "
        "divergence (Eqs. 4-5); E1: E0 standardised within each capacity tier; E2: the same divergence "
        "measured on probe updates of one fixed width for every client; E3: the distance of the label "
        "histogram the client reports. Colour: the client's capacity pmax (the largest width its device "
        "can train). Thin lines: least-squares fit within each capacity tier. How to read it: an estimate "
        "that tracks capacity separates the colours into horizontal bands whatever the truth; one that "
        "tracks the data rises from left to right within every colour. Panel titles: r(E, pmax) and the "
        "partial correlation r(E, TV | pmax), pooled over the seeds in Fisher's z, with their {ci_level} "
        "intervals, and how many runs the capacity-grouped check (a permutation test of TV within the "
        "capacity tiers, as hasfl diagnose does) calls confounded, data signal or inconclusive: the same "
        "numbers as Table 8. E0 and E2 are drawn on a log scale; in the E3 panel the dotted diagonal is "
        "E3 = TV (with exact label counts the reported histograms give the truth itself).",
        data_clients=True, tables=("table8_estimators",), params=("ci_level",), results_page=3,
        page_fallback="fig5_final_allocation"),
)
