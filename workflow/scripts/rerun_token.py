"""Snakemake glue for rule identity_rerun (hasfl.dag.identity.write_rerun_token): the rerun token of one
stale output, its job's extra input; the log says why the output is rerun (hasfl.dag.outputs.audit)."""

from hasfl.dag.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.dag.identity:write_rerun_token",
     {"path": sm.output[0], "folder": sm.wildcards.folder, "why": sm.params.why, "stamp": int(sm.wildcards.stamp)},
     sm.log[0])
