"""Character LSTM family with gate-blocked hidden-unit slicing (paper Sec. 4.6, Algorithm 2, Table 1).

Architecture: ``Embedding(vocab, embed_dim) -> LSTM(layers, hidden, batch_first)
-> Linear(hidden, vocab)`` applied to the last time step.

Width ``p`` keeps the leading ``h = ceil(p * hidden)`` units of every layer (under a rolling
:class:`~hasfl.models.slicing.Window`, ``h`` consecutive units from the round's offset, the same
units in every gate and layer).
PyTorch stacks the gates ``(i, f, g, o)`` along dim 0 of ``weight_ih``,
``weight_hh`` and both biases, so a rule views each as ``(4, hidden, ...)`` and
keeps rows ``[g*hidden, g*hidden + h)`` of every gate ``g`` -- never the first
``4h`` rows of the stacked matrix.  Layer 0 keeps all ``embed_dim`` input
columns; deeper layers keep the leading ``h`` inputs.  As Section 4.6 states,
the embedding and the output bias are shared in full, and every output row of
the projection is kept (only its input columns are sliced).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from hasfl.models.cost import lstm_macs
from hasfl.models.family import ModelFamily
from hasfl.models.slicing import SliceRule, Span, Window, width

__all__ = ["CharLSTM", "LSTMFamily"]

_ALL = slice(None)


class CharLSTM(nn.Module):
    """Next-character model: logits for the character following the sequence."""

    def __init__(self, vocab: int, embed_dim: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden, num_layers=layers, batch_first=True)
        self.fc = nn.Linear(hidden, vocab)

    def forward(self, x: Tensor) -> Tensor:
        out, _ = self.lstm(self.embed(x))
        return self.fc(out[:, -1])


class LSTMFamily(ModelFamily):
    """Width-p sub-models of :class:`CharLSTM`; ``in_shape = (seq_len,)``, ``num_classes = vocab``."""

    ARCH_KWARGS = frozenset({"embed_dim", "hidden", "layers"})

    def __init__(
        self,
        *,
        in_shape: tuple[int, ...],
        num_classes: int,
        embed_dim: int = 8,
        hidden: int = 256,
        layers: int = 2,
    ) -> None:
        super().__init__()
        if len(in_shape) != 1:
            raise ValueError(f"lstm: in_shape must be (seq_len,), got {tuple(in_shape)}")
        self.seq_len = int(in_shape[0])
        self.vocab = int(num_classes)
        self.embed_dim = int(embed_dim)
        self.hidden = int(hidden)
        self.layers = int(layers)

    def widths(self, p: float) -> dict[str, Any]:
        return {"hidden": width(p, self.hidden), "embed_dim": self.embed_dim, "vocab": self.vocab}

    def build(self, p: float = 1.0) -> CharLSTM:
        return CharLSTM(self.vocab, self.embed_dim, self.widths(p)["hidden"], self.layers)

    def dims(self, p: float) -> list[tuple[int, int]]:
        """The hidden units, one set for every layer, gate and time step (the recurrence maps them to themselves)."""
        return [(self.hidden, self.widths(p)["hidden"])]

    def _make_rules(self, p: float, window: Window) -> dict[str, SliceRule]:
        H = self.hidden
        h = window.span(H, self.widths(p)["hidden"], 0)
        rules = {"embed.weight": SliceRule(None, (_ALL,))}
        for layer in range(self.layers):
            keep_in: Span
            in_full, keep_in = (self.embed_dim, _ALL) if layer == 0 else (H, h)
            rules[f"lstm.weight_ih_l{layer}"] = SliceRule((4, H, in_full), (_ALL, h, keep_in))
            rules[f"lstm.weight_hh_l{layer}"] = SliceRule((4, H, H), (_ALL, h, h))
            rules[f"lstm.bias_ih_l{layer}"] = SliceRule((4, H), (_ALL, h))
            rules[f"lstm.bias_hh_l{layer}"] = SliceRule((4, H), (_ALL, h))
        rules["fc.weight"] = SliceRule(None, (_ALL, h))
        rules["fc.bias"] = SliceRule(None, (_ALL,))
        return rules

    def _macs(self, p: float, module: nn.Module) -> int:
        return lstm_macs(
            seq_len=self.seq_len,
            input_size=self.embed_dim,
            hidden=self.widths(p)["hidden"],
            layers=self.layers,
            out_features=self.vocab,
        )
