"""Table 4c (this project's extension): coverage over time -- which part of the global model the participants still train.

Section 3.3's Algorithm 2 gives a width-p participant the leading ``ceil(p * C)`` units of every layer;
Proposition 3 (Section 3.3) says the coordinates no participant trains keep their value, and Sections
4.2-4.3 explain the coverage ablation (Table 4) by the coordinates that capacity-capped allocations leave
untrained. Table 4b and the Proposition 3 table count those coordinates from the widest width trained,
which is exact only for nested prefixes (:attr:`hasfl.registry.MethodInfo.nested`). This table counts them
from the per-round participation ledger, so it holds for every method, rolling windows (FedRolex,
``uniform_rolling``) included: per run, the fraction of the global model's parameter coordinates that at
least one participant trained

* in the last k rounds (rounds R-k+1 .. R of ``participation.parquet``, R its last round; k is the config
  key ``analysis.table4c_last_rounds``, all R rounds when R < k), and
* in any round after the warm-up round t0 (run.json ``t0``; the ledger's round r is Algorithm 1's round
  t = r - 1, so these are the rows with r >= t0 + 2, as ``p_max_trained_after_warmup`` counts them),

overall and per block. A participant trained the coordinates of the slice rules of its trained width
``p_trained`` and its window (``window`` / ``window_shift``: :class:`hasfl.models.slicing.Window`; a
``sampled`` window, FedEcover's, is rebuilt by replaying the run's draws in ``window_shift`` order from the
run's seed, :func:`hasfl.models.cyclic.replay`); the union over participants is ORed into one boolean
accumulator per parameter (one fill per distinct physical width and window, not per ledger row). Only
parameters count (the keys of ``named_parameters()`` of the full model): BatchNorm running statistics are no
trained coordinates.

Two spreads of coverage per run, over every round of the ledger:

* ``gamma_min`` (and ``gamma_min_last_k`` over the last k rounds): Zhou et al.'s minimum coverage index
  (NeurIPS 2023, "Every Parameter Matters", arXiv 2310.08670): the fewest participants of one round whose
  sub-model holds one parameter coordinate, minimised over the rounds and the coordinates (of the block, or of
  every parameter). 0: some coordinate went untrained in some round.
* ``unit_gamma_min`` (``all`` row only): the same index at the level of units (a conv channel, a hidden unit:
  :meth:`hasfl.models.family.ModelFamily.dims`): the fewest participants of one round holding one unit, over the
  rounds and the units of every sliced dimension. The coordinate-level index is 0 for every method whose widths
  leave any weight of a unit pair untouched in a round (a prefix slice of two layers never covers every pair of
  their units together), so it separates nothing; the unit-level one tells an extraction that hands every unit
  to some participant in every round (FedEcover's cycles) from one that leaves units out.
* ``uncovered_frac_mean``: the mean over the rounds of the fraction of the block's parameter coordinates that no
  participant of that round holds (0: every coordinate trained in every round).
* ``unit_count_min`` / ``unit_count_max`` / ``unit_count_cv``: how many participants held each unit (a conv
  layer's channel, a hidden unit: :meth:`hasfl.models.family.ModelFamily.dims`) over the run; on the ``all`` row
  only: min and max over every unit of every sliced dimension, and the largest over the dimensions of the
  coefficient of variation (population std / mean) of that dimension's counts (FedEcover's "neuron selection
  count" balance). Block rows leave them empty.

A FIARSE run (ledger window ``masked``: a magnitude mask, not units) has one ``all`` row from its kept counts
(:func:`masked_row`): the uncovered fraction and the minimum coverage index per round; what a mask held cannot be
replayed, so the unions over rounds and the unit counts are empty.

A shuffled-partition run (ledger window ``partition/K``: each participant holds one block of a partition of the
coordinates into K, :mod:`hasfl.fl.methods.shuffled`) has every row exact from its ledger and K
(:func:`partition_rows`); its unit columns are empty (a block holds coordinates, not units).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hasfl.analysis.per_run.base import RunInputs
from hasfl.analysis.per_run.files import read_json
from hasfl.registry import MASKED_WINDOW, PARTITION_WINDOW

if TYPE_CHECKING:
    from torch import Tensor

    from hasfl.models.family import ModelFamily
    from hasfl.models.slicing import Window


__all__ = ["ALL_BLOCKS", "COLUMNS", "LEDGER_COLUMNS", "block_of", "coverage_counts", "coverage_union",
           "evaluate_run", "masked_row", "min_coverage", "partition_rows",
           "partitions_of", "read_ledger", "round_coverage", "row_windows", "run_rows", "unit_counts"]

PathLike = str | Path
#: The ``block`` of a run's row over every parameter coordinate (the overall fraction).
ALL_BLOCKS = "all"
#: One row per run and block (the run's ``all`` row first, then its blocks in parameter order).
COLUMNS = ["dataset", "method", "seed", "status", "window", "block", "coordinates", "trained_last_k", "frac_last_k",
           "trained_after_t0", "frac_after_t0", "k", "rounds_used", "last_round", "t0", "gamma_min",
           "gamma_min_last_k", "unit_gamma_min", "uncovered_frac_mean", "unit_count_min", "unit_count_max",
           "unit_count_cv"]
#: The columns of participation.parquet this table reads (hasfl.fl.records.PARTICIPATION_COLUMNS).
LEDGER_COLUMNS = ("round", "p_trained", "window", "window_shift")
_RNN_LAYER = re.compile(r"_l(\d+)(_reverse)?$")


def block_of(key: str) -> str:
    """The coordinate block of parameter ``key``: one layer's parameters.

    The module path before the last dot (``convs.0.weight`` -> ``convs.0``, ``fc1.bias`` -> ``fc1``,
    ``embed.weight`` -> ``embed``); a recurrent layer's parameters, which PyTorch names by layer in the last
    part (``lstm.weight_ih_l1``), form one block per layer (``lstm.l1``; ``lstm.l1_reverse`` for the reverse
    direction of a bidirectional layer). A key without a dot is its own block.
    """
    module, _, leaf = key.rpartition(".")
    m = _RNN_LAYER.search(leaf)
    if m is not None:
        return f"{module}.l{m.group(1)}{m.group(2) or ''}" if module else f"l{m.group(1)}{m.group(2) or ''}"
    return module or key


def read_ledger(path: PathLike) -> pd.DataFrame:
    """A run's participation.parquet, checked: the columns :data:`LEDGER_COLUMNS`, at least one row, 1-based
    integer rounds, trained widths in (0, 1] and windows of :class:`hasfl.models.slicing.Window`'s kinds.

    Raises:
        hasfl.io.InputFileError: the file is missing or no readable Parquet file (naming it).
        ValueError: naming the file and the column that is missing or holds a bad value.
    """
    from hasfl.io import read_parquet
    from hasfl.models.slicing import Window

    where = Path(path).as_posix()
    led = read_parquet(path)
    missing = [c for c in LEDGER_COLUMNS if c not in led.columns]
    if missing:
        raise ValueError(f"table4c: {where} lacks the column(s) {', '.join(repr(c) for c in missing)} (the "
                         "participation ledger: one row per participant and round); the run predates the ledger "
                         "-- rerun its training job")
    if led.empty:
        raise ValueError(f"table4c: {where} has no rows: no participant trained in any round")
    rounds = pd.to_numeric(led["round"], errors="coerce")
    shifts = pd.to_numeric(led["window_shift"], errors="coerce")
    p = pd.to_numeric(led["p_trained"], errors="coerce")
    for col, ok, expected in (("round", (rounds >= 1) & (rounds % 1 == 0), "1-based integer rounds"),
                              ("window_shift", shifts % 1 == 0, "integer shifts"),
                              ("p_trained", (p > 0.0) & (p <= 1.0), "trained widths in (0, 1]")):
        if not bool(ok.all()):  # NaN (or a non-number) fails every comparison
            raise ValueError(f"table4c: {where} column '{col}' holds {led[col][~ok].tolist()[0]!r} in "
                             f"{int((~ok).sum())} row(s); expected {expected}")
    kinds = set(map(str, led["window"].unique()))
    allowed = (*Window.KINDS, MASKED_WINDOW)
    partitions = {partitions_of(k) for k in kinds} - {None}
    alone = MASKED_WINDOW in kinds or bool(partitions)
    if not (kinds <= set(allowed) or len(partitions) == 1) or (alone and len(kinds) != 1):
        raise ValueError(f"table4c: {where} column 'window' holds {sorted(kinds)}; expected {' or '.join(allowed)} "
                         f"or {PARTITION_WINDOW}/K ({MASKED_WINDOW} rows alone: a FIARSE run; {PARTITION_WINDOW}/K "
                         "rows alone, one K: a shuffled-partition run)")
    if partitions and not bool(((shifts >= 0) & (shifts < min(partitions))).all()):
        raise ValueError(f"table4c: {where} column 'window_shift' of a {PARTITION_WINDOW}/{min(partitions)} run holds "
                         f"blocks outside 0 .. {min(partitions) - 1}")
    out = pd.DataFrame({"round": rounds.astype("int64"), "p_trained": p.astype("float64"),
                        "window": led["window"].astype(str), "window_shift": shifts.astype("int64")})
    if MASKED_WINDOW in kinds:  # a FIARSE run: its allocated widths give each mask's budget share
        alloc = pd.to_numeric(led["p"], errors="coerce") if "p" in led.columns else pd.Series(math.nan, led.index)
        if not bool(((alloc > 0.0) & (alloc <= 1.0)).all()):
            raise ValueError(f"table4c: {where} column 'p' (the allocated width a masked row's budget follows) is "
                             "missing or holds values outside (0, 1]")
        out["p"] = alloc.astype("float64")
    return out


def partitions_of(window: str) -> int | None:
    """K of a shuffled-partition ledger window ``partition/K`` (:data:`hasfl.registry.PARTITION_WINDOW`), else None."""
    kind, slash, k = str(window).partition("/")
    if kind != PARTITION_WINDOW or not slash:
        return None
    if not k.isdigit() or int(k) < 1:
        raise ValueError(f"table4c: ledger window {window!r}; expected {PARTITION_WINDOW}/K with an integer K >= 1")
    return int(k)


def row_windows(family: ModelFamily, ledger: pd.DataFrame, seed: int) -> list[Window]:
    """The window of each ledger row, in row order: ``Window(window, window_shift)`` for a prefix or rolling row; a
    sampled row's units replayed from the run's ``seed`` through every sampled row in ``window_shift`` (draw number)
    order (:func:`hasfl.models.cyclic.replay`), so the draw numbers must be 0 .. n-1."""
    from hasfl.models.slicing import Window

    kinds = [str(k) for k in ledger["window"]]
    shifts = [int(v) for v in ledger["window_shift"]]
    widths = [float(v) for v in ledger["p_trained"]]
    out: list[Any] = [None if k == "sampled" else Window(k, shifts[i] if k != "prefix" else 0)
                      for i, k in enumerate(kinds)]
    sampled = sorted((i for i, k in enumerate(kinds) if k == "sampled"), key=lambda i: shifts[i])
    if sampled:
        if [shifts[i] for i in sampled] != list(range(len(sampled))):
            raise ValueError("table4c: a sampled window's window_shift is its draw number in the run, 0 .. n-1 once "
                             f"each; the ledger's {len(sampled)} sampled rows hold others")
        from hasfl.models.cyclic import replay

        for i, w in zip(sampled, replay(family, int(seed), [widths[i] for i in sampled]), strict=True):
            out[i] = w
    return out


def coverage_union(family: ModelFamily, shapes: Mapping[str, tuple[int, ...]], rows: pd.DataFrame,
                   windows: Sequence[Window] | None = None) -> dict[str, Tensor]:
    """The coordinates of each parameter (``shapes``) that at least one of the ledger ``rows`` trained.

    A row trained the coordinates of ``family.slice_rules(p_trained, window)`` (the mask of
    :func:`hasfl.models.slicing.coverage_mask`), ``window`` its entry of ``windows`` (in row order; default
    ``Window(window, window_shift)``, which a sampled row cannot use: :func:`row_windows`); rows of the same physical
    widths (``family.widths``) and window give the same mask, so each distinct one is filled into the accumulator
    once (a rolling window's mask depends on its shift, a prefix's does not).
    """
    import torch

    from hasfl.models.slicing import Window, fill_

    acc = {k: torch.zeros(s, dtype=torch.bool) for k, s in shapes.items()}
    seen: set[tuple[str, Window]] = set()
    rows = rows[["p_trained", "window", "window_shift"]]
    for j, (p, kind, shift) in enumerate(rows.itertuples(index=False)):
        window = windows[j] if windows is not None else Window(str(kind), int(shift) if kind != "prefix" else 0)
        key = (repr(family.widths(float(p))), window)
        if key in seen:
            continue
        seen.add(key)
        rules = family.slice_rules(float(p), window)
        missing = [k for k in shapes if k not in rules]
        if missing:
            raise ValueError(f"table4c: the model family has no slice rule for {missing}; wrong model config?")
        for k in shapes:
            fill_(acc[k], rules[k], True)
    return acc


def coverage_counts(family: ModelFamily, shapes: Mapping[str, tuple[int, ...]], rows: pd.DataFrame,
                    windows: Sequence[Window]) -> dict[str, Tensor]:
    """How many of the ledger ``rows`` (one round's participants; ``windows`` theirs, in row order) hold each
    coordinate of each parameter."""
    import torch

    from hasfl.models.slicing import add_scalar_

    acc = {k: torch.zeros(s, dtype=torch.int32) for k, s in shapes.items()}
    for p, window in zip(rows["p_trained"], windows, strict=True):
        rules = family.slice_rules(float(p), window)
        for k in shapes:
            add_scalar_(acc[k], rules[k], 1)
    return acc


def min_coverage(family: ModelFamily, shapes: Mapping[str, tuple[int, ...]], ledger: pd.DataFrame,
                 windows: Sequence[Window], blocks: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Zhou et al.'s minimum coverage index of the ``ledger`` rows (``windows``: theirs, in row order): per block of
    ``blocks`` (name -> parameter keys), the fewest participants of one round holding one of the block's
    coordinates, over the ledger's rounds."""
    return round_coverage(family, shapes, ledger, windows, blocks)[0]


def round_coverage(family: ModelFamily, shapes: Mapping[str, tuple[int, ...]], ledger: pd.DataFrame,
                   windows: Sequence[Window], blocks: Mapping[str, Sequence[str]]
                   ) -> tuple[dict[str, int], dict[str, float], int]:
    """Per round of the ``ledger`` rows (``windows``: theirs, in row order), from the counts of participants holding
    each coordinate and each unit: per block of ``blocks`` Zhou et al.'s minimum coverage index (the fewest
    participants holding one coordinate, over the rounds) and the mean over the rounds of the fraction of its
    coordinates no participant holds; and the unit-level index (the fewest participants holding one unit of any
    sliced dimension, :func:`unit_counts`, over the rounds)."""
    rounds = ledger["round"].to_numpy()
    gamma = {b: -1 for b in blocks}
    uncovered: dict[str, list[float]] = {b: [] for b in blocks}
    unit_low = -1
    for r in sorted(set(rounds.tolist())):
        at = [j for j, v in enumerate(rounds) if v == r]
        rows, wins = ledger.iloc[at], [windows[j] for j in at]
        counts = coverage_counts(family, shapes, rows, wins)
        for b, keys in blocks.items():
            low = min(int(counts[k].min()) for k in keys)
            gamma[b] = low if gamma[b] < 0 else min(gamma[b], low)
            zero = sum(int((counts[k] == 0).sum()) for k in keys)
            uncovered[b].append(zero / sum(counts[k].numel() for k in keys))
        low_u = min(int(c.min()) for c in unit_counts(family, rows, wins))
        unit_low = low_u if unit_low < 0 else min(unit_low, low_u)
    return gamma, {b: float(np.mean(v)) for b, v in uncovered.items()}, unit_low


def unit_counts(family: ModelFamily, ledger: pd.DataFrame, windows: Sequence[Window]) -> list[np.ndarray]:
    """How many of the ``ledger`` rows (``windows``: theirs, in row order) held each unit of each sliced dimension
    (:meth:`hasfl.models.family.ModelFamily.dims`)."""
    counts = [np.zeros(size, dtype=np.int64) for size, _ in family.dims(1.0)]
    for p, window in zip(ledger["p_trained"], windows, strict=True):
        for d, (size, kept) in enumerate(family.dims(float(p))):
            span = window.span(size, kept, d)
            for piece in span if isinstance(span, tuple) else (span,):
                counts[d][piece.start:piece.stop] += 1
    return counts


def _check_init(init: Mapping[str, Tensor], shapes: Mapping[str, tuple[int, ...]], where: str, dataset: str) -> None:
    """Raise unless init.pt (``where``) has every parameter of the configured model at its shape."""
    bad = [k for k, s in shapes.items() if k not in init or tuple(init[k].shape) != s]
    if bad:
        got = tuple(init[bad[0]].shape) if bad[0] in init else "missing"
        raise ValueError(f"table4c: {where} does not match the configured model ({len(bad)} parameters differ, e.g. "
                         f"'{bad[0]}': file {got} vs config {shapes[bad[0]]}); was the run trained with another "
                         f"dataset_params.{dataset}.model? Rerun its training job.")


def run_rows(dataset: str, method: str, seed: int, ledger: pd.DataFrame, summary: Mapping[str, Any],
             family: ModelFamily, shapes: Mapping[str, tuple[int, ...]], last_rounds: int, source: str = "run"
             ) -> list[dict[str, Any]]:
    """One run's rows: its ``all`` row, then one per block (:func:`block_of`), of the coordinates trained in its
    last ``last_rounds`` rounds and after t0 (``summary``: run.json, with ``t0``; ``source``: the run folder, for
    the messages)."""
    from hasfl.analysis.coverage import COMPLETED, left_out_reason

    if summary.get("t0") is None:
        raise ValueError(f"table4c: {source}/run.json lacks 't0' (the warm-up round index); the run predates the "
                         "warm-up checkpoint -- rerun its training job")
    t0 = int(summary["t0"])
    last = int(ledger["round"].max())
    done = summary.get("rounds_completed")
    status = left_out_reason(summary) or str(summary.get("status", COMPLETED))
    if status == COMPLETED and done is not None and int(done) != last:
        raise ValueError(f"table4c: {source}/participation.parquet ends at round {last} but run.json says "
                         f"{int(done)} rounds completed; the files are of different runs -- rerun its training job")
    used = min(int(last_rounds), last)
    ledger = ledger.reset_index(drop=True)
    base = {"dataset": dataset, "method": method, "seed": int(seed), "status": status,
            "window": "+".join(sorted(set(ledger["window"]))), "k": int(last_rounds), "rounds_used": used,
            "last_round": last, "t0": t0}
    if set(ledger["window"]) == {MASKED_WINDOW}:
        return [masked_row(base, ledger, family, shapes, used)]
    partitions = partitions_of(str(ledger["window"].iloc[0]))
    if partitions is not None:
        return partition_rows(base, ledger, shapes, partitions, used, t0)
    windows = row_windows(family, ledger, seed)
    is_recent = (ledger["round"] > last - used).to_numpy()
    is_after = (ledger["round"] - 1 > t0).to_numpy()

    def part(mask: np.ndarray) -> tuple[pd.DataFrame, list[Any]]:
        at = np.flatnonzero(mask)
        return ledger.iloc[at], [windows[j] for j in at]

    recent = coverage_union(family, shapes, *part(is_recent))
    after = coverage_union(family, shapes, *part(is_after))
    blocks: dict[str, list[str]] = {ALL_BLOCKS: list(shapes)}
    for k in shapes:
        blocks.setdefault(block_of(k), []).append(k)
    gamma, uncovered, unit_gamma = round_coverage(family, shapes, ledger, windows, blocks)
    gamma_recent = min_coverage(family, shapes, *part(is_recent), blocks)
    units = unit_counts(family, ledger, windows)
    pooled = np.concatenate(units)
    cv = max(float(c.std() / c.mean()) if c.mean() > 0 else math.nan for c in units)
    rows = []
    for block, keys in blocks.items():
        n = sum(recent[k].numel() for k in keys)
        n_recent = sum(int(recent[k].sum()) for k in keys)
        n_after = sum(int(after[k].sum()) for k in keys)
        whole = block == ALL_BLOCKS
        rows.append({**base, "block": block, "coordinates": n, "trained_last_k": n_recent,
                     "frac_last_k": n_recent / n, "trained_after_t0": n_after, "frac_after_t0": n_after / n,
                     "gamma_min": gamma[block], "gamma_min_last_k": gamma_recent[block],
                     "unit_gamma_min": float(unit_gamma) if whole else math.nan,
                     "uncovered_frac_mean": uncovered[block],
                     "unit_count_min": float(pooled.min()) if whole else math.nan,
                     "unit_count_max": float(pooled.max()) if whole else math.nan,
                     "unit_count_cv": cv if whole else math.nan})
    return rows


def partition_rows(base: Mapping[str, Any], ledger: pd.DataFrame, shapes: Mapping[str, tuple[int, ...]],
                   partitions: int, used: int, t0: int) -> list[dict[str, Any]]:
    """A shuffled-partition run's rows (ledger window ``partition/K``, ``window_shift`` a participant's block): its
    ``all`` row and one per block, as :func:`run_rows`. Each participant holds every coordinate of its block, and the
    blocks' sizes per tensor follow from K (:func:`hasfl.models.partition.block_sizes`), so every count is exact
    from the ledger: a round leaves a coordinate untrained iff no participant held its block, and the fewest holders
    of a block's coordinates are the participants dealt the least-dealt block it has coordinates of. Which units a block holds is not a
    question (a block is coordinates, not units): the unit columns are empty."""
    from hasfl.models.partition import block_sizes

    sizes = {k: block_sizes(int(np.prod(s, dtype=np.int64)), partitions) for k, s in shapes.items()}
    blocks: dict[str, list[str]] = {ALL_BLOCKS: list(shapes)}
    for k in shapes:
        blocks.setdefault(block_of(k), []).append(k)
    last = int(ledger["round"].max())
    dealt = {int(r): np.bincount(g["window_shift"].to_numpy(dtype=np.int64), minlength=partitions)
             for r, g in ledger.groupby("round", sort=True)}

    def trained(rounds: list[int], keys: Sequence[str]) -> int:
        held = np.zeros(partitions, dtype=bool)
        for r in rounds:
            held |= dealt[r] > 0
        return int(sum(sizes[k][held].sum() for k in keys))

    recent = [r for r in dealt if r > last - used]
    after = [r for r in dealt if r - 1 > t0]
    rows = []
    nan = math.nan
    for block, keys in blocks.items():
        n = int(sum(sizes[k].sum() for k in keys))
        present = np.zeros(partitions, dtype=bool)
        for k in keys:
            present |= sizes[k] > 0
        low = {r: int(c[present].min()) for r, c in dealt.items()}
        uncovered = [float(sum(sizes[k][c == 0].sum() for k in keys)) / n for c in dealt.values()]
        n_recent, n_after = trained(recent, keys), trained(after, keys)
        rows.append({**base, "block": block, "coordinates": n, "trained_last_k": n_recent, "frac_last_k": n_recent / n,
                     "trained_after_t0": n_after, "frac_after_t0": n_after / n,
                     "gamma_min": min(low.values()), "gamma_min_last_k": min(low[r] for r in recent),
                     "unit_gamma_min": nan, "uncovered_frac_mean": float(np.mean(uncovered)), "unit_count_min": nan,
                     "unit_count_max": nan, "unit_count_cv": nan})
    return rows


def masked_row(base: Mapping[str, Any], ledger: pd.DataFrame, family: ModelFamily,
               shapes: Mapping[str, tuple[int, ...]], used: int) -> dict[str, Any]:
    """The ``all`` row of a FIARSE run, from its ledger's kept counts. Every participant trains the whole model, and a
    round's round-start masks come from one global model, so they are nested by share: the coordinates at least j
    participants held are the j-th largest mask's (:func:`hasfl.models.magnitude.coverage_from_kept`). Per round the
    uncovered coordinates are the ranked ones outside the largest mask (the unranked ones, batch norm and embeddings,
    every participant trains), and the fewest holders of one coordinate are the participants whose mask kept every
    ranked coordinate. Which coordinates a mask held is not in the ledger (masks follow the weights, they cannot be
    replayed), so the unions over rounds (``trained_last_k``, ``trained_after_t0``), the unit counts and the block
    rows are left empty."""
    import torch

    from hasfl.models.magnitude import coverage_from_kept, masked_numel

    with torch.random.fork_rng(devices=[]):
        ranked = masked_numel(family.build(1.0))
    total = sum(int(np.prod(s)) for s in shapes.values())
    gamma, gamma_recent, uncovered = -1, -1, []
    last = int(ledger["round"].max())
    for r, g in ledger.groupby("round", sort=True):
        kept = g["window_shift"].to_numpy(dtype=np.int64)
        if kept.min() < 0 or kept.max() > ranked:
            raise ValueError(f"table4c: a masked row of round {r} kept {int(kept.max())} coordinates; the model ranks "
                             f"{ranked} -- the run is of another model")
        held = coverage_from_kept(kept, ranked)  # held[j]: ranked coordinates held by exactly j participants
        low = int(np.flatnonzero(held)[0])  # the fewest holders of one coordinate (the unranked: every participant)
        gamma = low if gamma < 0 else min(gamma, low)
        if int(r) > last - used:
            gamma_recent = low if gamma_recent < 0 else min(gamma_recent, low)
        uncovered.append(int(held[0]) / total)
    nan = math.nan
    return {**base, "block": ALL_BLOCKS, "coordinates": total, "trained_last_k": nan, "frac_last_k": nan,
            "trained_after_t0": nan, "frac_after_t0": nan, "gamma_min": gamma, "gamma_min_last_k": gamma_recent,
            "unit_gamma_min": nan, "uncovered_frac_mean": float(np.mean(uncovered)), "unit_count_min": nan,
            "unit_count_max": nan, "unit_count_cv": nan}


def evaluate_run(run: RunInputs) -> list[dict[str, Any]]:
    """One run's rows of Table 4c (:func:`run_rows`): its participation.parquet, run.json and init.pt (init.pt only to
    check the run's model is the configured one), param ``last_rounds`` (config ``analysis.table4c_last_rounds``).

    Raises:
        ValueError: ``last_rounds`` is no integer >= 1, or the run lacks a file or holds a bad one (naming it).
    """
    from hasfl.analysis.coverage import load_state

    last_rounds = run.params["last_rounds"]
    if isinstance(last_rounds, bool) or not isinstance(last_rounds, int) or last_rounds < 1:
        # the config's value is checked by its setting (hasfl.analysis.specs.TABLE_SETTINGS); a job's spec again here
        raise ValueError(f"table4c: analysis.table4c_last_rounds must be an integer >= 1, got {last_rounds!r}")
    run.require("table4c", ("participation.parquet", "run.json", "init.pt"), " (participation.parquet is the per-round "
                "ledger of every participant's width and window)")
    key = ("shapes", run.dataset)
    if key not in run.cache:
        from hasfl.models.partition import parameter_shapes

        run.cache[key] = parameter_shapes(run.family())
    shapes = run.cache[key]
    f = run.files
    ledger = read_ledger(f["participation.parquet"])
    init_path = f["init.pt"]
    if not Path(init_path).is_file():
        raise ValueError(f"table4c: input file '{Path(init_path).as_posix()}' does not exist")
    _check_init(load_state(str(init_path)), shapes, Path(init_path).as_posix(), run.dataset)
    return run_rows(run.dataset, run.method, run.seed, ledger, read_json(f["run.json"]), run.family(), shapes,
                    last_rounds, run.where)
