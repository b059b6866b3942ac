"""Paper-evidence stage: tables, figures, published comparison, findings and the report.

Reads only the files of the data stage (``data/<dataset>/seed<seed>/``) and the
training stage (``runs/<dataset>/<method>/seed<seed>/``), never training internals.

Modules:

* :mod:`~hasfl.analysis.specs`     -- what each output covers; threshold defaults (light, used by the DAG).
* :mod:`~hasfl.analysis.runs`      -- reading run files; per-seed metrics.
* :mod:`~hasfl.analysis.floors`    -- majority-class / chance floors and the runs that never beat them.
* :mod:`~hasfl.analysis.stats`     -- mean/std, correlations, partial correlation, R^2 decomposition, paired CI.
* :mod:`~hasfl.analysis.tables`    -- Tables 1-4, 6, 7 and the matched-budget comparison.
* :mod:`~hasfl.analysis.confound`  -- Table 5 and the fedavg positive control.
* :mod:`~hasfl.analysis.diagnose`  -- the capacity-grouped check of an estimate (``hasfl diagnose``).
* :mod:`~hasfl.analysis.estimators` -- Table 8 (estimators E0-E3 through diagnose) and the matched budget
  of the estimator methods.
* :mod:`~hasfl.analysis.coverage`  -- Proposition 3 on init.pt / final.pt.
* :mod:`~hasfl.analysis.figures`   -- Figures 2-9.
* :mod:`~hasfl.analysis.published` -- published.yaml, comparability, comparison.parquet.
* :mod:`~hasfl.analysis.findings`  -- findings.json (F1-F6, and F7 / F8 on the estimators).
* :mod:`~hasfl.analysis.report`    -- Markdown renderings and report.md.
* :mod:`~hasfl.analysis.manifest`  -- analysis.manifest.json: the outputs' sha256 and the runs they read.
* :mod:`~hasfl.analysis.jobs`      -- one function per Snakemake rule.
"""

from hasfl.analysis.specs import DEFAULT_THRESHOLDS, resolve_thresholds

__all__ = ["DEFAULT_THRESHOLDS", "resolve_thresholds"]
