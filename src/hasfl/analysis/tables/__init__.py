"""One module per table of the analysis (:data:`hasfl.analysis.artifacts.TABLES`): its compute
function (``compute(inputs, outputs, params)``, the DAG's entry, and ``job(...)`` with named arguments),
its reader-facing ``display`` and, where report.md gives it a section of its own, its ``summary``.
The shared kernel is :mod:`hasfl.analysis.tables.base`."""
