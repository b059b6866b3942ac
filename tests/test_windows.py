"""Issue 27 (first step): FedRolex's rolling windows equal the official rule for every (C, p, t) tried,
wrapped ones included; a window that does not wrap is one basic slice (a view, like today's prefixes)."""

from __future__ import annotations

import math

import pytest
import torch

from hasfl.models.slicing import rolling_window, width, window_indices


def official(size: int, p: float, t: int) -> torch.Tensor:
    """``AIoT-MLSys-Lab/FedRolex`` resnet_server.py, split_model, overlap None: the rolled index, first
    ``ceil(size * rate)`` entries (written here from that rule, not copied)."""
    return torch.roll(torch.arange(size), t % size, -1)[: int(math.ceil(size * p))]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 8, 16, 33, 64])
@pytest.mark.parametrize("p", [0.25, 0.4, 0.5, 0.58, 0.75, 1.0])
def test_rolling_windows_equal_the_official_rule(size: int, p: float) -> None:
    wrapped = 0
    for t in range(0, 3 * size + 2):
        window = rolling_window(size, p, t)
        assert torch.equal(window_indices(window), official(size, p, t)), (size, p, t, window)
        assert len(window_indices(window)) == width(p, size)
        wrapped += len(window) == 2
    if width(p, size) > 1 and size > width(p, size):
        assert wrapped > 0  # the grid reaches wrapped windows


def test_every_unit_is_covered_within_size_rounds_at_any_width() -> None:
    for size in (5, 16, 64):
        for p in (0.25, 0.5):
            seen = torch.zeros(size, dtype=torch.bool)
            for t in range(size):
                seen[window_indices(rolling_window(size, p, t))] = True
            assert seen.all()


def test_an_unwrapped_window_is_one_slice_and_round_zero_is_the_prefix() -> None:
    assert rolling_window(64, 0.5, 0) == (slice(0, 32),)  # round 0: HeteroFL's prefix
    assert rolling_window(64, 0.5, 1) == (slice(63, 64), slice(0, 31))  # moved back by one, wrapped
    assert rolling_window(64, 0.5, 40) == (slice(24, 56),)
    full = torch.arange(64.0)
    (s,) = rolling_window(64, 0.5, 40)
    assert full[s].data_ptr() == full[24:].data_ptr()  # a view
    with pytest.raises(ValueError, match="size must be >= 1"):
        rolling_window(0, 0.5, 0)
