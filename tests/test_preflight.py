"""The pre-flight block (hasfl.dag.preflight): its cost model equals Table 1's, its estimate scales the
right way, and a run far too long for a CPU stops before any job while a dry run goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from hasfl.analysis.artifacts import run_tables
from hasfl.dag import preflight
from hasfl.config import load_config
from hasfl.models import family_from_config

REPO = Path(__file__).resolve().parents[1]
RATES = {"step_overhead_s": 0.003, "cnn_gmacs": 8.0, "lstm_gmacs": 6.0, "source": "test"}


@pytest.mark.parametrize(("model", "shape", "classes"), [
    ({"arch": "cnn", "channels": [64, 64, 128, 128, 256, 256], "pool_after": [1, 3], "pool_out": 4, "hidden": 512},
     (3, 32, 32), 10),
    ({"arch": "cnn", "channels": [64, 64, 128, 128, 256, 256], "pool_after": [1, 3], "pool_out": 4, "hidden": 512},
     (1, 28, 28), 62),
    ({"arch": "cnn", "channels": [32, 32, 64, 64], "pool_after": [1], "pool_out": 2, "hidden": 128}, (1, 8, 8), 10),
    ({"arch": "cnn", "channels": [5, 7, 9], "pool_after": [0, 2], "pool_out": 3, "hidden": 11}, (2, 15, 13), 4),
    ({"arch": "lstm", "embed_dim": 8, "hidden": 256, "layers": 2}, (80,), 96),
    ({"arch": "lstm", "embed_dim": 8, "hidden": 32, "layers": 3}, (20,), 96),
])
@pytest.mark.parametrize("p", [0.25, 0.5, 0.75, 1.0, 0.4137])
def test_analytic_macs_equal_the_cost_model(model, shape, classes, p) -> None:
    family = family_from_config(model, shape, classes)
    assert preflight.forward_macs(model, shape, classes, p) == family.cost(p).macs


def test_estimate_scales_with_rounds_cores_and_rates() -> None:
    quick = load_config(REPO / "presets" / "quick.yaml")
    base = preflight.estimate(quick, 2, RATES, machine_cores=2)
    assert base["train_jobs"] == 54 and base["data_jobs"] == 6
    longer = load_config(REPO / "presets" / "quick.yaml", overrides=["federation.rounds=60"])
    assert preflight.estimate(longer, 2, RATES, machine_cores=2)["train_job_hours"] == pytest.approx(
        2 * base["train_job_hours"], rel=0.05)
    faster = dict(RATES, cnn_gmacs=16.0, lstm_gmacs=12.0, step_overhead_s=0.0015)
    assert preflight.estimate(quick, 2, faster, machine_cores=2)["train_job_hours"] == pytest.approx(
        base["train_job_hours"] / 2, rel=1e-6)
    one = preflight.estimate(quick, 1, RATES, machine_cores=2)
    assert one["wall_hours"] > base["wall_hours"]
    oversubscribed = preflight.estimate(quick, 8, RATES, machine_cores=2)  # 8 jobs on 2 cores: no faster
    assert oversubscribed["wall_hours"] == pytest.approx(base["wall_hours"])
    paper = preflight.estimate(load_config(), 4, RATES, machine_cores=2)
    assert paper["train_job_hours"] > 1000 * base["train_job_hours"]


def test_check_stops_long_cpu_runs_only(monkeypatch) -> None:
    monkeypatch.setattr(preflight, "hardware", lambda: {"cpu": "test cpu", "cores": 2, "gpus": []})
    monkeypatch.setattr(preflight, "throughput", lambda device, threads, hw, measure=True: dict(RATES))
    block, reason = preflight.check(load_config(), 4, measure=False)
    assert "pre-flight: preset 'paper'" in block and reason is not None and "execution={max_cpu_wall_hours: 0}" in reason
    _, reason = preflight.check(load_config(overrides=["execution.max_cpu_wall_hours=0"]), 4, measure=False)
    assert reason is None  # deliberately allowed
    _, reason = preflight.check(load_config(REPO / "presets" / "quick.yaml"), 2, measure=False)
    assert reason is None
    monkeypatch.setattr(preflight, "hardware", lambda: {"cpu": "test cpu", "cores": 2, "gpus": ["GPU 0: H200"]})
    _, reason = preflight.check(load_config(), 4, measure=False)  # device auto -> cuda: a GPU machine is where it belongs
    assert reason is None


def test_paper_preset_on_this_cpu_stops_before_any_job_and_a_dry_run_goes_on(plan, tmp_path) -> None:
    """The Snakefile's session, in process (conftest ``plan``), for a run and for a dry run of the paper preset."""
    config = {"results_dir": str(tmp_path / "results")}
    res = plan(REPO, config=config, argv=("--cores", "2", "all"))
    assert res.code == 1
    assert "hasfl pre-flight: preset 'paper'" in res.stderr
    assert "hasfl: not starting: the estimated" in res.stderr and "--config 'execution={max_cpu_wall_hours: 0}'" in res.stderr
    assert "Traceback" not in res.stderr
    # the refusal once, and before any job table (issue 28): the run stops where the pre-flight ends
    assert res.stderr.count("not starting") == 1 and "would not start" not in res.stderr
    assert len(res.stderr.splitlines()) <= 10
    assert not (tmp_path / "results").exists()  # no job ran, nothing was written
    dry = plan(REPO, config=config)
    assert dry.code is None and "a run would not start" in dry.stderr


@pytest.mark.parametrize(("argv", "jobs"), [(["--cores", "2", "all"], True), (["-n", "all"], False),
                                            (["-np", "all"], False), (["--dry-run"], False), (["--lint"], False),
                                            (["--report", "r.html"], False), (["--cores=4"], True),
                                            (["--configfile", "presets/quick.yaml", "-p"], True),
                                            (["--touch"], False), (["-t"], False)])
def test_which_command_lines_run_jobs(argv, jobs) -> None:
    assert preflight.runs_jobs(argv) is jobs


@pytest.mark.snakemake
def test_quick_preset_prints_its_estimate(quick_dry_run, medium_dry_run) -> None:
    """The session's one dry run of the quick preset (conftest ``quick_dry_run``, console lines whole) prints the
    estimate and Snakemake's whole job blocks; a dry run under the console's default width (the medium preset's,
    conftest ``medium_dry_run``) cuts those lines."""
    whole = quick_dry_run
    assert whole.returncode == 0
    assert "hasfl pre-flight: preset 'quick'" in whole.stderr and "54 training" in whole.stderr
    assert "would not start" not in whole.stderr
    assert max(map(len, (whole.stdout + whole.stderr).splitlines())) > 10_000  # every input of a job, as Snakemake
    # Snakemake's job blocks (an analysis job's input line lists every run: ~15,000 characters) are cut on the console
    from hasfl.logs import CONSOLE_WIDTH

    res = medium_dry_run.res
    assert res.returncode == 0 and "hasfl pre-flight: preset 'medium'" in res.stderr
    lines = (res.stdout + res.stderr).splitlines()
    assert max(map(len, lines)) <= CONSOLE_WIDTH and any("characters cut]" in line for line in lines)


def test_the_preflight_costs_a_new_method_by_its_entry(monkeypatch, quick_config) -> None:
    """A method's pre-flight cost comes from its registry entry's rule (a new one is not costed as HAS-FL)."""
    from hasfl import registry
    from hasfl.dag import preflight

    rates = dict(preflight.FALLBACK)
    monkeypatch.setitem(registry.METHODS, "toy", registry.MethodInfo("hasfl.fl.methods.toy:toy", "Toy", "full"))
    cfg = {**quick_config, "methods": ["hasfl", "heterofl", "fedavg", "toy"]}
    est = preflight.estimate(cfg, 2, rates)
    for d, methods in est["per_method_job_hours"].items():
        assert methods["toy"] == methods["fedavg"] and methods["toy"] != methods["hasfl"], d
    with pytest.raises(ValueError, match="MethodInfo.cost: unknown rule 'magic'"):
        registry.MethodInfo("x:y", "X", "magic")
    with pytest.raises(TypeError):
        registry.MethodInfo("x:y", "X")  # the cost rule is required


def test_the_preflight_prices_only_what_is_not_finished(quick_config) -> None:
    """Issue 28 (console): finished runs and data-stage folders are reused, so they are not priced."""
    rates = dict(preflight.FALLBACK)
    full = preflight.estimate(quick_config, 2, rates)
    runs = {(d, m, int(s)) for d in quick_config["datasets"] for m in quick_config["methods"]
            for s in quick_config["seeds"][:2]}
    data = {(d, int(s)) for d in quick_config["datasets"] for s in quick_config["seeds"][:2]}
    part = preflight.estimate(quick_config, 2, rates, finished={"runs": runs, "data": data})
    assert part["train_jobs"] == full["train_jobs"] - len(runs) and part["reused_runs"] == len(runs)
    assert part["data_jobs"] == full["data_jobs"] - len(data) and part["reused_data"] == len(data)
    assert part["train_job_hours"] == pytest.approx(full["train_job_hours"] / 3)  # one seed of three left
    assert sum(part["per_dataset_job_hours"].values()) == pytest.approx(part["train_job_hours"])
    block = preflight.render(quick_config, part, rates, preflight.hardware(), 2, "cpu")
    assert f"{len(runs)} finished runs and {len(data)} data-stage folders reused, not priced" in block


@pytest.mark.parametrize(("model", "shape", "classes"), [
    ({"arch": "cnn", "channels": [32, 32, 64, 64, 128, 128], "pool_after": [1, 3], "pool_out": 4, "hidden": 256},
     (1, 28, 28), 10),
    ({"arch": "lstm", "embed_dim": 8, "hidden": 32, "layers": 2}, (80,), 80),
])
def test_the_parameter_count_is_the_models_own(model, shape, classes) -> None:
    family = family_from_config(model, shape, classes)
    want = sum(p.numel() for p in family.build(1.0).parameters())
    assert preflight.parameter_count(model, shape, classes) == want


def _coverage_rung():
    return load_config([REPO / "presets" / "medium.yaml", REPO / "presets" / "medium-coverage.yaml"])


def test_each_evaluation_is_priced_by_the_forward_passes_its_table_makes() -> None:
    """Issue 47: one full-width forward over the test set is the unit; the batch-norm sensitivity makes four (and a
    statistics pass), Table 4b three for a capped run and none for an uncapped one, FedEcover's sub-models one per
    participant, Table 4c's replay grows with the rounds."""
    cfg = _coverage_rung()
    model = cfg["dataset_params"]["fashion_mnist"]["model"]
    facts = preflight._facts("fashion_mnist", cfg["dataset_params"]["fashion_mnist"], None)
    one = facts["test"] * preflight.forward_macs(model, facts["shape"], facts["classes"], 1.0) / (RATES["cnn_gmacs"] * 1e9)
    uniform = preflight.evaluation_seconds(cfg, "fashion_mnist", "uniform", RATES)
    heterofl = preflight.evaluation_seconds(cfg, "fashion_mnist", "heterofl", RATES)
    fedecover = preflight.evaluation_seconds(cfg, "fashion_mnist", "fedecover", RATES)
    rolling = preflight.evaluation_seconds(cfg, "fashion_mnist", "uniform_rolling", RATES)
    assert 4 * one < uniform["bn_sensitivity"] < 4.5 * one
    assert 2 * one < uniform["table4b_stale_coordinates"] < 3 * one and heterofl["table4b_stale_coordinates"] == 0
    assert "table4b_stale_coordinates" not in rolling  # not nested: the table does not read it
    widths = sorted({t for _, t in preflight._method_widths("fedecover", cfg, preflight._capacities(cfg))})
    mean = sum(widths) / len(widths)
    each = facts["test"] * preflight.forward_macs(model, facts["shape"], facts["classes"], mean) / (RATES["cnn_gmacs"]
                                                                                                   * 1e9)
    assert fedecover["submodel_accuracy"] == pytest.approx(cfg["federation"]["clients_per_round"] * each, rel=1e-9)
    assert rolling["submodel_accuracy"] < fedecover["submodel_accuracy"] / 2  # one per width, not per participant
    longer = load_config([REPO / "presets" / "medium.yaml", REPO / "presets" / "medium-coverage.yaml"],
                         overrides=["federation.rounds=200"])
    assert preflight.evaluation_seconds(longer, "fashion_mnist", "uniform", RATES)["table4c_coverage_over_time"] == (
        pytest.approx(2 * uniform["table4c_coverage_over_time"]))
    quick = load_config(REPO / "presets" / "quick.yaml")
    assert preflight.evaluation_seconds(quick, "shakespeare", "hasfl", RATES)["bn_sensitivity"] == 0.0  # no BN


def test_the_estimate_prices_the_evaluate_jobs_of_the_runs_it_trains(quick_config) -> None:
    base = preflight.estimate(quick_config, 2, RATES, machine_cores=2)
    assert base["eval_jobs"] == 54 and base["eval_job_hours"] > 0
    assert base["analysis_wall_hours"] >= base["eval_job_hours"] / 2
    runs = {(d, m, s) for d in quick_config["datasets"] for m in quick_config["methods"] for s in quick_config["seeds"]}
    trained = preflight.estimate(quick_config, 2, RATES, machine_cores=2, finished={"runs": runs})
    assert trained["eval_jobs"] == 54 and trained["eval_job_hours"] == base["eval_job_hours"]  # runs, not evaluations
    evals = preflight.reused([f"evals/{d}/{m}/seed{s}/{t}" for d, m, s in runs if m != "fedavg"
                              for t in run_tables(d, m, quick_config["datasets"], quick_config["methods"])]
                             + [f"evals/{d}/fedavg/seed{s}/bn_sensitivity" for d in quick_config["datasets"]
                                for s in quick_config["seeds"]])
    part = preflight.estimate(quick_config, 2, RATES, machine_cores=2, finished={"runs": runs, **evals})
    assert part["eval_jobs"] == 6 and part["eval_job_hours"] < base["eval_job_hours"] / 9
    text = preflight.render(quick_config, base, RATES, {"cpu": "x", "cores": 2, "gpus": []}, 2, "cpu")
    assert "analysis: about" in text and "54 evaluate jobs" in text


def test_measured_forward_seconds_price_the_evaluations_and_widths_interpolate() -> None:
    """Issue 47: with a model's forward seconds measured (hasfl.bench.calibrate.forward_seconds) each evaluation is
    priced from them -- test-set passes from ``eval``, the static statistics pass from ``stats`` -- not from the
    training rate; between measured widths the seconds interpolate linearly, below the narrowest they are its."""
    cfg = _coverage_rung()
    facts = preflight._facts("fashion_mnist", cfg["dataset_params"]["fashion_mnist"], None)
    speeds = {"eval": {"1.0": 1e-3, "0.5": 4e-4, "0.25": 1e-4, "0.125": 5e-5, "0.0625": 4e-5},
              "stats": {"1.0": 2e-3, "0.5": 8e-4, "0.25": 2e-4, "0.125": 1e-4, "0.0625": 8e-5}}
    assert preflight._per_sample(speeds["eval"], 0.75) == pytest.approx(7e-4)
    assert preflight._per_sample(speeds["eval"], 0.01) == 4e-5 and preflight._per_sample(speeds["eval"], 1.0) == 1e-3
    uniform = preflight.evaluation_seconds(cfg, "fashion_mnist", "uniform", RATES, facts, speeds)
    pmax = preflight._capacities(cfg)
    capable = facts["train"] * sum(1 for p in pmax if p >= 1.0) / len(pmax)
    assert uniform["bn_sensitivity"] == pytest.approx(4 * facts["test"] * 1e-3 + capable * 2e-3)
    top = max(t for _, t in preflight._method_widths("uniform", cfg, pmax))
    assert uniform["table4b_stale_coordinates"] == pytest.approx(
        2 * facts["test"] * 1e-3 + facts["test"] * preflight._per_sample(speeds["eval"], top))
    by_macs = preflight.evaluation_seconds(cfg, "fashion_mnist", "uniform", RATES, facts)
    assert by_macs["bn_sensitivity"] != uniform["bn_sensitivity"]
    assert by_macs["table4c_coverage_over_time"] == uniform["table4c_coverage_over_time"]  # the replay: not a forward
    est = preflight.estimate(cfg, 2, RATES, machine_cores=2, speeds={"fashion_mnist": speeds})
    assert est["measured"] == ["fashion_mnist"] and est["unmeasured"] == [d for d in cfg["datasets"]
                                                                          if d != "fashion_mnist"]
    text = preflight.render(cfg, est, RATES, {"cpu": "x", "cores": 2, "gpus": []}, 2, "cpu")
    assert "forward passes measured here for fashion_mnist" in text


def test_forward_seconds_are_measured_once_per_model_and_never_in_a_dry_run(tmp_path, monkeypatch) -> None:
    """The pre-flight's forward measurement runs ``python -m hasfl.bench.calibrate --forward`` for each dataset's
    model (real torch, the quick preset's digits CNN), caches it per machine and model, and a dry run
    (``measure=False``) reads the cache only."""
    monkeypatch.setattr(preflight, "CACHE", tmp_path)
    quick = load_config(REPO / "presets" / "quick.yaml", overrides=["datasets=[digits]"])
    hw = {"cpu": "test cpu", "cores": 2, "gpus": []}
    assert preflight.forward_speeds(quick, "cpu", 1, hw, measure=False) == {}
    assert not list(tmp_path.iterdir())
    got = preflight.forward_speeds(quick, "cpu", 1, hw)["digits"]
    assert set(got["eval"]) == set(got["stats"]) == {"1.0", "0.5", "0.25", "0.125", "0.0625"}
    assert all(0 < s < 0.01 for kind in ("eval", "stats") for s in got[kind].values())
    assert got["stats_batch"] == quick["dataset_params"]["digits"]["optim"]["batch_size"]
    assert len(list(tmp_path.glob("forward-*.json"))) == 1
    assert preflight.forward_speeds(quick, "cpu", 1, hw, measure=False)["digits"]["eval"] == got["eval"]
    wider = load_config(REPO / "presets" / "quick.yaml", overrides=["datasets=[digits]",
                                                                      "dataset_params.digits.model.hidden=256"])
    assert preflight.forward_speeds(wider, "cpu", 1, hw, measure=False) == {}  # another model: not this answer


def test_the_forward_measurement_uses_the_analysis_evaluation_batch() -> None:
    """The forward calibration times the analysis's test-set evaluations in their own batch on the device
    (hasfl.analysis.stale: CPU_EVAL_BATCH here): measured on a small CNN, the measurement says which batch it used."""
    from hasfl.analysis import stale
    from hasfl.bench.calibrate import forward_seconds

    model = {"arch": "cnn", "channels": [4, 4], "pool_after": [0], "pool_out": 1, "hidden": 8}
    got = forward_seconds(model, (1, 8, 8), 10, 4, "cpu")
    assert got["eval_batch"] == stale.CPU_EVAL_BATCH and got["device"] == "cpu"
    assert set(got["eval"]) == {"1.0", "0.5", "0.25", "0.125", "0.0625"} and all(v > 0 for v in got["eval"].values())


def test_a_measurement_is_cached_per_cpu_kernel_pin(monkeypatch) -> None:
    """Under the portable kernel pin an AVX-512 CPU runs AVX2 kernels at about half the speed: the pre-flight priced
    a pinned build from the unpinned measurement (the medium preset's training took 2.06x its estimate). The cache
    key holds the pin's variables when any is set; without them it is the key it always was (no cache re-measured)."""
    import hashlib
    import json

    from hasfl.device import KERNEL_PIN_ENV, kernel_pin
    from hasfl.fl.runtime import ISA_ENV

    assert KERNEL_PIN_ENV == ISA_ENV  # the names a run's timings record
    hw = {"cpu": "test cpu", "cores": 2, "gpus": []}
    for k in KERNEL_PIN_ENV:
        monkeypatch.delenv(k, raising=False)
    plain = preflight._measurement_path("throughput", hw, "cpu", 1, 3)
    old = hashlib.sha256(json.dumps(["test cpu", [], "cpu", 1, preflight._torch_version(), 3],
                                    sort_keys=True).encode()).hexdigest()
    assert plain.name == f"throughput-{old[:16]}.json"
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    assert kernel_pin() == {"ATEN_CPU_CAPABILITY": "avx2"}
    pinned = preflight._measurement_path("throughput", hw, "cpu", 1, 3)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert len({plain, pinned, preflight._measurement_path("throughput", hw, "cpu", 1, 3)}) == 3


def test_the_preflight_says_when_other_work_loads_the_machine() -> None:
    """The estimate assumes free cores; a loaded machine (a new user's quick preset ran 3.5x its estimate) is named,
    and a throughput measured under the load says which cache file to delete. An idle machine gets no line."""
    from hasfl.dag.preflight import load_lines

    assert load_lines(2, {"source": "/c/throughput.json"}, load=0.9) == []
    (line,) = load_lines(2, {"source": "/c/throughput.json"}, load=3.4)
    assert "load average is 3.4 on 2 cores" in line and "delete" not in line
    (line,) = load_lines(2, {"source": "measured now, cached in /c/throughput-x.json"}, load=3.4)
    assert "delete /c/throughput-x.json and build on an idle machine" in line
    # corrected for the load: 2 jobs at a time and 1.3 other runnable processes share 2 cores, x1.65
    (line,) = load_lines(2, {"source": "/c/throughput.json"}, load=1.3, wall_hours=1.6, slots=2)
    assert "x1.65), about 2.6 h, if the load stays" in line
    (line,) = load_lines(16, {"source": "/c/throughput.json"}, load=9.0, wall_hours=1.0, slots=2)
    assert "2 jobs at a time and that load fit the cores: the estimate stands" in line
