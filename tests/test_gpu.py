"""The CUDA promises on a GPU (every test here is skipped without CUDA; scripts/gpu-check.sh runs this file).

A GPU run is deterministic by default: the same job twice and a SIGKILLed-then-resumed one give the same
bytes (hasfl.bench.gpu_check.determinism, the real ``hasfl train``), under the flags the run reports; the
batched client step computes the sequential engine's update there too."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_gpu_runs_are_byte_identical_twice_and_resumed(tmp_path) -> None:
    from hasfl.bench.gpu_check import determinism

    out = determinism(tmp_path, "cuda", rounds=6)
    assert out["run_device"].startswith("cuda")
    assert out["determinism"] == {"deterministic_algorithms": True, "cudnn_deterministic": True,
                                  "cudnn_benchmark": False, "cublas_workspace_config": ":4096:8"}
    assert out["killed_mid_run"]
    assert out["twice_identical"], out["differing_twice"]
    assert out["resumed_identical"], out["differing_resumed"]


def test_batched_step_on_the_gpu_matches_sequential() -> None:
    import importlib.util
    from pathlib import Path

    from hasfl.config import load_config

    path = Path(__file__).resolve().parents[1] / "scripts" / "experiments" / "client_batching.py"
    spec = importlib.util.spec_from_file_location("client_batching", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.bench_client_batching(load_config(), torch.device("cuda"), "cifar10", "hasfl", rounds=2, client_n=64)
    assert out["same_client_steps"] and out["max_abs_diff_final_weights"] < 1e-4


def test_an_evaluation_on_the_gpu_is_deterministic_and_near_the_cpu_count(_engine_base) -> None:
    """Issue 47 point 2: an evaluate job on a GPU machine computes there (``auto``), twice the same count, within a few
    test samples of the CPU's (another device class: its own store key)."""
    from hasfl.analysis import stale
    from hasfl.analysis.per_run.base import evaluation_device
    from hasfl.data import load_dataset
    from hasfl.models import family_from_config

    device, device_class = evaluation_device("auto")
    assert device == "cuda" and device_class.startswith("cuda:")
    dp = _engine_base["dataset_params"]["digits"]
    bundle = load_dataset("digits", _engine_base["data_dir"], dp)
    fam = family_from_config(dp["model"], bundle.input_shape, bundle.num_classes)
    torch.manual_seed(0)
    state = fam.build(1.0).state_dict()
    counts = []
    for where in ("cuda", "cuda", "cpu"):
        model = fam.build(1.0)
        model.load_state_dict(state)
        stale._COUNTS.clear()  # a count each time, not the cached one
        counts.append(stale.evaluate_accuracy(model, bundle, device=where) * len(bundle.test_y))
    assert counts[0] == counts[1]
    assert abs(counts[0] - counts[2]) <= 3, counts
