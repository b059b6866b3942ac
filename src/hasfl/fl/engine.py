"""The federated round loop (paper Algorithm 1).

:func:`run_federation` follows Algorithm 1 line by line: sample S(t) (line 5),
extract each participant's nested sub-model (lines 7-8, Algorithm 2), train
locally (lines 9-13), aggregate coordinate-wise (lines 17-19), and at adaptation
rounds estimate heterogeneity (Eq. 4), smooth it (Eq. 5) and let the policy
re-allocate widths (lines 20-29). The estimate is computed for every method as a
diagnostic; only HAS-FL's policy acts on it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hasfl.config import PRECISIONS
from hasfl.data.base import DatasetBundle
from hasfl.data.partition import rng_for
from hasfl.fl.aggregation import CoordinateAggregator
from hasfl.fl.client import ClientData, OptimConfig
from hasfl.fl.estimator import HeterogeneityTracker, divergence
from hasfl.fl.methods import MethodContext, build_method
from hasfl.io import atomic_path
from hasfl.models import build_family
from hasfl.models.family import ModelFamily
from hasfl.models.slicing import SliceRule, region

STREAM_SAMPLING = 3
STREAM_POLICY = 4
STREAM_LOCAL = 5


@dataclass
class LoopState:
    """Everything the round loop accumulates (checkpointed with the model)."""

    next_round: int
    records: list[dict[str, Any]]
    p_sum: np.ndarray
    times_sampled: np.ndarray
    p_hi_alloc: np.ndarray
    p_hi_trained: np.ndarray
    avg_p_rounds: list[float]
    status: str = "completed"
    diverged_round: int | None = None
    t_train: float = 0.0
    t_server: float = 0.0
    t_eval: float = 0.0

    @classmethod
    def fresh(cls, n_clients: int) -> LoopState:
        return cls(0, [], np.zeros(n_clients), np.zeros(n_clients, dtype=np.int64), np.zeros(n_clients),
                   np.zeros(n_clients), [])


def run_fingerprint(run_cfg: Mapping[str, Any], hasfl_avg_p: float | None) -> str:
    """Identity of a run's configuration; a checkpoint resumes only the same run."""
    blob = json.dumps({"cfg": run_cfg, "target": hasfl_avg_p}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class Checkpointer:
    """Atomic save / load of the loop state every k rounds (k = 0: never)."""

    def __init__(self, path: str | Path | None, every: int, fingerprint: str) -> None:
        self.path = Path(path) if path is not None else None
        self.every, self.fingerprint = int(every), fingerprint

    def due(self, rounds_done: int, total: int) -> bool:
        return self.path is not None and self.every > 0 and rounds_done % self.every == 0 and rounds_done < total

    def save(self, payload: dict[str, Any]) -> None:
        assert self.path is not None
        buf = io.BytesIO()
        torch.save({"fingerprint": self.fingerprint, **payload}, buf)
        with atomic_path(self.path) as tmp:
            tmp.write_bytes(buf.getvalue())
            # fault-injection window for the kill-during-write test (0 in normal use)
            time.sleep(float(os.environ.get("HASFL_CHECKPOINT_WRITE_DELAY", "0")))

    def load(self) -> dict[str, Any] | None:
        if self.path is None or self.every <= 0:
            return None
        for stale in self.path.parent.glob(f".{self.path.name}.*.tmp"):  # a write cut short by a kill
            stale.unlink()
        if not self.path.exists():
            return None
        try:
            saved = torch.load(self.path, weights_only=False)
        except Exception as exc:  # a checkpoint that cannot be read is ignored, never half-used
            logging.getLogger("hasfl.train").warning("ignoring unreadable checkpoint %s: %s", self.path, exc)
            return None
        if saved.get("fingerprint") != self.fingerprint:
            logging.getLogger("hasfl.train").warning("ignoring checkpoint %s of another configuration", self.path)
            return None
        logging.getLogger("hasfl.train").info("resuming from %s after round %d", self.path, saved["loop"].next_round)
        return saved

    def remove(self) -> None:
        if self.path is not None and self.path.exists():
            self.path.unlink()


@dataclass
class RunResult:
    """Everything a training job writes (see hasfl.fl.train for the files)."""

    rounds: pd.DataFrame
    clients: pd.DataFrame
    init_state: dict[str, Tensor]
    final_state: dict[str, Tensor]
    summary: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)


def participant_schedule(seed: int, n_clients: int, per_round: int, rounds: int) -> list[np.ndarray]:
    """S(t) for every round (line 5); identical for every method of one seed."""
    rng = rng_for(seed, STREAM_SAMPLING)
    return [np.sort(rng.choice(n_clients, size=per_round, replace=False)) for _ in range(rounds)]


def local_generator(seed: int, t: int, client: int) -> torch.Generator:
    """Mini-batch order of one client in one round, independent of the method."""
    state = np.random.SeedSequence([seed, STREAM_LOCAL, t, client]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(state))


def family_for(bundle: DatasetBundle, model_cfg: Mapping[str, Any]) -> ModelFamily:
    """The model family of a dataset from its config block."""
    kwargs = {k: v for k, v in model_cfg.items() if k != "arch"}
    return build_family(model_cfg["arch"], in_shape=tuple(bundle.input_shape), num_classes=bundle.num_classes, **kwargs)


@dataclass(frozen=True)
class Numerics:
    """How one run computes: arithmetic precision (config ``precision``) and memory layout.

    * ``fp32`` (default): IEEE float32 in every convolution, matmul and RNN. PyTorch's
      own default lets cuDNN run float32 convolutions and RNNs in TF32 on NVIDIA GPUs;
      ``fp32`` turns that off, so a GPU run computes what a CPU run computes.
    * ``tf32`` (CUDA only): TF32 tensor cores for float32 convolutions, RNNs and matmuls.
    * ``bf16``: forward passes (local training and evaluation) under bfloat16 autocast;
      parameters, gradients, optimiser state, aggregation and the estimator stay float32.

    The paper states no precision (docs/decisions.md, "Precision and memory layout"). Independently of
    precision, image sub-models train in ``channels_last`` on the CPU (measured faster,
    docs/performance.md). Layout and precision change rounding only: a run stays a
    deterministic function of config and seed.
    """

    device: torch.device
    precision: str = "fp32"
    channels_last: bool = False

    @classmethod
    def for_run(cls, device: torch.device, precision: str, image: bool) -> Numerics:
        """The numerics of a run on ``device`` (``image``: the model is an image CNN)."""
        if precision not in PRECISIONS:
            raise ValueError(f"config key 'precision' is '{precision}'; expected one of {', '.join(PRECISIONS)}")
        if precision == "tf32" and device.type != "cuda":
            raise ValueError(f"config key 'precision' is 'tf32', which needs a CUDA device; the run's device is "
                             f"'{device.type}' (use fp32 or bf16)")
        return cls(device, precision, channels_last=device.type == "cpu" and image)

    def prepare(self, module: nn.Module) -> nn.Module:
        """Move a freshly built module to the device in the training layout."""
        module = module.to(self.device)
        return module.to(memory_format=torch.channels_last) if self.channels_last else module

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Context of every forward pass: bfloat16 autocast under ``bf16``, nothing otherwise."""
        if self.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def backend_flags(self) -> Iterator[None]:
        """Set the float32 precision of cuDNN / cuBLAS (TF32 only under ``tf32``) and oneDNN (always
        IEEE) for the run; the previous settings are restored after."""
        cuda = "tf32" if self.precision == "tf32" else "ieee"
        modes = [(torch.backends.cuda.matmul, cuda), (torch.backends.cudnn.conv, cuda),
                 (torch.backends.cudnn.rnn, cuda), (torch.backends.mkldnn.matmul, "ieee"),
                 (torch.backends.mkldnn.conv, "ieee"), (torch.backends.mkldnn.rnn, "ieee")]
        knobs = [k for k, _ in modes]
        saved = [k.fp32_precision for k in knobs]
        for k, mode in modes:
            k.fp32_precision = mode
        try:
            yield
        finally:
            for k, v in zip(knobs, saved, strict=True):
                k.fp32_precision = v


class SubModels:
    """One physically sliced module per distinct width (cached), loaded from the global state."""

    def __init__(self, family: ModelFamily, numerics: Numerics) -> None:
        self.family, self.numerics = family, numerics
        self._cache: dict[str, tuple[nn.Module, dict[str, SliceRule]]] = {}

    def get(self, p: float) -> tuple[nn.Module, dict[str, SliceRule]]:
        key = repr(self.family.widths(p))
        if key not in self._cache:
            self._cache[key] = (self.numerics.prepare(self.family.build(p)), self.family.slice_rules(p))
        return self._cache[key]

    @staticmethod
    @torch.no_grad()
    def load(module: nn.Module, rules: Mapping[str, SliceRule], global_state: Mapping[str, Tensor]) -> None:
        """Copy the sub-model's coordinates out of the global state (Algorithm 2)."""
        for k, t in module.state_dict().items():
            src = region(global_state[k], rules[k])
            t.view(src.shape).copy_(src)


@torch.inference_mode()
def evaluate(model: nn.Module, bundle: DatasetBundle, batch_size: int = 2048,
             channels_last: bool = False, numerics: Numerics | None = None) -> tuple[float, float]:
    """Accuracy and mean cross-entropy of ``model`` on the full test set (Section 4.1)."""
    model.eval()
    correct, loss, n = 0, 0.0, len(bundle.test_y)
    autocast = numerics.autocast if numerics is not None else contextlib.nullcontext
    for s in range(0, n, batch_size):
        x = bundle.inputs(bundle.test_x[s:s + batch_size])
        if channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        with autocast():
            logits = model(x)
        y = bundle.test_y[s:s + batch_size]
        loss += float(F.cross_entropy(logits.float(), y, reduction="sum"))
        correct += int((logits.argmax(1) == y).sum())
    return correct / n, loss / n


class Evaluator:
    """Evaluates the global model each evaluation round, the fastest way measured per device.

    On the CPU: a channels_last copy of the global model (image CNNs; it receives the
    global state before each evaluation) in batches of 64, measured 1.4-2.3x faster than
    the model itself in batches of 2,048, whose activations do not fit the caches
    (docs/performance.md). Elsewhere, and whenever batch norm normalises with batch
    statistics at test time (``bn_stats: batch``, where the batch changes the result),
    batches of 2,048 of the model itself. The copy is built without touching torch's
    global RNG, so runs draw the same numbers as before.
    """

    CPU_BATCH, BATCH = 64, 2048

    def __init__(self, family: ModelFamily, numerics: Numerics, batch_stats: bool) -> None:
        cpu = numerics.device.type == "cpu"
        self.numerics = numerics
        self.batch_size = self.CPU_BATCH if cpu and not batch_stats else self.BATCH
        self.channels_last = numerics.channels_last and not batch_stats
        self.copy: nn.Module | None = None
        if self.channels_last:
            with torch.random.fork_rng(devices=[]):
                self.copy = numerics.prepare(family.build(1.0))

    def __call__(self, global_model: nn.Module, bundle: DatasetBundle) -> tuple[float, float]:
        model = global_model
        if self.copy is not None:
            self.copy.load_state_dict(global_model.state_dict())
            model = self.copy
        return evaluate(model, bundle, self.batch_size, self.channels_last, self.numerics)


def resolve_device(name: str) -> torch.device:
    """``auto`` picks cuda when present."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("config key 'device' is 'cuda' but no CUDA device is available")
    return torch.device(name)


def run_federation(
    bundle: DatasetBundle,
    partition: pd.DataFrame,
    clients: pd.DataFrame,
    run_cfg: Mapping[str, Any],
    *,
    hasfl_avg_p: float | None = None,
    hasfl_diverged: bool = False,
    progress: Callable[[int, dict[str, Any]], None] | None = None,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 0,
) -> RunResult:
    """Train one method on one dataset x seed; returns per-round and per-client records.

    With ``checkpoint`` and ``checkpoint_every > 0`` the complete loop state is saved
    atomically every ``checkpoint_every`` rounds, and a run that finds a checkpoint of the
    same configuration resumes from it; the result is identical to an uninterrupted run.
    """
    t_start = time.perf_counter()
    seed, method = int(run_cfg["seed"]), run_cfg["method"]
    fed, hcfg = run_cfg["federation"], run_cfg["hasfl"]
    n_clients, rounds = int(fed["clients"]), int(fed["rounds"])
    device = resolve_device(run_cfg["device"])
    bundle.to(device)
    optim = OptimConfig.from_config(run_cfg["dataset_params"]["optim"])
    family = family_for(bundle, run_cfg["dataset_params"]["model"])

    # Algorithm 1 line 1: w(0), the same for every method of one seed.
    torch.manual_seed(seed)
    global_model = family.build(1.0).to(device)
    global_state = global_model.state_dict()
    init_state = {k: v.detach().cpu().clone() for k, v in global_state.items()}
    float_keys = [k for k, v in global_state.items() if v.is_floating_point()]
    param_keys = [k for k, _ in global_model.named_parameters()]

    pmax = clients.sort_values("client_id")["pmax"].to_numpy(dtype=np.float64)
    n_train = clients.sort_values("client_id")["n_train"].to_numpy()
    train_rows = partition[partition["split"] == "train"]
    data = {
        int(c): ClientData(int(c), torch.tensor(g["sample_index"].to_numpy(), device=device),
                           bundle.train_x, bundle.train_y)
        for c, g in train_rows.groupby("client_id", sort=True)
    }
    schedule = participant_schedule(seed, n_clients, int(fed["clients_per_round"]), rounds)
    policy_rng = rng_for(seed, STREAM_POLICY)
    ctx = MethodContext(pmax=pmax, run_cfg=run_cfg, schedule=schedule, rng=policy_rng, family=family,
                        optim=optim, inputs=bundle.inputs, hasfl_avg_p=hasfl_avg_p,
                        hasfl_diverged=hasfl_diverged)
    policy, trainer = build_method(method, ctx)
    tracker = HeterogeneityTracker(n_clients, hcfg["beta"], hcfg["t_norm"])
    numerics = Numerics.for_run(device, run_cfg["precision"], bundle.task == "image")
    trainer.autocast = numerics.autocast
    subs = SubModels(family, numerics)
    evaluator = Evaluator(family, numerics, run_cfg["dataset_params"]["model"].get("bn_stats", "running") == "batch")

    st = LoopState.fresh(n_clients)
    ckpt = Checkpointer(checkpoint, checkpoint_every, run_fingerprint(run_cfg, hasfl_avg_p))
    saved = ckpt.load()
    if saved is not None:  # resume: every piece of state the remaining rounds depend on
        st = saved["loop"]
        with torch.no_grad():
            for k, v in saved["global_state"].items():
                global_state[k].copy_(v)
        policy.p = saved["policy_p"]
        tracker.h_tilde = saved["h_tilde"]
        trainer.load_state(saved["trainer"])
        policy_rng.bit_generator.state = saved["policy_rng"]
    with numerics.backend_flags():  # float32 precision of the backends, restored after the loop
        for t in range(st.next_round, rounds):
            participants = schedule[t]                                    # line 5
            widths = policy.widths(t, participants, policy_rng)
            lr = optim.lr_at(t)
            agg = CoordinateAggregator(global_state, float_keys)
            deltas: dict[int, tuple[dict[str, Tensor], dict[str, SliceRule]]] = {}
            trainer.begin_round(global_state)
            losses, finite = [], True
            for i, p in zip(participants.tolist(), widths.tolist(), strict=True):
                tic = time.perf_counter()
                p_trained = trainer.model_width(p, pmax[i])
                st.p_hi_alloc[i], st.p_hi_trained[i] = max(st.p_hi_alloc[i], p), max(st.p_hi_trained[i], p_trained)
                module, rules = subs.get(p_trained)
                subs.load(module, rules, global_state)                     # lines 7-8
                trainer.begin_client(i, module, p, p_trained)
                res = trainer.train(module, data[i], lr, local_generator(seed, t, i))  # lines 9-13
                trainer.end_client(i, module, res.steps, lr)
                st.t_train += time.perf_counter() - tic
                tic = time.perf_counter()
                with torch.no_grad():                                      # line 14: Delta_i
                    state = module.state_dict()
                    delta = {k: state[k].view(region(global_state[k], rules[k]).shape)
                             - region(global_state[k], rules[k]) for k in float_keys}
                agg.add(delta, rules, n_train[i])
                deltas[i] = (delta, rules)
                losses.append(res.loss)
                finite &= res.finite
                st.t_server += time.perf_counter() - tic
            tic = time.perf_counter()
            delta_bar = agg.mean()                                         # lines 17-18
            with torch.no_grad():
                for k in float_keys:                                       # line 19
                    global_state[k].add_(delta_bar[k], alpha=trainer.server_lr())
            trainer.end_round(global_state, n_clients)
            finite &= all(bool(torch.isfinite(global_state[k]).all()) for k in param_keys)
            if t >= int(hcfg["warmup"]) and t % int(hcfg["t_adapt"]) == 0:  # line 20
                h_hat = np.array([divergence(deltas[i][0], delta_bar, deltas[i][1], param_keys, hcfg["epsilon"])
                                  for i in participants.tolist()])         # line 22
                tracker.update(participants, h_hat)                        # line 23
                policy.adapt(tracker.h_tilde)                              # lines 25-29
            tracker.normalize_if_due(t)
            st.t_server += time.perf_counter() - tic

            st.p_sum[participants] += widths
            st.times_sampled[participants] += 1
            st.avg_p_rounds.append(float(np.mean(widths)))
            if not finite:
                st.status, st.diverged_round = "diverged", t + 1
            if (t + 1) % int(fed["eval_every"]) == 0 or t == rounds - 1 or not finite:
                tic = time.perf_counter()
                acc, loss = evaluator(global_model, bundle) if finite else (float("nan"), float("nan"))
                st.t_eval += time.perf_counter() - tic
                if not math.isfinite(loss) and finite:
                    st.status, st.diverged_round, finite = "diverged", t + 1, False
                row = {"round": t + 1, "test_acc": acc, "test_loss": loss, "avg_p": st.avg_p_rounds[-1],
                       "mean_h_tilde": float(tracker.h_tilde.mean()), "n_participants": int(len(participants)),
                       "train_loss": float(np.mean(losses))}
                st.records.append(row)
                if progress is not None:
                    progress(t + 1, row)
            st.next_round = t + 1
            if not finite:
                break
            if ckpt.due(t + 1, rounds):
                ckpt.save({"loop": st, "global_state": {k: v.detach().cpu() for k, v in global_state.items()},
                           "policy_p": policy.p, "h_tilde": tracker.h_tilde, "trainer": trainer.state(),
                           "policy_rng": policy_rng.bit_generator.state})

    records, avg_p_rounds = st.records, st.avg_p_rounds
    p_sum, times_sampled, p_hi_alloc, p_hi_trained = st.p_sum, st.times_sampled, st.p_hi_alloc, st.p_hi_trained
    status, diverged_round = st.status, st.diverged_round
    t_train, t_server, t_eval = st.t_train, st.t_server, st.t_eval
    rounds_df = pd.DataFrame.from_records(records, columns=[
        "round", "test_acc", "test_loss", "avg_p", "mean_h_tilde", "n_participants", "train_loss"])
    rounds_df = rounds_df.astype({"round": "int64", "n_participants": "int64"})
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_p = np.where(times_sampled > 0, p_sum / np.maximum(times_sampled, 1), np.nan)
    clients_df = pd.DataFrame({
        "client_id": np.arange(n_clients, dtype=np.int64),
        "pmax": pmax,
        "p_final": policy.p.astype(np.float64),
        "h_tilde_final": tracker.h_tilde.copy(),
        "times_sampled": times_sampled,
        "mean_p": mean_p,
        "p_max_allocated": p_hi_alloc,
        "p_max_trained": p_hi_trained,
    })
    summary = {
        "dataset": run_cfg["dataset"], "method": method, "seed": seed, "status": status,
        "diverged_round": diverged_round, "rounds_completed": len(avg_p_rounds),
        "avg_p": float(np.mean(avg_p_rounds)) if avg_p_rounds else math.nan,
        "final_test_acc": float(rounds_df["test_acc"].iloc[-1]) if len(rounds_df) else math.nan,
        "target_avg_p": hasfl_avg_p,
        "target_from_diverged_run": bool(hasfl_diverged) if hasfl_avg_p is not None else None,
    }
    total = time.perf_counter() - t_start
    timings = {"total_s": total, "local_training_s": t_train, "server_s": t_server, "evaluation_s": t_eval,
               "device": str(device), "threads": torch.get_num_threads(), "precision": numerics.precision,
               "channels_last": numerics.channels_last}
    final_state = {k: v.detach().cpu().clone() for k, v in global_state.items()}
    return RunResult(rounds_df, clients_df, init_state, final_state, summary, timings)
