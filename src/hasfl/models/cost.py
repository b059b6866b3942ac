"""Per-client cost of a width-p sub-model (paper Section 3.4, Table 1).

Conventions (recorded in docs/decisions.md):

* ``params``: every trainable parameter of the physically sliced sub-model --
  conv and linear weights *and biases*, BatchNorm affine weight/bias, LSTM
  weights and both bias vectors, and the (unsliced) embedding.  BatchNorm
  running buffers are not parameters and are not counted.
* ``macs``: multiply-accumulates per sample in convolutions and linear layers
  only (no BN, activation, pooling or bias adds).  A conv costs
  ``H_out * W_out * C_out * (C_in / groups) * k_h * k_w`` and a linear layer
  ``in * out``; both are measured with forward hooks on a batch-1 dummy input,
  so they follow the real architecture.  The LSTM is counted analytically (see
  :func:`lstm_macs`).
* ``upload_mb``: ``params * 4 / 1e6`` -- one float32 copy of the sub-model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

__all__ = ["Cost", "conv_linear_macs", "lstm_macs", "table1"]


@dataclass(frozen=True)
class Cost:
    """Sub-model size, per-sample compute and upload volume (Table 1 columns)."""

    params: int
    macs: int
    upload_mb: float

    @classmethod
    def of(cls, params: int, macs: int) -> "Cost":
        return cls(params=params, macs=macs, upload_mb=params * 4 / 1e6)


def conv_linear_macs(module: nn.Module, example: Tensor) -> int:
    """MACs of all Conv2d/Linear layers for one forward pass of ``example`` (batch 1)."""
    total = 0

    def hook(layer: nn.Module, inputs: tuple[Tensor, ...], output: Tensor) -> None:
        nonlocal total
        if isinstance(layer, nn.Conv2d):
            kh, kw = layer.kernel_size
            total += output.numel() * (layer.in_channels // layer.groups) * kh * kw
        else:  # nn.Linear: in * out per output row
            total += output.numel() * layer.in_features

    handles = [m.register_forward_hook(hook) for m in module.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    was_training = module.training
    try:
        module.eval()
        with torch.no_grad():
            module(example)
    finally:
        module.train(was_training)
        for h in handles:
            h.remove()
    return total


def lstm_macs(*, seq_len: int, input_size: int, hidden: int, layers: int, out_features: int) -> int:
    """Per-sample MACs of the text model: LSTM stack + final linear on the last step.

    Each layer and time step computes the four gate pre-activations
    ``W_ih x_t + W_hh h_{t-1}``: ``4 h (in + h)`` MACs, where ``in`` is the
    embedding size for layer 0 and ``h`` above.  The output projection runs
    once (last time step only): ``h * out``.  Gate nonlinearities, elementwise
    cell updates and bias adds are not counted, matching the conv/linear-only
    convention of the image models.
    """
    total = 0
    in_size = input_size
    for _ in range(layers):
        total += seq_len * 4 * hidden * (in_size + hidden)
        in_size = hidden
    return total + hidden * out_features


def table1(p_values: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)) -> list[dict]:
    """Rows ``{model, p, params, macs, upload_mb}`` of paper Table 1 (exact counts)."""
    from hasfl.models import build_family  # local import: families import this module

    models = {
        "CIFAR-10 CNN": build_family("cnn", in_shape=(3, 32, 32), num_classes=10),
        "EMNIST CNN": build_family("cnn", in_shape=(1, 28, 28), num_classes=62),
        # 95 printable ASCII characters + 1 out-of-vocabulary id.
        "Shakespeare LSTM": build_family("lstm", in_shape=(80,), num_classes=96),
    }
    rows = []
    for name, family in models.items():
        for p in p_values:
            c = family.cost(p)
            rows.append({"model": name, "p": p, "params": c.params, "macs": c.macs, "upload_mb": c.upload_mb})
    return rows
