"""Per-run evaluations: one module per table whose rows are a function of one run alone (its final model under each
batch-norm mode, its sub-models' accuracies, its stale coordinates, its coverage replay), and the evaluate job around
them (:mod:`~hasfl.analysis.per_run.base`, :mod:`~hasfl.analysis.per_run.files`).

What these modules import is an evaluation's code (:func:`hasfl.dag.identity.evaluation_code_digest`, part of its
store key): they import the models, the data loaders, the coverage and stale-coordinate arithmetic
(:mod:`hasfl.analysis.coverage`, :mod:`hasfl.analysis.stale`) and each other, never a table module, a finding, the
report or the artifact entries (tests/test_evaluations.py). A table's module gathers the rows and adds what is over
runs (tests/test_layout.py checks the direction).
"""
