"""Issue 26: a property-based config fuzzer (hypothesis, derandomised: the same presets on every run).

Random presets -- the quick preset with keys changed to random values, deleted, added, or varied
within their valid ranges -- go through validation; every one is either valid, and then its models
build and run a batch at every capacity tier, its job slices and identities are cut and the
pre-flight prices it, or refused with a :class:`hasfl.config.ConfigError` naming a key. Never another
exception. A smaller sample goes through the Snakefile's session in process (what `snakemake -n` decides): a plan, or
one ``hasfl:`` line and exit 1, before the pre-flight for an invalid one; never a traceback.
"""

from __future__ import annotations

import copy
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hasfl.config import ConfigError, deep_merge, load_config, read_yaml, validate_config

REPO = Path(__file__).resolve().parents[1]
QUICK = load_config(REPO / "presets" / "quick.yaml")
COUNTS: Counter[str] = Counter()

# Leaves worth hitting often: the keys the hostile trial and the cross-key rules are about.
HOT = ["seeds", "federation.rounds", "hasfl.warmup", "federation.clients", "federation.clients_per_round",
       "capacity.tiers", "capacity.counts", "dataset_params.digits.model.pool_after",
       "dataset_params.digits.model.channels", "dataset_params.digits.model.pool_out",
       "dataset_params.shakespeare.seq_len", "dataset_params.shakespeare.max_chars_per_role",
       "dataset_params.shakespeare.train_fraction", "dataset_params.shakespeare.top_roles", "device",
       "precision", "threads_per_job", "datasets", "methods", "name", "partition.alpha", "hasfl.t_adapt",
       "hasfl.p_min", "hasfl.beta", "method_params.fedprox.mu", "execution.max_cpu_wall_hours", "execution.checkpoint_every"]


def _leaves(value: Any, prefix: str = "") -> list[str]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, f"{prefix}.{k}" if prefix else k)]
    return [prefix]


LEAVES = _leaves(QUICK)

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from([0, 1, 2, 3, 10, 2**32 - 1, 2**32, 2**63, -1, 0.5, 1.0, 42.0, "cuda", "cpu", "auto", "digits",
                     "shakespeare", "hasfl", "fp32", "bf16", "tf32", "", "..", "a/b"]))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                                 st.dictionaries(st.text(max_size=6), inner,
                                                                                 max_size=3)), max_leaves=8)
near_valid = {
    "seeds": st.lists(st.integers(min_value=-3, max_value=2**64), min_size=0, max_size=4),
    "federation.rounds": st.integers(min_value=-1, max_value=200),
    "hasfl.warmup": st.integers(min_value=-1, max_value=60),
    "federation.clients": st.integers(min_value=0, max_value=40),
    "federation.clients_per_round": st.integers(min_value=0, max_value=40),
    "capacity.tiers": st.lists(st.floats(min_value=-0.5, max_value=1.5), min_size=0, max_size=5),
    "capacity.counts": st.lists(st.integers(min_value=-1, max_value=20), min_size=0, max_size=5),
    "dataset_params.digits.model.pool_after": st.lists(st.integers(min_value=-1, max_value=6), max_size=6),
    "dataset_params.digits.model.channels": st.lists(st.integers(min_value=-1, max_value=64), max_size=6),
    "dataset_params.digits.model.pool_out": st.integers(min_value=-1, max_value=9),
    "dataset_params.shakespeare.seq_len": st.integers(min_value=-1, max_value=2000),
    "dataset_params.shakespeare.max_chars_per_role": st.one_of(st.none(), st.integers(min_value=-1, max_value=5000)),
    "dataset_params.shakespeare.train_fraction": st.floats(min_value=-0.1, max_value=1.1),
    "datasets": st.lists(st.sampled_from(["digits", "shakespeare", "cifar10", "emnist", "fashion_mnist", "mnist"]),
                         max_size=3),
    "methods": st.lists(st.sampled_from(["hasfl", "random_budget", "fedavg", "fedprox", "heterofl", "toy"]),
                        max_size=4),
    "device": st.sampled_from(["cpu", "cuda", "auto", "tpu", "CPU"]),
}


@st.composite
def cnn_models(draw: st.DrawFn) -> dict[str, Any]:
    """A digits CNN within the schema: 1-6 convs, pools after any subset of them; at least 4 units a layer, so the
    quick preset's smallest width (tier 0.25) keeps one (a narrower layer is refused: the ``near`` draws of
    ``dataset_params.digits.model.channels`` reach that side)."""
    n = draw(st.integers(min_value=1, max_value=6))
    pools = draw(st.lists(st.integers(min_value=0, max_value=n - 1), unique=True, max_size=n))
    return {"arch": "cnn", "channels": draw(st.lists(st.integers(min_value=4, max_value=16), min_size=n, max_size=n)),
            "pool_after": sorted(pools), "pool_out": draw(st.integers(min_value=1, max_value=4)),
            "hidden": draw(st.integers(min_value=4, max_value=32))}


@st.composite
def shakespeare_cuts(draw: st.DrawFn) -> dict[str, Any]:
    """Shakespeare windows and role cuts within the schema."""
    return {"seq_len": draw(st.integers(min_value=1, max_value=1200)),
            "max_chars_per_role": draw(st.one_of(st.none(), st.integers(min_value=2, max_value=3000))),
            "train_fraction": draw(st.floats(min_value=0.05, max_value=0.95))}




def _set(config: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = config
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[last] = value


def _delete(config: dict[str, Any], dotted: str) -> None:
    *parents, last = dotted.split(".")
    node = config
    for part in parents:
        node = node.get(part)
        if not isinstance(node, dict):
            return
    node.pop(last, None)


@st.composite
def presets(draw: st.DrawFn) -> dict[str, Any]:
    """The quick preset with 1-3 random changes."""
    config = copy.deepcopy(QUICK)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        kind = draw(st.sampled_from(["near", "near", "model", "any", "delete", "add"]))
        if kind == "near":
            key = draw(st.sampled_from(sorted(near_valid)))
            _set(config, key, draw(near_valid[key]))
        elif kind == "model":
            config["dataset_params"]["digits"]["model"] = draw(cnn_models())
            config["dataset_params"]["shakespeare"].update(draw(shakespeare_cuts()))
        elif kind == "any":
            _set(config, draw(st.sampled_from(HOT + LEAVES)), draw(json_values))
        elif kind == "delete":
            _delete(config, draw(st.sampled_from(HOT + LEAVES)))
        else:
            parent = draw(st.sampled_from(["", "federation.", "hasfl.", "dataset_params.digits.model."]))
            _set(config, parent + draw(st.text(alphabet="abcxyz_", min_size=1, max_size=6)), draw(json_scalars))
    return config


def _exercise_valid(config: dict[str, Any]) -> None:
    """What a job would do with a valid preset before training: build every model at every tier and run a
    batch, cut every job's slices and identities, price the preset."""
    import torch

    from hasfl.dag import preflight
    from hasfl.dag.identity import data_slice, digest, run_slice
    from hasfl.models import family_from_config
    from hasfl.registry import DATASETS

    for d in config["datasets"]:
        dp = config["dataset_params"][d]
        facts = DATASETS[d].facts
        shape = (int(dp["seq_len"]),) if DATASETS[d].task == "text" else facts.shape
        family = family_from_config(dp["model"], shape, facts.classes)
        x = (torch.zeros((2, *shape), dtype=torch.long) if DATASETS[d].task == "text"
             else torch.zeros((2, *shape)))
        for p in config["capacity"]["tiers"]:
            out = family.build(float(p))(x)
            assert out.shape[-1] == facts.classes
        digest(data_slice(config, d))
        for m in config["methods"]:
            for s in config["seeds"]:
                digest(run_slice(config, d, m, s))
    rates = {"cnn_gmacs": 40.0, "lstm_gmacs": 40.0, "step_overhead_s": 5e-4}
    est = preflight.estimate(config, 2, rates, None, 2, None)
    assert math.isfinite(est["wall_hours"])


@settings(max_examples=400, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(presets())
def _validate_one(config: dict[str, Any]) -> None:
    COUNTS["tried"] += 1
    try:
        validate_config(config)
    except ConfigError as exc:
        assert re.search(r"config key '[^']+'|unknown config key|missing config key", str(exc)), str(exc)
        COUNTS["named"] += 1
        return
    COUNTS["valid"] += 1
    _exercise_valid(config)


def test_random_presets_are_valid_or_named_never_a_traceback(capsys) -> None:
    COUNTS.clear()
    _validate_one()
    with capsys.disabled():
        print(f"\nconfig fuzzer: {COUNTS['tried']} presets tried, {COUNTS['valid']} valid (models built, slices cut, "
              f"priced), {COUNTS['named']} refused naming a key, 0 tracebacks")
    assert COUNTS["tried"] == COUNTS["valid"] + COUNTS["named"]
    assert COUNTS["valid"] > 20 and COUNTS["named"] > 100  # the fuzzer reaches both sides


DAG_COUNTS: Counter[str] = Counter()


@settings(max_examples=16, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(presets())
def _plan_one(plan, tmp_path: Path, config: dict[str, Any]) -> None:
    DAG_COUNTS["tried"] += 1
    preset = tmp_path / f"fuzz{DAG_COUNTS['tried']}.yaml"
    config = deep_merge(config, {"results_dir": str(tmp_path / "results"), "execution": {"max_cpu_wall_hours": 0}})
    preset.write_text(yaml.safe_dump(config, allow_unicode=True))
    planned = plan(REPO, preset)  # any exception but the session's one-line stop fails here
    assert "Traceback" not in planned.stderr, planned.stderr[-3000:]
    try:  # Snakemake merges the file over config.yaml (a deleted key comes back from there)
        validate_config(deep_merge(read_yaml(REPO / "config.yaml"), config))
        valid = True
    except ConfigError:
        valid = False
    if valid:
        assert planned.session is not None and "hasfl pre-flight" in planned.stderr, planned.stderr[-3000:]
        DAG_COUNTS["valid"] += 1
    else:
        assert planned.code == 1 and planned.stderr.startswith("hasfl:") and "\nhasfl" not in planned.stderr \
            and "pre-flight" not in planned.stderr, planned.stderr[-3000:]
        DAG_COUNTS["named"] += 1
    assert not (tmp_path / "results").exists()  # a plan writes nothing


def test_random_presets_plan_or_stop_with_one_message(plan, tmp_path, capsys) -> None:
    """The smaller sample through the Snakefile's session in process (conftest ``plan``: what ``snakemake -n`` decides
    before its job table): a plan and its pre-flight, or one ``hasfl:`` line before the pre-flight. What Snakemake
    adds on top (its exit code for that line) the end-to-end test of a bad preset checks
    (tests/test_config.py::test_snakemake_rejects_bad_config_before_any_job)."""
    DAG_COUNTS.clear()
    _plan_one(plan, tmp_path)
    with capsys.disabled():
        print(f"\nconfig fuzzer (the Snakefile's session): {DAG_COUNTS['tried']} presets, {DAG_COUNTS['valid']} plans, "
              f"{DAG_COUNTS['named']} stopped naming a key, 0 tracebacks")
    assert DAG_COUNTS["tried"] == DAG_COUNTS["valid"] + DAG_COUNTS["named"] >= 16
    assert DAG_COUNTS["valid"] and DAG_COUNTS["named"]  # both sides reached


def test_a_duplicate_key_anywhere_is_refused(tmp_path) -> None:
    """The strict loader: a key twice in any mapping, at any depth, is named with its line."""
    f = tmp_path / "dup.yaml"
    f.write_text("name: a\nfederation:\n  rounds: 3\n  rounds: 4\n")
    with pytest.raises(ConfigError, match=r"'rounds' is given twice in one mapping \(first at line 3\)"):
        read_yaml(f)
    f.write_text("name: a\nseeds: [1]\nname: b\n")
    with pytest.raises(ConfigError, match="'name' is given twice"):
        read_yaml(f)
    f.write_text("a: {x: 1}\nb: {x: 1}\n")  # the same key in two mappings is fine
    assert read_yaml(f) == {"a": {"x": 1}, "b": {"x": 1}}
