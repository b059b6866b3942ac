"""The one base class of errors whose message says everything a user needs.

A :class:`HasflError` names the key, file or argument at fault and what was expected; the
command line, the workflow's jobs (:func:`hasfl.dag.worker.run_logged`) and the Snakefile print its
message alone, without a traceback. Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

__all__ = ["HasflError"]


class HasflError(Exception):
    """An error in the input (config, files, arguments), explained by its message."""
