"""The in-memory dataset every loader returns (paper Section 4.1, Table 2).

Features stay in their compact storage dtype (uint8 pixels, uint8 character
ids); :meth:`DatasetBundle.inputs` turns a batch into model inputs on the fly,
so a full dataset never needs a float copy in memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from hasfl.errors import HasflError


@dataclass
class DatasetBundle:
    """Train/test tensors plus metadata for one dataset.

    Attributes:
        name: dataset name as used in config and paths (``cifar10``, ...).
        task: ``"image"`` or ``"text"``.
        train_x, train_y, test_x, test_y: in-memory tensors. Images are uint8
            ``(N, C, H, W)``; text samples are uint8 ``(N, seq_len)`` character ids.
            Labels are int64 ``(N,)``.
        num_classes: size of the output layer (classes or vocabulary).
        input_shape: shape of one sample as the model sees it.
        mean, std: per-channel normalisation for images (applied by :meth:`inputs`).
        meta: free-form extra facts (e.g. Shakespeare's per-sample client ids).
    """

    name: str
    task: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    input_shape: tuple[int, ...]
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    _norm: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    def inputs(self, x: torch.Tensor) -> torch.Tensor:
        """Model inputs for a batch of stored samples ``x``.

        Images: float32, scaled to [0, 1] and standardised per channel.
        Text: int64 character ids.
        """
        if self.task == "text":
            return x.long()
        out = x.float().div_(255.0)
        if self.mean is not None and self.std is not None:
            norm = self._norm.get(out.device)
            if norm is None:  # once per device: no host-to-device copy per batch (CUDA graphs forbid it)
                norm = (torch.tensor(self.mean, dtype=torch.float32, device=out.device).view(1, -1, 1, 1),
                        torch.tensor(self.std, dtype=torch.float32, device=out.device).view(1, -1, 1, 1))
                self._norm[out.device] = norm
            out = out.sub_(norm[0]).div_(norm[1])
        return out

    def digest(self) -> str:
        """sha256 over the train/test tensors (dtype, shape, bytes) and the normalisation: part of
        a run's identity, so a run never resumes on other data under the same file names."""
        import hashlib

        h = hashlib.sha256()
        for attr in ("train_x", "train_y", "test_x", "test_y"):
            t = getattr(self, attr).detach().cpu().contiguous()
            h.update(f"{attr}:{t.dtype}:{tuple(t.shape)}".encode())
            h.update(t.numpy().tobytes())
        h.update(repr((self.num_classes, tuple(self.input_shape), self.mean, self.std)).encode())
        return h.hexdigest()

    def to(self, device: torch.device | str) -> "DatasetBundle":
        """Move all tensors to ``device`` (in place); returns self."""
        for attr in ("train_x", "train_y", "test_x", "test_y"):
            setattr(self, attr, getattr(self, attr).to(device))
        return self


class DatasetUnavailable(HasflError, RuntimeError):
    """A dataset's files are missing or corrupt; the message says what to place where."""
