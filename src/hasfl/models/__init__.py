"""Models with nested width slicing (paper Algorithm 2, Eq. 2) and their costs (Table 1).

``build_family(arch, in_shape=..., num_classes=..., **arch_kwargs)`` returns a
:class:`ModelFamily`; ``family.build(1.0)`` is the global model,
``family.build(p)`` a physically width-``p`` sub-model, and
``family.slice_rules(p)`` maps every sub-model tensor to a basic slice of the
global tensor (see :mod:`hasfl.models.slicing`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hasfl.models.cnn import CNNFamily
from hasfl.models.cost import Cost, table1
from hasfl.models.family import ModelFamily
from hasfl.models.lstm import LSTMFamily
from hasfl.models.slicing import SliceRule, coverage_mask, extract, region, width

__all__ = [
    "ARCHS",
    "CNNFamily",
    "Cost",
    "LSTMFamily",
    "ModelFamily",
    "SliceRule",
    "build_family",
    "coverage_mask",
    "extract",
    "family_from_config",
    "region",
    "table1",
    "width",
]

ARCHS: dict[str, type[ModelFamily]] = {"cnn": CNNFamily, "lstm": LSTMFamily}


def build_family(arch: str, *, in_shape: tuple[int, ...], num_classes: int, **arch_kwargs: Any) -> ModelFamily:
    """The model family ``arch`` ("cnn" or "lstm") for data of ``in_shape`` / ``num_classes``.

    Raises:
        ValueError: naming the unknown ``arch`` or the unknown keyword argument(s).
    """
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; expected one of {sorted(ARCHS)}")
    cls = ARCHS[arch]
    unknown = sorted(set(arch_kwargs) - cls.ARCH_KWARGS)
    if unknown:
        raise ValueError(
            f"unknown keyword argument(s) {', '.join(map(repr, unknown))} for arch {arch!r}; "
            f"allowed: {sorted(cls.ARCH_KWARGS)}"
        )
    return cls(in_shape=tuple(in_shape), num_classes=num_classes, **arch_kwargs)


def family_from_config(model_cfg: Mapping[str, Any], in_shape: Sequence[int], num_classes: int) -> ModelFamily:
    """The model family of a config block ``dataset_params.<d>.model`` (``arch`` plus its
    keyword arguments) for data of ``in_shape`` / ``num_classes`` -- the one way the engine,
    the analysis and the tests build a dataset's model."""
    kwargs = {k: v for k, v in model_cfg.items() if k != "arch"}
    return build_family(model_cfg["arch"], in_shape=tuple(int(s) for s in in_shape), num_classes=int(num_classes),
                        **kwargs)
