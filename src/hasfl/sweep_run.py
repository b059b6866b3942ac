"""``hasfl sweep KEY=V1,V2,... --configfile ...``: one command over a config key's values.

Each value is a point: a variant of the preset (the config files given, then ``KEY=value`` and a name of its own,
``<name>-<last key part><value>``), written as an overlay file ``sweeps/<name>-<last key part>/<point>.yaml`` and
built into its own results folder by the preset's own DAG (``snakemake all --configfile <files> <overlay>``), one
point after the other. Every point shares the run store: a run whose identity the swept key does not touch is
trained once (by the first point that needs it, or earlier) and linked by the others, and a rerun of the same
command after a kill resumes where it stopped, redoing nothing finished (each point's DAG finds its finished outputs
and store entries). Every point's config is loaded and validated before any job, so a bad value is named first. The
points are then compared (:mod:`hasfl.analysis.sweep`). Each point is its own Snakemake DAG (not one DAG over all).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hasfl.config import ConfigError, load_config, parse_override

__all__ = ["Point", "SweepError", "plan", "run"]

#: The characters a point's name keeps (a results folder's name); every other one becomes ``_``.
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class Point:
    """One point: its folder's ``name``, the swept ``value`` as given, its ``overlay`` file and what it holds
    (``data``), and the point's validated ``config``."""

    name: str
    value: str
    overlay: Path
    data: Mapping[str, Any]
    config: Mapping[str, Any]


class SweepError(ConfigError):
    """A point's build failed (the message names it)."""


def _values(spec: str) -> tuple[str, list[str]]:
    key, sep, raw = spec.partition("=")
    values = [v.strip() for v in raw.split(",")] if sep else []
    if not key or not values or any(not v for v in values) or len(values) < 2:
        raise ConfigError(f"hasfl sweep {spec!r}: expected KEY=V1,V2[,...] (two values or more), e.g. "
                          "method_params.fedprox.mu=0.01,0.1,1.0")
    return key, values


def plan(spec: str, configfiles: Sequence[str | Path], root: Path) -> list[Point]:
    """The points of sweep ``spec`` over the preset of ``configfiles`` (relative to ``root``), each config loaded and
    validated (a bad value raises :class:`hasfl.config.ConfigError` naming it, before any file is written)."""
    key, values = _values(spec)
    files = [Path(f) if Path(f).is_absolute() else root / f for f in configfiles]
    base = load_config(files, root / "config.yaml")
    tag = f"{base['name']}-{key.split('.')[-1]}"
    points = []
    for value in values:
        name = _SAFE.sub("_", f"{tag}{value}")
        overlay = {**parse_override(f"{key}={value}"), "name": name}
        try:
            config = load_config(files, root / "config.yaml", [f"{key}={value}", f"name={name}"])
        except ConfigError as exc:
            raise ConfigError(f"hasfl sweep: the point {key}={value}: {exc}") from None
        points.append(Point(name, value, root / "sweeps" / tag / f"{name}.yaml", overlay, config))
    names = [p.name for p in points]
    if len(set(names)) != len(names):
        raise ConfigError(f"hasfl sweep {spec!r}: two values give one folder name ({', '.join(names)})")
    return points


def run(spec: str, configfiles: Sequence[str | Path], root: Path, cores: int, extra: Sequence[str] = (),
        dry_run: bool = False) -> list[Point]:
    """Build every point of ``spec`` (:func:`plan`) in turn with the preset's DAG in ``root``; stops at the first
    point whose build fails, naming it (the points before it are finished and stay)."""
    import yaml

    from hasfl.io import atomic_path

    points = plan(spec, configfiles, root)
    for p in points:
        p.overlay.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(p.overlay) as tmp:
            tmp.write_text(f"# written by hasfl sweep {spec}\n" + yaml.safe_dump(dict(p.data), sort_keys=False))
    for i, p in enumerate(points, 1):
        cmd = [sys.executable, "-m", "snakemake", "--cores", str(int(cores)), "all", *(["-n"] if dry_run else []),
               *extra, "--configfile", *map(str, configfiles), str(p.overlay.relative_to(root))]
        print(f"hasfl sweep: point {i} of {len(points)}, {p.name} ({spec.partition('=')[0]}={p.value}): "
              + " ".join(cmd[1:]), flush=True)
        done = subprocess.run(cmd, cwd=root, check=False)
        if done.returncode != 0:
            raise SweepError(f"hasfl sweep: the build of point {p.name} failed (exit {done.returncode}); the "
                             f"points before it are finished; run the same command again to resume")
    return points
