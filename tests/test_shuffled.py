"""Shuffled sub-model partitions (Deng, Qiao and Mahdavi 2025, arXiv 2511.06132) against their algorithm as its
abstract states it: "the full model is partitioned into several sub-models in advance, and the server shuffles those
sub-models, sends each of them to clients at each round, and by the end of local updating period, clients send back
the updated sub-models, and server averages them" (the reading: docs/decisions.md "Who inherits the confound").

The transcription below is written here from that text, not imported: a partition fixed before round 0 whose blocks
are disjoint and cover every coordinate; per round a shuffle of the sub-models, each sent out; each participant's
update confined to its sub-model; the server's mean per coordinate over the participants holding it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hasfl.fl.methods.shuffled import HeldMean, deal
from hasfl.models import partition as P
from hasfl.models.slicing import SliceRule


def test_the_partition_is_fixed_disjoint_covering_and_balanced_per_tensor():
    shapes = {"conv.weight": (8, 3, 3, 3), "conv.bias": (8,), "fc.weight": (10, 7), "fc.bias": (10,)}
    blocks = P.blocks(shapes, 4, seed=42)
    assert {k: tuple(v.shape) for k, v in blocks.items()} == shapes
    for name, b in blocks.items():
        n = b.numel()
        counts = torch.bincount(b.flatten(), minlength=4).tolist()
        # every coordinate in exactly one block; n // K or n // K + 1 each, the larger counts first
        assert sum(counts) == n and counts == [n // 4 + (k < n % 4) for k in range(4)], name
    again = P.blocks(shapes, 4, seed=42)
    assert all(torch.equal(again[k], blocks[k]) for k in shapes)  # in advance: a function of the seed
    other = P.blocks(shapes, 4, seed=43)
    assert not all(torch.equal(other[k], blocks[k]) for k in shapes)


def test_each_round_sends_every_sub_model_and_reshuffles():
    k = 4
    rounds = [deal(42, t, 10, k) for t in range(30)]
    for dealt in rounds:
        # one fresh permutation after another: the first K, the next K, then the rest of a third
        assert sorted(dealt[:4]) == list(range(k)) and sorted(dealt[4:8]) == list(range(k))
        assert len(set(dealt[8:])) == 2
    assert len({tuple(d) for d in rounds}) > 20  # shuffled anew each round
    assert deal(42, 7, 10, k) == rounds[7]  # a function of (seed, t): nothing to checkpoint
    assert sorted(deal(1, 0, 3, k)) != list(range(k))  # fewer participants than sub-models: some go unsent
    with pytest.raises(ValueError, match="partitions"):
        deal(42, 0, 3, 0)


def test_the_server_averages_each_coordinate_over_its_holders():
    class Holder:
        masks: dict

    w = {"a": torch.zeros(2, 3), "bn.running_mean": torch.zeros(3)}
    holder = Holder()
    agg = HeldMean(w, ["a", "bn.running_mean"], holder)  # type: ignore[arg-type]
    full = {"a": SliceRule(None, (slice(0, 2), slice(0, 3))), "bn.running_mean": SliceRule(None, (slice(0, 3),))}
    blocks = torch.tensor([[0, 1, 0], [1, 1, 2]])
    updates = [(torch.full((2, 3), 1.0), 0, 2.0), (torch.full((2, 3), 4.0), 1, 1.0), (torch.full((2, 3), 7.0), 0, 1.0)]
    expected = torch.zeros(2, 3)
    for d, b, n in updates:
        holder.masks = {"a": blocks == b}
        agg.add({"a": d * (blocks == b), "bn.running_mean": torch.full((3,), n)}, full, n)
    # transcription: sum_i n_i m_i d_i / sum_i n_i m_i where held, else 0
    for j in np.ndindex(2, 3):
        held = [(d[j].item(), n) for d, b, n in updates if blocks[j].item() == b]
        expected[j] = sum(v * n for v, n in held) / sum(n for _, n in held) if held else 0.0
    mean = agg.mean()
    assert torch.allclose(mean["a"], expected) and mean["a"][1, 2] == 0  # block 2: no holder, no step
    assert torch.allclose(mean["bn.running_mean"], torch.full((3,), (2 * 2 + 1 + 1) / 4))  # statistics: everyone


def test_a_run_trains_each_block_by_its_holders_and_resumes_to_the_same_bytes(engine_cfg, federate, interrupted,
                                                                             tmp_path, one_thread):
    """A 6-round digits run: the ledger holds one row per participant and round with window ``partition/4`` and its
    block, every block dealt every round (10 participants, K = 4); a coordinate moves in a round only if a participant
    held it; a run killed after a checkpoint resumes to the same tables and final state; the same config gives the
    same bytes."""
    cfg = engine_cfg(rounds=6, warmup=2)
    cfg["method_params"]["shuffled"] = {"partitions": 4}
    run = federate(cfg, "shuffled")
    led = run.participation
    per_round = cfg["federation"]["clients_per_round"]
    assert (led.groupby("round").size() == per_round).all() and set(led["window"]) == {"partition/4"}
    assert (led["p"] == 1.0).all() and (led["p_trained"] == 1.0).all()
    for r, g in led.groupby("round"):
        assert list(g["window_shift"]) == deal(42, int(r) - 1, per_round, 4), r
    # a block nobody holds keeps its values: K = 8 with 10 participants leaves none; K = 16 leaves some
    cfg16 = engine_cfg(rounds=1, warmup=2)
    cfg16["method_params"]["shuffled"] = {"partitions": 16}
    one = federate(cfg16, "shuffled")
    dealt = set(deal(42, 0, per_round, 16))
    buffers = ("running_mean", "running_var", "num_batches_tracked")
    blocks = P.blocks({k: tuple(v.shape) for k, v in one.init_state.items() if not k.endswith(buffers)}, 16, 42)
    moved_held = held = 0
    for k, b in blocks.items():
        moved = one.final_state[k] != one.init_state[k]
        unsent = torch.isin(b, torch.tensor(sorted(set(range(16)) - dealt)))
        assert not (moved & unsent).any(), k
        moved_held, held = moved_held + int(moved[~unsent].sum()), held + int((~unsent).sum())
    assert moved_held > 0.5 * held  # (a held channel whose scale is in another block can stay dead: ReLU(0))
    resumed = interrupted(cfg, "shuffled", tmp_path / "ckpt.pt", at=4, every=2)
    assert resumed.rounds.equals(run.rounds) and resumed.participation.equals(led)
    for k, v in run.final_state.items():
        assert torch.equal(resumed.final_state[k], v), k
    again = federate(cfg, "shuffled")
    assert all(torch.equal(again.final_state[k], v) for k, v in run.final_state.items())



def test_table4c_counts_a_partition_run_as_its_training_held_it(engine_cfg, federate, tmp_path, one_thread):
    """Table 4c's rows of a shuffled run (K = 16, more blocks than the 10 participants of a round, so rounds leave
    blocks out) equal the counts of the training's own partition and deal, coordinate by coordinate; a ledger of two
    K or of a block outside 0 .. K-1 is refused."""
    import pandas as pd

    from hasfl.analysis.per_run.coverage_over_time import ALL_BLOCKS, block_of, read_ledger, run_rows
    cfg = engine_cfg(rounds=5, warmup=1)
    cfg["method_params"]["shuffled"] = {"partitions": 16}
    run = federate(cfg, "shuffled")
    buffers = ("running_mean", "running_var", "num_batches_tracked")
    shapes = {k: tuple(v.shape) for k, v in run.init_state.items() if not k.endswith(buffers)}
    blocks = P.blocks(shapes, 16, 42)
    led = run.participation
    counts = {r: {k: sum((b == int(s)).to(torch.int32) for s in g["window_shift"]) for k, b in blocks.items()}
              for r, g in led.groupby("round")}
    t0, last, used = int(run.summary["t0"]), int(led["round"].max()), 2
    ledger = read_ledger(_parquet(led, tmp_path / "run"))
    # a partition run's rows need no model family: the blocks' sizes follow from the shapes and K
    rows = pd.DataFrame(run_rows("digits", "shuffled", 42, ledger, run.summary, None, shapes, used))
    groups: dict[str, list[str]] = {ALL_BLOCKS: list(shapes)}
    for k in shapes:
        groups.setdefault(block_of(k), []).append(k)
    assert list(rows["block"]) == list(groups) and set(rows["window"]) == {"partition/16"}
    for _, row in rows.iterrows():
        keys = groups[row["block"]]
        n = sum(blocks[k].numel() for k in keys)

        def union(rounds):
            return sum(int(sum((counts[r][k] > 0) for r in rounds).gt(0).sum()) for k in keys)

        recent = [r for r in counts if r > last - used]
        after = [r for r in counts if r - 1 > t0]
        assert row["coordinates"] == n
        assert row["trained_last_k"] == union(recent) and row["trained_after_t0"] == union(after)
        assert row["gamma_min"] == min(int(counts[r][k].min()) for r in counts for k in keys)
        assert row["gamma_min_last_k"] == min(int(counts[r][k].min()) for r in recent for k in keys)
        expected = np.mean([sum(int((counts[r][k] == 0).sum()) for k in keys) / n for r in counts])
        assert row["uncovered_frac_mean"] == pytest.approx(expected, abs=1e-12)
        assert np.isnan(row["unit_count_cv"])
    assert rows.iloc[0]["uncovered_frac_mean"] > 0  # 16 blocks, 10 participants: some left out each round
    two = led.copy()
    two.loc[two.index[0], "window"] = "partition/8"
    with pytest.raises(ValueError, match="one K"):
        read_ledger(_parquet(two, tmp_path / "two"))
    bad = led.copy()
    bad.loc[bad.index[0], "window_shift"] = 16
    with pytest.raises(ValueError, match="outside 0 .. 15"):
        read_ledger(_parquet(bad, tmp_path / "bad"))



def _parquet(frame, folder):
    folder.mkdir()
    frame.to_parquet(folder / "participation.parquet")
    return folder / "participation.parquet"


def test_one_block_is_fedavg(engine_cfg, federate, one_thread):
    """K = 1: the one sub-model is the whole model, dealt to every participant, and the holders' mean is Algorithm 1
    line 18's over everyone: the run is FedAvg's, byte for byte (the masked forward pass keeps the parameters'
    memory layout, so its convolutions run the same kernels)."""
    cfg = engine_cfg(rounds=3, warmup=1)
    cfg["method_params"]["shuffled"] = {"partitions": 1}
    one, fedavg = federate(cfg, "shuffled"), federate(cfg, "fedavg")
    for k, v in fedavg.final_state.items():
        assert torch.equal(one.final_state[k], v), k
    assert one.rounds.equals(fedavg.rounds)


def test_a_participants_sub_model_is_its_block_of_the_final_model(engine_cfg, federate, digits, digits_family,
                                                                  one_thread, tmp_path):
    """The sub-model accuracy of a shuffled run: each last-round participant's network ``w * m_k`` (the final model's
    coordinates of its block, the others 0, test-batch statistics), its block the training's own partition; the row
    is their mean over the participants."""
    from hasfl.analysis.per_run import submodel_accuracy as sa
    from hasfl.analysis.per_run.bn_sensitivity import EVAL_BATCH
    from hasfl.analysis.stale import evaluate_accuracy
    from hasfl.analysis.tables.table4c_coverage_over_time import read_ledger
    from hasfl.models.bn import batch_statistics, model_at

    cfg = engine_cfg(rounds=3, warmup=1)
    cfg["method_params"]["shuffled"] = {"partitions": 4}
    run = federate(cfg, "shuffled")
    led = read_ledger(_parquet(run.participation, tmp_path / "led"))
    last = led[led["round"] == led["round"].max()]
    ids = P.blocks(P.parameter_shapes(digits_family), 4, digits.seed)

    def direct(block: int) -> float:
        model = batch_statistics(model_at(digits_family, 1.0, run.final_state, "per_width"))
        with torch.no_grad():
            for n, w in model.named_parameters():
                w.mul_(ids[n] == block)
        return 100.0 * evaluate_accuracy(model, digits.bundle, EVAL_BATCH)

    want = [direct(int(b)) for b in last["window_shift"]]
    row = sa.run_row("digits", "shuffled", digits.seed, "completed", digits_family, digits.bundle, run.final_state,
                     led, "batch")
    assert row["windows"] == "partition/4" and row["n_submodels"] == last["window_shift"].nunique()
    assert row["bn_used"] == "batch" and row["submodel_acc_pct"] == pytest.approx(np.mean(want), abs=1e-9)
    assert (row["min_submodel_acc_pct"], row["max_submodel_acc_pct"]) == pytest.approx((min(want), max(want)))
    full = 100.0 * evaluate_accuracy(model_at(digits_family, 1.0, run.final_state, "batch"), digits.bundle, EVAL_BATCH)
    assert any(abs(w - full) > 1e-9 for w in want)  # a block is not the whole model
