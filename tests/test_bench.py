"""Smoke tests of ``hasfl bench`` (issue 6): the JSON it prints, not how fast anything is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hasfl import bench
from hasfl.cli import main

TINY = ["bench", "--quick", "--trials", "1", "--min-trial-s", "0", "--batch-size", "8", "--fed-client-n", "8",
        "--fed-rounds", "2", "--eval-n", "16", "--no-write-doc"]


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and x > 0


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory) -> dict:
    """One tiny ``hasfl bench --quick`` run through the CLI; its stdout parsed as JSON."""
    import contextlib
    import io

    threads = torch.get_num_threads()
    out = io.StringIO()
    missing = tmp_path_factory.mktemp("noresults")
    with contextlib.redirect_stdout(out):
        rc = main([*TINY, "--quick-results", str(missing)])
    torch.set_num_threads(threads)
    assert rc == 0
    return json.loads(out.getvalue())


def test_top_level_keys(tiny_report):
    for key in ("machine", "budget", "targets", "client_vs_bare", "width_scaling", "server_share", "paper_scale",
                "quick_preset", "elapsed_s"):
        assert key in tiny_report, key
    m = tiny_report["machine"]
    assert m["cpu_model"] and m["torch_version"] == torch.__version__
    assert m["torch_threads"] == 1 and m["device"] in ("cpu", "cuda")
    assert set(tiny_report["targets"]) == {"a_client_vs_bare", "b_cnn_p025_over_p1", "c_server_share", "e_quick_preset"}


def test_client_vs_bare_and_widths_positive(tiny_report):
    rows = tiny_report["client_vs_bare"]["rows"]
    assert {(r["dataset"], r["p"]) for r in rows} == {("cifar10", 1.0), ("cifar10", 0.25),
                                                       ("shakespeare", 1.0), ("shakespeare", 0.25)}
    for r in rows:
        assert _positive(r["ours_samples_per_s"]) and _positive(r["bare_samples_per_s"]) and _positive(r["ratio"])
    w = tiny_report["width_scaling"]["rows"]
    assert {r["p"] for r in w} == {0.25, 0.5, 0.75, 1.0}
    assert all(_positive(r["step_ms"]) and _positive(r["rel_to_full"]) for r in w)
    assert all(r["rel_to_full"] == 1.0 for r in w if r["p"] == 1.0)


def test_server_share_and_paper_scale_positive(tiny_report):
    for run in tiny_report["server_share"]["runs"]:
        med = run["median_round"]
        assert _positive(med["round_s"]) and _positive(med["local_sgd_s"]) and _positive(med["evaluation_s"])
        assert 0 < med["server_share_incl_eval"] < 1
    ps = tiny_report["paper_scale"]
    assert set(ps["datasets"]) == {"cifar10", "emnist", "shakespeare"}
    assert _positive(ps["device_hours_total"]) and ps["jobs"] == 81 and ps["rounds"] == 200
    for d in ps["datasets"].values():
        assert {r["method"] for r in d["methods"]} == {"hasfl", "hasfl_nocov", "heterofl", "fjord", "uniform",
                                                       "random_budget", "fedavg", "scaffold", "fedprox"}
        assert all(_positive(v) for v in d["round_s"].values())
        # full-width training costs more per round than any sub-model method
        assert d["round_s"]["fedavg"] >= max(d["round_s"][m] for m in ("hasfl", "heterofl", "uniform"))


def test_arithmetic_floor_of_evaluation(tiny_report):
    """(c)'s arithmetic floor by hand: fedavg on CIFAR-10 evaluates 10,000 test images at full width
    per round and trains 10 clients x 2,500 samples x 5 epochs at 3 forward passes each."""
    cifar = {r["method"]: r for r in tiny_report["paper_scale"]["datasets"]["cifar10"]["methods"]}
    assert cifar["fedavg"]["eval_mac_share"] == pytest.approx(10_000 / (10_000 + 10 * 2_500 * 5 * 3), abs=1e-4)
    # narrower sub-models train fewer MACs, so evaluation is a larger share of their rounds
    assert cifar["uniform"]["eval_mac_share"] > cifar["hasfl"]["eval_mac_share"] > cifar["fedavg"]["eval_mac_share"]
    c = tiny_report["targets"]["c_server_share"]
    lo, hi = c["eval_mac_floor_range"]
    assert 0 < lo < hi < 1 and lo == pytest.approx(cifar["fedavg"]["eval_mac_share"])
    assert tiny_report["precision"] == "fp32"
    gemm = tiny_report["paper_scale"]["reference_gemm_gmac_per_s"]
    assert _positive(gemm["fp32"]) and _positive(gemm["bf16"])


@pytest.mark.parametrize("args,error", [
    (["--precision", "tf32", "--device", "cpu"], "config key 'precision' is 'tf32', which needs a CUDA device"),
    (["--precision", "bf16", "--sections", "g"], "has no bf16 variant"),
])
def test_bench_rejects_precision_before_measuring(args, error, capsys):
    """A precision the device or section cannot run fails at once, before any measurement."""
    import time

    tic = time.perf_counter()
    assert main(["bench", "--quick", "--no-write-doc", *args]) == 2
    assert time.perf_counter() - tic < 5
    captured = capsys.readouterr()
    assert error in captured.err and captured.out == ""


def test_quick_preset_not_measured_without_results(tiny_report):
    assert tiny_report["quick_preset"]["status"] == "not measured"
    assert tiny_report["targets"]["e_quick_preset"]["met"] == "not measured"


def test_engine_restored_after_instrumentation():
    from hasfl.fl import client, engine

    before = (engine.evaluate, engine.divergence, engine.CoordinateAggregator,
              engine.SubModels.__dict__["load"], client.LocalSGD.train)
    with bench.instrumented(torch.device("cpu")):
        assert engine.evaluate is not before[0]
    after = (engine.evaluate, engine.divergence, engine.CoordinateAggregator,
             engine.SubModels.__dict__["load"], client.LocalSGD.train)
    assert after == before


LOG = """Config file /x/config.yaml is extended by additional config specified via the command line.
SNAKEMAKE
=========
  Date: 2026-11-29 10:00:00
  Config file(s): [PosixPath('/x/presets/quick.yaml'), '/x/config.yaml']
Job stats:
job      count
-----  -------
train        2
all          1
total        3

[Sun Nov 29 10:00:05 2026]
rule train:
    jobid: 1
[Sun Nov 29 10:00:05 2026]
rule train:
    jobid: 2
[Sun Nov 29 10:00:15 2026]
Finished jobid: 1 (Rule: train)
[Sun Nov 29 10:00:25 2026]
Finished jobid: 2 (Rule: train)
[Sun Nov 29 10:00:30 2026]
localrule all:
    jobid: 0
[Sun Nov 29 10:00:30 2026]
Finished jobid: 0 (Rule: all)
3 of 3 steps (100%) done
"""


def test_quick_report_from_log(tmp_path: Path):
    logs = tmp_path / "log"
    logs.mkdir()
    (logs / "2026-11-29T100000.snakemake.log").write_text(LOG)
    info = bench.parse_snakemake_log(logs / "2026-11-29T100000.snakemake.log")
    assert info["wall_s"] == 30 and info["complete"] and info["job_stats"] == {"train": 2, "all": 1}
    assert info["job_walls_s"] == {"train": 30.0, "all": 0.0} and info["job_counts"]["train"] == 2
    for i, (tot, tr) in enumerate([(8.0, 6.0), (16.0, 12.0)]):
        run = tmp_path / "results" / "runs" / "digits" / "hasfl" / f"seed{i}"
        run.mkdir(parents=True)
        (run / "timings.json").write_text(json.dumps({"total_s": tot, "local_training_s": tr, "server_s": 1.0,
                                                      "evaluation_s": 1.0}))
    rep = bench.quick_preset_report(tmp_path / "results", cores=2, log_dir=logs)
    assert rep["status"] == "measured" and rep["wall_s"] == 30 and rep["runs"] == 2
    assert rep["outside_engine_share"] == pytest.approx(1 - 24 / 60)
    assert rep["log"]["train_job_overhead_s_mean"] == pytest.approx(3.0)
    assert rep["met"] is False  # 60 % outside the engine
    assert bench.quick_preset_report(tmp_path / "results", cores=2, wall_s=48.0)["outside_engine_share"] == \
        pytest.approx(1 - 24 / 96)


def test_write_doc_keeps_hand_written_analysis(tmp_path: Path, tiny_report):
    doc = tmp_path / "performance.md"
    doc.write_text("# old\n\n## Analysis\n\nkeep me\n")
    bench.write_doc(tiny_report, doc)
    text = doc.read_text()
    assert text.startswith("# Performance") and "## Machine" in text and "keep me" in text
    assert "## (a) Client update vs a bare PyTorch loop" in text and "## Analysis" in text


def _conc(label: str, rates: dict[str, dict[int, float]]) -> dict:
    rows = [{"dataset": ds, "p": 0.5, "jobs": k, "steps_per_s_total": v, "steps_per_s_per_job": v / k,
             "speedup_vs_one_job": v / by_k[1]} for ds, by_k in rates.items() for k, v in by_k.items()]
    return {"label": label, "rows": rows}


def test_packed_device_hours_and_merge(tiny_report):
    """(k) packing: serial hours x one-job rate (of the base run) / best aggregate rate."""
    import copy

    report = copy.deepcopy(tiny_report)
    paper = report["paper_scale"]
    for ds, hours in (("cifar10", 12.0), ("emnist", 30.0)):
        paper["datasets"][ds]["device_hours"] = hours
    paper["datasets"].pop("shakespeare", None)
    paper["device_hours_total"] = 42.0
    plain = _conc("no MPS", {"cifar10": {1: 100.0, 4: 200.0, 8: 150.0}, "emnist": {1: 50.0, 8: 100.0}})
    packed = bench.packed_device_hours(paper, plain)
    assert packed["datasets"]["cifar10"] == {"jobs_at_once": 4, "speedup_vs_one_job_alone": 2.0, "device_hours": 6.0}
    assert packed["datasets"]["emnist"]["device_hours"] == 15.0 and packed["device_hours_total"] == 21.0
    mps = {"concurrency": _conc("MPS", {"cifar10": {1: 80.0, 8: 600.0}, "emnist": {1: 40.0, 16: 500.0}})}
    report["machine"]["device"] = "cuda"
    paper["packed"], report["concurrency"] = packed, plain
    merged = bench.merge_concurrency(report, mps)
    extra = merged["paper_scale"]["packed_extra"][0]
    # relative to the no-MPS single job (100 and 50 steps/s), not MPS's own (80 and 40)
    assert extra["datasets"]["cifar10"]["device_hours"] == 2.0 and extra["datasets"]["emnist"]["device_hours"] == 3.0
    target = merged["targets"]["d_paper_device_hours"]
    assert target["value"] == 5.0 and target["met"] is True and target["serial"] == 42.0
    text = bench.render_markdown(merged)
    assert "## (k) Concurrent jobs on one device" in text and "| MPS | emnist | 16 |" in text
    with pytest.raises(ValueError, match="concurrency"):
        bench.merge_concurrency(report, {"paper_scale": {}})
    # a (d)-only report (gpu-bench.sh BENCH_SECTIONS=b,d) packs against the MPS run's own single job
    report = copy.deepcopy(tiny_report)
    report["paper_scale"] = copy.deepcopy(paper)
    report["paper_scale"].pop("packed")
    report.pop("concurrency", None)
    report["machine"]["device"] = "cuda"
    alone = bench.combine_reports([report, mps])["paper_scale"]["packed_extra"][0]
    assert alone["datasets"]["cifar10"]["device_hours"] == 1.6 and alone["datasets"]["emnist"]["device_hours"] == 2.4


def test_combine_reports_and_graph_section(tiny_report):
    """--from-json: the first report, (k) runs and the (g) section of the others, on one page."""
    import copy

    base = copy.deepcopy(tiny_report)
    base["machine"]["device"] = "cuda"
    base["concurrency"] = _conc("no MPS", {ds: {1: 100.0, 8: 200.0} for ds in base["paper_scale"]["datasets"]})
    mps = {"concurrency": _conc("MPS", {ds: {1: 90.0, 8: 400.0} for ds in base["paper_scale"]["datasets"]})}
    graph = {"cuda_graph_step": {"status": "measured", "steps": 200, "rows": [
        {"dataset": "cifar10", "p": 0.5, "batch_size": 64, "eager_step_ms": 4.0, "graph_step_ms": 1.0, "speedup": 4.0},
        {"dataset": "emnist", "p": 0.5, "error": "RuntimeError: capture failed"}]}}
    out = bench.combine_reports([base, mps, graph])
    serial = base["paper_scale"]["device_hours_total"]
    assert out["paper_scale"]["packed"]["device_hours_total"] == pytest.approx(serial / 2, rel=1e-2)
    assert out["paper_scale"]["packed_extra"][0]["device_hours_total"] == pytest.approx(serial / 4, rel=1e-2)
    assert out["targets"]["d_paper_device_hours"]["value"] == out["paper_scale"]["packed_extra"][0]["device_hours_total"]
    text = bench.render_markdown(out)
    assert "## (g) Proposal" in text and "| cifar10 | 0.5 | 64 | 4.0 | 1.0 | 4.0 |  |" in text
    assert "RuntimeError: capture failed" in text
    assert bench.combine_reports([base])["paper_scale"].get("packed_extra") is None  # idempotent re-render
    assert bench.bench_cuda_graph_step({}, torch.device("cpu"))["status"] == "skipped"


def test_op_counter_and_method_hooks_cost_a_constant_number_of_kernels():
    """``OpCounter`` counts what one local step dispatches (backward and optimiser included);
    FedProx's proximal term and SCAFFOLD's correction add O(1) kernels per step (foreach),
    not several per parameter tensor as the term written into the loss would (~3.5x a plain step)."""
    from dataclasses import replace

    from hasfl.config import load_config
    from hasfl.fl.client import FedProx, Scaffold

    with bench.OpCounter() as c:
        layer = torch.nn.Linear(3, 2)
        layer(torch.randn(4, 3)).sum().backward()
    assert c.kernels >= 4 and c.ops > c.kernels  # addmm, sum, ones_like, mm, ... and views (t, detach)

    cfg = load_config()
    optim = replace(bench._optim(cfg, "cifar10", bench.QUICK), batch_size=4)
    bundle = bench.synthetic_bundle("cifar10", 64, 8, torch.device("cpu"))
    family = bench._family(cfg, "cifar10", bundle)
    mp = cfg["method_params"]
    plain, prox, scaf = (bench._Client(family, 0.25, bundle, optim, torch.device("cpu"), t).ops_per_step()
                         for t in (None, FedProx(optim, bundle.inputs, mp["fedprox"]),
                                   Scaffold(optim, bundle.inputs, mp["scaffold"])))
    n_params = len(list(family.build(0.25).parameters()))
    assert plain["kernels"] > 2 * n_params  # forward + backward of every layer
    assert prox["kernels"] - plain["kernels"] <= 12 < n_params
    assert scaf["kernels"] <= plain["kernels"] + 2
    small = bench.synthetic_bundle("cifar10", 12, 8, torch.device("cpu"))  # 3 batches of 4
    with pytest.raises(ValueError, match="needs 4 batches of 4; the bundle holds 12 samples"):
        bench._Client(family, 0.25, small, optim, torch.device("cpu")).ops_per_step()


def test_step_variants_on_cpu_and_gpu():
    """The A/B section times the engine's numerics everywhere, and on a GPU also TF32 and the
    NHWC layout under TF32 / bf16 (image models only); nothing here needs a GPU."""
    from hasfl.fl.engine import Numerics

    cpu = bench.step_variants(torch.device("cpu"), image=True)
    assert list(cpu) == ["contiguous fp32", "engine fp32", "engine bf16"]
    assert cpu["engine fp32"] == Numerics(torch.device("cpu"), "fp32", channels_last=True)
    gpu = bench.step_variants(torch.device("cuda"), image=True)
    assert {k: (n.precision, n.channels_last) for k, n in gpu.items()} == {
        "contiguous fp32": ("fp32", False), "engine fp32": ("fp32", False), "engine bf16": ("bf16", False),
        "engine tf32": ("tf32", False), "channels_last tf32": ("tf32", True), "channels_last bf16": ("bf16", True)}
    assert list(bench.step_variants(torch.device("cuda"), image=False)) == [
        "contiguous fp32", "engine fp32", "engine bf16", "engine tf32"]


def test_client_batching_computes_the_sequential_update():
    """The vmapped step of several clients (A/B section) updates each client as the engine's
    one-at-a-time step does, to float rounding; the report carries both timings."""
    from dataclasses import replace

    from hasfl.config import load_config

    budget = replace(bench.QUICK, batch_size=4, trials=1)
    out = bench.bench_client_batching(load_config(), budget, torch.device("cpu"), k=3)
    assert out["clients"] == 3 and out["batch"] == 4
    assert 0 <= out["max_abs_diff_after_one_step"] < 1e-5
    assert _positive(out["ms_per_client_step"]["vmap"]) and _positive(out["ms_per_client_step"]["sequential"])
