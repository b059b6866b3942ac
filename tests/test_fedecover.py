"""Issue 37: FedEcover (``junesnow86/FedEcover``) as a method -- each participant's units drawn by cyclic sampling
without replacement. The draws equal a reference written from the official rule (``ServerFedEcover.random_choose_
indices``: a per-layer pool of undrawn units kept across rounds, refilled when it cannot serve a draw); every unit is
drawn once per cycle; sub-models hold exactly the drawn units (their inputs the previous layer's, the classifier's
outputs whole); runs are deterministic and resume to the bit; Table 4c replays the draws from the ledger and
reports Zhou et al.'s minimum coverage index and the spread of the units' training counts."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from hasfl.analysis.tables import table4c_coverage_over_time as T4C
from hasfl.models.cyclic import CyclicSampler, cycle_order, replay
from hasfl.models.partition import parameter_shapes
from hasfl.models.slicing import SliceRule, Window, gather, runs, scatter_add_, width
from hasfl.registry import METHODS

REPO = Path(__file__).resolve().parents[1]

SIZES = (4, 7, 8, 16, 33)
WIDTHS = (0.25, 0.5, 0.75, 1.0)


class OfficialPool:
    """The official rule for one layer (``modules/servers/fedecover.py`` ``random_choose_indices``), written with
    sets: the pool starts as every unit; a draw of ``k`` <= |pool| takes k units of the pool; a larger one takes the
    whole pool, reloads it with every unit, takes the missing units among those it does not hold and removes only
    those from the reloaded pool. The random choice among a pool is "first in the current cycle's order"
    (:func:`cycle_order`, cycle 0 at the start, +1 at every reload), the stand-in for ``np.random.choice``."""

    def __init__(self, seed: int, dim: int, size: int) -> None:
        self.seed, self.dim, self.size = seed, dim, size
        self.cycle = 0
        self.rank = self._rank()
        self.pool = set(range(size))

    def _rank(self) -> dict[int, int]:
        return {u: i for i, u in enumerate(cycle_order(self.seed, self.dim, self.cycle, self.size))}

    def _choose(self, among: set[int], n: int) -> set[int]:
        return set(sorted(among, key=self.rank.__getitem__)[:n])

    def draw(self, k: int) -> list[int]:
        if k > len(self.pool):
            current = set(self.pool)
            self.pool = set(range(self.size))  # reload
            self.cycle += 1
            self.rank = self._rank()
            additional = self._choose(self.pool - current, k - len(current))
            self.pool -= additional
            current |= additional
        else:
            current = self._choose(self.pool, k)
            self.pool -= current
        assert len(current) == k
        return sorted(current)  # the returned indices are sorted


class OneDim:
    """A stand-in family with one sliced dimension of ``size`` units."""

    def __init__(self, size: int) -> None:
        self.size = size

    def dims(self, p: float) -> list[tuple[int, int]]:
        return [(self.size, width(p, self.size))]


@pytest.mark.parametrize("size", SIZES)
def test_draws_equal_the_official_rule_for_every_size_width_and_client_count(size):
    rng = np.random.default_rng(size)
    for clients in (1, 3, 10):
        for seed in (0, 42):
            ours = CyclicSampler(OneDim(size), seed)
            ref = OfficialPool(seed, 0, size)
            counts = np.zeros(size, dtype=np.int64)
            for t in range(12):  # rounds: the pools carry over
                trained = rng.choice(WIDTHS, size=clients).tolist()
                windows = ours.windows(t, list(range(clients)), trained)
                for p, w in zip(trained, windows, strict=True):
                    kept = width(p, size)
                    want = ref.draw(kept)
                    assert list(w.units[0]) == want, (size, clients, seed, t, p)
                    assert w.kind == "sampled" and len(set(w.units[0])) == kept
                    counts[want] += 1
                    # every unit once per cycle: after any draw the counts differ by at most one
                    assert counts.max() - counts.min() <= 1, (size, clients, seed, t)
            assert ours.draws == 12 * clients


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("p", WIDTHS)
def test_a_fixed_width_covers_every_unit_once_per_cycle(size, p):
    """Draws of one width k: after every n * size / gcd units drawn, every unit was drawn equally often; the first
    ceil(size / k) draws hold every unit."""
    kept = width(p, size)
    sampler = CyclicSampler(OneDim(size), 7)
    draws = [sampler.draw(p).units[0] for _ in range(3 * size)]
    counts = np.zeros(size, dtype=np.int64)
    for i, units in enumerate(draws, start=1):
        counts[list(units)] += 1
        if (i * kept) % size == 0:
            assert (counts == i * kept // size).all(), (size, p, i)
    first = set().union(*draws[:math.ceil(size / kept)])
    assert first == set(range(size))


def test_windows_depend_on_the_seed_and_the_draws_only(small_cnn):
    widths = [0.5, 0.25, 0.75, 1.0, 0.5] * 4
    a, b = replay(small_cnn, 42, widths), replay(small_cnn, 42, widths)
    assert a == b and [w.shift for w in a] == list(range(len(widths)))
    assert replay(small_cnn, 43, widths) != a
    # per dimension: the classifier's hidden units and every conv layer draw from their own pools
    assert len(a[0].units) == len(small_cnn.channels) + 1
    for w, p in zip(a, widths, strict=True):
        assert [len(u) for u in w.units] == [kept for _, kept in small_cnn.dims(p)]
    # a checkpointed sampler continues as the uninterrupted one
    s = CyclicSampler(small_cnn, 42)
    first = [s.draw(p) for p in widths[:7]]
    t = CyclicSampler(small_cnn, 42)
    t.load_state(s.state())
    assert first + [t.draw(p) for p in widths[7:]] == a


def test_runs_and_the_round_window():
    assert runs((0, 1, 2)) == slice(0, 3)
    assert runs((1, 3, 4, 7)) == (slice(1, 2), slice(3, 5), slice(7, 8))
    w = Window("sampled", 5, ((1, 3, 4), (0, 2)))
    assert w.span(8, 3, 0) == (slice(1, 2), slice(3, 5)) and w.span(4, 2, 1) == (slice(0, 1), slice(2, 3))
    assert w.span(8, 8, 0) == slice(0, 8)  # every unit: the dimension in its own order
    assert not w.nested and Window("sampled", 3).span(8, 3) == slice(0, 3)  # the round's common window: the prefix
    with pytest.raises(ValueError, match="asked for 2 of 8"):
        w.span(8, 2, 0)
    with pytest.raises(ValueError, match="only a sampled window"):
        Window("rolling", 1, ((0,),))


def _reference(family, state, window: Window, arch: str, ref) -> dict[str, torch.Tensor]:
    """The sub-model by index tensors, written from the rule: a layer's outputs its units, its inputs the previous
    layer's units, the classifier's outputs whole (``ref``: the ``index_reference`` fixture)."""
    if arch == "lstm":
        h = torch.tensor(window.units[0]) if window.units[0] else torch.arange(family.hidden)
        return ref.lstm(family, state, h)
    units = [torch.tensor(window.units[i]) for i in range(len(family.channels))]
    return ref.cnn(family, state, units, torch.tensor(window.units[-1]))


@pytest.mark.parametrize("arch", ["cnn", "lstm"])
def test_sub_models_hold_exactly_the_drawn_units(arch, small_cnn, small_lstm, index_reference):
    family = small_cnn if arch == "cnn" else small_lstm
    state = index_reference.random_state(family)
    widths = [0.25, 0.5, 0.75, 1.0] * 3
    for p, window in zip(widths, replay(family, 3, widths), strict=True):
        sub = family.extract(state, p, window)
        ref = _reference(family, state, window, arch, index_reference)
        assert set(sub) == set(ref)
        shapes = family.sub_shapes(p)
        for k in ref:
            assert torch.equal(sub[k], ref[k].reshape(shapes[k])), (arch, p, k)


def test_sampled_rules_scatter_and_gather_as_dense_index_tensors():
    """A rule of many pieces (the index-tensor path) gathers and scatter-adds what index tensors give."""
    torch.manual_seed(1)
    full = torch.randn(4, 9, 5)
    rows, cols = (0, 2, 3), (1, 2, 4, 6, 8)
    rule = SliceRule((4, 9, 5), (runs(rows), runs(cols)))
    r, c = torch.tensor(rows)[:, None], torch.tensor(cols)[None, :]
    assert torch.equal(gather(full, rule), full[r, c])
    sub = torch.randn(3, 5, 5)
    acc = full.clone()
    scatter_add_(acc, rule, sub, alpha=0.5)
    want = full.clone()
    want[r, c] += 0.5 * sub
    assert torch.allclose(acc, want, rtol=0, atol=1e-6)
    untouched = torch.ones_like(full, dtype=torch.bool)
    untouched[r, c] = False
    assert torch.equal(acc[untouched], full[untouched])


def test_registry_entry_and_budget():
    info = METHODS["fedecover"]
    assert info.nested is False and info.cost == "fixed" and info.plain_local_sgd
    assert info.build == "hasfl.fl.methods.fedecover:fedecover"


# --------------------------------------------------------------------------- engine runs
def test_runs_are_deterministic_resume_to_the_bit_and_the_ledger_replays(engine_cfg, federate, interrupted, one_thread,
                                                                        tmp_path, monkeypatch, digits_family):
    cfg = engine_cfg(rounds=4, warmup=0)
    drawn: list[Window] = []
    original = CyclicSampler.windows

    def spy(self, t, participants, trained):
        out = original(self, t, participants, trained)
        drawn.extend(out)
        return out

    monkeypatch.setattr(CyclicSampler, "windows", spy)
    run = federate(cfg, "fedecover")
    monkeypatch.setattr(CyclicSampler, "windows", original)
    led = run.participation
    assert run.summary["status"] == "completed"
    assert (led["window"] == "sampled").all() and led["window_shift"].tolist() == list(range(len(led)))
    uni = federate(cfg, "uniform")
    assert led["p"].tolist() == uni.participation["p"].tolist()  # Uniform's widths and cost
    assert run.rounds["upload_mb"].tolist() == uni.rounds["upload_mb"].tolist()
    # the ledger's draw numbers and widths rebuild the windows the engine used (Table 4c's replay)
    assert T4C.row_windows(digits_family, led, 42) == drawn

    again = federate(cfg, "fedecover")  # same seed: the same bytes
    assert again.participation.equals(led) and again.rounds.equals(run.rounds)
    for k, v in run.final_state.items():
        assert torch.equal(again.final_state[k], v), k

    ckpt = tmp_path / "checkpoint.pt"
    resumed = interrupted(cfg, "fedecover", ckpt, at=3, every=2)
    saved = torch.load(ckpt, weights_only=False)  # round 2's, the one the run resumed from
    assert saved["window_sampler"]["draws"] == 2 * cfg["federation"]["clients_per_round"]
    for k, v in run.final_state.items():
        assert torch.equal(resumed.final_state[k], v), k
    assert resumed.participation.equals(led) and resumed.rounds.equals(run.rounds)
    assert resumed.clients.equals(run.clients)


# --------------------------------------------------------------------------- Table 4c's new columns
def test_table4c_minimum_coverage_index_and_unit_counts_on_a_fabricated_ledger(small_cnn):
    """small_cnn (channels 8, 12, 16; hidden 20). Round 1: two width-0.5 prefixes; round 2: one width-0.5 prefix and
    one full-width participant. Coordinates beyond the half prefix have nobody in round 1: Gamma_min = 0 for
    convs.0 and every block; the full model in round 2 alone: Gamma_min over round 2 (the last k = 1) = 1. Units:
    a leading half unit 4 times, the others once."""
    shapes = parameter_shapes(small_cnn)
    ledger = pd.DataFrame({"round": [1, 1, 2, 2], "p_trained": [0.5, 0.5, 0.5, 1.0],
                           "window": ["prefix"] * 4, "window_shift": [0] * 4})
    summary = {"t0": 0, "rounds_completed": 2, "status": "completed"}
    rows = pd.DataFrame(T4C.run_rows("digits", "uniform", 42, ledger, summary, small_cnn, shapes, 1))
    whole = rows[rows["block"] == T4C.ALL_BLOCKS].iloc[0]
    assert whole["gamma_min"] == 0 and whole["gamma_min_last_k"] == 1
    assert whole["unit_count_min"] == 1 and whole["unit_count_max"] == 4
    # per layer: half of C units 4 times, the rest once (C even): mean 2.5, std 1.5 -> CV 0.6; hidden 20 the same
    assert whole["unit_count_cv"] == pytest.approx(0.6)
    # issue 45 point 5: the unit-level index (round 1 leaves the outer half of every layer's units to nobody) and
    # the per-round fraction of coordinates nobody holds (round 1: all but the half prefix; round 2: none)
    assert whole["unit_gamma_min"] == 0
    every = sum(int(torch.zeros(shape).numel()) for shape in shapes.values())
    held = pd.DataFrame(T4C.run_rows("digits", "uniform", 42, ledger[ledger["round"] == 1], {**summary,
                                     "rounds_completed": 1}, small_cnn, shapes, 1)).iloc[0]
    assert whole["uncovered_frac_mean"] == pytest.approx((1 - held["frac_last_k"]) / 2) and every == whole["coordinates"]
    assert held["uncovered_frac_mean"] == pytest.approx(1 - held["frac_last_k"]) and held["frac_last_k"] < 1
    fc2 = rows[rows["block"] == "fc2"].iloc[0]  # every class row, the kept hidden columns
    assert fc2["gamma_min"] == 0 and fc2["gamma_min_last_k"] == 1 and math.isnan(fc2["unit_count_cv"])
    # every participant full width: every coordinate held by both each round, every unit 4 times
    full = ledger.assign(p_trained=1.0)
    whole = pd.DataFrame(T4C.run_rows("digits", "fedavg", 42, full, summary, small_cnn, shapes, 1)).iloc[0]
    assert whole["gamma_min"] == 2 and whole["unit_count_cv"] == 0.0 and whole["unit_count_min"] == 4
    assert whole["unit_gamma_min"] == 2 and whole["uncovered_frac_mean"] == 0.0
    # sampled rows: replayed from the seed in draw order; 4 draws of width 0.5 in one round cover every unit twice
    sampled = pd.DataFrame({"round": [1, 1, 1, 1], "p_trained": [0.5] * 4, "window": ["sampled"] * 4,
                            "window_shift": [3, 1, 0, 2]})  # any row order
    one = {"t0": 0, "rounds_completed": 1, "status": "completed"}
    rows = pd.DataFrame(T4C.run_rows("digits", "fedecover", 5, sampled, one, small_cnn, shapes, 1)).set_index("block")
    whole = rows.loc[T4C.ALL_BLOCKS]
    assert whole["unit_count_min"] == whole["unit_count_max"] == 2 and whole["unit_count_cv"] == 0.0
    # every unit held, so the blocks whose other dimension is never sliced are whole; a pair of units of two
    # layers is held only if one participant drew both, so the later blocks need not be
    for block in ("convs.0", "bns.0", "bns.2", "fc2"):
        assert rows.loc[block, "frac_last_k"] == 1.0 and rows.loc[block, "gamma_min"] >= 1, block
    assert (whole["frac_last_k"] < 1.0) == (whole["gamma_min"] == 0)
    # every unit held by two of the round's four participants: the unit-level index is 2 where the coordinate-level
    # one is 0 (pairs of units nobody drew together); the uncovered fraction is what the round left out
    assert whole["unit_gamma_min"] == 2 and whole["uncovered_frac_mean"] == pytest.approx(1 - whole["frac_last_k"])
    want = replay(small_cnn, 5, [0.5] * 4)
    assert T4C.row_windows(small_cnn, sampled, 5) == [want[3], want[1], want[0], want[2]]
    with pytest.raises(ValueError, match="draw number"):
        T4C.row_windows(small_cnn, sampled.assign(window_shift=[0, 1, 2, 4]), 5)


# --------------------------------------------------------------------------- the official server's mean (issue 48)
def test_participants_weighting_is_the_official_equal_weight_mean(engine_cfg, federate) -> None:
    """``weighting: participants`` gives every participant holding a coordinate weight 1 (the official server's
    mean, ``modules/servers/base.py:161-162``), ``samples`` (the default) weight n_i; the two runs differ, the
    draws and widths do not; an unknown weighting is refused naming the key."""
    from hasfl.fl.methods.fedecover import CountWeighted

    cfg = engine_cfg(rounds=3, warmup=0)
    base = federate(cfg, "fedecover")
    cfg["method_params"]["fedecover"] = {**cfg["method_params"]["fedecover"], "weighting": "participants"}
    equal = federate(cfg, "fedecover")
    assert equal.participation[["client_id", "p", "window_shift"]].equals(
        base.participation[["client_id", "p", "window_shift"]])
    assert any(not torch.equal(equal.final_state[k], v) for k, v in base.final_state.items())
    assert CountWeighted().client_weight(57) == 1.0
    cfg["method_params"]["fedecover"]["weighting"] = "clients"
    with pytest.raises(ValueError, match="method_params.fedecover.weighting is 'clients'"):
        federate(cfg, "fedecover")


def test_the_official_overlay_runs_fedecover_at_each_clients_capacity() -> None:
    """presets/medium-coverage-fedecover-official.yaml: p = 1.0 (p_i = pmax_i, full-capacity clients train the
    whole model) and the equal-weight mean; the other methods' config slices are the coverage rung's, so the
    store links their runs."""
    from hasfl.config import load_config, run_config
    from hasfl.fl.policies import UniformPolicy

    presets = REPO / "presets"
    rung = load_config([presets / "medium.yaml", presets / "medium-coverage.yaml"])
    official = load_config([presets / "medium.yaml", presets / "medium-coverage.yaml",
                            presets / "medium-coverage-fedecover-official.yaml"])
    assert official["method_params"]["fedecover"] == {"p": 1.0, "weighting": "participants"}
    for m in ("heterofl", "fedrolex"):
        assert run_config(official, "fashion_mnist", m, 42) == run_config(rung, "fashion_mnist", m, 42)
    pmax = np.array([0.25, 0.5, 0.75, 1.0])
    assert UniformPolicy(pmax, 1.0).initial().tolist() == pmax.tolist()  # each its own capacity
    assert UniformPolicy(pmax, rung["method_params"]["fedecover"]["p"]).initial().max() == 0.5
