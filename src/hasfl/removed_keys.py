"""Config keys that were removed, each with what replaced it, so that a config still holding one gets that answer
instead of "unknown key": top-level keys (:mod:`hasfl.config`) and keys of the ``analysis`` block
(:mod:`hasfl.analysis.specs`). A leaf module (imports nothing) that both read.
"""

from __future__ import annotations

#: Top-level keys.
TOP_LEVEL = {"share_runs": "finished data stages and runs are kept once per identity in the run store "
                           "(<results_dir>/.store, hasfl.dag.store) and every folder links them; there is "
                           "nothing to turn off: delete the key",
             **{k: f"it moved into the execution block (how jobs run, never what they compute): write "
                   f"'execution: {{{k}: ...}}' instead (on the command line: --config 'execution={{{k}: ...}}')"
                for k in ("gpu", "checkpoint_every", "warm_worker", "max_cpu_wall_hours")}}

#: Keys of the ``analysis`` block.
ANALYSIS = {
    "rising_min_gain_pct": "the 'still rising' gate was removed: a final-accuracy comparison is decided at "
                           "the rung's fixed horizon and the trend of the gap is reported beside it as a caveat "
                           "(docs/preregistration.md); delete the key",
    "f9_learned_loss_fraction": "F9's training-loss rule was removed: a run failed to train when its accuracy under "
                                "its method's declared batch-norm rule never rose above the majority-class floor, the "
                                "same rule for every method (the loss rule marked runs that learned under their "
                                "declared rule as failed; docs/preregistration.md, amendments); delete the key",
}
