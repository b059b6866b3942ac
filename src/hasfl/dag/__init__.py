"""The DAG's front door: what every output of a preset must be, and where its bytes are kept.

* :mod:`hasfl.dag.store` -- the run store: finished data stages and runs kept once per identity key under
  ``<results_dir>/.store/``, owned by no results folder; every ``results/<name>/`` folder holds links into it.

Torch-free at import (the Snakefile imports this package).
"""
