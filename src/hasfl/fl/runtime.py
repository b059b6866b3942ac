"""How a run computes, apart from what it computes: device, precision, layout, sub-model
buffers, evaluation and phase timing.

Nothing here changes the algorithm (Algorithm 1 lives in :mod:`hasfl.fl.engine`):

* :class:`Numerics` -- device, arithmetic precision (config ``precision``) and memory layout;
* :class:`SubModels` -- one physically sliced module per width, filled from the global state
  (Algorithm 2) and read back as an update (Algorithm 1 line 14);
* :class:`Evaluator` -- the global model on the full test set, the fastest way measured per device;
* :class:`PhaseClock` -- wall seconds per phase of the round loop (``timings.json``; ``hasfl bench``
  passes one that waits for the device before reading the time).
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hasfl.data.base import DatasetBundle
from hasfl.models import family_from_config
from hasfl.models.bn import state_for_mode
from hasfl.models.family import ModelFamily
from hasfl.models.lstm import LSTMFamily
from hasfl.models.slicing import PREFIX, SliceRule, Window, assign_, gather
from hasfl.registry import PRECISIONS

__all__ = ["CUBLAS_WORKSPACE", "ISA_ENV", "Evaluator", "Numerics", "PhaseClock", "SubModels", "cpu_kernels",
           "determinism_flags", "evaluate", "family_for", "resolve_device"]

#: cuBLAS's deterministic workspace setting, which ``torch.use_deterministic_algorithms`` needs on CUDA >= 10.2
#: (PyTorch's "Reproducibility" notes): set in the environment before the run's first cuBLAS call unless the
#: user set ``CUBLAS_WORKSPACE_CONFIG`` to one of the two documented values.
CUBLAS_WORKSPACE = ":4096:8"

#: Environment settings that choose the CPU kernels' instruction set (read when torch / oneDNN / MKL start):
#: ATen's dispatch level, oneDNN's highest ISA, MKL's conditional numerical reproducibility (docs/guide/gpu.md "Bytes
#: across machines").
ISA_ENV = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS")


def cpu_kernels() -> dict[str, Any]:
    """What a run records of the CPU kernels it used (``timings.json``, not the result's identity): ATen's CPU
    capability (``torch.backends.cpu.get_cpu_capability``: the instruction set its vectorised kernels dispatch to,
    e.g. AVX512 or AVX2), the :data:`ISA_ENV` settings in force and the CPU's model (MKL picks its path by the
    CPU's maker too, unless ``MKL_CBWR`` fixes it). Float results are byte-identical across machines only at the
    same capability and path (``hasfl compare`` names them for a same-identity difference)."""
    import os

    from hasfl.device import cpu_model

    return {"cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
            "isa_env": {k: os.environ[k] for k in ISA_ENV if k in os.environ}, "cpu": cpu_model()}


def determinism_flags() -> dict[str, Any]:
    """The determinism settings in force, as a run records them (``timings.json``, key ``determinism``):
    PyTorch's deterministic-algorithms mode, cuDNN's deterministic and benchmark flags and the cuBLAS
    workspace setting. Read from torch and the environment, not from the config."""
    import os

    return {"deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
            "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
            "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG")}


def device_class(run_cfg: Mapping[str, Any]) -> str:
    """The kind of device a run computes on (part of its identity): ``cpu`` or ``cuda:<the GPU's name>``."""
    device = resolve_device(run_cfg["device"])
    return f"cuda:{torch.cuda.get_device_name(device)}" if device.type == "cuda" else device.type


def resolve_device(name: str) -> torch.device:
    """Config key ``device``: ``auto`` picks cuda when present."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("config key 'device' is 'cuda' but no CUDA device is available")
    return torch.device(name)


def family_for(bundle: DatasetBundle, model_cfg: Mapping[str, Any]) -> ModelFamily:
    """The model family of a dataset from its config block ``dataset_params.<d>.model``."""
    return family_from_config(model_cfg, bundle.input_shape, bundle.num_classes)


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

    On CUDA a run is deterministic by default (config ``cuda_deterministic``, ``deterministic`` here):
    :meth:`backend_flags` turns on ``torch.use_deterministic_algorithms``, cuDNN's deterministic
    algorithms (no autotuning) and cuBLAS's fixed workspace, so the same config and seed give the same
    bytes and a resumed run equals an uninterrupted one, as on the CPU (where the kernels are
    deterministic at a fixed thread count and nothing is set). ``cuda_deterministic: false`` leaves
    PyTorch's defaults, for speed.
    """

    device: torch.device
    precision: str = "fp32"
    channels_last: bool = False
    deterministic: bool = True

    @classmethod
    def for_run(cls, device: torch.device, precision: str, image: bool, deterministic: bool = True) -> Numerics:
        """The numerics of a run on ``device`` (``image``: the model is an image CNN; ``deterministic``:
        config ``cuda_deterministic``)."""
        if precision not in PRECISIONS:
            raise ValueError(f"config key 'precision' is '{precision}'; expected one of {', '.join(PRECISIONS)}")
        if precision == "tf32" and device.type != "cuda":
            raise ValueError(f"config key 'precision' is 'tf32', which needs a CUDA device; the run's device is "
                             f"'{device.type}' (use fp32 or bf16)")
        if deterministic and device.type == "cuda":
            import os

            cublas = os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
            if cublas not in (":4096:8", ":16:8"):
                raise ValueError(f"config key 'cuda_deterministic' is true, but the environment sets "
                                 f"CUBLAS_WORKSPACE_CONFIG={cublas!r}; deterministic cuBLAS needs ':4096:8' or "
                                 f"':16:8' (unset it, or set cuda_deterministic: false)")
        return cls(device, precision, channels_last=device.type == "cpu" and image, deterministic=deterministic)

    def check_model(self, family: ModelFamily) -> None:
        """Refuse, before any round, a precision this device cannot run for this model: CPUs without
        native bfloat16 (e.g. AVX2-only) have no oneDNN LSTM kernel under bfloat16 autocast."""
        if self.precision != "bf16" or self.device.type != "cpu":
            return
        if not isinstance(family, LSTMFamily):
            return
        probe = nn.LSTM(4, 4, batch_first=True)
        try:
            with torch.random.fork_rng(devices=[]), self.autocast(), torch.no_grad():
                probe(torch.zeros(1, 2, 4))
        except RuntimeError as exc:
            raise ValueError(f"config key 'precision' is 'bf16', but this CPU cannot run an LSTM under bfloat16 "
                             f"autocast ({str(exc).splitlines()[0][:120]}); use precision fp32 for this model") from None

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
        IEEE) for the run, and on CUDA (unless ``deterministic`` is off) the deterministic algorithms;
        the previous settings are restored after."""
        cuda = "tf32" if self.precision == "tf32" else "ieee"
        modes = [(torch.backends.cuda.matmul, cuda), (torch.backends.cudnn.conv, cuda),
                 (torch.backends.cudnn.rnn, cuda), (torch.backends.mkldnn.matmul, "ieee"),
                 (torch.backends.mkldnn.conv, "ieee"), (torch.backends.mkldnn.rnn, "ieee")]
        knobs = [k for k, _ in modes]
        saved = [k.fp32_precision for k in knobs]
        det = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
               torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
        for k, mode in modes:
            k.fp32_precision = mode
        # torch.use_deterministic_algorithms imports torch._inductor / torch._dynamo (about 2 s a job on a 2-core
        # CPU, measured: 1.5-3 s of every quick run's wall outside its phases), so it is called, and restored,
        # only where it is set: on CUDA
        deterministic = self.deterministic and self.device.type == "cuda"
        if deterministic:
            torch.use_deterministic_algorithms(True)
            torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
        try:
            yield
        finally:
            for k, v in zip(knobs, saved, strict=True):
                k.fp32_precision = v
            if deterministic:
                torch.use_deterministic_algorithms(det[0], warn_only=det[1])
                torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = det[2], det[3]


class SubModels:
    """One physically sliced module per distinct width (cached), loaded from the global state at the units of the
    round's :class:`~hasfl.models.slicing.Window` (the method's answer; the leading units by default)."""

    def __init__(self, family: ModelFamily, numerics: Numerics) -> None:
        self.family, self.numerics = family, numerics
        self._cache: dict[str, tuple[nn.Module, dict[str, SliceRule]]] = {}

    def get(self, p: float) -> tuple[nn.Module, dict[str, SliceRule]]:
        """The width-``p`` module (built once) and its slice rules into the global tensors."""
        key = repr(self.family.widths(p))
        if key not in self._cache:
            self._cache[key] = (self.numerics.prepare(self.family.build(p)), self.family.slice_rules(p))
        return self._cache[key]

    def extract(self, p: float, global_state: Mapping[str, Tensor],
                window: Window = PREFIX) -> tuple[nn.Module, dict[str, SliceRule]]:
        """Algorithm 1 lines 7-8 (Algorithm 2): the width-``p`` sub-model holding w(t)'s coordinates of ``window``."""
        module, rules = self.get(p)
        if not window.nested:
            rules = self.family.slice_rules(p, window)  # cut once per round and width (the family keeps them)
        self.load(module, rules, global_state)
        return module, rules

    @staticmethod
    @torch.no_grad()
    def load(module: nn.Module, rules: Mapping[str, SliceRule], global_state: Mapping[str, Tensor]) -> None:
        """Copy the sub-model's coordinates out of the global state (Algorithm 2)."""
        for k, t in module.state_dict().items():
            assign_(t, global_state[k], rules[k])

    @staticmethod
    @torch.no_grad()
    def delta(module: nn.Module, rules: Mapping[str, SliceRule], global_state: Mapping[str, Tensor],
              keys: list[str]) -> dict[str, Tensor]:
        """Algorithm 1 line 14: Delta_i = w_i(t, K) - m_i * w(t), in the sub-model's own shapes."""
        state = module.state_dict()
        out = {}
        for k in keys:
            src = gather(global_state[k], rules[k])
            out[k] = state[k].view(src.shape) - src
        return out


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

    ``bn_mode`` (``model.bn_stats``) picks the BN running statistics the global model is
    evaluated with (:func:`hasfl.models.bn.state_for_mode`): the extra keys of the global
    state (:meth:`hasfl.fl.bn_stats.WidthStatistics.entries`) are given with each call; with
    none, the global model's own buffers, as they are.
    """

    CPU_BATCH, BATCH = 64, 2048

    def __init__(self, family: ModelFamily, numerics: Numerics, bn_mode: str) -> None:
        cpu = numerics.device.type == "cpu"
        batch_stats = bn_mode == "batch"
        self.family, self.numerics, self.bn_mode = family, numerics, bn_mode
        self.batch_size = self.CPU_BATCH if cpu and not batch_stats else self.BATCH
        self.channels_last = numerics.channels_last and not batch_stats
        self.copy: nn.Module | None = self._copy() if self.channels_last else None

    def _copy(self) -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            return self.numerics.prepare(self.family.build(1.0))

    def __call__(self, global_model: nn.Module, bundle: DatasetBundle,
                 bn_extra: Mapping[str, Tensor] | None = None) -> tuple[float, float]:
        model = global_model
        if bn_extra and self.copy is None:
            self.copy = self._copy()  # the global model's own buffers must stay as they are
        if self.copy is not None:
            state = global_model.state_dict()
            if bn_extra:
                state = state_for_mode({**state, **bn_extra}, self.family, 1.0, self.bn_mode)
            self.copy.load_state_dict(state)
            model = self.copy
        return evaluate(model, bundle, self.batch_size, self.channels_last, self.numerics)


class PhaseClock:
    """Wall seconds spent in each phase of the round loop, summed over the run.

    The loop wraps its phases in :meth:`phase` (``slicing``, ``local_sgd``, ``aggregation``,
    ``estimation``, ``evaluation``); the totals go to ``timings.json``. ``sync`` is called
    before each reading of the time: ``hasfl bench`` passes one that waits for the GPU, so
    that asynchronous kernels are charged to the phase that launched them.
    """

    PHASES = ("slicing", "local_sgd", "aggregation", "estimation", "evaluation")

    def __init__(self, sync: Callable[[], None] | None = None) -> None:
        self.sync = sync
        self.seconds: dict[str, float] = defaultdict(float)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Charge the time of the ``with`` block to ``name``."""
        tic = time.perf_counter()
        try:
            yield
        finally:
            if self.sync is not None:
                self.sync()
            self.seconds[name] += time.perf_counter() - tic

    def snapshot(self) -> dict[str, float]:
        """The totals so far (a copy)."""
        return dict(self.seconds)

    def restore(self, seconds: Mapping[str, float]) -> None:
        """Continue from the totals of a checkpoint."""
        self.seconds.clear()
        self.seconds.update(seconds)
