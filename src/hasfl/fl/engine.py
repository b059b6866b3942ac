"""The federated round loop: paper Algorithm 1, line by line.

:func:`run_federation` reads top to bottom next to the paper: initialise (lines 1-3);
every round sample S(t) (line 5), extract each participant's sub-model (lines 7-8,
Algorithm 2: the units of the method's window for the round, the leading ones for every nested method), train it locally (lines 9-13), take its update (line 14), aggregate
coordinate-wise (lines 17-18), apply the update (line 19), and at adaptation rounds
estimate heterogeneity (Eq. 4, line 22), smooth it (Eq. 5, line 23) and let the policy
re-allocate widths (Eq. 6 and the coverage guarantee, lines 25-29); every T_norm rounds
the estimates are normalised (Section 3.2). The estimate is computed for every method as
a diagnostic; only HAS-FL's policy acts on it. Batch-norm running statistics are kept per
channel count (:mod:`hasfl.fl.bn_stats`, FjORD's per-width BN): a client starts from its
width's set and each set moves by the clients that trained at that width.

How the run computes (device, precision, sub-model buffers, evaluation, timing) is in
:mod:`hasfl.fl.runtime`; the record and the run files in :mod:`hasfl.fl.records`;
resuming in :mod:`hasfl.fl.checkpoint`; who is sampled and which mini-batches in
:mod:`hasfl.fl.sampling`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch

from hasfl.data.base import DatasetBundle
from hasfl.fl.batched import BatchedRound, check_batchable
from hasfl.fl.bn_stats import WidthStatistics
from hasfl.fl.checkpoint import Checkpointer
from hasfl.fl.client import OptimConfig, client_data
from hasfl.fl.estimator import Estimates, divergence, reported_tv
from hasfl.fl.methods import MethodContext, build_method
from hasfl.fl.probe import Probe
from hasfl.fl.records import RunRecord, RunResult, WidthCosts
from hasfl.fl.runtime import (
    Evaluator,
    Numerics,
    PhaseClock,
    SubModels,
    cpu_kernels,
    determinism_flags,
    family_for,
    resolve_device,
)
from hasfl.fl.sampling import local_generator, participant_schedule, policy_rng, report_rng

__all__ = ["run_federation"]


def run_federation(
    bundle: DatasetBundle,
    partition: pd.DataFrame,
    clients: pd.DataFrame,
    run_cfg: Mapping[str, Any],
    *,
    hasfl_avg_p: float | None = None,
    hasfl_diverged: bool = False,
    progress: Callable[[int, dict[str, Any]], None] | None = None,
    checkpointer: Checkpointer | None = None,
    clock: PhaseClock | None = None,
) -> RunResult:
    """Train one method on one dataset x seed (config slice ``run_cfg``); returns its record.

    ``hasfl_avg_p`` is the budget a random-budget control matches. With a ``checkpointer`` the
    loop state is saved every ``checkpointer.every`` rounds and a run that finds a checkpoint
    of its own identity resumes from it, with the same result as an uninterrupted run.
    ``clock`` times the phases (a fresh :class:`PhaseClock` by default).
    """
    t_start = time.perf_counter()
    clock = clock or PhaseClock()
    seed, fed, h = int(run_cfg["seed"]), run_cfg["federation"], run_cfg["hasfl"]
    n_clients, rounds = int(fed["clients"]), int(fed["rounds"])
    device = resolve_device(run_cfg["device"])
    numerics = Numerics.for_run(device, run_cfg["precision"], bundle.task == "image",
                                deterministic=bool(run_cfg.get("cuda_deterministic", True)))
    bundle.to(device)
    optim = OptimConfig.from_config(run_cfg["dataset_params"]["optim"])
    family = family_for(bundle, run_cfg["dataset_params"]["model"])
    numerics.check_model(family)
    submodels = SubModels(family, numerics)
    evaluate = Evaluator(family, numerics, run_cfg["dataset_params"]["model"].get("bn_stats", "per_width"))
    table = clients.sort_values("client_id")
    pmax, n_train = table["pmax"].to_numpy(dtype=np.float64), table["n_train"].to_numpy()
    data = client_data(partition, bundle)

    torch.manual_seed(seed)
    global_model = family.build(1.0).to(device)                         # line 1: w(0), one per seed
    w = global_model.state_dict()
    init_state = {k: v.detach().cpu().clone() for k, v in w.items()}
    float_keys = [k for k, v in w.items() if v.is_floating_point()]
    param_keys = [k for k, _ in global_model.named_parameters()]
    full_widths = repr(family.widths(1.0))
    schedule = participant_schedule(seed, n_clients, int(fed["clients_per_round"]), rounds)
    rng = policy_rng(seed)
    method = build_method(run_cfg["method"], MethodContext(           # line 3: p(0) = pmax (the policy's)
        pmax=pmax, run_cfg=run_cfg, schedule=schedule, rng=rng, family=family, optim=optim,
        inputs=bundle.inputs, hasfl_avg_p=hasfl_avg_p, hasfl_diverged=hasfl_diverged))
    method.client.autocast = numerics.autocast
    batched = run_cfg.get("client_step", "sequential") == "batched"  # lines 9-13 for a width's clients at once
    if batched:
        check_batchable(run_cfg["method"], method.client)
    # BN running statistics per width and mixed (hasfl.fl.bn_stats), in global channel coordinates when the
    # method's windows roll
    bn = WidthStatistics(global_model, nested=method.nested_in(rounds))
    est = run_cfg["estimators"]  # line 2: H~(0) = 1, and the capacity-separable E1-E3 beside it
    estimates = Estimates(n_clients, h["beta"], h["t_norm"], pmax, reported_tv(
        {i: d.y[d.index].cpu().numpy() for i, d in data.items()}, n_clients, bundle.num_classes,
        est["reported"]["epsilon"], report_rng(seed)))
    probe = Probe(est["probe"]["width"] or min(run_cfg["capacity"]["tiers"]), est["probe"]["batches"], optim,
                  bundle.inputs, submodels, h["epsilon"], seed)
    probe.sgd.autocast = numerics.autocast
    costs = WidthCosts(family)

    record = RunRecord(n_clients, t0=int(h["warmup"]))
    ckpt = checkpointer or Checkpointer(None, 0, {})
    saved = ckpt.load()
    if saved is not None:  # resume: every piece of state the remaining rounds depend on
        record = saved["record"]
        with torch.no_grad():
            for k, v in saved["global_state"].items():
                w[k].copy_(v)
        method.policy.p = saved["policy_p"]
        estimates.load_state(saved["estimates"])
        method.server.load_state(saved["server"])
        bn.load_state(saved["bn_stats"], device)
        rng.bit_generator.state = saved["policy_rng"]
        method.restore(saved)
        clock.restore(saved["seconds"])

    with numerics.backend_flags():  # float32 precision and determinism of the backends, restored after the loop
        determinism = determinism_flags()  # what the loop runs under, as torch reports it
        for t in range(record.next_round, rounds):
            participants = schedule[t]                                    # line 5: S(t)
            widths = method.policy.widths(t, participants, rng)          # p_i(t)
            window = method.window(t)                                     # which units: the method's answer
            trained = method.policy.trained_widths(participants, widths)
            windows = dict(zip(participants.tolist(), method.windows(t, participants.tolist(), trained.tolist()),
                               strict=True))                              # each participant's (the round's, or its own)
            lr = optim.lr_at(t)
            adapting = t >= int(h["warmup"]) and t % int(h["t_adapt"]) == 0  # line 20
            if adapting:  # E2: probes of one width from w(t), before anyone trains
                with clock.phase("probe"):
                    h_probe = probe.divergences(t, participants.tolist(), w, data, n_train, lr, float_keys, param_keys,
                                                window)
            agg = method.server.aggregator(w, float_keys)                # lines 17-18's sums (the method's mean)
            method.server.begin_round()
            bn.begin_round(w, any(repr(family.widths(q)) != full_widths for q in trained.tolist()))
            updates, losses, finite = {}, [], True
            charged = adapting and method.policy.estimator == "probe"  # E2 allocates: its probes are a cost
            batch = None
            if batched:  # config client_step: every participant's lines 7-13 first (hasfl.fl.batched)
                with clock.phase("local_sgd"):
                    batch = BatchedRound.train(
                        participants.tolist(), trained.tolist(),
                        lambda i, q: _prepared(submodels, bn, q, w, windows[i]), data,
                        {i: local_generator(seed, t, i) for i in participants.tolist()}, optim, lr, bundle.inputs,
                        numerics.autocast, lambda q: repr(family.widths(q)))
            for i, p, p_trained in zip(participants.tolist(), widths.tolist(), trained.tolist(), strict=True):
                probe_mb, probe_macs = probe.paid(i, n_train[i] * optim.local_epochs, costs) if charged else (0, 0)
                record.client_trained(t, i, p, p_trained, method.client.upload_mb(costs, p, p_trained) + probe_mb,
                                      method.client.forward_macs(costs, p, p_trained) + probe_macs)  # Table 1's costs
                with clock.phase("slicing"):
                    module, rules = submodels.extract(p_trained, w, windows[i])  # lines 7-8
                    bn.prepare(module, rules)                             # its widths' BN statistics
                with clock.phase("local_sgd"):                            # lines 9-13
                    res = (method.client.run(i, module, data[i], lr, local_generator(seed, t, i), p, p_trained)
                           if batch is None else batch.result(i, module))
                with clock.phase("aggregation"):
                    delta = SubModels.delta(module, rules, w, float_keys)  # lines 14-15: Delta_i
                    agg.add(delta, rules, method.server.client_weight(n_train[i]),  # line 18: n_i
                            skip=bn.sub_width_keys(module))
                    bn.add(module, rules, method.server.client_weight(n_train[i]), w)
                updates[i] = (delta, rules)
                record.client_done(t, i, p, p_trained, method.client.held(windows[i]), int(n_train[i]), res.steps,
                                   res.loss)
                losses.append(res.loss)
                finite &= res.finite
            with clock.phase("aggregation"):
                delta_bar = agg.mean()                                    # lines 17-18: Delta_bar(t)
                method.server.step(w, delta_bar, float_keys)              # line 19: w(t+1)
                bn.finish_round(method.server.global_lr())
            finite &= all(bool(torch.isfinite(w[k]).all()) for k in param_keys)
            h_hat = None
            if adapting:                                                  # line 20
                with clock.phase("estimation"):
                    h_hat = np.array([divergence(updates[i][0], delta_bar, updates[i][1], param_keys, h["epsilon"])
                                      for i in participants.tolist()])    # line 22: Eq. 4
                estimates.observe(participants, h_hat, h_probe)           # line 23: Eq. 5 (E0 and E2)
                method.policy.adapt(estimates.values()[method.policy.estimator])  # lines 25-29: Eq. 6 + coverage
            estimates.normalize_if_due(t)                                 # Section 3.2: every T_norm
            record.round_estimated(None if h_hat is None else dict(zip(participants.tolist(), h_hat.tolist())),
                                   estimates.update.h_tilde)

            record.round_trained(participants, widths, trained,
                                 probe_gmacs=costs(probe.width).macs * probe.samples / 1e9 if adapting else 0.0)
            if t == record.t0:
                record.warmup_done(t, {**w, **bn.entries()})
            if not finite:
                record.diverged(t + 1)
            if (t + 1) % int(fed["eval_every"]) == 0 or t == rounds - 1 or not finite:
                with clock.phase("evaluation"):
                    acc, loss = evaluate(global_model, bundle, bn.entries()) if finite else (math.nan, math.nan)
                if not math.isfinite(loss) and finite:
                    record.diverged(t + 1)
                    finite = False
                row = record.evaluated(t + 1, acc, loss, float(estimates.update.h_tilde.mean()),
                                       int(len(participants)), float(np.mean(losses)))
                if progress is not None:
                    progress(t + 1, row)
            record.next_round = t + 1
            if not finite:
                break
            if ckpt.due(t + 1, rounds):
                ckpt.save({"record": record, "global_state": {k: v.detach().cpu() for k, v in w.items()},
                           "policy_p": method.policy.p, "estimates": estimates.state(),
                           "server": method.server.state(), "bn_stats": bn.state(),
                           "policy_rng": rng.bit_generator.state, **method.checkpoint(),
                           "seconds": clock.snapshot()})

    s = clock.seconds
    timings = {"total_s": time.perf_counter() - t_start, "local_training_s": s["slicing"] + s["local_sgd"],
               "server_s": s["aggregation"] + s["estimation"], "evaluation_s": s["evaluation"], "probe_s": s["probe"],
               "phases_s": clock.snapshot(), "device": str(device), "threads": torch.get_num_threads(),
               "precision": numerics.precision, "channels_last": numerics.channels_last, "determinism": determinism,
               **cpu_kernels()}
    final_state = {**{k: v.detach().cpu().clone() for k, v in w.items()}, **bn.entries()}
    result = record.result(run_cfg, pmax, method.policy.p, estimates.values(), hasfl_avg_p, hasfl_diverged,
                           init_state, final_state, timings)
    result.kept_models = method.server.kept_models()
    return result


def _prepared(submodels: SubModels, bn: WidthStatistics, p: float, w: Mapping[str, torch.Tensor],
              window: Any) -> torch.nn.Module:
    """A width-``p`` sub-model of w(t) at ``window`` with its widths' BN statistics (lines 7-8)."""
    module, rules = submodels.extract(p, w, window)
    bn.prepare(module, rules)
    return module
