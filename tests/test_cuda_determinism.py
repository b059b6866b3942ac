"""Deterministic CUDA by default (config ``cuda_deterministic``), checked on the CPU.

* The flags a CUDA run sets are torch's real global state inside :meth:`Numerics.backend_flags`
  (deterministic algorithms, cuDNN deterministic without autotuning, cuBLAS's workspace), restored after;
  ``cuda_deterministic: false`` and CPU runs leave them alone; a run reports the flags it ran under in
  ``timings.json``, read from torch.
* Every op our training path runs has a deterministic CUDA kernel: the aten operators of real runs (CNN with
  batch norm at 8x8 and at 28x28, whose pooling windows overlap; the char-LSTM; every method's hooks) under
  deterministic mode, against the operators PyTorch documents as throwing under it
  (``torch.use_deterministic_algorithms``'s docstring, torch 2.14).
* The pooling that replaces ``AdaptiveAvgPool2d`` equals it: bitwise where the windows tile, to float
  rounding where they overlap.

tests/test_gpu.py runs the same promises on a GPU (skipped without CUDA).
"""

from __future__ import annotations

import copy
import json
import os

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from hasfl.config import load_config, run_config
from hasfl.fl.runtime import CUBLAS_WORKSPACE, Numerics, determinism_flags
from hasfl.models.cnn import average_pool

#: aten operators behind the entries of "will throw a RuntimeError when mode=True" in
#: ``torch.use_deterministic_algorithms.__doc__`` (torch 2.14): on CUDA, each refuses to run (forward or
#: backward) under deterministic mode.
CUDA_REFUSED = frozenset({
    "avg_pool3d_backward", "_adaptive_avg_pool2d_backward", "_adaptive_avg_pool3d_backward",
    "adaptive_max_pool2d_backward", "fractional_max_pool2d_backward", "fractional_max_pool3d_backward",
    "max_unpool1d", "max_unpool2d", "max_unpool3d", "upsample_linear1d_backward", "upsample_bilinear2d_backward",
    "upsample_bicubic2d_backward", "upsample_trilinear3d_backward", "reflection_pad1d_backward",
    "reflection_pad2d_backward", "reflection_pad3d_backward", "nll_loss2d_forward", "nll_loss2d_backward",
    "_ctc_loss_backward", "_embedding_bag_backward", "_embedding_bag_dense_backward", "put_", "put", "histc",
    "bincount", "median", "nanmedian", "grid_sampler_2d_backward", "grid_sampler_3d_backward", "scatter_reduce",
    "scatter_reduce_",
})


def test_the_refused_list_is_torchs_own() -> None:
    """Every layer or function the docstring lists as throwing is covered by an operator name above (a new torch
    that adds one fails here until the list is extended)."""
    doc = torch.use_deterministic_algorithms.__doc__ or ""
    refused = doc.split("normally-nondeterministic operations will throw")[1].split("In addition")[0]
    named = {line.split("`")[1].split(".")[-1] for line in refused.splitlines() if line.strip().startswith("*")}
    covered = {"AvgPool3d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool2d", "FractionalMaxPool2d",
               "FractionalMaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "interpolate", "ReflectionPad1d",
               "ReflectionPad2d", "ReflectionPad3d", "NLLLoss", "CTCLoss", "EmbeddingBag", "put_", "histc",
               "bincount", "median", "grid_sample", "scatter_reduce", "resize_"}
    assert named <= covered, sorted(named - covered)


@pytest.fixture()
def clean_env(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)  # a run sets it for its process; restored after
    before = {k: v for k, v in determinism_flags().items() if k != "cublas_workspace_config"}
    yield
    after = {k: v for k, v in determinism_flags().items() if k != "cublas_workspace_config"}
    assert after == before  # every test leaves torch as it found it


def test_a_cuda_run_sets_the_flags_and_restores_them(clean_env) -> None:
    numerics = Numerics.for_run(torch.device("cuda"), "fp32", image=True)  # builds without a GPU present
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == CUBLAS_WORKSPACE  # before the run's first cuBLAS call
    assert numerics.deterministic and not determinism_flags()["deterministic_algorithms"]
    with numerics.backend_flags():
        assert determinism_flags() == {"deterministic_algorithms": True, "cudnn_deterministic": True,
                                       "cudnn_benchmark": False, "cublas_workspace_config": CUBLAS_WORKSPACE}
    assert not torch.are_deterministic_algorithms_enabled()


def test_opting_out_and_cpu_runs_leave_pytorchs_defaults(clean_env) -> None:
    for numerics in (Numerics.for_run(torch.device("cuda"), "tf32", image=True, deterministic=False),
                     Numerics.for_run(torch.device("cpu"), "fp32", image=True)):
        with numerics.backend_flags():
            flags = determinism_flags()
            assert not flags["deterministic_algorithms"] and not flags["cudnn_deterministic"]
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ


def test_a_conflicting_cublas_setting_is_refused(monkeypatch) -> None:
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0")
    with pytest.raises(ValueError, match="cuda_deterministic.*CUBLAS_WORKSPACE_CONFIG=':0:0'"):
        Numerics.for_run(torch.device("cuda"), "fp32", image=False)
    Numerics.for_run(torch.device("cuda"), "fp32", image=False, deterministic=False)  # opted out: no matter


def test_the_key_is_part_of_a_gpu_runs_identity_only() -> None:
    cfg = load_config()
    assert cfg["cuda_deterministic"] is True and cfg["device"] == "auto"
    assert run_config(cfg, "cifar10", "hasfl", 42)["cuda_deterministic"] is True
    off = copy.deepcopy(cfg)
    off["cuda_deterministic"] = False
    assert run_config(off, "cifar10", "hasfl", 42) != run_config(cfg, "cifar10", "hasfl", 42)
    cpu = copy.deepcopy(off)
    cpu["device"] = "cpu"
    assert "cuda_deterministic" not in run_config(cpu, "cifar10", "hasfl", 42)  # a CPU run's bytes never change


def test_a_run_reports_the_flags_it_ran_under(engine_cfg, tmp_path, one_thread) -> None:
    from hasfl.config import data_config
    from hasfl.dag.jobs import train_job

    cfg = engine_cfg(rounds=1)
    train_job(run_config(cfg, "digits", "heterofl", 42), data_config(cfg, "digits"), tmp_path / "run")
    flags = json.loads((tmp_path / "run" / "timings.json").read_text())["determinism"]
    assert flags == determinism_flags()  # a CPU run: PyTorch's defaults, as torch reports them
    assert set(flags) == {"deterministic_algorithms", "cudnn_deterministic", "cudnn_benchmark",
                          "cublas_workspace_config"}


class Ops(TorchDispatchMode):
    """The aten operator names a block dispatches."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func._schema.name.split("::")[-1])
        return func(*args, **(kwargs or {}))


@pytest.fixture()
def deterministic_mode():
    """Deterministic mode on the CPU, as a CUDA run sets it (the model's pooling follows the mode)."""
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("method", ["hasfl", "fjord", "scaffold", "fedprox", "fedrolex", "hasfl_probe"])
def test_the_training_path_runs_no_operator_cuda_refuses(engine_cfg, federate, one_thread, deterministic_mode,
                                                         method) -> None:
    cfg = engine_cfg(rounds=2, warmup=0, t_adapt=1)
    ops = Ops()
    with ops:
        federate(cfg, method)
    assert "convolution_backward" in ops.names and "native_batch_norm_backward" in ops.names  # it saw a step
    assert not ops.names & CUDA_REFUSED, sorted(ops.names & CUDA_REFUSED)


@pytest.mark.parametrize("dataset", ["emnist", "shakespeare"])
def test_paper_models_run_no_operator_cuda_refuses(one_thread, deterministic_mode, dataset) -> None:
    """The paper's EMNIST CNN (28x28: 7x7 maps pooled to 4x4, overlapping windows) and char-LSTM, a local step
    and an evaluation, through the engine on synthetic data of the real shapes."""
    from hasfl.bench.workload import synthetic_bundle, synthetic_tables
    from hasfl.fl.engine import run_federation

    config = load_config()
    config["federation"].update(clients=4, clients_per_round=2, rounds=1)
    config["capacity"].update(tiers=[0.5, 1.0], counts=[2, 2])
    if dataset == "emnist":
        config["dataset_params"]["emnist"]["model"].update(channels=[4, 4, 8, 8, 8, 8], hidden=16)
    else:
        config["dataset_params"]["shakespeare"]["model"].update(hidden=16)
    bundle = synthetic_bundle(dataset, 4 * 8, 8, torch.device("cpu"))
    partition, clients = synthetic_tables(4, 8, config, 42)
    cfg = run_config(config, dataset, "heterofl", 42)
    cfg["device"] = "cpu"
    ops = Ops()
    with ops:
        run_federation(bundle, partition, clients, cfg)
    assert not ops.names & CUDA_REFUSED, sorted(ops.names & CUDA_REFUSED)
    if dataset == "emnist":
        assert "adaptive_avg_pool2d" not in ops.names and "_adaptive_avg_pool2d" not in ops.names


@pytest.mark.parametrize("side,out", [(7, 4), (28, 4), (5, 2), (6, 4)])
def test_deterministic_pooling_equals_the_adaptive_pool(deterministic_mode, side, out) -> None:
    torch.manual_seed(0)
    x = torch.randn(3, 5, side, side, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 5, out, out, dtype=torch.float64)
    want = F.adaptive_avg_pool2d(x, out)
    (want_grad,) = torch.autograd.grad(want, x, g)
    got = average_pool(x, out)
    (got_grad,) = torch.autograd.grad(got, x, g)
    assert torch.allclose(got, want, atol=1e-12) and torch.allclose(got_grad, want_grad, atol=1e-12)


def test_tiling_windows_pool_bitwise_as_before(one_thread) -> None:
    """Where the windows tile (CIFAR-10's 8x8 -> 4x4, digits' 4x4 -> 2x2), the pool is bitwise the old one in
    both layouts, so CPU runs of those models are unchanged."""
    torch.manual_seed(0)
    for side, out in ((8, 4), (4, 2)):
        for layout in (torch.contiguous_format, torch.channels_last):
            x = torch.randn(16, 8, side, side).contiguous(memory_format=layout).requires_grad_()
            g = torch.randn(16, 8, out, out)
            a = F.adaptive_avg_pool2d(x, out)
            b = average_pool(x, out)
            assert torch.equal(a, b)
            assert torch.equal(*(torch.autograd.grad(y, x, g)[0] for y in (a, b)))
