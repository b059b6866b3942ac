# Reruns decided by identity (hasfl.dag.outputs.audit): a finished data-stage, run or run-evaluation folder that is not
# what the preset would make gets a rerun token as one more input; the token is made here and is a
# target of rules all / data / runs (Snakemake makes a missing input only for a job that must run
# anyway, so the token must be wanted in its own right), so Snakemake reruns the job ("input files
# updated by another job") and everything downstream of it.

RERUN_DIR = SESSION.rerun_dir


rule identity_rerun:
    """A rerun token: why a finished output is rerun (its job's extra input)."""
    output:
        f"{RERUN_DIR}/{{folder}}.{{stamp}}.json",
    log:
        f"{RESULTS}/logs/identity/{{folder}}.{{stamp}}.log",
    wildcard_constraints:
        folder=r"(data|runs|evals)/.+|analysis",
        stamp=r"\d+",
    priority: 100
    localrule: True
    params:
        why=lambda wc: SESSION.rerun_why(wc.folder),
    script:
        "../scripts/rerun_token.py"
