"""Snakemake glue for rule fetch_emnist (hasfl.data.images.fetch_emnist)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.data.images:fetch_emnist", {"data_dir": sm.config["data_dir"]}, sm.log[0])
