"""Configuration: the paper preset, presets merged over it, and validation.

``config.yaml`` (repository root) is the paper preset (Section 4.1). A preset file
is merged over it key by key -- nested mappings merge, lists and scalars replace --
exactly as Snakemake merges ``--configfile`` over ``configfile:``. The merged
mapping is validated against ``workflow/schemas/config.schema.json`` plus the
cross-key rules JSON Schema cannot express; every violation is reported with the
dotted key that caused it, before any job runs. :func:`run_config` and
:func:`data_config` cut the slice of the config one job depends on.

Names (methods, datasets, precisions) come from :mod:`hasfl.registry`, removed keys from
:mod:`hasfl.removed_keys`; this module imports nothing else from ``hasfl`` and no torch.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from hasfl.errors import HasflError
from hasfl.registry import DATASETS, METHODS, SERVER_NOISE
from hasfl.removed_keys import ANALYSIS as REMOVED_ANALYSIS_KEYS
from hasfl.removed_keys import TOP_LEVEL as REMOVED_TOP_LEVEL

REPO_ROOT = Path(__file__).resolve().parents[2]
PAPER_CONFIG = REPO_ROOT / "config.yaml"
SCHEMA_PATH = REPO_ROOT / "workflow" / "schemas" / "config.schema.json"


class ConfigError(HasflError, ValueError):
    """An invalid configuration; the message names the offending key."""


def deep_merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``base`` updated by ``overlay``: mappings merge recursively, anything else replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (YAML would keep the last one
    silently: two ``federation:`` blocks would drop the first)."""


def _strict_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is given twice in one mapping (first at line {seen[key].line + 1}); "
                            "YAML would keep only the last one", key_node.start_mark)
        seen[key] = key_node.start_mark
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _strict_mapping)


def load_yaml_text(text: str) -> Any:
    """YAML text as Python values, a duplicate key refused (:class:`_StrictLoader`)."""
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping, with a clear error for a missing file or a non-mapping."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file '{p}' does not exist")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file '{p}' is not UTF-8 text (byte {exc.start}: {exc.reason})") from exc
    except OSError as exc:
        raise ConfigError(f"config file '{p}' cannot be read: {exc.strerror or exc}") from exc
    try:
        data = load_yaml_text(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file '{p}' is not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file '{p}' must hold a mapping at top level, got {type(data).__name__}")
    return data


def parse_override(item: str) -> dict[str, Any]:
    """``dotted.key=value`` as a nested mapping; the value is read as YAML (``0.5``, ``[42, 43]``,
    ``null``, ``{mu: 0.5}``), so types are what a preset file would give."""
    key, sep, raw = item.partition("=")
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {item!r}: expected dotted.key=value, e.g. method_params.fedprox.mu=0.5")
    try:
        value = load_yaml_text(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {item!r}: the value is not valid YAML ({exc})") from exc
    out: dict[str, Any] = {}
    node = out
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def typed_command_line(config: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with the lists given on Snakemake's command line (``--config 'seeds=[42,43]'``) typed as a
    preset file would type them. Snakemake reads a list's items with YAML's base loader, as strings
    (``['42', '43']``); each string item is read again as YAML (``42`` -> 42, ``0.5`` -> 0.5, ``cifar10``
    stays a string, ``42.0`` is a float and still refused where an integer is expected). The scalars of a
    mapping given there (``--config 'execution={max_cpu_wall_hours: 0}'``, read as ``{'max_cpu_wall_hours':
    '0'}``) are read again the same way. Keys not in ``overrides`` and top-level scalars (which Snakemake
    already types) are left as they are."""
    def typed(value: Any, given: Any, nested: bool) -> Any:
        if isinstance(given, Mapping) and isinstance(value, Mapping):
            return {k: typed(value[k], given[k], True) if k in given else value[k] for k in value}
        if isinstance(value, list) and isinstance(given, list):
            return [yaml.safe_load(v) if isinstance(v, str) else v for v in value]
        if nested and isinstance(value, str) and value == given:
            return yaml.safe_load(value)
        return value

    return {k: typed(v, overrides[k], False) if k in overrides else v for k, v in config.items()}


def load_config(preset: str | Path | Sequence[str | Path] | None = None, base: str | Path = PAPER_CONFIG,
                overrides: list[str] | None = None) -> dict[str, Any]:
    """Load ``base`` (the paper preset), merge ``preset`` (one file, or several in order, as ``--configfile``
    gives them) and then each ``overrides`` item (``dotted.key=value``) over it, validate, return."""
    config = read_yaml(base)
    presets = [] if preset is None else [preset] if isinstance(preset, (str, Path)) else list(preset)
    for path in presets:
        config = deep_merge(config, read_yaml(path))
    for item in overrides or []:
        config = deep_merge(config, parse_override(item))
    config = with_method_defaults(config)
    validate_config(config)
    return canonical_numbers(config)


class _Absent:
    """A key one side of :func:`dotted_differences` lacks (shown as ``absent``)."""

    def __repr__(self) -> str:
        return "absent"


ABSENT = _Absent()


def dotted_differences(a: Any, b: Any, prefix: str = "", missing: Any = None) -> list[tuple[str, Any, Any]]:
    """``(dotted key, a's value, b's value)`` at each key where two nested mappings (config slices, identities)
    differ, keys sorted; a key one side lacks reads as ``missing`` there (:data:`ABSENT` to tell it from a None)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return [d for key in sorted(set(a) | set(b), key=str)
                for d in dotted_differences(a.get(key, missing), b.get(key, missing),
                                            f"{prefix}.{key}" if prefix else str(key), missing)]
    return [] if a == b else [(prefix or "<all>", a, b)]


def canonical_numbers(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with every integer at a key the schema types ``number`` written as a float (``capacity.tiers:
    [0.25, 1]`` -> ``[0.25, 1.0]``): equal numbers give equal identities and store keys (an integer-valued
    float written without ``.0`` would otherwise hash differently and retrain a byte-identical run). A key typed
    ``integer`` keeps its int; booleans are left alone; ``-0.0`` is written ``0.0``."""
    schema = _schema()

    def resolve(node: Mapping[str, Any]) -> Mapping[str, Any]:
        while isinstance(node, Mapping) and "$ref" in node:
            target: Any = schema
            for part in str(node["$ref"]).removeprefix("#/").split("/"):
                target = target[part]
            node = target
        return node

    def walk(value: Any, node: Any) -> Any:
        node = resolve(node) if isinstance(node, Mapping) else {}
        kinds = node.get("type")
        kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
        if isinstance(value, int) and not isinstance(value, bool) and "number" in kinds and "integer" not in kinds:
            return float(value)
        if isinstance(value, float) and value == 0.0:
            return 0.0  # -0.0 is 0.0: one number, one identity (JSON would write them apart)
        if isinstance(value, list):
            return [walk(v, node.get("items", {})) for v in value]
        if isinstance(value, Mapping):
            props, extra = node.get("properties", {}), node.get("additionalProperties", {})
            return {k: walk(v, props.get(k, extra if isinstance(extra, Mapping) else {})) for k, v in value.items()}
        return value

    return walk(dict(config), schema)


@lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    """The config schema, with the ``method_params`` block of every method an installed package registers
    (:attr:`hasfl.registry.MethodInfo.schema`)."""
    schema = json.loads(SCHEMA_PATH.read_text())
    blocks = schema["properties"]["method_params"].setdefault("properties", {})
    for name, info in METHODS.items():
        if info.schema is not None and name not in blocks:
            blocks[name] = dict(info.schema)
    return schema


def with_method_defaults(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with each method's :attr:`hasfl.registry.MethodInfo.defaults` under ``method_params.<name>`` where
    the config leaves a key out (an installed method's defaults; a built-in method's are in ``config.yaml``)."""
    out = dict(config)
    given = config.get("method_params")
    if not isinstance(given, Mapping):
        return out
    params = dict(given)
    for name, info in METHODS.items():
        if info.defaults:
            block = params.get(name)
            params[name] = {**copy.deepcopy(dict(info.defaults)), **(dict(block) if isinstance(block, Mapping) else {})}
    out["method_params"] = params
    return out


def _key(path: Any) -> str:
    """Dotted key for a jsonschema path: ``federation.rounds``, ``seeds[0]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


_TYPE_NAMES = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "true/false",
               "array": "a list", "object": "a mapping", "null": "null"}


def _describe(error: Any) -> str:
    key = _key(error.absolute_path)
    v, expected, got = error.validator, error.validator_value, error.instance
    if v == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(got) - set(allowed))
        prefix = f"{key}." if error.absolute_path else ""
        if key == "analysis" and extra[0] in REMOVED_ANALYSIS_KEYS:
            return f"config key 'analysis.{extra[0]}' was removed: {REMOVED_ANALYSIS_KEYS[extra[0]]}"
        return (f"unknown config key '{prefix}{extra[0]}'" + (f" (and {extra[1:]})" if len(extra) > 1 else "")
                + f"; allowed keys here: {', '.join(allowed)}")
    if v == "required":
        missing = [k for k in expected if k not in got]
        prefix = f"{key}." if error.absolute_path else ""
        return f"missing config key '{prefix}{missing[0]}'"
    if v == "type":
        kinds = expected if isinstance(expected, list) else [expected]
        want = " or ".join(_TYPE_NAMES.get(k, k) for k in kinds)
        return f"config key '{key}': expected {want}, got {type(got).__name__} {got!r}"
    if v in ("enum", "const"):
        options = expected if v == "enum" else [expected]
        what = {"datasets": "dataset", "methods": "method"}.get(str(error.absolute_path[0]) if error.absolute_path else "", "value")
        return f"config key '{key}': unknown {what} {got!r}; expected one of {', '.join(map(str, options))}"
    bounds = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
    if v in bounds:
        return f"config key '{key}': must be {bounds[v]} {expected}, got {got!r}"
    if v == "minItems":
        return f"config key '{key}': must not be empty" if expected == 1 else f"config key '{key}': needs at least {expected} items"
    if v == "uniqueItems":
        return f"config key '{key}': items must be unique, got {got!r}"
    if v == "maxLength":
        return f"config key '{key}': at most {expected} characters, got {len(got)}"
    if v == "pattern" and key == "name":
        return _name_message(got)
    if v == "pattern":
        return f"config key '{key}': {got!r} does not match the pattern {expected}"
    return f"config key '{key}': {error.message}"


def _name_message(name: str) -> str:
    """Why ``name`` (config key ``name``, the folder ``<results_dir>/<name>``) is refused by the schema's pattern."""
    if name.startswith("."):
        why = ("it starts with '.': a hidden folder beside the results folders, such as the run store's, whose "
               "entries `hasfl gc --delete` removes when no results folder links them")
    elif ".." in name or "/" in name or "\\" in name:
        why = "it is a path ('..' or a path separator), not one folder under results_dir"
    else:
        why = "it has a character other than those allowed"
    return (f"config key 'name': {name!r} is not a plain folder name ({why}); expected letters, digits, '_', '.', "
            "'-', not starting with '.' and without '..', e.g. quick or paper-mu05")


def _non_finite(value: Any, key: str = "") -> list[str]:
    """Every NaN / inf number in ``value`` (JSON Schema's bounds are false for NaN, so a NaN would
    pass every range check), named by its dotted key."""
    if isinstance(value, float) and not math.isfinite(value):
        return [f"config key '{key or '<top level>'}': must be a finite number, got {value!r}"]
    if isinstance(value, Mapping):
        return [m for k, v in value.items() for m in _non_finite(v, f"{key}.{k}" if key else str(k))]
    if isinstance(value, list):
        return [m for i, v in enumerate(value) for m in _non_finite(v, f"{key}[{i}]")]
    return []


def _validator_class() -> Any:
    """Draft 2020-12 with strict integers: JSON Schema counts 42.0 as an integer, but a seed or a
    round count written 42.0 is a typo that would end in a path like ``seed42.0``."""
    import jsonschema  # here, not at module level: training jobs load configs already validated (0.2 s)

    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine(
        "integer", lambda _checker, v: isinstance(v, int) and not isinstance(v, bool))
    return jsonschema.validators.extend(base, type_checker=checker)


def validate_config(config: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` naming the key of the first violation (all listed)."""
    validator = _validator_class()(_schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    messages = _removed_keys(config) + _non_finite(config) + [_describe(e) for e in errors
                                                              if not _is_removed(e)] + _unknown_methods(config)
    if not messages:
        messages = _semantic_errors(config)
    if messages:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(messages))


#: Keys that were removed, and what replaced them (named in the error instead of "unknown key").
REMOVED_KEYS = REMOVED_TOP_LEVEL


def _removed_keys(config: Mapping[str, Any]) -> list[str]:
    """A removed top-level key, named with what replaced it."""
    return [f"config key '{k}' was removed: {why}" for k, why in REMOVED_KEYS.items() if k in config]


def _is_removed(error: Any) -> bool:
    """A schema error that only reports a removed key (already named by :func:`_removed_keys`)."""
    return (error.validator == "additionalProperties" and not error.absolute_path
            and set(error.instance) - set(error.schema.get("properties", {})) <= set(REMOVED_KEYS))


def _unknown_methods(config: Mapping[str, Any]) -> list[str]:
    """Method names (``methods``, ``method_params``) that the registry hasfl.registry.METHODS does not know."""
    errs = []
    options = ", ".join(METHODS)
    methods = config.get("methods")
    for i, m in enumerate(methods if isinstance(methods, list) else []):
        if isinstance(m, str) and m not in METHODS:
            errs.append(f"config key 'methods[{i}]': unknown method {m!r}; expected one of {options}")
    params = config.get("method_params")
    for m in params if isinstance(params, Mapping) else {}:
        if m not in METHODS:
            errs.append(f"unknown config key 'method_params.{m}': not a method; expected one of {options}")
    return errs


def _semantic_errors(config: Mapping[str, Any]) -> list[str]:
    """Cross-key rules that JSON Schema cannot express."""
    errs: list[str] = []
    fed, cap = config["federation"], config["capacity"]
    if fed["clients_per_round"] > fed["clients"]:
        errs.append(f"config key 'federation.clients_per_round': {fed['clients_per_round']} sampled clients per round "
                    f"exceeds federation.clients = {fed['clients']}")
    if len(cap["tiers"]) != len(cap["counts"]):
        errs.append(f"config key 'capacity.counts': {len(cap['counts'])} counts for {len(cap['tiers'])} tiers; "
                    "expected one count per tier")
    elif sum(cap["counts"]) != fed["clients"]:
        errs.append(f"config key 'capacity.counts': counts sum to {sum(cap['counts'])}, expected "
                    f"federation.clients = {fed['clients']}")
    hooked = [m for m in config["methods"] if m in METHODS and not METHODS[m].plain_local_sgd]
    if config["client_step"] == "batched" and hooked:
        errs.append(f"config key 'client_step': 'batched' runs only methods that train with the plain shared "
                    f"optimiser; {', '.join(hooked)} change the local step (registry plain_local_sgd); drop them "
                    f"from methods or use client_step: sequential")
    if config["precision"] == "tf32" and config["device"] == "cpu":
        errs.append("config key 'precision': 'tf32' needs a CUDA device but device is 'cpu'; use fp32 or bf16")
    if sorted(set(cap["tiers"])) != list(cap["tiers"]):
        errs.append(f"config key 'capacity.tiers': tiers must be strictly increasing, got {cap['tiers']}")
    if "shakespeare" in config["datasets"] and config["dataset_params"]["shakespeare"]["top_roles"] != fed["clients"]:
        errs.append(f"config key 'dataset_params.shakespeare.top_roles': {config['dataset_params']['shakespeare']['top_roles']} "
                    f"role-clients, expected federation.clients = {fed['clients']} (one client per role)")
    if config["hasfl"]["warmup"] > fed["rounds"] - 2:
        errs.append(f"config key 'hasfl.warmup': t0 = {config['hasfl']['warmup']} leaves no round after t0 in "
                    f"federation.rounds = {fed['rounds']} (rounds t = 0 .. {fed['rounds'] - 1}; the warm-up ends with "
                    "round t0, Algorithm 1 adapts from t0 on and Proposition 3 is about the rounds t > t0); expected "
                    "hasfl.warmup <= federation.rounds - 2")
    for ds in config["datasets"]:
        model = config["dataset_params"][ds]["model"]
        if model["arch"] == "cnn" and any(i >= len(model["channels"]) for i in model["pool_after"]):
            errs.append(f"config key 'dataset_params.{ds}.model.pool_after': indices {model['pool_after']} must be "
                        f"< len(channels) = {len(model['channels'])}")
        elif model["arch"] == "cnn":
            shape = DATASETS[ds].facts.shape
            side = min(shape[1:]) if len(shape) >= 3 else None
            pools = len(set(model["pool_after"]))
            if side is not None and side // 2 ** pools < 1:
                errs.append(f"config key 'dataset_params.{ds}.model.pool_after': {pools} 2x2 max-pools shrink "
                            f"{ds}'s {side}x{side} input to nothing ({side} // 2**{pools} = 0); at most "
                            f"{side.bit_length() - 1} pools fit")
    errs += _width_errors(config)
    if "shakespeare" in config["datasets"]:
        sp = config["dataset_params"]["shakespeare"]
        cap, seq, frac = sp["max_chars_per_role"], sp["seq_len"], sp["train_fraction"]
        if cap is not None:
            train_chars = math.floor(frac * cap)
            if min(train_chars, cap - train_chars) <= seq:
                errs.append(f"config key 'dataset_params.shakespeare.seq_len': {seq}-character windows do not fit a "
                            f"role cut to max_chars_per_role = {cap} characters (train_fraction = {frac:g}: "
                            f"{train_chars} train and {cap - train_chars} test characters; each split needs more "
                            f"than seq_len); expected seq_len < {min(train_chars, cap - train_chars)}")
    return errs


def _smallest_layer(model: Mapping[str, Any]) -> tuple[str, int]:
    """The sliced layer of a model config with the fewest units (``channels[i]`` or ``hidden``) and that count:
    every sliced layer keeps ``ceil(p * units)`` units (:func:`hasfl.models.slicing.width`)."""
    channels = model.get("channels", []) if model["arch"] == "cnn" else []
    layers = [(f"channels[{i}]", int(c)) for i, c in enumerate(channels)]
    layers.append(("hidden", int(model["hidden"])))
    return min(layers, key=lambda layer: layer[1])


def _widths(config: Mapping[str, Any]) -> list[tuple[str, float]]:
    """Every width a job of ``config`` can train or probe at its smallest, by dotted key: the capacity tiers (the
    clients' pmax, every run), E2's probe width (every run, when set), ``hasfl.p_min`` (methods that allocate by
    Eq. 6, whose widths are at least min(p_min, pmax)) and ``method_params.<m>.p`` (the fixed-width methods)."""
    out = [(f"capacity.tiers[{i}]", float(t)) for i, t in enumerate(config["capacity"]["tiers"])]
    probe = config["estimators"]["probe"]["width"]
    if probe is not None:
        out.append(("estimators.probe.width", float(probe)))
    methods = [m for m in config["methods"] if m in METHODS]
    if any(METHODS[m].allocation_rule for m in methods):
        out.append(("hasfl.p_min", float(config["hasfl"]["p_min"])))
    for m in methods:
        if METHODS[m].cost == "fixed":
            p = config["method_params"].get(m, {}).get("p")
            if p is None:  # named by the schema check of the method's block (a fixed width needs its p)
                raise ConfigError(f"config key 'method_params.{m}.p': method '{m}' trains one fixed width and needs "
                                  "it; expected a number in (0, 1]")
            out.append((f"method_params.{m}.p", float(p)))
    return out


def _width_errors(config: Mapping[str, Any]) -> list[str]:
    """Widths that keep fewer than one unit of a dataset's smallest sliced layer (``p * units < 1``): slicing would
    round them up to one unit (:func:`hasfl.models.slicing.width`), so the sub-model trained would be wider than the
    width the run records. Refused, with the key, the width, the layer and its unit count."""
    errs = []
    for ds in config["datasets"]:
        layer, units = _smallest_layer(config["dataset_params"][ds]["model"])
        for key, p in _widths(config):
            if p * units < 1 - 1e-9:
                errs.append(f"config key '{key}': width {p:g} keeps fewer than one unit of {ds}'s smallest layer "
                            f"dataset_params.{ds}.model.{layer} ({units} units: {p:g} x {units} = {p * units:.3g}); "
                            f"slicing keeps at least one unit, so the run would train width {1 / units:.4g}, not "
                            f"{p:g}; expected a width >= 1/{units} = {1 / units:.4g} (or a wider layer)")
    return errs


def run_config(config: Mapping[str, Any], dataset: str, method: str, seed: int) -> dict[str, Any]:
    """The slice of ``config`` one training job depends on (and nothing else).

    It is the Snakemake ``params.run_cfg`` of the job (so that changing one method's
    hyperparameter reruns only that method's jobs) and the only configuration the job
    receives (:func:`hasfl.fl.train.train_job`). ``threads`` is part of it: torch's
    reductions, hence the run's bytes, depend on the thread count.
    """
    return {
        "dataset": dataset,
        "method": method,
        "seed": int(seed),
        "device": config["device"],
        "precision": config["precision"],
        # CUDA's deterministic algorithms change a GPU run's bytes, never a CPU run's
        **({} if config["device"] == "cpu" else {"cuda_deterministic": bool(config["cuda_deterministic"])}),
        # a batched client step is another engine: its runs are another identity (rounding differs)
        **({} if config["client_step"] == "sequential" else {"client_step": config["client_step"]}),
        "threads": int(config["threads_per_job"]),
        "federation": dict(config["federation"]),
        "capacity": dict(config["capacity"]),
        # the estimator (Eqs. 4-5) runs for every method; Eq. 6's p_min / gamma only for HAS-FL's policy
        "hasfl": {k: v for k, v in config["hasfl"].items()
                  if METHODS[method].allocation_rule or k not in ("p_min", "gamma")},
        "estimators": copy.deepcopy(config["estimators"]),  # E1-E3 are logged by every run
        "method_params": dict(config["method_params"].get(method, {})),
        "dataset_params": copy.deepcopy(config["dataset_params"][dataset]),
    }


def data_config(config: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    """The slice of ``config`` the data stage of ``dataset`` depends on."""
    params = {k: v for k, v in config["dataset_params"][dataset].items() if k not in ("model", "optim")}
    return {
        "dataset": dataset,
        "data_dir": config["data_dir"],
        "clients": config["federation"]["clients"],
        "capacity": dict(config["capacity"]),
        "partition": dict(config["partition"]),
        "dataset_params": params,
    }


def server_noise(config: Mapping[str, Any]) -> dict[str, float]:
    """The methods of ``config`` whose server adds noise to every coordinate each round
    (:data:`hasfl.registry.SERVER_NOISE`), with its positive scale from ``method_params``; a scale of 0 is no noise."""
    out = {}
    for method, key in SERVER_NOISE.items():
        scale = float(config.get("method_params", {}).get(method, {}).get(key, 0.0))
        if method in config.get("methods", ()) and scale > 0.0:
            out[method] = scale
    return out
