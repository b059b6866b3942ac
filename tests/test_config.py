"""Config loading, preset merging and validation (issue 2, section 2)."""

from __future__ import annotations

import copy

import pytest
import yaml

from hasfl.config import ConfigError, data_config, deep_merge, load_config, run_config, validate_config


def test_paper_preset_values(paper_config):
    c = paper_config
    assert c["name"] == "paper"
    assert c["datasets"] == ["cifar10", "emnist", "shakespeare"]
    assert c["seeds"] == [42, 43, 44]
    assert c["federation"] == {"clients": 20, "clients_per_round": 10, "rounds": 200, "eval_every": 1}
    assert c["partition"]["alpha"] == 0.3
    assert c["capacity"]["tiers"] == [0.25, 0.5, 0.75, 1.0]
    assert c["hasfl"] == {"p_min": 0.4, "gamma": 0.25, "beta": 0.9, "t_adapt": 5, "warmup": 10, "t_norm": 20,
                          "epsilon": 1e-8}
    cifar, emnist, shk = (c["dataset_params"][d]["optim"] for d in ("cifar10", "emnist", "shakespeare"))
    assert (cifar["lr"], cifar["lr_decay"], cifar["local_epochs"], cifar["momentum"], cifar["weight_decay"],
            cifar["clip"]) == (0.01, 0.995, 5, 0.9, 1e-4, 10.0)
    assert emnist["local_epochs"] == 1
    assert (shk["local_epochs"], shk["lr"], shk["clip"]) == (1, 0.1, 5.0)
    assert c["method_params"]["fedprox"]["mu"] == 1.0
    assert c["methods"][:9] == ["hasfl", "hasfl_nocov", "heterofl", "fjord", "uniform", "random_budget", "fedavg",
                                "scaffold", "fedprox"]  # the paper's nine, then the estimator methods
    assert c["methods"][9:] == ["hasfl_probe", "random_budget_probe", "hasfl_reported", "random_budget_reported"]


def test_quick_preset_merges_over_paper(quick_config, paper_config):
    q = quick_config
    assert q["name"] == "quick"
    assert q["datasets"] == ["digits", "shakespeare"]
    assert q["federation"]["clients"] == 20 and q["federation"]["clients_per_round"] == 10
    assert len(q["seeds"]) == 3
    # untouched nested keys survive the merge
    assert q["dataset_params"]["shakespeare"]["train_fraction"] == paper_config["dataset_params"]["shakespeare"]["train_fraction"]
    assert q["dataset_params"]["shakespeare"]["optim"]["lr"] == paper_config["dataset_params"]["shakespeare"]["optim"]["lr"]
    assert q["hasfl"] == paper_config["hasfl"]


def test_deep_merge_semantics():
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    merged = deep_merge(base, {"a": {"c": [3]}, "e": 2})
    assert merged == {"a": {"b": 1, "c": [3]}, "d": 1, "e": 2}
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": 1}  # not mutated


def _set(cfg: dict, dotted: str, value) -> dict:
    cfg = copy.deepcopy(cfg)
    *parents, last = dotted.split(".")
    node = cfg
    for p in parents:
        node = node[p]
    node[last] = value
    return cfg


BAD = [
    ("unknown top-level key", "colour", "red", "unknown config key 'colour'"),
    ("unknown nested key", "federation.round", 5, "unknown config key 'federation.round'"),
    ("wrong type", "federation.rounds", "200", "config key 'federation.rounds': expected an integer"),
    ("yaml 1e-4 is a string", "dataset_params.cifar10.optim.weight_decay", "1e-4",
     "config key 'dataset_params.cifar10.optim.weight_decay': expected a number"),
    ("alpha zero", "partition.alpha", 0, "config key 'partition.alpha': must be > 0"),
    ("alpha negative", "partition.alpha", -1.0, "config key 'partition.alpha': must be > 0"),
    ("rounds zero", "federation.rounds", 0, "config key 'federation.rounds': must be >= 1"),
    ("tier above one", "capacity.tiers", [0.25, 0.5, 1.5, 1.0], "config key 'capacity.tiers[2]': must be <= 1"),
    ("tier zero", "capacity.tiers", [0.0, 0.5, 0.75, 1.0], "config key 'capacity.tiers[0]': must be > 0"),
    ("clients per round", "federation.clients_per_round", 21, "config key 'federation.clients_per_round'"),
    ("unknown dataset", "datasets", ["cifar10", "mnist"], "config key 'datasets[1]': unknown dataset 'mnist'"),
    ("unknown method", "methods", ["hasfl", "fedsgd"], "config key 'methods[1]': unknown method 'fedsgd'"),
    ("empty seeds", "seeds", [], "config key 'seeds': must not be empty"),
    ("counts vs clients", "capacity.counts", [5, 10, 3, 3], "config key 'capacity.counts': counts sum to 21"),
    ("counts vs tiers", "capacity.counts", [10, 10], "config key 'capacity.counts': 2 counts for 4 tiers"),
    ("unknown precision", "precision", "fp16",
     "config key 'precision': unknown value 'fp16'; expected one of fp32, tf32, bf16"),
    ("a removed analysis key", "analysis.f9_learned_loss_fraction", 0.95,
     "config key 'analysis.f9_learned_loss_fraction' was removed: F9's training-loss rule was removed"),
    ("a name longer than a folder name can be", "name", "n" * 300, "config key 'name': at most 100 characters, got 300"),
    ("tf32 on the cpu", "device", "cpu", "config key 'precision': 'tf32' needs a CUDA device but device is 'cpu'"),
]


@pytest.mark.parametrize("what,key,value,message", BAD, ids=[b[0] for b in BAD])
def test_bad_config_rejected_with_key(paper_config, what, key, value, message):
    if what == "tf32 on the cpu":
        paper_config = _set(paper_config, "precision", "tf32")
    with pytest.raises(ConfigError) as exc:
        validate_config(_set(paper_config, key, value))
    assert message in str(exc.value)


def test_missing_config_file_named(tmp_path):
    with pytest.raises(ConfigError, match="does-not-exist.yaml' does not exist"):
        load_config(tmp_path / "does-not-exist.yaml")


def test_run_config_is_method_specific(paper_config):
    a = run_config(paper_config, "cifar10", "fedprox", 42)
    b = run_config(_set(paper_config, "method_params.fedprox.mu", 0.5), "cifar10", "fedprox", 42)
    c = run_config(_set(paper_config, "method_params.fedprox.mu", 0.5), "cifar10", "hasfl", 42)
    assert a != b
    assert c == run_config(paper_config, "cifar10", "hasfl", 42)
    # precision changes what a training job computes, so it is part of every job's parameters
    bf16 = run_config(_set(paper_config, "precision", "bf16"), "cifar10", "hasfl", 42)
    assert bf16["precision"] == "bf16" and a["precision"] == "fp32" and bf16 != c
    # so do the torch threads (reductions, hence bytes, depend on them): the slice carries threads_per_job
    assert a["threads"] == paper_config["threads_per_job"] == 1
    four = run_config(_set(paper_config, "threads_per_job", 4), "cifar10", "fedprox", 42)
    assert four["threads"] == 4 and four == {**a, "threads": 4}
    # only methods with the allocation rule (hasfl.registry.MethodInfo.allocation_rule) read p_min / gamma
    assert {"p_min", "gamma"} <= set(c["hasfl"]) and not {"p_min", "gamma"} & set(a["hasfl"])
    assert a["hasfl"] == {k: v for k, v in c["hasfl"].items() if k not in ("p_min", "gamma")}


def test_data_config_is_the_data_stage_slice(paper_config):
    d = data_config(paper_config, "cifar10")
    assert set(d) == {"dataset", "data_dir", "clients", "capacity", "partition", "dataset_params"}
    assert "model" not in d["dataset_params"] and "optim" not in d["dataset_params"]
    # training-only keys do not reach the data stage
    assert data_config(_set(paper_config, "dataset_params.cifar10.optim.lr", 0.5), "cifar10") == d
    assert data_config(_set(paper_config, "threads_per_job", 4), "cifar10") == d
    assert data_config(_set(paper_config, "partition.alpha", 0.5), "cifar10") != d


BAD_KEYS = [
    ("partition.alpha", 0, "partition.alpha"),
    ("seeds", [], "seeds"),
    ("methods", ["hasfl", "nope"], "unknown method 'nope'"),
]


def _overlay(key: str, value: object) -> dict:
    overlay: dict = {}
    node = overlay
    *parents, last = key.split(".")
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value
    return overlay


@pytest.mark.parametrize("key,value,message", BAD_KEYS)
def test_a_bad_overlay_is_refused_over_config_yaml(repo, key, value, message):
    """What the Snakefile's session decides for ``--configfile bad.yaml`` (hasfl.dag.session: the file merged over
    config.yaml, then ``validate_config``), in process; the end-to-end run is the next test."""
    from hasfl.config import ConfigError, deep_merge, read_yaml, validate_config

    with pytest.raises(ConfigError) as refused:
        validate_config(deep_merge(read_yaml(repo / "config.yaml"), _overlay(key, value)))
    assert message in str(refused.value) and "invalid configuration" in str(refused.value)
    assert "missing config key" not in str(refused.value)  # the overlay merged over config.yaml


def test_snakemake_rejects_bad_config_before_any_job(plan, repo, tmp_path):
    """The Snakefile's session, in process (conftest ``plan``; tests/test_identity.py's refusals run end to end):
    a bad key stops it with exit code 1 and the key's message, before any job."""
    key, value, message = BAD_KEYS[2]
    preset = tmp_path / "bad.yaml"
    preset.write_text(yaml.safe_dump(_overlay(key, value)))
    res = plan(tmp_path, preset, argv=("-n", "all"))
    assert res.code == 1 and res.session is None
    assert message in res.stderr
    assert "invalid configuration" in res.stderr
    assert "missing config key" not in res.stderr  # the overlay merged over config.yaml
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "results").exists()


def test_snakemake_dry_run(quick_dry_run, job_counts):
    """The session's one dry run of the quick preset (conftest): Snakemake's job table."""
    res = quick_dry_run
    assert res.returncode == 0, res.stderr[-3000:]
    counts = job_counts(res.stdout + res.stderr)
    assert counts["data_stage"] == 3 * 2, counts
    assert counts["train"] == 9 * 3 * 2, counts  # the quick preset runs the paper's nine


def test_the_paper_preset_plans_every_data_stage_and_run(plan, repo, tmp_path):
    """The paper preset (config.yaml alone) in an empty folder, as the Snakefile's session plans it (conftest ``plan``,
    in process): 3 datasets x 3 seeds of data stages and 13 methods x 3 seeds x 3 datasets of runs, every one made by
    a job; nothing written."""
    res = plan(tmp_path, config={"results_dir": str(tmp_path / "results")})
    jobs = res.jobs()
    assert len([f for f in jobs["missing"] if f.startswith("data/")]) == 3 * 3, jobs
    assert len([f for f in jobs["missing"] if f.startswith("runs/")]) == 13 * 3 * 3, jobs
    assert not jobs["rerun"] and not jobs["link"] and not (tmp_path / "results").exists()


def test_schema_names_match_the_registry():
    """hasfl.registry.PRECISIONS / DATASETS (engine, CLI, Snakefile) and the schema's enums list the same values."""
    import json

    from hasfl.config import SCHEMA_PATH
    from hasfl.registry import DATASETS, PRECISIONS

    schema = json.loads(SCHEMA_PATH.read_text())["properties"]
    assert schema["precision"]["enum"] == list(PRECISIONS)
    assert schema["datasets"]["items"]["enum"] == list(DATASETS)


def test_overrides_set_any_nested_key_with_yaml_types(paper_config) -> None:
    """`hasfl config --set dotted.key=value`: nested keys, YAML-typed values, validated like a preset."""
    from hasfl.config import ConfigError, load_config, parse_override

    assert parse_override("method_params.fedprox.mu=0.5") == {"method_params": {"fedprox": {"mu": 0.5}}}
    assert parse_override("seeds=[1, 2]") == {"seeds": [1, 2]}
    assert parse_override("estimators.reported.epsilon=null") == {"estimators": {"reported": {"epsilon": None}}}
    cfg = load_config(overrides=["method_params.fedprox.mu=0.5", "name=paper-mu05"])
    assert cfg["method_params"]["fedprox"] == {"mu": 0.5} and cfg["name"] == "paper-mu05"
    assert cfg["method_params"]["scaffold"] == paper_config["method_params"]["scaffold"]  # siblings kept
    for bad, message in (("mu", "expected dotted.key=value"), ("a..b=1", "expected dotted.key=value"),
                         ("method_params.fedprox.mu=abc", "config key 'method_params.fedprox.mu': expected a number"),
                         ("seeds=[42.0]", "expected an integer, got float 42.0")):
        with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
            load_config(overrides=[bad])


def test_hasfl_config_set_writes_a_preset_snakemake_runs(hasfl_cli, plan, repo, tmp_path) -> None:

    res = hasfl_cli("config", "--config", str(repo / "presets/quick.yaml"),
                          "--set", "method_params.fedprox.mu=0.25", "--set", "federation.rounds=3", "--set", "hasfl.warmup=1", "--yaml")
    assert res.returncode == 0, res.stderr
    assert "add --set name=" in res.stderr  # results would land in results/quick: say so
    preset = tmp_path / "mine.yaml"
    preset.write_text(res.stdout)
    import yaml

    loaded = yaml.safe_load(res.stdout)
    assert loaded["method_params"]["fedprox"]["mu"] == 0.25 and loaded["federation"]["rounds"] == 3
    dry = plan(repo, preset, config={"results_dir": str(tmp_path)})  # the Snakefile's session, in process
    assert dry.code is None and "hasfl pre-flight: preset 'quick'" in dry.stderr, dry.stderr[-2000:]


def test_lists_from_the_command_line_are_typed_as_in_a_preset() -> None:
    """Issue 28: Snakemake reads ``--config 'seeds=[42,43]'`` as ['42', '43']; typed as a preset would be,
    with a float still a float (refused where an integer is expected) and other keys untouched."""
    from hasfl.config import typed_command_line

    cfg = {"seeds": ["42", "43"], "methods": ["hasfl", "fedavg"], "name": "x", "capacity": {"tiers": ["0.5", "1"]}}
    cli = {"seeds": ["42", "43"], "capacity": {"tiers": ["0.5", "1"]}}
    out = typed_command_line(cfg, cli)
    assert out["seeds"] == [42, 43] and out["capacity"]["tiers"] == [0.5, 1] and out["methods"] == ["hasfl", "fedavg"]
    assert typed_command_line({"seeds": ["42.0"]}, {"seeds": ["42.0"]})["seeds"] == [42.0]
    assert typed_command_line({"seeds": ["42"]}, {})["seeds"] == ["42"]  # not from the command line: untouched


# Widths below one unit of the smallest sliced layer (fault 6e): slicing keeps ceil(p * units) units but at least one
# (hasfl.models.slicing.width), so such a width would train a wider sub-model than the run records; refused at
# validation, naming the key, the width, the layer and its unit count. The quick preset's digits CNN has channels
# [32, 32, 64, 64] and hidden 128: its smallest layer is channels[0], 32 units, so a width below 1/32 is refused.
SUB_UNIT = [
    ("capacity.tiers", [0.03, 0.5, 0.75, 1.0], "capacity.tiers[0]", "0.03"),
    ("estimators.probe.width", 0.02, "estimators.probe.width", "0.02"),
    ("hasfl.p_min", 0.03, "hasfl.p_min", "0.03"),
    ("method_params.uniform.p", 0.025, "method_params.uniform.p", "0.025"),
    ("method_params.uniform_rolling.p", 0.01, "method_params.uniform_rolling.p", "0.01"),
]


def _digits(quick_config: dict, *methods: str) -> dict:
    return _set(_set(quick_config, "datasets", ["digits"]), "methods", list(methods))


@pytest.mark.parametrize("key,value,named,width", SUB_UNIT, ids=[s[0] for s in SUB_UNIT])
def test_a_width_below_one_unit_of_the_smallest_layer_is_refused(quick_config, key, value, named, width):
    cfg = _digits(quick_config, "hasfl", "uniform", "uniform_rolling", "fedavg")
    with pytest.raises(ConfigError) as exc:
        validate_config(_set(cfg, key, value))
    msg = str(exc.value)
    assert f"config key '{named}': width {width} keeps fewer than one unit of digits's smallest layer " \
           "dataset_params.digits.model.channels[0] (32 units" in msg, msg


def test_one_unit_of_the_smallest_layer_is_enough_and_unused_keys_are_not_checked(quick_config):
    cfg = _digits(quick_config, "hasfl", "uniform", "fedavg")
    validate_config(_set(cfg, "method_params.uniform.p", 1 / 32))  # exactly one of 32 units
    validate_config(_set(cfg, "method_params.uniform_rolling.p", 0.01))  # uniform_rolling does not run
    validate_config(_set(_set(cfg, "methods", ["fedavg"]), "hasfl.p_min", 0.01))  # no method allocates by Eq. 6
    lstm = _set(_set(cfg, "datasets", ["shakespeare"]), "dataset_params.shakespeare.model.hidden", 8)
    with pytest.raises(ConfigError, match=r"'capacity.tiers\[0\]': width 0.1 keeps fewer than one unit of "
                                          r"shakespeare's smallest layer dataset_params.shakespeare.model.hidden "
                                          r"\(8 units"):
        validate_config(_set(lstm, "capacity.tiers", [0.1, 0.5, 0.75, 1.0]))


def test_execution_keys_live_in_one_block_outside_every_identity() -> None:
    """Issue 36: how jobs run (GPU packing, checkpoints, the warm worker, the CPU-hours cap) is one
    ``execution`` block; no run slice or analysis identity holds it, and the old top-level keys are
    refused naming where they went. A mapping on Snakemake's command line has its scalars typed."""
    from hasfl.config import ConfigError, run_config, typed_command_line
    from hasfl.dag.identity import analysis_identity

    base = load_config()
    other = load_config(overrides=["execution.checkpoint_every=3", "execution.warm_worker=false",
                                   "execution.max_cpu_wall_hours=0", "execution.gpu.jobs_per_gpu=5"])
    assert other["execution"] != base["execution"]
    assert run_config(other, "cifar10", "hasfl", 42) == run_config(base, "cifar10", "hasfl", 42)
    assert analysis_identity(other, "c") == analysis_identity(base, "c")
    assert analysis_identity(load_config(overrides=["seeds=[42]"]), "c") != analysis_identity(base, "c")
    # a renamed folder (issue 46 fault 18): the name is in no table or finding, only report.md's params
    assert analysis_identity(load_config(overrides=["name=paper-copy"]), "c") == analysis_identity(base, "c")
    for key in ("warm_worker", "checkpoint_every", "max_cpu_wall_hours", "gpu"):
        with pytest.raises(ConfigError, match=rf"config key '{key}' was removed: it moved into the execution block"):
            load_config(overrides=[f"{key}=0"])
    cli = {"execution": {"max_cpu_wall_hours": "0", "warm_worker": "false"}}
    merged = {**base, "execution": {**base["execution"], **cli["execution"]}}
    typed = typed_command_line(merged, cli)["execution"]
    assert typed["max_cpu_wall_hours"] == 0 and typed["warm_worker"] is False and typed["checkpoint_every"] == 10


def test_the_long_horizon_overlay_changes_only_the_rounds_and_seeds(repo) -> None:
    """presets/medium-coverage-long.yaml (issue 48 point 4): the coverage rung's runs at 200 rounds on three seeds; every
    other config value of a run is the rung's, and its data stages are the rung's (their identity holds no rounds), so
    the store links them; its own results folder."""
    from hasfl.config import data_config, load_config, run_config

    presets = repo / "presets"
    rung = load_config([presets / "medium.yaml", presets / "medium-coverage.yaml"])
    long = load_config([presets / "medium.yaml", presets / "medium-coverage.yaml", presets / "medium-coverage-long.yaml"])
    assert long["federation"]["rounds"] == 200 and rung["federation"]["rounds"] == 100
    assert long["seeds"] == [42, 43, 44] and set(long["seeds"]) < set(rung["seeds"])
    assert long["methods"] == rung["methods"] and long["name"] != rung["name"]
    for m in long["methods"]:
        a, b = run_config(long, "fashion_mnist", m, 42), run_config(rung, "fashion_mnist", m, 42)
        assert a["federation"] | {"rounds": 100} == b["federation"] and {k: v for k, v in a.items() if k != "federation"} \
            == {k: v for k, v in b.items() if k != "federation"}, m
    assert data_config(long, "fashion_mnist") == data_config(rung, "fashion_mnist")  # the data stage's whole slice


def test_the_headline_rung_shares_the_coverage_rungs_data_and_baseline_runs(repo) -> None:
    """presets/medium-headline.yaml: HAS-FL, its controls and the positive control at the coverage rung's width (32),
    data and seeds; its heterofl and uniform runs have the coverage rung's config slices (so the store can link
    them), its data stages the medium preset's, and it carries the methods F1a-F1d, F2a, F3, F4 and F6 compare."""
    from hasfl.analysis.findings import FINDING_METHODS
    from hasfl.config import data_config, load_config, run_config

    presets = repo / "presets"
    medium = load_config([presets / "medium.yaml"])
    rung = load_config([presets / "medium.yaml", presets / "medium-coverage.yaml"])
    head = load_config([presets / "medium.yaml", presets / "medium-headline.yaml"])
    assert head["name"] not in (rung["name"], medium["name"]) and head["seeds"] == rung["seeds"]
    assert head["dataset_params"]["fashion_mnist"]["model"] == rung["dataset_params"]["fashion_mnist"]["model"]
    for m in ("heterofl", "uniform"):
        assert run_config(head, "fashion_mnist", m, 42) == run_config(rung, "fashion_mnist", m, 42), m
    assert data_config(head, "fashion_mnist") == data_config(medium, "fashion_mnist")
    needed = {m for fid in ("F1a", "F1b", "F1c", "F1d", "F2a", "F3", "F4", "F6") for m in FINDING_METHODS.get(fid, ())}
    assert needed and needed <= set(head["methods"]), needed - set(head["methods"])


def test_the_width_ladders_rungs_differ_from_the_headline_rung_only_in_width(repo) -> None:
    """presets/medium-headline-w8.yaml and -w16.yaml on top of the headline rung: HAS-FL and FedAvg (the methods of
    F1a, F1c, F6 and F4), the headline's seeds and every config key of its runs but the model's channels and hidden
    width (which scale with the base width as the headline's do); width 8 is the medium preset's model, so the store
    links the medium rung's hasfl and fedavg runs of seeds 42-44."""
    from hasfl.analysis.findings import FINDING_METHODS
    from hasfl.config import load_config, run_config

    presets = repo / "presets"
    base = [presets / "medium.yaml", presets / "medium-headline.yaml"]
    head = load_config(base)
    medium = load_config([presets / "medium.yaml"])
    for width in (8, 16):
        rung = load_config([*base, presets / f"medium-headline-w{width}.yaml"])
        assert rung["name"] == f"medium-headline-w{width}" and rung["seeds"] == head["seeds"]
        assert set(rung["methods"]) == {m for f in ("F1a", "F1c", "F6", "F4") for m in FINDING_METHODS[f]}
        model = rung["dataset_params"]["fashion_mnist"]["model"]
        assert model["channels"][0] == width and model["hidden"] == 8 * width
        for m in rung["methods"]:
            mine, theirs = run_config(rung, "fashion_mnist", m, 42), run_config(head, "fashion_mnist", m, 42)
            mine["dataset_params"]["model"].pop("channels"), theirs["dataset_params"]["model"].pop("channels")
            mine["dataset_params"]["model"].pop("hidden"), theirs["dataset_params"]["model"].pop("hidden")
            assert mine == theirs, m
        if width == 8:
            for m in rung["methods"]:
                assert run_config(rung, "fashion_mnist", m, 42) == run_config(medium, "fashion_mnist", m, 42), m


def test_a_config_block_of_a_method_or_dataset_a_preset_does_not_run_changes_none_of_its_analysis(repo) -> None:
    """A new user added a method with its method_params block and every folder's whole analysis reran, folders that
    never run the method included. The analysis identity holds method_params and dataset_params only of the methods
    and datasets the preset runs."""
    from hasfl.dag.identity import analysis_identity

    quick = load_config([repo / "presets" / "quick.yaml"])
    assert "fedprox" in quick["methods"] and "fedrolex" not in quick["methods"]
    ident = analysis_identity(quick, "c")
    other_method = {**quick, "method_params": {**quick["method_params"], "fedrolex": {"anything": 1}}}
    other_dataset = {**quick, "dataset_params": {**quick["dataset_params"], "cifar10": {"model": {"hidden": 7}}}}
    assert analysis_identity(other_method, "c") == analysis_identity(other_dataset, "c") == ident
    run_method = {**quick, "method_params": {**quick["method_params"], "fedprox": {"mu": 0.5}}}
    assert analysis_identity(run_method, "c") != ident


def test_the_local_steps_rung_differs_from_the_headline_rung_only_in_its_images(repo) -> None:
    """presets/medium-headline-data500.yaml: hasfl and fedavg at the headline's width and seeds with 500 train
    images per class; every other key of their runs is the headline's."""
    from hasfl.config import load_config, run_config

    presets = repo / "presets"
    base = [presets / "medium.yaml", presets / "medium-headline.yaml"]
    head = load_config(base)
    rung = load_config([*base, presets / "medium-headline-data500.yaml"])
    assert rung["seeds"] == head["seeds"] and rung["methods"] == ["hasfl", "fedavg"]
    for m in rung["methods"]:
        mine, theirs = run_config(rung, "fashion_mnist", m, 42), run_config(head, "fashion_mnist", m, 42)
        assert mine["dataset_params"].pop("train_per_class") == 500
        assert theirs["dataset_params"].pop("train_per_class") == 200
        assert mine == theirs, m
