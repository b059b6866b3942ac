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
