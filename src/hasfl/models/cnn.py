"""Image CNN family with nested channel slicing (paper Algorithm 2, Eq. 2, Table 1).

Architecture: ``Conv3x3(pad 1, bias) -> BatchNorm2d -> ReLU`` per entry of
``channels``, ``MaxPool2d(2)`` after the conv indices in ``pool_after``, then
``AdaptiveAvgPool2d(pool_out) -> flatten -> Linear(C_last * pool_out^2, hidden)
-> ReLU -> Linear(hidden, num_classes)``.

Width ``p`` keeps the leading ``ceil(p * C)`` channels of every conv layer and
the leading ``ceil(p * hidden)`` hidden units, plus their input connections
(under a rolling :class:`~hasfl.models.slicing.Window`, that many consecutive units from the
round's offset, wrapping around; each layer's inputs are the previous layer's kept outputs).
Input channels and classes are never sliced.  Flattening is channel-major, so
the first linear layer's inputs for the leading ``k`` channels are its leading
``k * pool_out^2`` columns.  BatchNorm weight, bias and running statistics are
sliced with their channels; ``num_batches_tracked`` is shared whole.  Which running
statistics a width-``p`` layer evaluates with is ``bn_stats`` (:mod:`hasfl.models.bn`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from hasfl.models.bn import BN_MODES, check_mode
from hasfl.models.cost import conv_linear_macs
from hasfl.models.family import ModelFamily
from hasfl.models.slicing import SliceRule, Span, Window, width

__all__ = ["CNN", "CNNFamily"]

_ALL = slice(None)


class CNN(nn.Module):
    """Plain VGG-style CNN; every size is explicit so sub-models are just smaller CNNs."""

    def __init__(
        self,
        in_channels: int,
        channels: Sequence[int],
        pool_after: Sequence[int],
        pool_out: int,
        hidden: int,
        num_classes: int,
        track_running_stats: bool = True,
    ) -> None:
        super().__init__()
        ins = [in_channels, *channels[:-1]]
        self.convs = nn.ModuleList(nn.Conv2d(i, o, 3, padding=1, bias=True) for i, o in zip(ins, channels))
        self.bns = nn.ModuleList(nn.BatchNorm2d(c, track_running_stats=track_running_stats) for c in channels)
        self.pool_after = frozenset(pool_after)
        self.pool_out = pool_out
        self.fc1 = nn.Linear(channels[-1] * pool_out * pool_out, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        for i, (conv, bn) in enumerate(zip(self.convs, self.bns)):
            x = torch.relu(bn(conv(x)))
            if i in self.pool_after:
                x = nn.functional.max_pool2d(x, 2)
        x = torch.flatten(average_pool(x, self.pool_out), 1)
        return self.fc2(torch.relu(self.fc1(x)))


def average_pool(x: Tensor, out: int) -> Tensor:
    """``AdaptiveAvgPool2d(out)`` with a backward pass that is deterministic on CUDA.

    A side divisible by ``out`` pools by ``avg_pool2d`` (equal windows; bitwise the adaptive
    pool's values and gradients on the CPU, tested). Otherwise the windows overlap and CUDA's
    adaptive-pool backward adds by atomics, which ``torch.use_deterministic_algorithms`` refuses
    (``AdaptiveAvgPool2d``, "when attempting to differentiate a CUDA tensor"); under that mode
    (which runs set on CUDA only, :class:`hasfl.fl.runtime.Numerics`) the same averages are two
    matmuls with the window-membership matrices (float rounding only, tested), elsewhere the
    adaptive pool itself, so a CPU run computes what it always did.
    """
    h, w = x.shape[-2:]
    if h % out == 0 and w % out == 0:
        return nn.functional.avg_pool2d(x, (h // out, w // out))
    if not torch.are_deterministic_algorithms_enabled():
        return nn.functional.adaptive_avg_pool2d(x, out)
    return pool_matrix(h, out, x) @ x @ pool_matrix(w, out, x).T


def pool_matrix(n: int, out: int, like: Tensor) -> Tensor:
    """The ``(out, n)`` averaging matrix of adaptive pooling along one side of length ``n``: row ``i``
    is ``1 / len`` over ``[floor(i n / out), ceil((i + 1) n / out))``, PyTorch's windows."""
    m = torch.zeros(out, n, dtype=like.dtype, device=like.device)
    for i in range(out):
        lo, hi = (i * n) // out, -((-(i + 1) * n) // out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


class CNNFamily(ModelFamily):
    """Width-p sub-models of :class:`CNN` and their slice rules."""

    ARCH_KWARGS = frozenset({"channels", "pool_after", "pool_out", "hidden", "bn_stats"})
    BN_STATS = BN_MODES

    def __init__(
        self,
        *,
        in_shape: tuple[int, ...],
        num_classes: int,
        channels: Sequence[int] = (64, 64, 128, 128, 256, 256),
        pool_after: Sequence[int] = (1, 3),
        pool_out: int = 4,
        hidden: int = 512,
        bn_stats: str = "per_width",
    ) -> None:
        super().__init__()
        self.bn_stats = check_mode(bn_stats, "cnn: bn_stats")
        if len(in_shape) != 3:
            raise ValueError(f"cnn: in_shape must be (C, H, W), got {tuple(in_shape)}")
        if not channels:
            raise ValueError("cnn: channels must be non-empty")
        if any(not 0 <= i < len(channels) for i in pool_after):
            raise ValueError(f"cnn: pool_after {tuple(pool_after)} out of range for {len(channels)} convs")
        self.in_shape = tuple(int(s) for s in in_shape)
        self.num_classes = int(num_classes)
        self.channels = tuple(int(c) for c in channels)
        self.pool_after = tuple(int(i) for i in pool_after)
        self.pool_out = int(pool_out)
        self.hidden = int(hidden)

    def widths(self, p: float) -> dict[str, Any]:
        return {"channels": [width(p, c) for c in self.channels], "hidden": width(p, self.hidden)}

    def build(self, p: float = 1.0) -> CNN:
        w = self.widths(p)
        return CNN(self.in_shape[0], w["channels"], self.pool_after, self.pool_out, w["hidden"], self.num_classes,
                   track_running_stats=self.bn_stats != "batch")

    def dims(self, p: float) -> list[tuple[int, int]]:
        """Every conv layer's channels, then the hidden units."""
        w = self.widths(p)
        return [*zip(self.channels, w["channels"]), (self.hidden, w["hidden"])]

    def _make_rules(self, p: float, window: Window) -> dict[str, SliceRule]:
        w = self.widths(p)
        rules: dict[str, SliceRule] = {}
        keep_in: Span = _ALL  # input image channels are never sliced
        for i, c in enumerate(w["channels"]):
            keep = window.span(self.channels[i], c, i)
            rules[f"convs.{i}.weight"] = SliceRule(None, (keep, keep_in))
            rules[f"convs.{i}.bias"] = SliceRule(None, (keep,))
            for name in ("weight", "bias"):
                rules[f"bns.{i}.{name}"] = SliceRule(None, (keep,))
            if self.bn_stats != "batch":
                for name in ("running_mean", "running_var"):
                    rules[f"bns.{i}.{name}"] = SliceRule(None, (keep,))
                rules[f"bns.{i}.num_batches_tracked"] = SliceRule(None, ())
            keep_in = keep
        h = window.span(self.hidden, w["hidden"], len(self.channels))
        flat = _flat(keep_in, self.pool_out**2)  # channel-major flatten
        rules["fc1.weight"] = SliceRule(None, (h, flat))
        rules["fc1.bias"] = SliceRule(None, (h,))
        rules["fc2.weight"] = SliceRule(None, (_ALL, h))  # every class row kept
        rules["fc2.bias"] = SliceRule(None, (_ALL,))
        return rules

    def _macs(self, p: float, module: nn.Module) -> int:
        return conv_linear_macs(module, torch.zeros(1, *self.in_shape))


def _flat(channels: Span, per_channel: int) -> Span:
    """The first linear layer's input columns of the kept last-layer ``channels`` (flattening is channel-major:
    channel k is columns ``[k * per_channel, (k + 1) * per_channel)``)."""
    pieces = channels if isinstance(channels, tuple) else (channels,)
    cols = tuple(slice(s.start * per_channel, s.stop * per_channel) for s in pieces)
    return cols[0] if len(cols) == 1 else cols
