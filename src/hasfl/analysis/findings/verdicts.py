"""A verdict's vocabulary and its arithmetic (:mod:`hasfl.analysis.findings.kernel` re-exports it): the four verdicts,
how units combine into a finding's verdict (:func:`combine`), a directional and an equivalence verdict from an
interval (:func:`directional`, :func:`equivalence`), and the number helpers every finding formats with."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from hasfl.analysis.markdown import num as markdown_num

__all__ = ["CONTRADICTED", "INCONCLUSIVE", "MIXED", "NOT_RUN", "SPLIT", "SUPPORTED", "clean", "combine", "directional",
           "equivalence", "fmt", "num", "summarize"]

SUPPORTED, CONTRADICTED, INCONCLUSIVE, MIXED = "supported", "contradicted", "inconclusive", "mixed"
#: A finding (or one of its estimands) none of whose in-scope units ran: no test, so no verdict.
NOT_RUN = "not run"
#: A finding whose estimands (full model, sub-models) have different verdicts: no one word is true of it, so each
#: estimand's verdict is what a reader sees (:func:`summarize`).
SPLIT = "split by estimand"


def clean(v: Any) -> Any:
    """JSON-safe: NaN -> None, numpy scalars -> Python, containers recursively."""
    if isinstance(v, Mapping):
        return {str(k): clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean(x) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def num(x: Any) -> float:
    """``float(x)``, NaN when it is not a number."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def fmt(x: float | None) -> str:
    """A verdict's number as every page writes it (:func:`hasfl.analysis.markdown.num`)."""
    return markdown_num(x)


def combine(verdicts: Sequence[str], conjunction: bool = False) -> str:
    """mixed if some units support and others contradict (one dataset does not override another);
    else contradicted if any is, supported if all are (and there is one), inconclusive otherwise.
    ``conjunction``: the units are parts of one claim that needs all of them (a composite test, or
    Proposition 3 on every run): one contradiction contradicts it, there is no mixed."""
    if not verdicts:
        return INCONCLUSIVE
    if not conjunction and (MIXED in verdicts or (SUPPORTED in verdicts and CONTRADICTED in verdicts)):
        return MIXED
    if CONTRADICTED in verdicts:
        return CONTRADICTED
    return SUPPORTED if all(v == SUPPORTED for v in verdicts) else INCONCLUSIVE


def summarize(verdicts: Sequence[str]) -> str:
    """A finding's word from its estimands' verdicts: ``not run`` when none ran, their common verdict when they
    agree, :data:`SPLIT` otherwise (the page then shows each estimand's, never one word for all)."""
    ran = [v for v in verdicts if v != NOT_RUN]
    if not ran:
        return NOT_RUN
    return ran[0] if len(set(ran)) == 1 else SPLIT


def directional(low: float, high: float, margin: float, above: bool) -> tuple[str, str]:
    """Verdict of "theta > margin" (``above``) or "theta < margin" from the one-sided bounds [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return INCONCLUSIVE, "interval undefined"
    if above:
        if low > margin:
            return SUPPORTED, f"lower bound {fmt(low)} > margin {fmt(margin)}"
        if high < margin:
            return CONTRADICTED, f"upper bound {fmt(high)} < margin {fmt(margin)}"
        return INCONCLUSIVE, f"interval [{fmt(low)}, {fmt(high)}] contains the margin {fmt(margin)}"
    if high < margin:
        return SUPPORTED, f"upper bound {fmt(high)} < margin {fmt(margin)}"
    if low > margin:
        return CONTRADICTED, f"lower bound {fmt(low)} > margin {fmt(margin)}"
    return INCONCLUSIVE, f"interval [{fmt(low)}, {fmt(high)}] contains the margin {fmt(margin)}"


def equivalence(eq_low: float, eq_high: float, two_low: float, two_high: float, margin: float,
                null: float = 0.0) -> tuple[str, str]:
    """TOST with precedence to a significant difference (see the module docstring)."""
    if not all(math.isfinite(v) for v in (eq_low, eq_high, two_low, two_high)):
        return INCONCLUSIVE, "interval undefined"
    if two_low > null or two_high < null:
        return CONTRADICTED, f"the two-sided interval [{fmt(two_low)}, {fmt(two_high)}] excludes {fmt(null)}"
    if -margin < eq_low and eq_high < margin:
        return SUPPORTED, f"the TOST interval [{fmt(eq_low)}, {fmt(eq_high)}] lies inside +-{fmt(margin)}"
    return INCONCLUSIVE, (f"the TOST interval [{fmt(eq_low)}, {fmt(eq_high)}] is not inside +-{fmt(margin)} "
                          f"and the two-sided interval covers {fmt(null)}")
