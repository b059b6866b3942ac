"""``hasfl bench``: where the time of a federation goes, measured side by side in one process.

Sections, each a module, each a number the project's performance targets use:

* ``client`` (:mod:`.client`) -- the engine's client update against a bare PyTorch loop.
* ``width`` (:mod:`.width`) -- a local step at p = 0.25 / 0.5 / 0.75 relative to p = 1.
* ``server`` (:mod:`.server`) -- the server's share of a round (engine work outside local SGD).
* ``paper-scale`` (:mod:`.paper_scale`) -- seconds per round and job-hours of the paper preset
  on this device, with the method step factors, the evaluation's arithmetic floor and the
  device's reference matmul rate.
* ``quick-preset`` (:mod:`.quick_preset`) -- wall time of a finished quick-preset run and its
  share outside the engine, from the run's Snakemake log.

:mod:`.harness` holds the budget, timing and machine facts; :mod:`.workload` the synthetic data,
the timed client and the instrumented federations (timed through the engine's
:class:`~hasfl.fl.runtime.PhaseClock` hook, nothing patched); :mod:`.report` the targets summary
and the generated Markdown page. Experiments that were tried and not adopted live outside the
package, in ``scripts/experiments/``.
"""

from __future__ import annotations

from .harness import FULL, QUICK, Budget
from .report import render_markdown, summarize_targets, write_doc
from .run import SECTIONS, run_bench

__all__ = ["FULL", "QUICK", "SECTIONS", "Budget", "render_markdown", "run_bench", "summarize_targets", "write_doc"]
