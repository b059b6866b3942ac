"""Snakemake glue for rule fetch_shakespeare (hasfl.data.shakespeare.fetch_job)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.data.shakespeare:fetch_job",
     {"dest": sm.output[0], "version": sm.wildcards.version, "sha256": sm.params.sha256}, sm.log[0])
