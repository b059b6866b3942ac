"""What a reader sees of the verdicts (issue 45 points 4, 7, 8): the summary's counts equal the findings table's,
the table says what its intervals are and escapes `|`, the rule text names every finding it gates, a run that failed
to train is named at the top, a two-seed correlation with a large spread gets a wide interval, and a Shakespeare
run at the floor is caught by F9's never-learned rule. In-process, on the hand-made tables of test_findings."""

from __future__ import annotations

import re

import pytest
from test_findings import DATASETS, SEEDS, base_tables, evaluate, frame, replace, seeds, t5, unit

from hasfl.analysis import findings as F
from hasfl.analysis.findings.kernel import VERDICT_RULES
from hasfl.analysis.provenance import summary_block
from hasfl.analysis.results_page import _findings_table, failed_lines


def _table_verdicts(lines: list[str]) -> list[str]:
    rows = [line for line in lines if line.startswith("| F")]
    return [re.search(r"\*\*(.+?)\*\*", r).group(1) for r in rows]


def _findings(tables) -> list[dict]:
    return list(evaluate(tables).values())


def test_the_summary_counts_equal_the_findings_table():
    """Every finding of the table counted once, a statistic two findings share (F7-E0 / F1c) included, mixed as
    often as the table shows it: the tally adds up to the findings tested."""
    items = _findings(base_tables())
    items[0] = {**items[0], "verdict": "mixed"}
    items[1] = {**items[1], "same_statistic_as": items[0]["id"], "verdict": "mixed"}
    items.append(dict(_split_f9c()[F.F9C], id="F9c-split"))  # a split finding: each estimand's verdict in its cell
    table = ["split by estimand" if "; " in v else v for v in _table_verdicts(_findings_table(items))]
    summary = summary_block(items, "snakemake all", 54, 0.2)
    tally = next(line for line in summary if line.startswith("Verdicts: "))
    counts = {v: int(n) for n, v in re.findall(
        r"(\d+) (supported|contradicted|inconclusive|mixed|split by estimand|not run)", tally.split(" (every")[0])}
    assert sum(counts.values()) == len(table) == len(items)
    assert counts == {v: table.count(v) for v in set(table)} and counts["mixed"] == 2
    assert counts["split by estimand"] == 1 and "The split findings' estimands: 1 contradicted, 1 inconclusive" in tally
    assert f"{len(items)} findings tested" in "\n".join(summary)


def test_the_findings_table_says_what_its_intervals_are_and_escapes_pipes():
    items = _findings(base_tables())
    items[0] = {**items[0], "claim": "a claim with a | inside", "reason": "r | s"}
    lines = _findings_table(items, 0.95, 0.8)
    assert "value [two-sided 90% interval, whose ends are the one-sided 95% bounds]" in lines[0]
    assert "one-sided interval]" not in lines[0]
    header_cells = lines[0].count(" | ")
    row = next(line for line in lines if line.startswith(f"| {items[0]['id']}"))
    assert "a claim with a \\| inside" in row and row.replace("\\|", "").count(" | ") == header_cells
    assert "interval, whose ends are the one-sided 97.5% bounds" in _findings_table(items, 0.975, 0.9)[0]


def test_the_rule_text_names_every_finding_read_at_the_horizon():
    """Every finding with a final-accuracy unit (one that carries a gap trend) is named in the rules the pages
    print, F9b-F9g as a range."""
    named = set(re.findall(r"\b(F\d[a-z]?(?:-[a-z]+)?)\b", VERDICT_RULES))
    for first, last in re.findall(r"\bF9([a-z])-F9([a-z])\b", VERDICT_RULES):  # a range names every letter in it
        named |= {f"F9{chr(c)}" for c in range(ord(first), ord(last) + 1)}
    with_trend = {f["id"] for f in _findings(base_tables())
                  if any("gap_trend" in u or any("gap_trend" in p for p in u.get("parts", [])) for u in f["units"])}
    assert with_trend >= {"F3", "F3-shakespeare", "F4", "F9b", "F9c", "F9d"}
    assert with_trend <= named, with_trend - named
    assert "F8" in VERDICT_RULES and "failed to train at this budget" in VERDICT_RULES


def test_a_run_that_failed_to_train_is_named_at_the_top_of_the_page():
    t = replace(base_tables(), F.T6S, "cifar10", "hasfl",
                seeds("cifar10", "hasfl", final=[10, 76, 73], floor=[True, False, False]))
    items = _findings(t)
    u = unit(next(f for f in items if f["id"] == F.F4), "cifar10")
    assert u["gate_kind"] == "failed_to_train" and u["failed_runs"] == [
        {"dataset": "cifar10", "method": "hasfl", "seed": SEEDS[0], "why": "at the majority-class floor"}]
    lines = failed_lines(items, "quick")
    assert lines[0] == "## Failed to train at this budget" and "evidence about the regime" in lines[2]
    row = next(line for line in lines if line.startswith("| cifar10 | hasfl |"))
    assert f"| {SEEDS[0]} |" in row and "F4 cifar10" in row
    assert failed_lines(_findings(base_tables()), "quick") == []


def test_a_two_seed_correlation_with_a_large_spread_gets_a_wide_interval():
    """Two seeds whose correlations disagree (0.1 and 0.7 over 100 clients each): the fixed effect's interval is the
    clients' (narrow, it would call F6 supported); the random-effects interval has the seeds' spread in it."""
    t = replace(base_tables(), F.T5, "cifar10", "fedavg",
                [r for r in t5("fedavg", "cifar10", r_h_tv=[0.1, 0.7, 0.0]) if r["seed"] != SEEDS[2]])
    u = unit(evaluate(t)[F.F6], "cifar10")
    fe = u["fixed_effect"]
    assert u["n"] == 2 and fe["low"] > 0.3  # the clients alone: a tight interval well above the margin 0
    assert (u["high"] - u["low"]) > 3 * (fe["high"] - fe["low"]) and u["low"] < 0.0 and u["verdict"] == F.INCONCLUSIVE
    assert u["tau2"] > 0 and "random effects over 2 seeds" in u["pooling"]


def test_a_shakespeare_run_at_the_floor_is_caught_by_the_never_learned_rule():
    """Predicting character frequencies lowers the loss below ln K without lifting the accuracy: the accuracy against
    the floor catches it (F9b on Shakespeare). The run is the claimed-better arm's while Uniform learned: the claim
    fails at this budget (contradicted, scoped so), where before it was withheld like a failing baseline."""
    rows = seeds("shakespeare", "uniform_rolling", final=[18, 41, 40], decay=[0.1, 0.2, 0.1], p_trained=[0.44] * 3,
                 floor=[True, False, False], min_loss=[2.9, 2.0, 2.1])
    for r in rows:
        r["chance_pct"] = 100 / 80  # 80 characters: ln K = 4.38, 0.95 ln K = 4.16 > 2.9
    t = replace(base_tables(), F.T4S, "shakespeare", "uniform_rolling", rows)
    u = unit(evaluate(t)[F.F9B], "shakespeare")
    assert u["verdict"] == F.CONTRADICTED and u["gate_kind"] == "failed_to_train"
    assert "uniform_rolling, the method claimed better, failed to train (seeds 42: at the majority-class floor)" \
        in u["reason"]
    assert "lowest training loss" not in u["reason"]


@pytest.mark.parametrize("datasets", [DATASETS])
def test_base_tables_stay_decided(datasets):
    """The fixture every page test uses stays decided under the random-effects pooling (100 clients a run); F9f / F9g
    compare at each client's capacity, which the fixture's fedecover / fiarse runs (at Uniform's widths) are not
    (tests/test_findings.py: test_every_finding_supported_on_the_base_tables_and_fully_described)."""
    res = evaluate(base_tables(), datasets=datasets)
    assert all(f["verdict"] == F.SUPPORTED for k, f in res.items() if k not in (F.F9F, F.F9G))
    assert frame([]).empty


def test_seeds_needed_for_a_random_effects_correlation_use_its_t_reference():
    """An inconclusive pooled correlation of 3 seeds (the quick page's F6 on digits: 0.415, se 0.13 in z) never
    'needs' the 3 seeds it already has: under random effects the interval is on t with seeds - 1 df, so the plan
    counts the seeds at which t_{1-alpha, n-1} + t_{power, n-1} standard errors fit between the estimate and the
    margin (the normal reference answered 3)."""
    import math

    from hasfl.analysis.findings import seeds as SN
    from hasfl.analysis.findings.kernel import Settings
    from hasfl.analysis.specs import resolve_thresholds

    st = Settings(alpha=0.025, power=0.8, th=resolve_thresholds({}))  # Holm's first step over 2 units
    unit = {"se_z": 0.13, "n": 3, "estimate": 0.415, "margin": 0.0, "decision": "directional"}
    normal = SN.seeds_needed(unit, st)
    random = SN.seeds_needed({**unit, "tau2": 0.0}, st)
    assert normal == 3 and random > 3
    w = 1 / (0.13 ** 2 * 3)
    import scipy.stats as sps

    def fits(n: int) -> bool:
        return (sps.t.ppf(0.975, n - 1) + sps.t.ppf(0.8, n - 1)) / math.sqrt(n * w) <= math.atanh(0.415)
    assert fits(random) and not fits(random - 1)


# --- issue 61: verdicts scoped to what they test ---------------------------------------------------------------------


def _split_f9c():
    """F9c with a full-model unit that is inconclusive and a sub-model unit that contradicts (the coverage page's
    shape at 100 rounds)."""
    import pandas as pd

    t = replace(base_tables(), F.T4S, "cifar10", "fedrolex", seeds("cifar10", "fedrolex", final=[70, 84, 77]))
    t[F.OPTIONAL_TABLES[0]] = pd.DataFrame(
        [{"dataset": "cifar10", "method": m, "seed": s, "status": "completed", "submodel_acc_pct": v}
         for m, vals in (("fedrolex", [30, 28, 31]), ("heterofl", [50, 52, 51]), ("uniform", [55, 56, 57]),
                         ("uniform_rolling", [60, 63, 61]), ("fedecover", [65, 66, 68]), ("fiarse", [60, 61, 62]))
         for s, v in zip(SEEDS, vals, strict=True)])
    return evaluate(t)


def test_a_two_estimand_finding_whose_units_disagree_shows_both_and_attributes_only_the_authors_estimand():
    """Before, F9c's word was "contradicted" (any unit contradicts), printed as Alam et al.'s claim although their
    claim is about the full model. Now each estimand is its own verdict; the page shows both, never one word, and
    only the full model's is Alam et al.'s."""
    from hasfl.analysis.page_refs import shown_verdict, verdict_counts

    f = _split_f9c()[F.F9C]
    est = {e["estimand"]: e for e in f["estimands"]}
    assert est["full-model"]["verdict"] == F.INCONCLUSIVE and est["sub-model"]["verdict"] == F.CONTRADICTED
    assert f["verdict"] == F.SPLIT
    assert shown_verdict(f) == "full model: inconclusive; sub-models: contradicted"
    assert est["full-model"]["attribution"] == "Alam et al. 2022 (FedRolex)"
    assert est["sub-model"]["attribution"] == "this project's extension"
    row = next(line for line in _findings_table([f]) if line.startswith("| F9c"))
    assert "**full model: inconclusive; sub-models: contradicted**" in row
    assert "full model: Alam et al. 2022 (FedRolex)'s claim; sub-models: this project's extension" in row
    assert verdict_counts([f])[F.SPLIT] == 1 and verdict_counts([f])[F.CONTRADICTED] == 0
    # Holm runs within an estimand: the full-model unit is not corrected against the sub-model one
    assert "Holm" not in unit(f, "cifar10")["reason"]


def test_an_authors_attribution_on_another_estimand_is_refused():
    from hasfl.analysis.findings.claims import AUTHOR_CLAIMS, AttributionError, attribution

    assert attribution("F9c", "full-model") == "Alam et al. 2022 (FedRolex)"
    assert attribution("F9c", "sub-model") is None and attribution("F9b", "full-model") is None
    with pytest.raises(AttributionError, match="whose claim is about estimand 'full-model'"):
        attribution("F9c", "sub-model", "Alam et al. 2022 (FedRolex)")
    with pytest.raises(AttributionError, match="whose claim is about estimand 'sub-model'"):
        attribution("F9g", "full-model", "Wu et al. 2024 (FIARSE)")
    with pytest.raises(AttributionError):
        F.kernel.finding("F9c", claim="c", source="s", scope="all", statistic="s", test="t", margin_key=None,
                         st=F.Settings(alpha=0.05, power=0.8, th={}), units=[], files=[], mde_meaning="",
                         not_run="x", estimands=[F.kernel.Estimand("sub-model", "sub-models", "c",
                                                                   "Alam et al. 2022 (FedRolex)")])
    # every cited claim names its estimand and evidence, and decisions.md quotes it
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "decisions.md").read_text()
    for (fid, est), c in AUTHOR_CLAIMS.items():
        assert c.estimand == est and c.evidence.split()[0] in text, (fid, est)


def test_horizons_side_by_side_label_a_verdict_that_differs_and_the_summary_counts_it():
    """The same findings at 100 and 200 rounds: an estimand whose verdict differs is horizon-dependent, in the
    section's table and in the summary's counts."""
    from hasfl.analysis.results_page import horizon_lines, horizon_rows

    short = {"horizon": {"rounds": 100, "seeds": [42, 43, 44, 45, 46]}, "findings": list(_split_f9c().values())}
    t = replace(base_tables(), F.T4S, "cifar10", "fedrolex", seeds("cifar10", "fedrolex", final=[80, 84, 82]))
    long = {"horizon": {"rounds": 200, "seeds": [42, 43, 44]}, "findings": list(evaluate(t).values())}
    rows = {(r["id"], r["estimand"]): r for r in horizon_rows(short, long)}
    r = rows[("F9c", "full model")]
    assert (r["a"], r["b"], r["dependent"]) == (F.INCONCLUSIVE, F.SUPPORTED, True)
    assert rows[("F1a", "")]["dependent"] is False
    lines = horizon_lines(short, [("long", long, horizon_rows(short, long))])
    assert lines[0] == "## Horizons side by side" and "at 100 rounds, 5 seeds" in lines[2]
    assert "**horizon-dependent**: F9c full model" in lines[2]
    summary = summary_block(short["findings"], "snakemake all", 30, 1.0, horizon_dependent=["F9c full model (long)"])
    assert any("Horizon-dependent" in line and "F9c full model (long)" in line for line in summary)


def test_the_failed_to_train_table_is_one_row_per_seed_with_its_own_why():
    """Before, one row per method paired the seeds with a set of whys; now every run is its own row."""
    t = replace(base_tables(), F.T6S, "cifar10", "hasfl",
                seeds("cifar10", "hasfl", final=[10, 9, 73], floor=[True, True, False]))
    lines = failed_lines(_findings(t), "quick")
    rows = [line for line in lines if line.startswith("| cifar10 | hasfl |")]
    assert [r.split(" | ")[2] for r in rows] == [str(SEEDS[0]), str(SEEDS[1])]


def test_the_method_figures_of_a_page_show_every_method_its_folder_ran():
    """Before, the coverage page's frontier (Figure 6) drew 2 of its folder's 6 methods: every registry method is now
    in it, and the convergence figure draws F9's extraction methods beside the paper's three."""
    from hasfl.analysis.artifacts import FIGURES, artifact_methods
    from hasfl.registry import METHODS

    assert set(artifact_methods(FIGURES["fig6_frontier"])) == set(METHODS)
    extraction = {m for m, info in METHODS.items() if not info.nested}
    assert extraction and extraction <= set(artifact_methods(FIGURES["fig3_convergence_allocation"]))
    from hasfl.analysis.labels import method_color, method_marker

    styles = {(method_color(m), method_marker(m)) for m in METHODS}
    assert len(styles) == len(METHODS) and ("k", "o") not in styles  # each drawn in a style of its own
