"""Throughput of this machine for the pre-flight estimate (:mod:`hasfl.dag.preflight`), in seconds.

Three measurements with the engine's own local optimiser (:class:`hasfl.fl.client.LocalSGD`)
on one thread, the way one Snakemake job runs:

* ``step_overhead_s`` -- one local step of a model so small that its arithmetic is negligible
  (Python, dispatch, optimiser: what every step pays);
* ``cnn_gmacs`` / ``lstm_gmacs`` -- training multiply-accumulates per second (forward MACs as
  Table 1 counts them, times 3 for forward + backward) of a mid-size CNN and LSTM, with the
  overheads taken out;
* ``lstm_timestep_s`` -- what an LSTM step pays per time step and layer beyond its arithmetic
  (the recurrence runs one small kernel chain per character: at the presets' small hidden sizes
  this, not the arithmetic, is most of a step). Fitted from two LSTMs, hidden 16 and 128.

``python -m hasfl.bench.calibrate --json`` prints them; the pre-flight runs it once per machine
(about 5 s with the torch import) and caches the answer.

``python -m hasfl.bench.calibrate --forward SPEC`` (:func:`forward_seconds`) measures what the analysis's evaluate
jobs pay per sample for one model of a preset, at each of :data:`FORWARD_WIDTHS`: its forward passes are priced from
these, not from the training rate (at the presets' small CNNs a forward in batches of 512 runs at a
quarter of the training rate -- activations that leave the caches, per-batch dispatch -- and the static batch-norm
pass runs in the local batch size). The pre-flight caches one answer per machine and model.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import torch

from hasfl.analysis.stale import CPU_EVAL_BATCH, GPU_EVAL_BATCH
from hasfl.bench.harness import cpu_model
from hasfl.data.base import DatasetBundle
from hasfl.fl.client import ClientData, LocalSGD, OptimConfig
from hasfl.fl.runtime import Numerics, resolve_device
from hasfl.models import build_family, family_from_config

__all__ = ["FORWARD_WIDTHS", "calibrate", "forward_seconds"]

#: The widths each model's evaluation forward is measured at (:func:`forward_seconds`); the pre-flight interpolates
#: between them and uses the narrowest below it.
FORWARD_WIDTHS = (1.0, 0.5, 0.25, 0.125, 0.0625)


def _bundle(shape: tuple[int, ...], classes: int, n: int, text: bool, device: torch.device) -> DatasetBundle:
    g = torch.Generator().manual_seed(0)
    hi = classes if text else 256
    x = torch.randint(0, hi, (n, *shape), generator=g, dtype=torch.uint8)
    y = torch.randint(0, classes, (n,), generator=g, dtype=torch.int64)
    mean = None if text else tuple(0.5 for _ in range(shape[0]))
    std = None if text else tuple(0.25 for _ in range(shape[0]))
    return DatasetBundle(name="calibration", task="text" if text else "image", train_x=x, train_y=y, test_x=x[:8],
                         test_y=y[:8], num_classes=classes, input_shape=shape, mean=mean, std=std).to(device)


def _seconds_per_step(arch: str, kwargs: dict[str, Any], shape: tuple[int, ...], classes: int, batch: int,
                      steps: int, device: torch.device) -> tuple[float, int]:
    """Median seconds of one local step and the model's forward MACs per sample."""
    family = build_family(arch, in_shape=shape, num_classes=classes, **kwargs)
    numerics = Numerics.for_run(device, "fp32", arch == "cnn")
    module = numerics.prepare(family.build(1.0))
    bundle = _bundle(shape, classes, batch * steps, arch == "lstm", device)
    sgd = LocalSGD(OptimConfig(lr=0.01, lr_decay=1.0, local_epochs=1, batch_size=batch, momentum=0.9,
                               weight_decay=1e-4, clip=10.0), bundle.inputs)
    data = ClientData(0, torch.arange(batch * steps, device=device), bundle.train_x, bundle.train_y)
    times = []
    with numerics.backend_flags():
        for trial in range(4):
            if device.type == "cuda":
                torch.cuda.synchronize()
            tic = time.perf_counter()
            sgd.train(module, data, 0.01, torch.Generator().manual_seed(trial))
            if device.type == "cuda":
                torch.cuda.synchronize()
            times.append((time.perf_counter() - tic) / steps)
    return sorted(times)[1:][len(times[1:]) // 2], family.cost(1.0).macs  # the first trial warms up


def calibrate(device_name: str = "auto", threads: int = 1) -> dict[str, Any]:
    """The three numbers of the module docstring for ``device_name`` at ``threads`` torch threads."""
    torch.set_num_threads(threads)
    device = resolve_device(device_name)
    overhead, _ = _seconds_per_step("cnn", {"channels": [2], "pool_after": [], "pool_out": 1, "hidden": 2},
                                    (1, 4, 4), 2, 2, 16, device)
    cnn_s, cnn_macs = _seconds_per_step("cnn", {"channels": [32, 32, 64, 64], "pool_after": [1], "pool_out": 2,
                                                "hidden": 128}, (1, 28, 28), 10, 32, 8, device)
    lstm_s, lstm_macs = _seconds_per_step("lstm", {"embed_dim": 8, "hidden": 128, "layers": 2}, (80,), 96, 32, 8,
                                          device)
    small_s, small_macs = _seconds_per_step("lstm", {"embed_dim": 8, "hidden": 16, "layers": 2}, (80,), 96, 32, 8,
                                            device)

    def rate(step_s: float, macs: int) -> float:
        return 3.0 * macs * 32 / max(step_s - overhead, 1e-6) / 1e9

    # step = overhead + 160 time-step-layers x t_ts + 3 x MACs x batch / rate, for both LSTMs
    flops_big, flops_small = 3.0 * lstm_macs * 32, 3.0 * small_macs * 32
    per_flop = max((lstm_s - small_s) / max(flops_big - flops_small, 1.0), 1e-15)
    timestep = max((small_s - overhead - flops_small * per_flop) / 160.0, 0.0)
    return {"device": str(device), "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
            else cpu_model(), "threads": threads, "torch": torch.__version__, "step_overhead_s": overhead,
            "cnn_gmacs": rate(cnn_s, cnn_macs), "lstm_gmacs": 1.0 / per_flop / 1e9, "lstm_timestep_s": timestep}


def forward_seconds(model: dict[str, Any], shape: Sequence[int], classes: int, batch: int,
                    device_name: str = "auto", threads: int = 1) -> dict[str, Any]:
    """Seconds per sample of the analysis's two kinds of forward pass of the config block ``model`` (data of
    ``shape`` / ``classes``), at each width of :data:`FORWARD_WIDTHS`:

    * ``eval``: eval mode without autograd in the batches of the analysis's test-set evaluations on the device
      (:func:`hasfl.analysis.stale.evaluate_accuracy`: :data:`~hasfl.analysis.stale.CPU_EVAL_BATCH` on the CPU,
      :data:`~hasfl.analysis.stale.GPU_EVAL_BATCH` on a GPU);
    * ``stats`` (CNNs): training mode without autograd in batches of ``batch``, the local batch size (the static
      batch-norm statistics pass, :func:`hasfl.analysis.bn_sensitivity.static_statistics`).

    Random inputs of the model's shape: the time of a forward pass does not depend on the values."""
    torch.set_num_threads(threads)
    device = resolve_device(device_name)
    family = family_from_config(model, tuple(shape), int(classes))
    g = torch.Generator().manual_seed(0)
    text = model["arch"] == "lstm"

    def inputs(n: int) -> torch.Tensor:
        if text:
            return torch.randint(0, int(classes), (n, *shape), generator=g).to(device)
        return torch.randn((n, *shape), generator=g).to(device)

    def timed(net: torch.nn.Module, x: torch.Tensor, repeats: int) -> float:
        """Median seconds per sample of ``repeats`` forward passes of ``x``, after one of its first 8 samples."""
        net(x[:8])
        times = []
        for _ in range(repeats):
            tic = time.perf_counter()
            net(x)
            if device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - tic)
        return sorted(times)[len(times) // 2] / len(x)

    out: dict[str, Any] = {"eval": {}, "stats": {}}
    stats_batch = max(2, int(batch))  # batch norm cannot normalise one sample in training mode
    eval_batch = CPU_EVAL_BATCH if device.type == "cpu" else GPU_EVAL_BATCH
    big, small = inputs(eval_batch), inputs(stats_batch)
    for q in FORWARD_WIDTHS:
        net = family.build(q).to(device)
        with torch.inference_mode():
            out["eval"][str(q)] = timed(net.eval(), big, 1)
        if not text:
            with torch.no_grad():
                out["stats"][str(q)] = timed(net.train(), small, 5)
    return {"device": str(device), "threads": threads, "torch": torch.__version__, "eval_batch": eval_batch,
            "stats_batch": stats_batch, **out}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hasfl.bench.calibrate", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print JSON (the default)")
    parser.add_argument("--forward", metavar="SPEC", help="JSON {model, shape, classes, batch}: the analysis's "
                        "forward seconds per sample of that model (forward_seconds) instead")
    args = parser.parse_args(argv)
    if args.forward:
        spec = json.loads(args.forward)
        print(json.dumps(forward_seconds(spec["model"], spec["shape"], spec["classes"], spec["batch"], args.device,
                                         args.threads)))
        return 0
    print(json.dumps(calibrate(args.device, args.threads)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
