"""Snakemake glue for rule fetch_fashion_mnist (hasfl.data.images.fetch_fashion_mnist)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.data.images:fetch_fashion_mnist", {"data_dir": sm.config["data_dir"]}, sm.log[0])
