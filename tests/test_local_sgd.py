"""The in-house local optimiser equals torch.optim.SGD + clip_grad_norm_ (Section 4.1)."""

from __future__ import annotations

import copy

import pytest
import torch

from hasfl.fl.client import SGDState


@pytest.mark.parametrize("momentum,wd,clip", [(0.9, 1e-4, 0.5), (0.0, 0.0, 10.0), (0.9, 0.0, 1e-3)])
def test_sgd_state_matches_torch_optim(momentum, wd, clip):
    torch.manual_seed(0)
    ours = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 3))
    ref = copy.deepcopy(ours)
    sgd = SGDState(list(ours.parameters()), 0.1, momentum, wd, clip)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=momentum, weight_decay=wd)
    for _ in range(6):
        x, y = torch.randn(8, 5), torch.randint(0, 3, (8,))
        sgd.zero_grad()
        torch.nn.functional.cross_entropy(ours(x), y).backward()
        sgd.step()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ref(x), y).backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), clip)
        opt.step()
    for a, b in zip(ours.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7)
