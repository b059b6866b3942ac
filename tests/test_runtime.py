"""How a run computes (hasfl.fl.runtime): precision and memory layout (Numerics), sub-model
buffers (SubModels, Algorithm 2 and line 14), evaluation (Evaluator) and phase timing."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hasfl.fl.client import ClientData, LocalSGD, OptimConfig
from hasfl.fl.runtime import Evaluator, Numerics, PhaseClock, SubModels, evaluate, family_for, resolve_device
from hasfl.models import region

pytestmark = pytest.mark.usefixtures("one_thread")


# --------------------------------------------------------------------------- precision and layout
def test_numerics_for_run_rules() -> None:
    """channels_last only for image models on the CPU; tf32 needs CUDA; an unknown precision is named."""
    cpu = torch.device("cpu")
    assert Numerics.for_run(cpu, "fp32", image=True).channels_last
    assert not Numerics.for_run(cpu, "fp32", image=False).channels_last
    assert not Numerics.for_run(torch.device("meta"), "fp32", image=True).channels_last
    with pytest.raises(ValueError, match="config key 'precision' is 'tf32', which needs a CUDA device"):
        Numerics.for_run(cpu, "tf32", image=True)
    with pytest.raises(ValueError, match="config key 'precision' is 'fp16'; expected one of fp32, tf32, bf16"):
        Numerics.for_run(cpu, "fp16", image=True)
    assert isinstance(Numerics.for_run(cpu, "bf16", image=False).autocast(), torch.autocast)


def test_numerics_backend_flags_set_and_restored() -> None:
    """fp32 and bf16 force IEEE float32 in cuDNN/cuBLAS/oneDNN (PyTorch lets cuDNN use TF32) and restore after."""
    knobs = [torch.backends.cudnn.conv, torch.backends.cudnn.rnn, torch.backends.cuda.matmul]
    before = [k.fp32_precision for k in knobs]
    for precision in ("fp32", "bf16"):
        with Numerics(torch.device("cpu"), precision).backend_flags():
            assert [k.fp32_precision for k in knobs] == ["ieee"] * 3
        assert [k.fp32_precision for k in knobs] == before
    with Numerics(torch.device("cuda"), "tf32").backend_flags():
        assert [k.fp32_precision for k in knobs] == ["tf32"] * 3
        assert torch.backends.mkldnn.conv.fp32_precision == "ieee"  # TF32 is for the GPU's kernels only
    assert [k.fp32_precision for k in knobs] == before


def test_resolve_device_and_family_for(digits, digits_family) -> None:
    """Config key ``device``; ``family_for`` is the config's model for the bundle's shapes."""
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="config key 'device' is 'cuda'"):
            resolve_device("cuda")
    fam = family_for(digits.bundle, {"arch": "cnn", "channels": [32, 32, 64, 64], "pool_after": [1], "pool_out": 2,
                                     "hidden": 128})
    assert fam.in_shape == digits_family.in_shape == tuple(digits.bundle.input_shape)
    assert fam.widths(0.5) == digits_family.widths(0.5)


def test_channels_last_training_matches_contiguous(engine_cfg, digits, digits_family) -> None:
    """The CPU training layout (channels_last) computes the same local update as a contiguous module,
    to float rounding, and its state loads back into the global model's layout."""
    bundle = digits.bundle
    family = digits_family
    optim = OptimConfig.from_config(engine_cfg()["dataset_params"]["digits"]["optim"])
    data = ClientData(0, torch.arange(256), bundle.train_x, bundle.train_y)
    states = {}
    for cl in (False, True):
        torch.manual_seed(0)
        module = Numerics(torch.device("cpu"), "fp32", channels_last=cl).prepare(family.build(0.5))
        conv = [m for m in module.modules() if isinstance(m, nn.Conv2d)][1]  # > 1 input channel
        assert conv.weight.is_contiguous(memory_format=torch.channels_last) == cl
        assert conv.weight.is_contiguous() != cl
        LocalSGD(optim, bundle.inputs).train(module, data, 0.05, torch.Generator().manual_seed(1))
        states[cl] = module.state_dict()
    for k, v in states[False].items():
        assert torch.allclose(v, states[True][k], rtol=1e-4, atol=1e-5), k


def _cpu_runs_bf16_lstm() -> bool:
    """Whether torch itself runs an LSTM under bf16 autocast on this CPU (oneDNN 2.14 cannot build its
    bf16 LSTM primitive on AVX2-only CPUs such as some AMD EPYC VMs)."""
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            nn.LSTM(2, 2)(torch.zeros(1, 1, 2))
    except RuntimeError:
        return False
    return True


def test_lstm_forward_under_bf16_autocast() -> None:
    """The sliced char-LSTM trains under bf16 autocast: bf16 activations, float32 loss and gradients."""
    from hasfl.models import family_from_config

    if not _cpu_runs_bf16_lstm():
        pytest.skip(f"torch {torch.__version__} runs no LSTM under bf16 autocast on this CPU "
                    f"({torch.backends.cpu.get_cpu_capability()}): not a property of hasfl's LSTM")
    family = family_from_config({"arch": "lstm", "embed_dim": 8, "hidden": 32, "layers": 2}, (20,), 96)
    module = family.build(0.5)
    x, y = torch.randint(0, 96, (8, 20)), torch.randint(0, 96, (8,))
    with Numerics(torch.device("cpu"), "bf16").autocast():
        logits = module(x)
        loss = nn.functional.cross_entropy(logits, y)
    assert logits.dtype == torch.bfloat16 and loss.dtype == torch.float32
    loss.backward()
    assert all(q.grad is not None and q.grad.dtype == torch.float32 for q in module.parameters())


# --------------------------------------------------------------------------- sub-models (Algorithm 2, line 14)
@pytest.mark.parametrize("make", ["small_cnn", "small_lstm"], ids=["cnn", "lstm"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_submodels_extract_load_and_delta(request, make, channels_last) -> None:
    """One cached module per width holding exactly the family's extraction of the global state;
    ``delta`` is w_i - m_i * w in the sub-model's shapes and touches nothing else."""
    family = request.getfixturevalue(make)
    torch.manual_seed(0)
    glob = family.build(1.0).state_dict()
    for v in glob.values():
        if v.is_floating_point():
            v.normal_()
    subs = SubModels(family, Numerics(torch.device("cpu"), "fp32", channels_last=channels_last))
    for p in (0.25, 0.5, 1.0):
        module, rules = subs.extract(p, glob)
        assert subs.get(p)[0] is module and rules == family.slice_rules(p)  # built once per width
        expected = family.extract(glob, p)
        state = module.state_dict()
        assert set(state) == set(expected)
        for k, v in expected.items():
            assert torch.equal(state[k], v), (p, k)
        keys = [k for k, v in glob.items() if v.is_floating_point()]
        assert all(torch.equal(t, torch.zeros_like(t)) for t in SubModels.delta(module, rules, glob, keys).values())
        with torch.no_grad():
            for q in module.parameters():
                q.add_(1.0)
        delta = SubModels.delta(module, rules, glob, keys)
        params = {n for n, _ in module.named_parameters()}
        for k in keys:
            assert delta[k].shape == region(glob[k], rules[k]).shape
            torch.testing.assert_close(delta[k], torch.full_like(delta[k], 1.0 if k in params else 0.0), rtol=0,
                                       atol=1e-5, msg=k)
        SubModels.load(module, rules, glob)  # reload: the update is gone
        for k, v in module.state_dict().items():
            assert torch.equal(v, expected[k]), (p, k)
    # widths that round to the same sizes share one module
    assert subs.get(0.5)[0] is subs.get(0.49)[0]


# --------------------------------------------------------------------------- evaluation and timing
@pytest.mark.parametrize("batch_stats", [False, True])
def test_evaluator_matches_plain_evaluation(digits, digits_family, batch_stats: bool) -> None:
    """The CPU evaluator (channels_last copy, batches of 64) gives the accuracy of evaluating the
    global model itself in one batch, the loss to float precision, and leaves the RNG alone."""
    bundle = digits.bundle
    family = digits_family
    torch.manual_seed(3)
    model = family.build(1.0)
    for m in model.modules():  # non-trivial running statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    state = torch.random.get_rng_state()
    ev = Evaluator(family, Numerics.for_run(torch.device("cpu"), "fp32", image=True),
                   "batch" if batch_stats else "per_width")
    assert torch.equal(torch.random.get_rng_state(), state)
    if batch_stats:
        assert ev.copy is None and ev.batch_size == Evaluator.BATCH
    else:
        assert ev.batch_size == Evaluator.CPU_BATCH and ev.batch_size < len(bundle.test_y)
        assert next(ev.copy.parameters()).dim() == 4
        conv = next(m for m in ev.copy.modules() if isinstance(m, nn.Conv2d))
        assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    acc, loss = ev(model, bundle)
    ref_acc, ref_loss = evaluate(model, bundle, batch_size=len(bundle.test_y))
    assert acc == ref_acc and loss == pytest.approx(ref_loss, rel=1e-5, abs=1e-6)
    # the copy follows the global model: change the model, evaluate again
    with torch.no_grad():
        next(model.parameters()).mul_(0.0)
    assert ev(model, bundle) == pytest.approx(evaluate(model, bundle, batch_size=len(bundle.test_y)), rel=1e-5)


def test_phase_clock_sums_phases_syncs_and_restores() -> None:
    syncs = []
    clock = PhaseClock(sync=lambda: syncs.append(1))
    with clock.phase("local_sgd"):
        pass
    with pytest.raises(KeyError), clock.phase("aggregation"):  # an exception still charges the phase
        raise KeyError("x")
    snap = clock.snapshot()
    assert set(snap) == {"local_sgd", "aggregation"} and all(v >= 0 for v in snap.values()) and len(syncs) == 2
    snap["local_sgd"] = 99.0  # a copy
    assert clock.seconds["local_sgd"] != 99.0
    clock.restore({"evaluation": 1.5})
    assert clock.snapshot() == {"evaluation": 1.5}
    assert set(PhaseClock.PHASES) == {"slicing", "local_sgd", "aggregation", "estimation", "evaluation"}


def test_bf16_lstm_is_refused_before_any_round_where_the_cpu_cannot_run_it() -> None:
    """On a CPU without bfloat16 LSTM kernels the run stops at start naming the key; elsewhere it runs."""
    from hasfl.models import family_from_config

    lstm = family_from_config({"arch": "lstm", "embed_dim": 8, "hidden": 32, "layers": 2}, (20,), 96)
    cnn = family_from_config({"arch": "cnn", "channels": [4], "pool_after": [], "pool_out": 1, "hidden": 4},
                             (1, 4, 4), 3)
    bf16 = Numerics(torch.device("cpu"), "bf16")
    bf16.check_model(cnn)  # CNNs run under bf16 on every CPU
    Numerics(torch.device("cpu"), "fp32").check_model(lstm)
    if _cpu_runs_bf16_lstm():
        bf16.check_model(lstm)
    else:
        with pytest.raises(ValueError, match="config key 'precision' is 'bf16', but this CPU cannot run an LSTM"):
            bf16.check_model(lstm)


def test_a_cpu_run_does_not_pay_for_the_deterministic_switch() -> None:
    """Issue 36 (speed): torch.use_deterministic_algorithms imports torch._inductor / torch._dynamo (about 2 s a
    job on a 2-core CPU); a CPU run's backend flags neither set it nor restore it, so a fresh process that trains
    on the CPU never imports them."""
    import subprocess
    import sys

    code = ("import sys, torch\nfrom hasfl.fl.runtime import Numerics\n"
            "with Numerics(torch.device('cpu'), 'fp32').backend_flags():\n    pass\n"
            "print('torch._inductor' in sys.modules, 'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == ["False", "False"], out.stdout + out.stderr
