"""F6 [Section 4.7, this project's extension]: the positive control.

Pooled r(H~, TV) of the fedavg runs > ``f6_min_r_h_tv``: with equal widths the estimate
tracks the data (asserted, not measured, in the paper).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hasfl.analysis.findings.f1_confound import POOLING, control_units
from hasfl.analysis.findings.kernel import ALL, T5, FindingSpec, Settings, finding

F6 = "F6"


def evaluate(t: Mapping[str, pd.DataFrame], datasets: Sequence[str], st: Settings) -> list[dict[str, Any]]:
    """F6 [Section 4.7, this project's extension]: the positive control."""
    t5 = t[T5]
    units = list(control_units(t5, datasets, st).values())
    return [finding(
        F6, claim="Positive control: with equal widths (fedavg) the estimate correlates positively with TV",
        source="Section 4.7 (asserted, not measured, in the paper: this project's extension)", scope=ALL,
        statistic="r(H~, TV) over the clients of each fedavg run, pooled over seeds (Fisher z; " + POOLING + ")",
        test="one-sided z test: supported if the lower bound > margin, contradicted if the upper bound < margin",
        margin_key="f6_min_r_h_tv", st=st, units=units, files=[f"tables/{T5}.parquet"],
        mde_meaning="true pooled r at which the test returns supported with the configured power",
        not_run="no completed fedavg run", extension=True)]


SPEC = FindingSpec(ids=(F6,), tables=(T5,), methods={F6: ("fedavg",)}, margins=("f6_min_r_h_tv",),
                   evaluate=evaluate)
