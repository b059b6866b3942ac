"""What a reader sees for a method or dataset name: its label and plot style, from the registry
(:data:`hasfl.registry.METHODS`, :data:`hasfl.registry.DATASETS`). A name the registry does not know
is shown as itself (black circles in a figure); a registry method without a style gets one of a fixed palette."""

from __future__ import annotations

from hasfl.registry import DATASETS, METHODS

__all__ = ["dataset_label", "method_color", "method_label", "method_marker"]


def method_label(method: str) -> str:
    """The method's label (``METHODS[method].label``), else its name."""
    info = METHODS.get(method)
    return info.label if info is not None else method


#: Colours and markers of registry methods whose entry names none (matplotlib's tab20b, in registry order), so a
#: figure that draws every method tells them apart. Kept here, not in the registry: a registry edit re-keys every
#: run evaluation (the evaluation code imports the registry), a style is no part of one.
_FALLBACK_COLORS = ("#393b79", "#8c6d31", "#843c39", "#7b4173", "#637939", "#5254a3", "#bd9e39", "#ad494a")
_FALLBACK_MARKERS = ("P", "X", "<", ">", "8", "H", "d", "^")


def _fallback(method: str) -> int | None:
    unstyled = [m for m, info in METHODS.items() if not info.color]
    return unstyled.index(method) if method in unstyled else None


def method_color(method: str) -> str:
    """The method's plot colour; a registry method without one gets its own from a fixed palette; black for a name
    the registry does not know."""
    info = METHODS.get(method)
    if info is not None and info.color:
        return info.color
    i = _fallback(method)
    return "k" if i is None else _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)]


def method_marker(method: str) -> str:
    """The method's plot marker; a registry method without one gets its own; a circle for an unknown name."""
    info = METHODS.get(method)
    if info is not None and info.marker:
        return info.marker
    i = _fallback(method)
    return "o" if i is None else _FALLBACK_MARKERS[i % len(_FALLBACK_MARKERS)]


def dataset_label(dataset: str) -> str:
    """The dataset's label (``DATASETS[dataset].label``), else its name."""
    info = DATASETS.get(dataset)
    return info.label if info is not None and info.label else dataset
