"""Snakemake glue for rule fetch_cifar10 (hasfl.data.images.fetch_cifar10)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.data.images:fetch_cifar10", {"data_dir": sm.config["data_dir"]}, sm.log[0])
