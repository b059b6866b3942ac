"""The random-budget control (paper Section 4.4): random widths whose average matches the finished run
of the method named by the registry entry's ``budget_of`` (hasfl, hasfl_probe or hasfl_reported)."""

from __future__ import annotations

from hasfl.fl.methods import Method, MethodContext, local_sgd
from hasfl.fl.policies import RandomBudgetPolicy

__all__ = ["random_budget"]


def random_budget(ctx: MethodContext) -> Method:
    """Random-budget control (Section 4.4): random widths at the hasfl run's average budget."""
    if ctx.hasfl_avg_p is None:
        raise ValueError("random_budget needs the average p of the hasfl run of the same dataset and seed")
    policy = RandomBudgetPolicy(ctx.pmax, ctx.schedule, ctx.hasfl_avg_p, ctx.rng)
    tolerance = float(ctx.params["tolerance"])
    if abs(policy.achieved - ctx.hasfl_avg_p) > tolerance and not ctx.hasfl_diverged:
        raise ValueError(
            f"random_budget cannot reach the hasfl run's average p {ctx.hasfl_avg_p:.4f} with this schedule "
            f"(closest: {policy.achieved:.4f}); method_params.random_budget.tolerance is {tolerance}")
    return Method(policy, local_sgd(ctx))
