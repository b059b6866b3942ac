"""Batch-norm running statistics per width, kept by the server beside the global model.

BN running statistics never enter training (a BN layer in training mode normalises by the
batch), so they are bookkeeping for evaluation only; :mod:`hasfl.models.bn` says what each
mode evaluates with. Every run with running statistics tracks both running modes, at no
client compute beyond the one local training it does anyway:

* **per width** (FjORD's layers, one set per width: Flower ``baselines/fjord``,
  ``od/layers/batch_norm.py``): a client that trains a BN layer at ``c`` channels starts from
  that width's statistics (initial values, mean 0 / variance 1, before anyone trained at ``c``);
  after the round each width's statistics move by the sample-weighted mean (Algorithm 1
  line 18's weights) of the changes of exactly the clients that trained at ``c``. The full
  count's set is the global model's own BN buffers, aggregated by the engine's coordinate
  aggregator as before (so a run whose clients all train at full width has the bytes it always had).
* **mixed** (the former default): one full-size set per layer, every channel averaged over every
  client whose sub-model holds it, whatever its width. A client's running statistic is affine in
  its starting value, r_end = d * r_start + A with d = (1 - momentum)^n after n training-mode
  forward passes, so the change it would have made starting from the mixed set follows from the
  one it made: A - (1 - d) * m = r_end - d * r_start - (1 - d) * m. The mixed set exists from the
  first round in which some client trains a layer below full width; until then it equals the
  full-width set exactly.

Under a rolling window (FedRolex, :class:`hasfl.models.slicing.Window`) a sub-model's channel j is a
different global channel every round, so a width's set is kept in global channel coordinates (full
size, each channel moved by the clients that trained it at that width) instead of the sub-model's; the
channels of every client are read off its slice rules, as its parameters are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from hasfl.models.bn import STATS, bn_layers, counts_key, mixed_key, width_key
from hasfl.models.slicing import SliceRule, add_scalar_, assign_, gather, scatter_add_

__all__ = ["WidthStatistics"]


class WidthStatistics:
    """The per-width and mixed BN statistics of one run (see the module doc)."""

    def __init__(self, global_model: nn.Module, nested: bool = True) -> None:
        self.full = bn_layers(global_model)  # layer prefix -> full channel count C
        self.nested = nested  # False: the sub-width sets are in global channel coordinates (rolling windows)
        self.momentum: dict[str, float] = {}
        for name, m in global_model.named_modules():
            if name in self.full:
                if m.momentum is None:
                    raise ValueError(f"batch norm '{name}' uses a cumulative average (momentum None); per-width "
                                     "statistics need an exponential one")
                self.momentum[name] = float(m.momentum)
        self.width: dict[tuple[str, int], list[Tensor]] = {}   # (layer, c < C) -> [mean, var]
        self.trained: dict[str, set[int]] = {layer: set() for layer in self.full}
        self.mixed: dict[str, list[Tensor]] = {}               # layer -> [mean, var], full size
        self._start: dict[str, int] = {}
        self._acc: dict[tuple[str, int], list[Any]] = {}
        self._mixed_acc: dict[str, list[Tensor]] = {}

    # --- one round ------------------------------------------------------------
    def begin_round(self, global_state: Mapping[str, Tensor], narrower: bool) -> None:
        """Start a round; ``narrower``: some client of it trains a sub-model narrower than the global
        model. Then the mixed sets are created (copies of the full-width sets, equal to them so far)."""
        self._acc, self._mixed_acc = {}, {}
        if narrower:
            for layer in self.full:
                if layer not in self.mixed:
                    self.mixed[layer] = [global_state[f"{layer}.{s}"].detach().clone() for s in STATS]

    def sub_width_keys(self, module: nn.Module) -> list[str]:
        """State-dict keys of ``module``'s BN statistics at layers narrower than full: these go to the
        per-width sets, not to the full-width buffers of the global model."""
        return [f"{layer}.{s}" for layer, c in bn_layers(module).items() if c < self.full[layer] for s in STATS]

    @torch.no_grad()
    def prepare(self, module: nn.Module, rules: Mapping[str, SliceRule]) -> None:
        """Give a client's freshly loaded ``module`` (slice ``rules``) the statistics of its own widths (Algorithm 1
        line 8)."""
        for name, m in module.named_modules():
            if name not in self.full or not m.track_running_stats:
                continue
            self._start[name] = int(m.num_batches_tracked)
            c = int(m.num_features)
            if c < self.full[name]:
                mean, var = self.width.get((name, c), (None, None))
                if mean is None:  # nobody trained at this width yet: the initial statistics
                    m.running_mean.zero_()
                    m.running_var.fill_(1.0)
                elif self.nested:
                    m.running_mean.copy_(mean)
                    m.running_var.copy_(var)
                else:  # its channels of the width's set
                    assign_(m.running_mean, mean, rules[f"{name}.running_mean"])
                    assign_(m.running_var, var, rules[f"{name}.running_var"])

    @torch.no_grad()
    def add(self, module: nn.Module, rules: Mapping[str, SliceRule], n_samples: float,
            global_state: Mapping[str, Tensor]) -> None:
        """Record one client's statistics after its local training (weight ``n_samples``, slice ``rules``); the global
        state is still w(t), as the client received it."""
        for name, m in module.named_modules():
            if name not in self.full or not m.track_running_stats:
                continue
            c, full = int(m.num_features), self.full[name]
            rule = rules[f"{name}.running_mean"]  # its channels (both statistics share them)
            self.trained[name].add(c)
            steps = int(m.num_batches_tracked) - self._start.get(name, 0)
            ends = [m.running_mean, m.running_var]
            if c < full and self.nested:
                start = self.width.get((name, c))
                starts = start if start is not None else [torch.zeros_like(ends[0]), torch.ones_like(ends[1])]
                acc = self._acc.setdefault((name, c), [torch.zeros_like(ends[0]), torch.zeros_like(ends[1]), 0.0])
                for j in range(2):
                    acc[j].add_(ends[j] - starts[j], alpha=float(n_samples))
                acc[2] += float(n_samples)
            elif c < full:  # global channel coordinates; the weight is per channel
                start = self.width.get((name, c))
                starts = ([gather(start[0], rule), gather(start[1], rule)] if start is not None
                          else [torch.zeros_like(ends[0]), torch.ones_like(ends[1])])
                shape = (full,)
                acc = self._acc.setdefault((name, c), [ends[0].new_zeros(shape), ends[1].new_zeros(shape),
                                                       ends[0].new_zeros(shape)])
                for j in range(2):
                    scatter_add_(acc[j], rule, ends[j] - starts[j], alpha=float(n_samples))
                add_scalar_(acc[2], rule, float(n_samples))
            else:
                starts = [global_state[f"{name}.{s}"] for s in STATS]
            if name in self.mixed:
                d = (1.0 - self.momentum[name]) ** steps
                macc = self._mixed_acc.setdefault(name, [torch.zeros_like(self.mixed[name][0]),
                                                         torch.zeros_like(self.mixed[name][1]),
                                                         torch.zeros_like(self.mixed[name][0])])
                for j, end in enumerate(ends):
                    change = end - d * starts[j] - (1.0 - d) * gather(self.mixed[name][j], rule)
                    scatter_add_(macc[j], rule, change, alpha=float(n_samples))
                add_scalar_(macc[2], rule, float(n_samples))

    @torch.no_grad()
    def finish_round(self, global_lr: float) -> None:
        """Apply the round's sample-weighted mean changes (the server step, Algorithm 1 line 19)."""
        for (layer, c), (s_mean, s_var, weight) in sorted(self._acc.items()):
            cur = self.width.get((layer, c))
            if cur is None:
                cur = [torch.zeros_like(s_mean), torch.ones_like(s_var)]
                self.width[(layer, c)] = cur
            if isinstance(weight, Tensor):  # global channel coordinates: only the channels trained this round move
                covered = weight > 0
                for j, s in enumerate((s_mean, s_var)):
                    cur[j].add_(torch.where(covered, s / weight.clamp_min(1e-30), torch.zeros_like(s)), alpha=global_lr)
                continue
            cur[0].add_(s_mean / weight, alpha=global_lr)
            cur[1].add_(s_var / weight, alpha=global_lr)
        for layer, (s_mean, s_var, weight) in sorted(self._mixed_acc.items()):
            covered = weight > 0
            for j, s in enumerate((s_mean, s_var)):
                step = torch.where(covered, s / weight.clamp_min(1e-30), torch.zeros_like(s))
                self.mixed[layer][j].add_(step, alpha=global_lr)
        self._acc, self._mixed_acc = {}, {}

    # --- the global state's extra keys, checkpoints ---------------------------
    def entries(self) -> dict[str, Tensor]:
        """The extra keys of the saved global state (:mod:`hasfl.models.bn`): none while every client has
        trained at full width only, so such a run's states are the model's state dict alone."""
        if not self.mixed and not self.width:
            return {}
        out: dict[str, Tensor] = {}
        for layer in self.full:
            out[counts_key(layer)] = torch.tensor(sorted(self.trained[layer]), dtype=torch.int64)
            for (name, c), stats in sorted(self.width.items()):
                if name == layer:
                    for s, t in zip(STATS, stats, strict=True):
                        out[width_key(layer, c, s)] = t.detach().cpu().clone()
            if layer in self.mixed:
                for s, t in zip(STATS, self.mixed[layer], strict=True):
                    out[mixed_key(layer, s)] = t.detach().cpu().clone()
        return out

    def state(self) -> dict[str, Any]:
        """Everything the remaining rounds depend on (checkpointed)."""
        return {"width": {k: [t.detach().cpu().clone() for t in v] for k, v in self.width.items()},
                "trained": {k: sorted(v) for k, v in self.trained.items()},
                "mixed": {k: [t.detach().cpu().clone() for t in v] for k, v in self.mixed.items()}}

    def load_state(self, state: Mapping[str, Any], device: torch.device) -> None:
        """Restore :meth:`state` (tensors onto ``device``)."""
        self.width = {tuple(k): [t.to(device) for t in v] for k, v in state["width"].items()}
        self.trained = {k: set(v) for k, v in state["trained"].items()}
        self.mixed = {k: [t.to(device) for t in v] for k, v in state["mixed"].items()}
