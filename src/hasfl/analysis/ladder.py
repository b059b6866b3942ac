"""The width ladder: the capacity-confound estimates at several base widths of one model, beside the paper's.

The paper's first claim (Section 4.4, Table 5: r(H~, pmax) between -0.72 and -0.84 on every run) is made at base
width 64 (CIFAR-10 and EMNIST). A rung of this project tests it at its own width; the ladder sets the same
estimands of folders that differ only in the model's base width (``channels[0]``) side by side:

* **F1a** r(H~, pmax) over the clients of each hasfl run, pooled over seeds (Table 5's ``r_h_pmax``);
* **F1c** partial r(H~, TV | pmax) (Table 5's ``pr_h_tv_pmax``);
* **F6** r(H~, TV) of each fedavg run, the positive control (the paper publishes no FedAvg row of Table 5);
* **F4** final accuracy of fedavg minus hasfl, points (Table 6's fedavg and hasfl final means, differenced here).

Every measured row is a unit of a folder's findings.json (its estimate, its interval, its verdict at that folder's
horizon); every published row is the paper's own (mean and sample sd over its 3 seeds, ``published.yaml`` through
:func:`hasfl.analysis.published.load_published`), kept in its own rows with ``source = "published"`` and never
averaged into a measured one. The folders must share the dataset's data setting and seeds (a different image count
is another axis, not a width); a width a folder does not hold is refused, a finding a folder did not run is a
``not run`` row, never a missing one. A second axis, local steps per round (:data:`STEPS`), sets folders at one
width that differ only in their train images per class side by side the same way, the paper's runs at their own
steps. The reading (:func:`reading_lines`) states distances to the paper's values and whether they shrink along the
axis, from the numbers; it carries no verdict word of its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

__all__ = ["AXES", "COLUMNS", "ESTIMANDS", "PAPER_DATASETS", "SETTING", "STEPS", "WIDTH", "Axis", "Estimand",
           "LadderError", "Rung", "figure", "folder_rungs", "ladder_frame", "paper_positions", "position",
           "protocol_lines", "published_rows", "reading_lines", "table_lines"]


class LadderError(ValueError):
    """Folders that cannot form a width ladder (the message names the folder and what differs)."""


@dataclass(frozen=True)
class Estimand:
    """One estimand of the ladder: its finding, what it measures, and where the paper publishes it (``metric`` of
    ``table`` for ``method``; ``minus``: a difference of two published means, method minus ``minus``)."""

    finding: str
    statistic: str
    table: int | None
    metric: str | None
    method: str | None = None
    minus: str | None = None


ESTIMANDS: tuple[Estimand, ...] = (
    Estimand("F1a", "r(H~, pmax), hasfl", 5, "r_h_pmax", "hasfl"),
    Estimand("F1c", "partial r(H~, TV | pmax), hasfl", 5, "pr_h_tv_pmax", "hasfl"),
    Estimand("F6", "r(H~, TV), fedavg (positive control)", None, None),
    Estimand("F4", "final acc(fedavg) - final acc(hasfl), points", 6, "final_acc_pct", "fedavg", "hasfl"),
)

#: One row per (estimand, source, position on the axis, dataset).
COLUMNS = ["finding", "statistic", "source", "position", "dataset", "estimate", "low", "high", "level", "n", "verdict",
           "folder", "note"]


@dataclass(frozen=True)
class Rung:
    """One measured width on one dataset: the results folder's name, the base width of its runs on the dataset, its
    findings.json, the setting its runs share besides the model (:data:`SETTING`) and its seeds."""

    folder: str
    width: int
    findings: Mapping[str, Any]
    setting: Mapping[str, Any]
    seeds: tuple[int, ...]
    config: Mapping[str, Any] = field(default_factory=dict)  # one run's recorded config slice


#: What a run's config slice must share with the other rungs' (dotted keys): its data, its federation and its local
#: training; only the model differs along the ladder.
SETTING = ("dataset_params.train_per_class", "dataset_params.subsample_seed", "dataset_params.optim",
           "federation", "capacity")


@dataclass(frozen=True)
class Axis:
    """What a ladder varies: ``name`` (the table's column and the reading's words), the setting keys allowed to
    differ between its rungs (:data:`SETTING`'s; the model always may only on the width axis), and where the paper
    stands on it (its base width, or its own local steps per round: :func:`paper_positions`)."""

    key: str
    name: str
    free: tuple[str, ...]


WIDTH = Axis("width", "base width", ())
STEPS = Axis("steps", "local steps per round", ("dataset_params.train_per_class",))
AXES = {a.key: a for a in (WIDTH, STEPS)}


def position(rung: Rung, dataset: str, axis: Axis) -> int:
    """Where ``rung`` stands on ``axis``: its base width, or its local steps per round (:func:`_protocol`)."""
    return rung.width if axis is WIDTH else int(_protocol(rung.config, dataset)["local steps per round"])


def _dotted(cfg: Mapping[str, Any], key: str) -> Any:
    for part in key.split("."):
        cfg = cfg.get(part) if isinstance(cfg, Mapping) else None
    return cfg


def folder_rungs(folders: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]]
                 ) -> dict[str, list[Rung]]:
    """Per dataset on which the folders' runs have a base width (a CNN's ``channels[0]``), one rung per folder
    (``folders``: name -> (its analysis manifest's ``runs``, its findings.json, each run's recorded config slice by
    run folder)). A folder whose runs on a dataset differ in width, setting or seeds among themselves is refused."""
    out: dict[str, list[Rung]] = {}
    for name, (runs, doc, configs) in folders.items():
        per: dict[str, tuple[set[int], list[Any], set[int]]] = {}
        one: dict[str, Mapping[str, Any]] = {}
        for rel in runs:
            _, dataset, _method, seed = rel.split("/")
            cfg = configs.get(rel) or {}
            channels = _dotted(cfg, "dataset_params.model.channels")
            if not channels:
                continue
            widths, settings, seeds = per.setdefault(dataset, (set(), [], set()))
            widths.add(int(channels[0]))
            setting = {k: _dotted(cfg, k) for k in SETTING}
            if setting not in settings:
                settings.append(setting)
            seeds.add(int(seed.removeprefix("seed")))
            one.setdefault(dataset, cfg)
        for dataset, (widths, settings, seeds) in per.items():
            if len(widths) > 1 or len(settings) > 1:
                raise LadderError(f"folder '{name}' runs {dataset} at base widths {sorted(widths)} or in "
                                  f"{len(settings)} settings: a rung is one width and one setting")
            out.setdefault(dataset, []).append(Rung(name, widths.pop(), doc, settings[0], tuple(sorted(seeds)),
                                                    one[dataset]))
    return out


def _unit(doc: Mapping[str, Any], finding: str, dataset: str) -> tuple[Mapping[str, Any] | None, str]:
    """(the unit of ``finding`` on ``dataset`` in findings.json ``doc``, the finding's shown verdict)."""
    for f in doc.get("findings") or []:
        if str(f.get("id")) == finding:
            for u in f.get("units") or []:
                if str(u.get("unit")) == dataset:
                    return u, str(u.get("verdict"))
            return None, "not run"
    return None, "not run"


def _interval(u: Mapping[str, Any]) -> tuple[float, float, float]:
    """The unit's two-sided interval and its level where it has one, else its own interval and level."""
    if u.get("two_sided_low") is not None and u.get("two_sided_high") is not None:
        return float(u["two_sided_low"]), float(u["two_sided_high"]), float(u.get("two_sided_level", math.nan))
    return (float(u.get("low", math.nan)), float(u.get("high", math.nan)), float(u.get("interval_level", math.nan)))


def _check(rungs: Sequence[Rung], dataset: str, axis: Axis) -> None:
    at = [position(r, dataset, axis) for r in rungs]
    if len(rungs) < 2:
        raise LadderError(f"a ladder over {axis.name} needs folders at two or more of its values; got {len(rungs)} "
                          f"({', '.join(r.folder for r in rungs) or 'none'})")
    doubled = sorted({w for w in at if at.count(w) > 1})
    if doubled:
        raise LadderError(f"two folders at {axis.name} {doubled[0]}: "
                          f"{', '.join(r.folder for r, w in zip(rungs, at, strict=True) if w == doubled[0])}; give "
                          f"one folder per {axis.name}")
    first = rungs[0]
    for r in rungs[1:]:
        differs = [k for k in SETTING if k not in axis.free and r.setting.get(k) != first.setting.get(k)]
        if axis is not WIDTH and r.width != first.width:
            differs.append("base width")
        for what, mine, theirs in (("setting", {k: r.setting.get(k, r.width) for k in differs},
                                    {k: first.setting.get(k, first.width) for k in differs}),
                                   ("seeds", r.seeds, first.seeds)):
            if mine != theirs:
                raise LadderError(f"folder '{r.folder}' (width {r.width}) runs {dataset} with {what} {mine}, "
                                  f"folder '{first.folder}' (width {first.width}) with {theirs}: a ladder over "
                                  f"{axis.name} compares at one setting otherwise (data, federation, local training"
                                  f"{', width' if axis is not WIDTH else ''}) and one seed set")


def published_rows(dataset_label: str, published: pd.DataFrame,
                   at: Mapping[str, int] | None = None) -> list[dict[str, Any]]:
    """The paper's values of :data:`ESTIMANDS` at its base width (64), one row per estimand and published dataset
    (``source = "published"``; ``low``/``high`` the mean -+ the sample sd over its seeds, ``level`` NaN: not an
    interval), and a row saying so for an estimand the paper does not publish. ``dataset_label``: the measured
    dataset the rows stand beside (named in ``note``); ``at``: each published dataset's position on the ladder's
    axis (default its base width, 64)."""
    rows: list[dict[str, Any]] = []
    for e in ESTIMANDS:
        if e.table is None:
            rows.append({"finding": e.finding, "statistic": e.statistic, "source": "published", "position": 64,
                         "dataset": "", "estimate": math.nan, "low": math.nan, "high": math.nan, "level": math.nan,
                         "n": 0, "verdict": "", "folder": "", "note": "not published by the paper"})
            continue
        pub = published[(published["table"] == e.table) & (published["metric"] == e.metric)]
        for dataset in sorted(set(pub["dataset"])):
            a = pub[(pub["dataset"] == dataset) & (pub["method"] == e.method)]
            if a.empty:
                continue
            mean, sd, n = float(a["mean"].iloc[0]), float(a["std"].iloc[0]), int(a["n"].iloc[0])
            note = f"Table {e.table}, mean +- sd over the paper's {n} seeds"
            if e.minus is not None:
                b = pub[(pub["dataset"] == dataset) & (pub["method"] == e.minus)]
                if b.empty:
                    continue
                mean, sd = mean - float(b["mean"].iloc[0]), math.nan
                note = f"Table {e.table}: {e.method} minus {e.minus} published means (no sd of the difference)"
            rows.append({"finding": e.finding, "statistic": e.statistic, "source": "published",
                         "position": int((at or {}).get(str(dataset), 64)), "dataset": str(dataset), "estimate": mean,
                         "low": mean - sd if math.isfinite(sd) else math.nan,
                         "high": mean + sd if math.isfinite(sd) else math.nan, "level": math.nan, "n": n,
                         "verdict": "", "folder": "", "note": f"{note}; beside our {dataset_label}"})
    return rows


def ladder_frame(rungs: Sequence[Rung], dataset: str, published: pd.DataFrame | None = None, axis: Axis = WIDTH,
                 paper_at: Mapping[str, int] | None = None) -> pd.DataFrame:
    """Every estimand of :data:`ESTIMANDS` at every rung's position on ``axis`` (base width by default) on ``dataset``
    (``source = "measured"``, sorted by position; a finding a folder did not run is a ``not run`` row), then the
    paper's values (:func:`published_rows`, at ``paper_at``: each paper dataset's position on the axis, default its
    width 64). ``frame.attrs["axis"]``: the axis's name.

    Raises:
        LadderError: fewer than two folders, two at one position, or folders whose setting (other than the axis's)
            or seeds differ.
    """
    rungs = sorted(rungs, key=lambda r: position(r, dataset, axis))
    _check(rungs, dataset, axis)
    rows: list[dict[str, Any]] = []
    for e in ESTIMANDS:
        for r in rungs:
            u, verdict = _unit(r.findings, e.finding, dataset)
            low, high, level = _interval(u) if u is not None else (math.nan, math.nan, math.nan)
            rows.append({"finding": e.finding, "statistic": e.statistic, "source": "measured",
                         "position": position(r, dataset, axis),
                         "dataset": dataset, "estimate": float(u["estimate"]) if u is not None else math.nan,
                         "low": low, "high": high, "level": level, "n": int(u.get("n", 0)) if u is not None else 0,
                         "verdict": verdict, "folder": r.folder, "note": ""})
    if published is None:
        from hasfl.analysis.published import load_published

        published = load_published()
    rows += published_rows(dataset, published, paper_at)
    frame = pd.DataFrame.from_records(rows, columns=COLUMNS)
    frame.attrs["axis"] = axis.name
    return frame


def _num(x: float) -> str:
    return "--" if not math.isfinite(x) else f"{x:.3g}"


def table_lines(frame: pd.DataFrame) -> list[str]:
    """The ladder as one Markdown table: per estimand, the measured widths in order, then the paper's rows, each
    marked **published** (its range is the seeds' sd, not an interval)."""
    axis = str(frame.attrs.get("axis", WIDTH.name))
    out = [f"| Finding | Statistic | {axis[0].upper() + axis[1:]} | Source | Estimate | Interval | n | Verdict at the "
           "folder's horizon |",
           "|---|---|---:|---|---:|---|---:|---|"]
    for e in ESTIMANDS:
        part = frame[frame["finding"] == e.finding]
        stat = e.statistic.replace("|", "\\|")  # a bar inside a cell would end it
        for r in part[part["source"] == "measured"].to_dict("records"):
            level = f" ({100 * r['level']:.0f}%)" if math.isfinite(r["level"]) else ""
            span = f"[{_num(r['low'])}, {_num(r['high'])}]{level}" if math.isfinite(r["estimate"]) else "--"
            out.append(f"| {e.finding} | {stat} | {r['position']} | measured (`{r['folder']}`) | "
                       f"{_num(r['estimate'])} | {span} | {r['n']} | {r['verdict']} |")
        for r in part[part["source"] == "published"].to_dict("records"):
            if not math.isfinite(r["estimate"]):
                out.append(f"| {e.finding} | {stat} | {r['position']} | **published** | -- | {r['note']} | -- | "
                           "-- |")
                continue
            span = (f"+- sd [{_num(r['low'])}, {_num(r['high'])}]" if math.isfinite(r["low"]) else "no sd")
            out.append(f"| {e.finding} | {stat} | {r['position']} | **published** ({r['dataset']}; "
                       f"{r['note'].split(';')[0]}) | {_num(r['estimate'])} | {span} | {r['n']} | -- |")
    return out


def reading_lines(frame: pd.DataFrame) -> list[str]:
    """Per estimand, from the numbers: the measured estimate at each position on the axis, its distance to the paper's
    published mean (the mean over its datasets), and whether that distance shrinks, grows or neither as the position
    grows. No verdict word: the folders' own verdicts are in the table."""
    axis = str(frame.attrs.get("axis", WIDTH.name))
    out = []
    for e in ESTIMANDS:
        part = frame[frame["finding"] == e.finding]
        meas = part[(part["source"] == "measured") & part["estimate"].notna()].sort_values("position")
        pub = part[(part["source"] == "published") & part["estimate"].notna()]
        if meas.empty:
            out.append(f"- **{e.finding}**: not run at any {axis} of the ladder.")
            continue
        at = ", ".join(f"{_num(v)} at {axis} {w}" for w, v in zip(meas["position"], meas["estimate"], strict=True))
        if pub.empty:
            out.append(f"- **{e.finding}** ({e.statistic}): {at}; the paper publishes no value to compare with.")
            continue
        target = float(pub["estimate"].mean())
        dist = [abs(float(v) - target) for v in meas["estimate"]]
        steps = [b - a for a, b in zip(dist, dist[1:], strict=False)]
        if len(steps) and all(s < 0 for s in steps):
            trend = f"shrinks at every step up in {axis}"
        elif len(steps) and all(s > 0 for s in steps):
            trend = f"grows at every step up in {axis}"
        else:
            trend = f"does not change in one direction with {axis}"
        where = ", ".join(f"{d} at {axis} {w}" for d, w in sorted(zip(pub["dataset"], pub["position"], strict=True)))
        positions = ", ".join(str(w) for w in meas["position"])
        out.append(f"- **{e.finding}** ({e.statistic}): {at}; the paper's published mean "
                   f"{_num(target)} ({where}). The distance to it, "
                   f"{', '.join(_num(d) for d in dist)} at {axis} {positions}, {trend}; whether a step is more than "
                   "seed noise is for the intervals in the table to say.")
    return out


#: The paper's own datasets, whose runs Table 5 reports.
PAPER_DATASETS = ("cifar10", "emnist")


def _protocol(cfg: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    """What a run's config slice ``cfg`` of ``dataset`` gives of the protocol: base width, train images per client and
    local steps per round at an equal split of the training set over the clients (``train_per_class`` x classes, or
    the whole training set when it is null: :data:`hasfl.registry.DATASETS`' facts), rounds, clients per round."""
    from hasfl.registry import DATASETS

    facts = DATASETS[dataset].facts
    params = cfg.get("dataset_params") or {}
    fed = cfg.get("federation") or {}
    optim = params.get("optim") or {}
    per_class = params.get("train_per_class")
    train = facts.train if per_class is None else int(per_class) * facts.classes
    per_client = train / int(fed.get("clients", 1))
    steps = math.ceil(per_client / int(optim.get("batch_size", 1))) * int(optim.get("local_epochs", 1))
    return {"base width": int((params.get("model") or {}).get("channels", [0])[0]),
            "train images per client": round(per_client), "local steps per round": steps,
            "rounds": fed.get("rounds"), "clients per round": f"{fed.get('clients_per_round')} of {fed.get('clients')}"}


def paper_positions(paper: Mapping[str, Mapping[str, Any]], axis: Axis) -> dict[str, int]:
    """Where each of the paper's runs of Table 5 (``paper``: dataset -> its config slice) stands on ``axis``."""
    key = "base width" if axis is WIDTH else "local steps per round"
    return {d: int(_protocol(cfg, d)[key]) for d, cfg in paper.items()}


def protocol_lines(rungs: Sequence[Rung], dataset: str, paper: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """How far the ladder's protocol is from the paper's, parameter by parameter: the rungs' values (each value the
    rungs take, in order) beside the paper's runs of Table 5 (``paper``: dataset -> the run config slice config.yaml
    gives, :data:`PAPER_DATASETS`), images and steps at an equal split (clients differ under the Dirichlet
    partition)."""
    ours = sorted((_protocol(r.config, dataset) for r in rungs),
                  key=lambda o: (o["base width"], o["local steps per round"]))
    theirs = {d: _protocol(cfg, d) for d, cfg in paper.items()}
    head = f"| Parameter | this ladder ({dataset}) | " + " | ".join(f"the paper ({d})" for d in theirs) + " |"
    out = [head, "|---|---:|" + "---:|" * len(theirs)]
    for key in ours[0]:
        mine = ", ".join(str(v) for v in dict.fromkeys(o[key] for o in ours))
        out.append(f"| {key} | {mine} | " + " | ".join(str(t[key]) for t in theirs.values()) + " |")
    return out


def figure(frame: pd.DataFrame) -> Any:
    """One panel per estimand: the measured estimate and its interval against the ladder's axis (log2), the paper's
    published values at its own position (width 64, or its local steps per round) as hollow markers, a star and a
    diamond per published dataset (their bars the seeds' sd), labelled published."""
    import matplotlib.pyplot as plt
    import numpy as np

    from hasfl.analysis.figures.style import set_style

    axis = str(frame.attrs.get("axis", WIDTH.name))
    set_style()
    fig, axes = plt.subplots(1, len(ESTIMANDS), figsize=(3.6 * len(ESTIMANDS), 3.6), squeeze=False)
    ticks = sorted({int(v) for v in frame["position"].dropna()})
    for ax, e in zip(axes[0], ESTIMANDS, strict=True):
        part = frame[frame["finding"] == e.finding]
        meas = part[(part["source"] == "measured") & part["estimate"].notna()].sort_values("position")
        if len(meas):
            y = meas["estimate"].to_numpy(float)
            err = np.vstack([y - meas["low"].to_numpy(float), meas["high"].to_numpy(float) - y])
            ax.errorbar(meas["position"], y, yerr=np.nan_to_num(err), fmt="o-", color="#1f5f8b", capsize=3,
                        label="measured (interval)")
        for i, r in enumerate(part[(part["source"] == "published") & part["estimate"].notna()].to_dict("records")):
            yerr = ([[r["estimate"] - r["low"]], [r["high"] - r["estimate"]]] if math.isfinite(r["low"]) else None)
            ax.errorbar([r["position"] * (1.06 if i else 1.0)], [r["estimate"]], yerr=yerr, fmt="*D"[i % 2],
                        ms=11 - 4 * (i % 2), mfc="white", color="#b03a2e", capsize=3,
                        label=f"published, {r['dataset']} (paper)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlabel(axis + (" (channels of the first layer)" if axis == WIDTH.name else ""))
        ax.set_title(f"{e.finding}: {e.statistic}", fontsize=9)
        if e.finding != "F4":
            ax.axhline(0, color="0.6", lw=0.8)
        ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return fig
