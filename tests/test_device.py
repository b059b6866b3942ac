"""One device decision (hasfl.device): the pre-flight, the GPU plan and the jobs go by the GPUs torch can use.

A GPU that ``nvidia-smi`` lists (here a stand-in ``nvidia-smi`` on PATH: an external tool) but torch cannot use
(this machine's torch has no CUDA device; ``CUDA_VISIBLE_DEVICES=""``; a probe that fails) is no GPU: the paper
preset keeps its CPU stop, ``device: cuda`` is refused before any job. The torch probe runs for real (this
interpreter, in a subprocess). Runs of different device classes never meet in one analysis.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path

import pytest
import torch

from hasfl import device
from hasfl.config import load_config, run_config
from hasfl.dag import preflight
from hasfl.dag.jobs import verify_runs_job
from hasfl.integrity import IntegrityError, run_identity, training_code_digest, write_run_manifest

REPO = Path(__file__).resolve().parents[1]
LISTED = ("GPU 0: NVIDIA H200 (UUID: GPU-a)",)
FAKE_SMI = textwrap.dedent("""\
    #!/usr/bin/env bash
    # stand-in for nvidia-smi -L on a machine whose driver knows one GPU
    echo "GPU 0: NVIDIA H200 (UUID: GPU-a)"
""")
NO_CUDA_HERE = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch that cannot use CUDA")


@pytest.fixture()
def gpu_listed(tmp_path, monkeypatch) -> Path:
    """This process as on a machine whose nvidia-smi lists one GPU (the stand-in first on ``PATH``), with an empty
    hasfl cache (the pre-flight's, fixed at import from ``XDG_CACHE_HOME``, pointed here): the cache folder."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(preflight, "CACHE", tmp_path / "cache" / "hasfl")
    return tmp_path / "cache" / "hasfl"


@NO_CUDA_HERE
def test_paper_preset_keeps_its_cpu_stop_when_torch_cannot_use_the_listed_gpu(gpu_listed, plan, tmp_path) -> None:
    """nvidia-smi lists a GPU, torch here cannot use it: the pre-flight prices the CPU, says why in one line and
    applies the CPU stop (a dry run shows it, a run stops before any job); the probe's answer is cached. The
    Snakefile's session in process (conftest ``plan``), the probe for real."""
    config = {"results_dir": str(tmp_path / "results")}
    dry = plan(REPO, config=config, argv=("-n", "all"))
    assert dry.code is None, dry.stderr[-3000:]
    assert "hasfl pre-flight: preset 'paper'" in dry.stderr and "no GPU); device cpu" in dry.stderr
    note = [ln for ln in dry.stderr.splitlines() if ln.startswith("  GPU: nvidia-smi lists 1 GPU(s)")]
    assert len(note) == 1 and "torch here cannot use them" in note[0] and "treated as no GPU" in note[0]
    assert "a run would not start: the estimated" in dry.stderr and "GPU packing" not in dry.stderr
    assert "a dry run caches no probe" in note[0]
    probe = device.probe_path(gpu_listed, LISTED)
    assert not probe.exists()  # a dry run writes nothing of ours
    run = plan(REPO, config=config, argv=("--cores", "2", "all"))
    assert run.code == 1 and "hasfl: not starting: the estimated" in run.stderr
    assert json.loads(probe.read_text())["cuda"] is False  # a build caches the probe's answer for the next one
    assert "Traceback" not in run.stderr and not (tmp_path / "results").exists()  # no job ran


@NO_CUDA_HERE
def test_device_cuda_without_a_gpu_torch_can_use_is_refused_before_any_job(gpu_listed, plan, tiny_preset,
                                                                            tmp_path) -> None:
    """Config ``device: cuda`` where nvidia-smi lists a GPU torch cannot use: refused in one line naming the key,
    before the data stage (which used to run, then the training job died with a traceback)."""
    preset = tiny_preset(tmp_path, device="cuda")
    files = (REPO / "presets" / "quick.yaml", preset)
    dry = plan(tmp_path, *files, argv=("-n", "all"))
    assert dry.code is None, dry.stderr[-3000:]
    assert "run on this machine, the build stops at its start: config key 'device' is 'cuda' but this machine has " \
           "no GPU torch can use (nvidia-smi lists 1 GPU(s) but torch here cannot use them" in dry.stderr
    # where the jobs run is known once Snakemake set its executor, after the parse: the refusal is at ``onstart``,
    # before any job (not even the data stage)
    run = plan(tmp_path, *files, argv=("--cores", "2", "all"))
    assert run.code is None and "Traceback" not in run.stderr, run.stderr[-3000:]
    why = run.session.start_refusal()
    assert why.startswith("config key 'device' is 'cuda'") and "device: cpu" in why
    assert not (tmp_path / "results").exists()


def test_probe_honours_cuda_visible_devices_and_is_cached(tmp_path, monkeypatch) -> None:
    """The real probe with ``CUDA_VISIBLE_DEVICES=""``: torch sees no device on any machine, so the listed GPU is
    no GPU, said why; the answer is cached per CUDA_VISIBLE_DEVICES (another value is probed anew)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    found = device.devices(tmp_path, LISTED)
    assert found.listed == LISTED and found.gpus == ()
    assert "torch here cannot use them" in found.note and "treated as no GPU" in found.note
    assert "CUDA_VISIBLE_DEVICES=''" in found.note or "CPU-only build" in found.note
    cached = device.probe_path(tmp_path, LISTED)
    assert json.loads(cached.read_text())["count"] == 0 and cached.name in found.note
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert device.probe_path(tmp_path, LISTED) != cached


def test_no_gpu_listed_costs_no_probe_and_a_failed_probe_is_no_gpu(tmp_path) -> None:
    """A machine whose nvidia-smi lists nothing runs no probe (nothing is cached); a probe that runs past its time
    counts as no GPU, said in one line."""
    assert device.devices(tmp_path / "none", ()) == device.Devices((), ())
    assert not (tmp_path / "none").exists()
    slow = device.devices(tmp_path / "slow", LISTED, timeout_s=0.01)
    assert slow.gpus == () and "failed or ran past 0.01 s" in slow.note and "\n" not in slow.note
    assert not (tmp_path / "slow").exists()  # a failed probe is not cached: the next pre-flight probes again


def test_resolve_is_the_jobs_decision() -> None:
    """Config ``device`` as a job resolves it: auto follows torch; cuda without it is a one-line error."""
    assert device.resolve("auto", True) == "cuda" and device.resolve("auto", False) == "cpu"
    assert device.resolve("cpu", True) == "cpu" and device.resolve("cuda", True) == "cuda"
    with pytest.raises(device.DeviceError, match=r"config key 'device' is 'cuda' but no CUDA device .*\(why\)"):
        device.resolve("cuda", False, "why")
    # the job's own resolution (hasfl.fl.runtime.resolve_device, unchanged so that no run's training-code identity
    # changes) is the same predicate: torch.cuda.is_available(), which the probe reports as "cuda"
    import torch

    from hasfl.fl.runtime import resolve_device

    view = device.torch_view()
    assert bool(view["cuda"]) == torch.cuda.is_available()
    for name in ("auto", "cpu"):
        assert resolve_device(name).type == device.resolve(name, bool(view["cuda"]))


def _finished_run(folder: Path, config: dict, method: str, device_class: str) -> None:
    """A finished run folder's manifest, written as a training job writes it (no result files needed)."""
    folder.mkdir(parents=True)
    identity = run_identity(run_config(config, "digits", method, 42), {}, data_digest="d",
                            code=training_code_digest(method, "digits"), budget=None, device_class=device_class)
    write_run_manifest(folder, [], identity)


def test_analysis_gate_refuses_runs_of_two_device_classes(tmp_path) -> None:
    """verify_runs (the gate before the analysis): a CPU run and a GPU run of one preset stop the analysis,
    naming both classes and a folder of each; nothing is deleted. One device class passes."""
    config = load_config(REPO / "presets" / "quick.yaml")
    runs = tmp_path / "results" / "runs" / "digits"
    _finished_run(runs / "hasfl" / "seed42", config, "hasfl", "cpu")
    _finished_run(runs / "fedavg" / "seed42", config, "fedavg", "cuda:NVIDIA H200")
    folders = [str(runs / m / "seed42") for m in ("hasfl", "fedavg")]
    expected = {f: run_config(config, "digits", m, 42) for f, m in zip(folders, ("hasfl", "fedavg"), strict=True)}
    out = tmp_path / "verified.json"
    with pytest.raises(IntegrityError, match=r"2 device classes") as err:
        verify_runs_job(folders, expected, str(out))
    msg = str(err.value)
    assert f"cpu: 1 run(s), e.g. '{folders[0]}'" in msg and f"cuda:NVIDIA H200: 1 run(s), e.g. '{folders[1]}'" in msg
    assert not out.exists() and all((Path(f) / "manifest.json").is_file() for f in folders)
    verify_runs_job(folders[:1], {folders[0]: expected[folders[0]]}, str(out))  # one class: the gate passes
    assert out.exists()


@NO_CUDA_HERE
def test_a_gpu_build_for_a_cluster_is_planned_from_a_machine_without_a_gpu(snakemake, plan, tiny_preset,
                                                                          tmp_path) -> None:
    """docs/guide/slurm.md's path: ``device: cuda`` from a login node without a GPU. Snakemake parses the Snakefile
    before it sets the executor, so the session read "local" during the parse and refused ("the jobs would run
    here"). Now the plan is made, each training job requests a GPU, and the refusal waits for ``onstart``, where it
    applies only to local execution."""
    res = snakemake("-n", "all", "--executor", "slurm", "--jobs", "10", "--configfile", REPO / "presets/quick.yaml",
                    "--config", "device=cuda", f"results_dir={tmp_path / 'results'}",
                    "-s", REPO / "Snakefile", "--directory", tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout + res.stderr
    assert "a run would not start" not in out and "each job requests a GPU on its node" in out, out[-3000:]
    blocks = [b for b in re.split(r"\n(?=rule |localrule )", out) if b.startswith("rule train:")]
    assert blocks and all(re.search(r"resources: .*\bgpu=1\b", b) for b in blocks), blocks[:1]
    assert all(re.search(r"\bgpu_slot=0\b", b) for b in blocks)
    # the session itself: a cluster executor (set after the parse) starts; local execution is refused at onstart
    preset = tiny_preset(tmp_path / "p", device="cuda")
    run = plan(tmp_path / "p", REPO / "presets" / "quick.yaml", preset, argv=("--jobs", "10", "all"))
    assert run.code is None, run.stderr[-3000:]
    run.session.workflow.local_exec = False
    assert run.session.start_refusal() is None and run.session.gpu_slot() == 0
    run.session.workflow.local_exec = True
    assert run.session.start_refusal().startswith("config key 'device' is 'cuda' but this machine has no GPU")
