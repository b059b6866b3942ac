# Reruns decided by identity (hasfl.identity.audit): a finished data-stage or run folder that is not
# what the preset would make gets a rerun token as one more input; the token is made here and is a
# target of rules all / data / runs (Snakemake makes a missing input only for a job that must run
# anyway, so the token must be wanted in its own right), so Snakemake reruns the job ("input files
# updated by another job") and everything downstream of it.

import time

RERUN_DIR = f"{RESULTS}/.hasfl/rerun"


def schedule_reruns(stale):
    """Give each stale folder (relative to RESULTS -> why) a token that does not exist yet (one per
    DAG build: a dry run writes nothing, the next build makes its own)."""
    stamp = time.time_ns()
    for folder, why in stale.items():
        RERUNS[folder] = (f"{RERUN_DIR}/{folder}.{stamp}.json", why)


def rerun_tokens(*kinds):
    """The rerun tokens of this DAG build: of the folders of ``kinds`` (``data``, ``runs``, ``analysis``),
    or all."""
    return [
        token
        for folder, (token, _) in sorted(RERUNS.items())
        if not kinds or folder.split("/")[0] in kinds
    ]


rule identity_rerun:
    """A rerun token: why a finished output is rerun (its job's extra input)."""
    output:
        f"{RERUN_DIR}/{{folder}}.{{stamp}}.json",
    log:
        f"{RESULTS}/logs/identity/{{folder}}.{{stamp}}.log",
    wildcard_constraints:
        folder=r"(data|runs)/.+|analysis",
        stamp=r"\d+",
    priority: 100
    localrule: True
    params:
        why=lambda wc: RERUNS.get(wc.folder, (None, "unknown"))[1],
    script:
        "../scripts/rerun_token.py"
