"""Coordinate-wise aggregation (hasfl.fl.aggregation; paper Algorithm 1 lines 17-19)."""

from __future__ import annotations

import pytest
import torch

from hasfl.fl.aggregation import CoordinateAggregator
from hasfl.models import coverage_mask
from hasfl.models.slicing import SliceRule

ALL = slice(None)


def test_aggregation_hand_computed_example() -> None:
    """Algorithm 1 line 18 on a 4x4 weight + 4-bias with overlapping nested widths."""
    glob = {"w": torch.full((4, 4), 5.0), "b": torch.full((4,), 5.0)}
    # client: (rules, delta in sub-model shape, n_samples)
    a = ({"w": SliceRule(None, (slice(0, 2), slice(0, 2))), "b": SliceRule(None, (slice(0, 2),))},
         {"w": torch.tensor([[1.0, 2.0], [3.0, 4.0]]), "b": torch.tensor([1.0, 2.0])}, 1)
    b = ({"w": SliceRule(None, (slice(0, 4), slice(0, 3))), "b": SliceRule(None, (slice(0, 4),))},
         {"w": torch.full((4, 3), 8.0), "b": torch.tensor([10.0, 20.0, 30.0, 40.0])}, 3)
    c = ({"w": SliceRule(None, (slice(0, 1), slice(0, 1))), "b": SliceRule(None, (slice(0, 1),))},
         {"w": torch.tensor([[-4.0]]), "b": torch.tensor([100.0])}, 2)
    agg = CoordinateAggregator(glob, ["w", "b"])
    for rules, delta, n in (a, b, c):
        agg.add(delta, rules, n)
    bar = agg.mean()

    # b: row 0 = A,B,C; row 1 = A,B; rows 2,3 = B only.
    expected_b = torch.tensor([(1 * 1 + 3 * 10 + 2 * 100) / 6, (1 * 2 + 3 * 20) / 4, 30.0, 40.0])
    expected_w = torch.tensor([
        [(1 * 1 + 3 * 8 + 2 * -4) / 6, (1 * 2 + 3 * 8) / 4, 8.0, 0.0],
        [(1 * 3 + 3 * 8) / 4, (1 * 4 + 3 * 8) / 4, 8.0, 0.0],
        [8.0, 8.0, 8.0, 0.0],
        [8.0, 8.0, 8.0, 0.0],
    ])
    torch.testing.assert_close(bar["b"], expected_b, rtol=0, atol=1e-6)
    torch.testing.assert_close(bar["w"], expected_w, rtol=0, atol=1e-6)
    # Line 19: the uncovered column keeps the global value exactly.
    new_w = glob["w"] + bar["w"]
    assert torch.equal(new_w[:, 3], glob["w"][:, 3])


def test_aggregation_gate_view_rule() -> None:
    """A gate-blocked (LSTM-style) rule scatters into the leading rows of every gate."""
    glob = {"g": torch.zeros(8)}  # 4 gates x 2 units
    rule = {"g": SliceRule((4, 2), (ALL, slice(0, 1)))}
    agg = CoordinateAggregator(glob, ["g"])
    agg.add({"g": torch.tensor([1.0, 2.0, 3.0, 4.0])}, rule, 1)
    agg.add({"g": torch.tensor([3.0, 4.0, 5.0, 6.0])}, rule, 3)
    assert torch.equal(agg.mean()["g"], torch.tensor([2.5, 0.0, 3.5, 0.0, 4.5, 0.0, 5.5, 0.0]))


@pytest.mark.parametrize("widths", [(0.25, 0.5, 1.0), (0.25, 0.5)])
def test_aggregation_cnn_family(digits_family, widths) -> None:
    """Real CNN slice rules: every coordinate is the n-weighted mean over exactly its covering clients."""
    family = digits_family
    glob = family.build(1.0).state_dict()
    keys = [k for k, v in glob.items() if v.is_floating_point()]
    n = {0.25: 1, 0.5: 3, 1.0: 2}
    value = {0.25: 1.0, 0.5: 10.0, 1.0: 100.0}
    agg = CoordinateAggregator(glob, keys)
    for p in widths:
        sub = family.sub_shapes(p)
        agg.add({k: torch.full(sub[k], value[p]) for k in keys}, family.slice_rules(p), n[p])
    bar = agg.mean()
    masks = {p: coverage_mask(glob, family.slice_rules(p)) for p in widths}
    for k in keys:
        num = sum(n[p] * value[p] * masks[p][k].double() for p in widths)
        den = sum(n[p] * masks[p][k].double() for p in widths)
        expected = torch.where(den > 0, num / den.clamp_min(1), torch.zeros_like(num)).float()
        torch.testing.assert_close(bar[k], expected, rtol=1e-6, atol=0, msg=k)
        union = masks[max(widths)][k]  # nested masks: the union is the widest one
        assert torch.all(bar[k][~union] == 0), k
    # The nested regions really overlap: fc1.weight holds all three kinds of coordinates.
    fc1 = bar["fc1.weight"]
    assert torch.isclose(fc1[0, 0], torch.tensor(sum(n[p] * value[p] for p in widths) / sum(n[p] for p in widths)))
    assert (fc1 == 0).any() == (1.0 not in widths)
