"""Snakemake glue for rule share_data_stage (hasfl.identity.share_folder): link a finished data stage of the same
identity from another results folder into this one."""

from pathlib import Path

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.identity:share_folder", {"source": sm.params.source, "dest": str(Path(sm.output[0]).parent)}, sm.log[0])
