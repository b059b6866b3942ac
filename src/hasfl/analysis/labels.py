"""What a reader sees for a method or dataset name: its label and plot style, from the registry
(:data:`hasfl.registry.METHODS`, :data:`hasfl.registry.DATASETS`). A name the registry does not know
is shown as itself (black circles in a figure)."""

from __future__ import annotations

from hasfl.registry import DATASETS, METHODS

__all__ = ["dataset_label", "method_color", "method_label", "method_marker"]


def method_label(method: str) -> str:
    """The method's label (``METHODS[method].label``), else its name."""
    info = METHODS.get(method)
    return info.label if info is not None else method


def method_color(method: str) -> str:
    """The method's plot colour, black when its entry names none."""
    info = METHODS.get(method)
    return info.color if info is not None and info.color else "k"


def method_marker(method: str) -> str:
    """The method's plot marker, a circle when its entry names none."""
    info = METHODS.get(method)
    return info.marker if info is not None and info.marker else "o"


def dataset_label(dataset: str) -> str:
    """The dataset's label (``DATASETS[dataset].label``), else its name."""
    info = DATASETS.get(dataset)
    return info.label if info is not None and info.label else dataset
