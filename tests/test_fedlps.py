"""FedLPS's ratio choice against a transcription of the official rule (sunnyxuejj/FedLPS-main @b499bbb:
``Hetero_Client.py:84-89`` the arms, ``:117-151`` P_UCBV; ``FedLPS.py:30-31`` U, ``:192-194`` the capped rate,
``:207-226`` the reward and the arm it is credited to), on the same random draws.

The transcription keeps the official data structures (numpy arrays that ``np.insert`` returns, a dict of reward
lists keyed by lower bound, the exploration flag from ``random.random``, the arm from ``random.randint``, the action
from ``random.uniform``) and is written here, not imported: the module under test must agree with it draw by draw."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from hasfl.fl.methods.fedlps import ARMS, RatioBandit, arm_of_rate, reward, utility


class OfficialRandom:
    """Python's ``random`` API over a numpy generator, so the transcription draws what the module draws."""

    def __init__(self, gen: np.random.Generator) -> None:
        self.gen = gen

    def random(self) -> float:
        return float(self.gen.random())

    def randint(self, a: int, b: int) -> int:  # inclusive, as random.randint
        return int(self.gen.integers(a, b + 1))

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * float(self.gen.random())


class OfficialClient:
    """``Hetero_Client``'s bandit state and ``P_UCBV``, line by line."""

    def __init__(self, rounds: int, nusers: int, frac: float, rnd: OfficialRandom) -> None:
        self.rounds, self.nusers, self.frac, self.random = rounds, nusers, frac, rnd
        self.selected_times = 0
        a = np.linspace(0.5, 1, 6)
        self.mab_arms = [[a[i], a[i + 1]] for i in range(len(a) - 1)]
        self.arms_reward = {}
        for i in range(len(self.mab_arms)):
            self.arms_reward[self.mab_arms[i][0]] = [0.0]
        self.pull_times = np.ones(len(self.mab_arms))
        self.acc_record = [0]

    def P_UCBV(self):  # noqa: N802 (the official name)
        T = self.rounds / (self.nusers * self.frac)
        phi = T / math.pow(len(self.mab_arms), 2)
        if self.selected_times == 0:
            self.es_0 = 1
            self.m = 0
            self.ep = 1
        score_list = []
        for j, (key, record) in enumerate(self.arms_reward.items()):
            r_ = np.mean(np.array(record))
            v_ = np.var(np.array(record))
            if math.log(phi * T * self.es_0) > 0:
                score = r_ + math.sqrt(0.5 * (abs(v_) + 2) * math.log(phi * T * self.es_0) / (4 * self.pull_times[j]))
            else:
                score = r_
            score_list.append(score)
        flag = self.random.random()
        if flag < self.ep:
            max_index = self.random.randint(0, len(self.mab_arms) - 1)
        else:
            max_index = np.argmax(np.array(score_list))
        action = self.random.uniform(self.mab_arms[max_index][0], self.mab_arms[max_index][1])
        bound = self.mab_arms[max_index][1]
        self.mab_arms[max_index][1] = action
        self.mab_arms = np.insert(self.mab_arms, max_index + 1, [action, bound], axis=0)
        self.arms_reward[action] = copy.deepcopy(self.arms_reward[self.mab_arms[max_index][0]])
        pulltime_copy = self.pull_times[max_index]
        self.pull_times = np.insert(self.pull_times, max_index, pulltime_copy)
        self.pull_times[max_index + 1] += 1
        self.es_0 = self.es_0 / 2
        self.m += 1
        self.ep = 1 / self.m
        return action, max_index + 1

    def credit(self, mask_rate: float, value: float) -> None:
        """``FedLPS.py:222-226``."""
        action_index = 0
        for i, n in enumerate(self.mab_arms):
            if n[0] > mask_rate:
                action_index = i - 1
                break
        self.arms_reward[self.mab_arms[action_index][0]].append(value)


def official_U(x):  # noqa: N802
    return 10 - 20 / (1 + math.exp(0.35 * x))


def official_reward(acc_record, train_flops, ul_cost, capacity_rate):
    """The cifar branch of ``FedLPS.py:211-215``."""
    return (official_U(acc_record[-1]) - official_U(max(acc_record[:-1]))) \
        / (3 * train_flops / 1e6 / 672000 / capacity_rate + ul_cost / 8 / 1024 / 1024 / 14.9)


@pytest.mark.parametrize("capacity", [1.0, 0.5, 0.25])
def test_the_bandit_agrees_with_the_official_rule_draw_by_draw(capacity):
    """40 selections of one client (the official default horizon: 100 rounds, 100 clients, fraction 0.1) with rewards
    from a drifting accuracy: the same actions, arms, reward lists (keys, insertion order, values) and pull counts."""
    ours, theirs = RatioBandit.new(100, 100, 10), OfficialClient(100, 100, 0.1, OfficialRandom(np.random.default_rng(7)))
    draws = np.random.default_rng(7)
    acc = [0.0]
    for step in range(40):
        action = ours.choose(draws)
        official_action, _ = theirs.P_UCBV()
        theirs.selected_times += 1
        assert action == official_action, step
        rate = min(capacity, action)
        acc.append(min(1.0, 0.1 + 0.02 * step + 0.05 * math.sin(step)))
        flops, bits = 1e9 * rate, 32 * 60_000 * rate
        value = reward(acc, flops, bits, capacity, (672000.0, 14.9))
        assert value == pytest.approx(official_reward(acc, flops, bits, capacity), rel=1e-12)
        ours.record(rate, value)
        theirs.credit(rate, value)
        assert [list(map(float, a)) for a in theirs.mab_arms] == ours.arms
        assert list(theirs.arms_reward) == list(ours.rewards)
        assert [list(v) for v in theirs.arms_reward.values()] == list(ours.rewards.values())
        assert list(theirs.pull_times) == ours.pulls


def test_the_credit_scan_keeps_the_official_edge_cases():
    arms = [[ARMS[i], ARMS[i + 1]] for i in range(5)]
    assert arm_of_rate(arms, 0.25) == -1  # below every arm: the official i - 1 at i = 0, the last arm
    assert arm_of_rate(arms, 0.95) == 0  # in the last arm: no lower bound exceeds it, the default 0
    assert arm_of_rate(arms, 0.65) == 1
    assert utility(0.0) == 0.0 and utility(1.0) == pytest.approx(official_U(1.0))


def test_a_resumed_bandit_draws_what_an_uninterrupted_one_draws():
    a, draws_a = RatioBandit.new(30, 20, 10), np.random.default_rng(3)
    b, draws_b = RatioBandit.new(30, 20, 10), np.random.default_rng(3)
    for _ in range(5):
        for bandit, draws in ((a, draws_a), (b, draws_b)):
            rate = bandit.choose(draws)
            bandit.record(rate, rate / 3)
    import json

    b = RatioBandit.from_state(json.loads(json.dumps(b.state())))
    state = draws_b.bit_generator.state
    draws_b = np.random.default_rng()
    draws_b.bit_generator.state = state
    assert [a.choose(draws_a) for _ in range(6)] == [b.choose(draws_b) for _ in range(6)]
    assert a.state() == b.state()


def test_a_reward_needs_a_record():
    with pytest.raises(ValueError, match="initial 0"):
        reward([0.5], 1.0, 1.0, 1.0, (1.0, 1.0))


# --------------------------------------------------------------------------- the method in the engine
def test_the_server_mean_is_over_every_participant_as_the_official_avg():
    """``agg/avg.py:9-24`` without its noise: (1/|S|) sum_i (delta_i + w), a coordinate a participant does not hold
    entering as w (delta 0), against the mean of the engine's aggregator of the method."""
    import torch

    from hasfl.fl.methods.fedlps import FedLPSServer
    from hasfl.models.slicing import SliceRule

    w = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3)}
    server = FedLPSServer(10, 4, 2, 42, noise=0.0)
    agg = server.aggregator(w, ["a"])
    full, prefix = SliceRule(None, (slice(0, 2), slice(0, 3))), SliceRule(None, (slice(0, 1), slice(0, 2)))
    d1, d2 = torch.ones(2, 3), torch.full((1, 2), 4.0)
    agg.add({"a": d1}, {"a": full}, server.client_weight(100))
    agg.add({"a": d2}, {"a": prefix}, server.client_weight(7))
    new = {"a": w["a"].clone()}
    server.step(new, agg.mean(), ["a"])
    official = ((d1 + w["a"]) + (torch.nn.functional.pad(d2, (0, 1, 0, 1)) + w["a"])) / 2
    assert torch.equal(new["a"], official)


def test_a_run_learns_ratios_within_capacity_and_resumes_to_the_same_result(engine_cfg, federate, tmp_path, one_thread):
    """A 12-round run on digits: every participant's allocated p is min(pmax, an action in [0.5, 1]), a full-capacity
    client's p moves between rounds (the bandit), and a run stopped after a checkpoint resumes to the same tables and
    final state, its server state (bandits, accuracy records, noise generator) in the checkpoint."""
    import torch

    from hasfl.fl.checkpoint import Checkpointer

    cfg = engine_cfg(rounds=12, warmup=2)
    full = federate(cfg, "fedlps")
    led = full.participation
    pmax = full.clients.set_index("client_id")["pmax"]
    capped = led["p"] <= led["client_id"].map(pmax) + 1e-12
    floor = led["p"] >= led["client_id"].map(pmax).clip(upper=0.5) - 1e-12
    assert capped.all() and floor.all()
    top = led[led["client_id"].map(pmax) == 1.0]
    assert top.groupby("client_id")["p"].nunique().max() > 1
    # the final allocation is each client's latest learned ratio (Table 10 reads it)
    last = led.sort_values("round").groupby("client_id")["p"].last()
    final = full.clients.set_index("client_id")["p_final"]
    assert np.allclose(final[last.index], last) and (final.drop(last.index) == pmax.drop(last.index)).all()

    class Stop(Exception):
        pass

    def stop(rnd, row):
        if rnd == 7:
            raise Stop

    ckpt = tmp_path / "checkpoint.pt"
    with pytest.raises(Stop):
        federate(cfg, "fedlps", checkpointer=Checkpointer(ckpt, 3, {"digest": "fedlps"}), progress=stop)
    saved = torch.load(ckpt, weights_only=False)
    assert set(saved["server"]) == {"bandits", "accuracies", "kept", "generator"} and saved["server"]["bandits"]
    resumed = federate(cfg, "fedlps", checkpointer=Checkpointer(ckpt, 3, {"digest": "fedlps"}))
    assert resumed.rounds.equals(full.rounds) and resumed.participation.equals(full.participation)
    for k, v in full.final_state.items():
        assert torch.equal(resumed.final_state[k], v), k
    assert resumed.kept_models.keys() == full.kept_models.keys()
    for i, kept in full.kept_models.items():
        assert resumed.kept_models[i]["p"] == kept["p"]
        for k, v in kept["state"].items():
            assert torch.equal(resumed.kept_models[i]["state"][k], v), (i, k)


def test_each_client_keeps_its_last_local_model_above_a_quarter(engine_cfg, federate, one_thread):
    """``Hetero_Client.py:258-267``: a client keeps the model of its last training at a rate above 0.25 (its
    width's shapes), a client that never trained above it keeps none; every other method keeps none."""
    from hasfl.fl.methods.fedlps import KEEP_ABOVE

    cfg = engine_cfg(rounds=8, warmup=2)
    run = federate(cfg, "fedlps")
    led = run.participation
    above = led[led["p_trained"] > KEEP_ABOVE].sort_values("round")
    last = above.groupby("client_id")["p_trained"].last()
    assert set(run.kept_models) == set(last.index) and 0 < len(last) < led["client_id"].nunique()
    full = sum(v.numel() for v in run.final_state.values())
    for i, kept in run.kept_models.items():
        assert kept["p"] == pytest.approx(last[i])  # the last one above a quarter, not a later one below
        size = sum(v.numel() for v in kept["state"].values())
        assert (size < full) == (kept["p"] < 1.0), (i, kept["p"])
    assert federate(cfg, "fedavg").kept_models == {}
