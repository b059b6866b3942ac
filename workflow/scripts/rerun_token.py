"""Snakemake glue for rule identity_rerun: the rerun token of one stale output (its job's extra
input) and a log line saying why it is rerun (hasfl.identity.audit)."""

from pathlib import Path

from hasfl.io import write_json

sm = snakemake  # noqa: F821 (injected by Snakemake)
Path(sm.log[0]).parent.mkdir(parents=True, exist_ok=True)
Path(sm.log[0]).write_text(f"rerun {sm.wildcards.folder}: {sm.params.why}\n")
write_json(sm.output[0], {"folder": sm.wildcards.folder, "why": sm.params.why, "stamp": int(sm.wildcards.stamp)})
