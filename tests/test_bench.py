"""``hasfl bench``: the JSON a tiny quick run prints, the generated pages, the targets summary, the
command line, and the experiment scripts kept beside the package. Not how fast anything is."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import json
import re
from pathlib import Path
from types import ModuleType

import pytest
import torch

from hasfl.bench import render_markdown, summarize_targets
from hasfl.bench.quick_preset import parse_snakemake_log, quick_preset_report
from hasfl.cli import build_parser, main

TINY = ["bench", "--quick", "--trials", "1", "--batch-size", "8", "--fed-client-n", "8", "--fed-rounds", "2",
        "--eval-n", "16"]
SECTIONS = ("client_vs_bare", "width_scaling", "server_share", "paper_scale", "quick_preset")
REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = sorted((REPO / "scripts" / "experiments").glob("*.py"))
PAGES = {"docs/performance.md": ["docs/bench/cpu.json", "docs/bench/cpu-bf16.json", "docs/bench/flower.json"],
         "docs/performance-gpu.md": ["docs/bench/h200.json"]}


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and x > 0


def _run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


def _engine_hooks() -> tuple:
    from hasfl.fl import client, engine, runtime

    return (engine.run_federation, engine.Evaluator, engine.SubModels, runtime.evaluate, runtime.PhaseClock.phase,
            runtime.SubModels.extract, client.LocalSGD.train, client.SGDState.step)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    """One tiny ``hasfl bench --quick`` run through the CLI (no --doc): its stdout, JSON file and folder."""
    tmp = tmp_path_factory.mktemp("bench")
    docs_before = {p: (REPO / p).read_bytes() for p in PAGES}
    hooks = _engine_hooks()
    threads = torch.get_num_threads()
    rc, out = _run([*TINY, "--quick-results", str(tmp / "noresults"), "--json-out", str(tmp / "r.json")])
    torch.set_num_threads(threads)
    assert rc == 0
    assert _engine_hooks() == hooks  # timed through the engine's clock hook; nothing patched
    return {"report": json.loads(out), "json": tmp / "r.json", "dir": tmp, "docs_before": docs_before}


def test_quick_run_has_every_section(tiny):
    r = tiny["report"]
    assert r["bench_version"] == 2 and r["mode"] == "quick" and r["precision"] == "fp32"
    for key in (*SECTIONS, "machine", "budget", "targets", "elapsed_s"):
        assert key in r, key
    assert r["machine"]["torch_threads"] == 1 and r["machine"]["torch_version"] == torch.__version__
    assert json.loads(tiny["json"].read_text()) == r
    assert set(r["targets"]) == {"client_vs_bare", "cnn_width_scaling", "server_share_excl_eval",
                                 "server_share_incl_eval", "paper_preset_hours", "quick_preset_wall",
                                 "quick_preset_outside_share"}


def test_quick_run_writes_no_page(tiny):
    assert {p: (REPO / p).read_bytes() for p in PAGES} == tiny["docs_before"]
    assert not list(tiny["dir"].rglob("*.md"))


def test_client_width_and_server_numbers(tiny):
    r = tiny["report"]
    rows = r["client_vs_bare"]["rows"]
    assert {(x["dataset"], x["p"]) for x in rows} == {("cifar10", 1.0), ("cifar10", 0.25), ("shakespeare", 1.0),
                                                       ("shakespeare", 0.25)}
    assert all(_positive(x["ours_samples_per_s"]) and _positive(x["ratio"]) for x in rows)
    w = r["width_scaling"]["rows"]
    assert {x["p"] for x in w} == {0.25, 0.5, 0.75, 1.0} and {x["dataset"] for x in w} == {"cifar10", "emnist",
                                                                                          "shakespeare"}
    assert all(x["rel_to_full"] == 1.0 for x in w if x["p"] == 1.0)
    for run in r["server_share"]["runs"]:
        med = run["median_round"]
        assert _positive(med["round_s"]) and _positive(med["local_sgd_s"]) and _positive(med["evaluation_s"])
        assert 0 < med["server_share_excl_eval"] < med["server_share_incl_eval"] < 1


def test_paper_scale_projection(tiny):
    ps = tiny["report"]["paper_scale"]
    assert set(ps["datasets"]) == {"cifar10", "emnist", "shakespeare"}
    from hasfl.config import load_config

    paper = load_config()
    jobs = len(paper["methods"]) * len(paper["seeds"]) * 3
    assert _positive(ps["job_hours_total"]) and ps["jobs"] == jobs and ps["rounds"] == 200
    for d in ps["datasets"].values():
        assert {x["method"] for x in d["methods"]} == set(paper["methods"])
        assert d["round_s"]["fedavg"] >= max(d["round_s"][m] for m in ("hasfl", "heterofl", "uniform"))
    # the evaluation's arithmetic floor by hand: fedavg on CIFAR-10 evaluates 10,000 images at full width
    # per round and trains 10 clients x 2,500 samples x 5 epochs at 3 forward passes each
    cifar = {x["method"]: x for x in ps["datasets"]["cifar10"]["methods"]}
    assert cifar["fedavg"]["eval_mac_share"] == pytest.approx(10_000 / (10_000 + 10 * 2_500 * 5 * 3), abs=1e-4)
    assert cifar["uniform"]["eval_mac_share"] > cifar["hasfl"]["eval_mac_share"] > cifar["fedavg"]["eval_mac_share"]
    mf = ps["method_factors"]
    assert set(mf["factors"]) == {"fedprox", "scaffold", "fjord"} and all(_positive(v) for v in mf["factors"].values())
    assert ps["factors_applied"] == mf["factors"]
    gemm = ps["reference_gemm"]
    assert _positive(gemm["gmac_per_s"]["fp32"]) and _positive(gemm["gmac_per_s"]["bf16"])


def test_method_hooks_cost_a_constant_number_of_kernels(tiny):
    """FedProx's proximal term and SCAFFOLD's correction add O(1) kernels per step (foreach), not several
    per parameter tensor as the term written into the loss would; counted by the paper-scale section."""
    ops = tiny["report"]["paper_scale"]["method_factors"]["ops_per_step"]
    assert ops["plain"]["kernels"] > 40 and ops["plain"]["ops"] > ops["plain"]["kernels"]
    assert ops["fedprox"]["kernels"] - ops["plain"]["kernels"] <= 12
    assert ops["scaffold"]["kernels"] <= ops["plain"]["kernels"]  # no momentum, one foreach add
    assert ops["fjord"]["kernels"] > ops["plain"]["kernels"]  # the distilled student's forward/backward


def test_quick_preset_not_measured_without_a_run(tiny):
    r = tiny["report"]
    assert r["quick_preset"]["status"] == "not measured"
    assert r["targets"]["quick_preset_wall"]["met"] is None


def test_page_from_saved_json_only_with_doc(tiny):
    page = tiny["dir"] / "page.md"
    rc, out = _run(["bench", "--from-json", str(tiny["json"])])
    assert rc == 0 and out.startswith("# Performance: ") and not page.exists()
    rc, out = _run(["bench", "--from-json", str(tiny["json"]), "--doc", str(page)])
    assert rc == 0 and out == ""
    text = page.read_text()
    for heading in ("## Targets", "## Client update vs a bare PyTorch loop", "## Local step time by width",
                    "## Server share of a round", "## Paper-scale projection", "## Quick preset"):
        assert heading in text, heading
    assert f"Generated by `hasfl bench --from-json {tiny['json']} --doc {page}`" in text


def test_second_report_is_a_section_of_the_page(tiny):
    bf16 = copy.deepcopy(tiny["report"])
    bf16.update(precision="bf16", label="")
    text = render_markdown([tiny["report"], bf16], ["a.json", "b.json"])
    assert text.count("## Targets") == 2 and "## precision bf16" in text and "### Paper-scale projection" in text
    assert "`b.json`: `hasfl bench` in quick mode, config `precision: bf16`" in text


@pytest.mark.parametrize("page", sorted(PAGES))
def test_committed_pages_are_generated_from_their_json(page):
    """docs/performance*.md are exactly what the renderer makes of the committed JSON."""
    sources = PAGES[page]
    reports = [json.loads((REPO / s).read_text()) for s in sources]
    command = f"hasfl bench --from-json {' '.join(sources)} --doc {page}"
    assert render_markdown(reports, sources, command) == (REPO / page).read_text()
    for r in reports:
        if r.get("kind") != "flower":  # the Flower comparison (hasfl.bench.flower) has no targets of its own
            assert r["targets"] == summarize_targets(r)


def test_renderer_rejects_an_old_report(tmp_path):
    old = json.loads((REPO / "docs/bench/cpu.json").read_text()) | {"bench_version": 1}
    with pytest.raises(ValueError, match="convert_reports.py"):
        render_markdown(old)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    assert main(["bench", "--from-json", str(path)]) == 2


def test_targets_summary():
    r = json.loads((REPO / "docs/bench/cpu.json").read_text())
    t = summarize_targets(r)
    assert t["client_vs_bare"]["value"] == r["client_vs_bare"]["min_ratio"] and t["client_vs_bare"]["met"] is True
    assert t["server_share_excl_eval"]["met"] is True and t["server_share_incl_eval"]["met"] is False
    assert t["paper_preset_hours"]["met"] is None  # no hours goal on a CPU
    assert t["quick_preset_wall"]["met"] is True and t["quick_preset_outside_share"]["met"] is True
    r["client_vs_bare"]["min_ratio"] = 0.85
    r["quick_preset"]["wall_s"] = 700.0
    gpu = json.loads((REPO / "docs/bench/h200.json").read_text())
    t, tg = summarize_targets(r), summarize_targets(gpu)
    assert t["client_vs_bare"]["met"] is False and t["quick_preset_wall"]["met"] is False
    assert tg["paper_preset_hours"]["goal"] == "<= 8 on one GPU" and tg["paper_preset_hours"]["met"] is False
    assert tg["cnn_width_scaling"]["met"] is False and "client_vs_bare" not in tg


def test_user_facing_text_names_no_issue_numbers():
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["bench"]
    texts = [sub.format_help(), *((REPO / p).read_text() for p in PAGES)]
    for text in texts:
        assert not re.search(r"issue|\([a-e]\)", text, re.IGNORECASE), text[:200]


@pytest.mark.parametrize("args,error", [
    (["--sections", "client,foo"], "unknown section(s) foo"),
    (["--trials", "0"], "argument --trials: must be > 0"),
    (["--threads", "two"], "argument --threads: expected an integer"),
    (["--device", "tpu"], "argument --device: invalid choice"),
])
def test_bad_arguments_are_rejected_by_the_parser(args, error, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", *args])
    assert exc.value.code == 2 and error in capsys.readouterr().err


@pytest.mark.parametrize("args,error", [
    (["--from-json", "x.json", "--quick"], "--from-json renders saved reports and measures nothing"),
    (["--quick", "--run-quick", "--quick-wall-s", "5"], "use one of them"),
    (["--quick", "--sections", "width", "--quick-wall-s", "5"], "which --sections leaves out"),
    (["--quick", "--min-trial-s", "-1"], "--min-trial-s must be >= 0"),
    (["--from-json", "/nonexistent/r.json"], "cannot read a JSON report"),
    (["--quick", "--precision", "tf32", "--device", "cpu"], "config key 'precision' is 'tf32', which needs a CUDA"),
])
def test_bad_combinations_fail_before_measuring(args, error, capsys):
    import time

    tic = time.perf_counter()
    assert main(["bench", *args]) == 2
    assert time.perf_counter() - tic < 10
    captured = capsys.readouterr()
    assert error in captured.err and captured.out == ""


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


def test_quick_preset_from_a_snakemake_log(tmp_path: Path):
    logs = tmp_path / "log"
    logs.mkdir()
    (logs / "2026-11-29T100000.snakemake.log").write_text(LOG)
    info = parse_snakemake_log(logs / "2026-11-29T100000.snakemake.log")
    assert info["wall_s"] == 30 and info["complete"] and info["job_stats"] == {"train": 2, "all": 1}
    assert info["job_walls_s"] == {"train": 30.0, "all": 0.0} and info["job_counts"]["train"] == 2
    for i, (tot, tr) in enumerate([(8.0, 6.0), (16.0, 12.0)]):
        run = tmp_path / "results" / "runs" / "digits" / "hasfl" / f"seed{i}"
        run.mkdir(parents=True)
        (run / "timings.json").write_text(json.dumps({"total_s": tot, "local_training_s": tr, "server_s": 1.0,
                                                      "evaluation_s": 1.0}))
    rep = quick_preset_report(tmp_path / "results", cores=2, log_dir=logs)
    assert rep["status"] == "measured" and rep["wall_s"] == 30 and rep["runs"] == 2
    assert rep["outside_engine_share"] == pytest.approx(1 - 24 / 60)
    assert rep["log"]["train_job_overhead_s_mean"] == pytest.approx(3.0)
    assert summarize_targets({"machine": {"device": "cpu"}, "quick_preset": rep})[
        "quick_preset_outside_share"]["met"] is False  # 60 % outside the engine
    assert quick_preset_report(tmp_path / "results", cores=2, wall_s=48.0)["outside_engine_share"] == \
        pytest.approx(1 - 24 / 96)


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"experiment_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", EXPERIMENTS, ids=[p.name for p in EXPERIMENTS])
def test_experiment_scripts_import_and_help(path, capsys):
    """Each experiment runs against the installed package: it imports, documents its result, and has --help."""
    module = _load(path)
    assert module.__doc__ and "Result" in module.__doc__ or path.name == "convert_reports.py"
    with pytest.raises(SystemExit) as exc:
        module.main(["--help"])
    assert exc.value.code == 0 and "usage:" in capsys.readouterr().out


def test_experiments_readme_names_every_script():
    readme = (REPO / "scripts" / "experiments" / "README.md").read_text()
    assert all(p.name in readme for p in EXPERIMENTS)


def test_client_batching_runs_both_engines():
    """The experiment runs the real engine both ways: the same client steps, weights equal to float rounding.

    The tolerances hold on AVX2 and AVX-512 kernels with a 5x margin: measured, the weights differ by 4.3e-6
    (AVX-512) and 8.3e-6 (`ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`, as on an AVX2-only CPU), the BN running
    statistics (forward passes through every layer) by 4.3e-6 and 1.9e-5."""
    from hasfl.config import load_config

    mod = _load(REPO / "scripts" / "experiments" / "client_batching.py")
    cfg = load_config()
    cfg["federation"].update(clients=4, clients_per_round=3)
    cfg["capacity"].update(tiers=[0.5, 1.0], counts=[2, 2])
    out = mod.bench_client_batching(cfg, torch.device("cpu"), "emnist", "heterofl", rounds=2, client_n=16)
    assert out["same_client_steps"] and out["sequential"]["client_steps"] == 2 * 3 * 1  # 16 samples = 1 batch of 64
    assert 0 <= out["max_abs_diff_final_weights"] < 5e-5 and out["batched_speedup"] > 0
    assert 0 <= out["max_abs_diff_bn_statistics"] < 1e-4


def test_concurrency_packing_arithmetic():
    """Packed hours = serial hours x one-job rate of the first run / best aggregate rate of each run."""
    mod = _load(REPO / "scripts" / "experiments" / "concurrency.py")

    def run(label: str, rates: dict[str, dict[int, float]]) -> dict:
        return {"label": label, "rows": [{"dataset": ds, "jobs": k, "steps_per_s_total": v}
                                         for ds, by_k in rates.items() for k, v in by_k.items()]}

    report = {"paper_scale": {"datasets": {"cifar10": {"job_hours": 12.0}, "emnist": {"job_hours": 30.0}}}}
    plain = run("no MPS", {"cifar10": {1: 100.0, 4: 200.0, 8: 150.0}, "emnist": {1: 50.0, 8: 100.0}})
    mps = run("MPS", {"cifar10": {1: 80.0, 8: 600.0}, "emnist": {1: 40.0, 16: 500.0}})
    a, b = mod.pack(report, [plain, mps])
    assert a["datasets"]["cifar10"] == {"jobs_at_once": 4, "speedup_vs_one_job_alone": 2.0, "device_hours": 6.0}
    assert a["device_hours_total"] == 21.0
    assert b["datasets"]["cifar10"]["device_hours"] == 2.0 and b["datasets"]["emnist"]["device_hours"] == 3.0


def test_device_check_pieces_render_into_the_page(tiny, tmp_path, cpu_packing_calibration):
    """scripts/gpu-check.sh's pieces, measured here on the CPU by the same code: determinism (a job twice, once
    SIGKILLed and resumed), the packing calibration, the batched step; assembled into the bench report, rendered,
    and the packed paper hours computed from them."""
    from hasfl.bench import gpu_check
    from hasfl.config import load_config
    from hasfl.integrity import UNCHECKED
    from hasfl.registry import RUN_FILES

    check = tmp_path / "check"
    check.mkdir()
    det = gpu_check.determinism(tmp_path / "det", "cpu", rounds=4)
    assert det["twice_identical"] and det["resumed_identical"] and det["killed_mid_run"]
    compared = [f for f in RUN_FILES if f not in UNCHECKED]  # every run file but the wall times
    assert det["files_compared"] == len(compared) and det["determinism"]["deterministic_algorithms"] is False  # CPU
    (check / "determinism.json").write_text(json.dumps(det))
    cal = cpu_packing_calibration
    (check / "packing.json").write_text(json.dumps(cal))
    cfg = load_config()
    cfg["federation"].update(clients=4, clients_per_round=2)
    cfg["capacity"].update(tiers=[0.5, 1.0], counts=[2, 2])
    mod = _load(REPO / "scripts" / "experiments" / "client_batching.py")
    (check / "batched.json").write_text(json.dumps(mod.bench_client_batching(cfg, torch.device("cpu"), "emnist",
                                                                             "hasfl", rounds=2, client_n=8)))
    report_path = tmp_path / "r.json"
    report_path.write_text(tiny["json"].read_text())
    assert gpu_check.main(["assemble", str(check), "--into", str(report_path)]) == 0
    report = json.loads(report_path.read_text())
    assert report["gpu_check"]["quick_preset_packed"] is None and report["gpu_check"]["packing"] == cal
    text = render_markdown(report)
    assert "## Device check (scripts/gpu-check.sh)" in text
    assert "run twice: byte-identical; SIGKILLed after a checkpoint and resumed: byte-identical" in text
    assert "Packed: not measured." in text and "MPS: not asked for" in text
    t = summarize_targets(report)["paper_preset_packed_hours"]
    assert t["value"] == round(report["paper_scale"]["job_hours_total"] / cal["plain"]["speedup"], 2)
    assert t["goal"] == "<= 8 in fp32"
