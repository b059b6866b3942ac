"""Paper-evidence stage: tables, figures, published comparison, findings and the report.

Reads only the files of the data stage (``data/<dataset>/seed<seed>/``) and the
training stage (``runs/<dataset>/<method>/seed<seed>/``), never training internals.

Modules:

* :mod:`~hasfl.analysis.artifacts` -- the registry: every table and figure declared once (light, used by the DAG).
* :mod:`~hasfl.analysis.tables`    -- one module per table (compute, display, its report section).
* :mod:`~hasfl.analysis.figures`   -- one module per figure (Figures 2-9) on a shared style.
* :mod:`~hasfl.analysis.findings`  -- findings.json: the verdict kernel, one module per finding family.
* :mod:`~hasfl.analysis.report`    -- report.md, assembled from the registry.
* :mod:`~hasfl.analysis.jobs`      -- the rules' entry points (run_artifact, findings, report).
* :mod:`~hasfl.analysis.specs`     -- estimator specs, floor tolerance, margins and threshold defaults (light).
* :mod:`~hasfl.analysis.markdown`, :mod:`~hasfl.analysis.inputs`, :mod:`~hasfl.analysis.labels` -- Markdown
  primitives, what the jobs read from data stage and runs, labels and plot styles from the registry.
* :mod:`~hasfl.analysis.runs`      -- reading run files; per-seed metrics.
* :mod:`~hasfl.analysis.floors`    -- majority-class / chance floors and the runs that never beat them.
* :mod:`~hasfl.analysis.stats`     -- mean/std, correlations, partial correlation, R^2 decomposition, paired CI.
* :mod:`~hasfl.analysis.confound`  -- Table 5's correlations and the fedavg positive control.
* :mod:`~hasfl.analysis.diagnose`  -- the capacity-grouped check of an estimate (``hasfl diagnose``).
* :mod:`~hasfl.analysis.estimators` -- Table 8 (estimators E0-E3 through diagnose) and the matched budget
  of the estimator methods.
* :mod:`~hasfl.analysis.coverage`, :mod:`~hasfl.analysis.stale` -- Proposition 3 and Table 4b on saved states.
* :mod:`~hasfl.analysis.bn_sensitivity` -- every run's final model under each batch-norm mode.
* :mod:`~hasfl.analysis.per_run` -- the per-run evaluations (one run each, the evaluate job; the code of
  their store keys: what they import and nothing else).
* :mod:`~hasfl.analysis.published` -- published.yaml, comparability, comparison.parquet.
* :mod:`~hasfl.analysis.manifest`  -- analysis.manifest.json: the outputs' sha256 and the runs they read.
* :mod:`~hasfl.analysis.results_page` -- docs/results/<preset>.md from a finished results folder.
"""
