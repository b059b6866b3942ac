"""The DAG's front door: what every output of a preset must be, where its bytes are kept, and what the Snakefile does
around its rules. Nothing of the library imports this package (tests/test_layout.py).

* :mod:`hasfl.dag.session` -- one DAG build (``SESSION = Session(workflow, config)`` in the Snakefile): validation,
  verification, the identity check and its rerun tokens, the store count, the pre-flight, the GPU plan; the results
  lock, adoption, MPS and the warm worker around the jobs.
* :mod:`hasfl.dag.identity` -- the code digests and the config slices outputs are made of.
* :mod:`hasfl.dag.outputs` -- every output's identity (data stage, run: :class:`hasfl.dag.outputs.RunRecord`, run
  evaluation) and the audit of every present one.
* :mod:`hasfl.dag.status` -- the one walk over a preset's outputs (current, rerun, foreign, in the store, missing).
* :mod:`hasfl.dag.jobs` -- the data-stage, train and evaluate job bodies, each placing its entry in the store.
* :mod:`hasfl.dag.store` -- the run store's bytes: entries kept once per identity key under ``<results_dir>/.store/``,
  owned by no results folder (locks, links, repair, adoption, gc); every ``results/<name>/`` folder links into it.
* :mod:`hasfl.dag.preflight` -- what a run will cost on this machine, printed before any job.
* :mod:`hasfl.dag.gpu` -- K training jobs per local GPU (slots, MPS).
* :mod:`hasfl.dag.worker` -- the warm worker that forks the jobs from one process with torch imported.
* :mod:`hasfl.dag.handover` -- the job's side of the warm worker: a job hands its function over, or runs it itself.

Torch-free at import (the Snakefile imports this package).
"""
