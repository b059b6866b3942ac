"""Whose claim a verdict is: the authors' claims this project tests, each on the one estimand it is about.

A verdict is attributed to a paper's authors only on the estimand their claim is about: the model whose accuracy
their own code reports (docs/decisions.md "Whose claim a verdict is", which quotes the evaluation each entry cites).
Every other estimand of the same finding is this project's extension. :func:`attribution` is the one way a finding
names authors (:func:`hasfl.analysis.findings.kernel.estimand_entry`): an attribution asked for on an estimand this
registry does not record for those authors is refused, so "(Alam et al.'s claim): contradicted" cannot be printed from
a sub-model unit while FedRolex's claim is about the full model. :data:`ESTIMANDS` (which estimands decide a finding)
and :data:`AUTHORS` are rule values of the pre-registration record (docs/preregistration.md): changing either needs an
amendment entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["AUTHORS", "AUTHOR_CLAIMS", "ESTIMANDS", "AttributionError", "AuthorClaim", "attribution"]


class AttributionError(ValueError):
    """A verdict attributed to authors on an estimand their claim is not about."""


@dataclass(frozen=True)
class AuthorClaim:
    """One claim of other authors that a finding tests: on which estimand, and where their code shows it."""

    authors: str
    estimand: str
    evidence: str


#: The estimands of the findings with more than one (key, label): each is its own verdict. A finding not here has one,
#: its statistic. A rule value of the pre-registration record (which units decide each finding).
ESTIMANDS = {
    "F9b": (("full-model", "full model"), ("sub-model", "sub-models")),
    "F9c": (("full-model", "full model"), ("sub-model", "sub-models")),
    "F9d": (("full-model", "full model"), ("sub-model", "sub-models")),
    "F9e": (("full-model", "full model"), ("sub-model", "sub-models")),
    "F9f": (("full-model", "full model"), ("sub-model", "sub-models")),
    "F9g": (("full-model", "full model"), ("sub-model", "sub-models")),
}

#: (finding id, estimand key) -> (authors, where their code shows the estimand). Only the comparisons the authors
#: themselves ran are here: at Uniform's budget (F9b, F9d, F9e) nobody but this project compares, so those are
#: extensions on both estimands. A rule value of the pre-registration record.
AUTHORS = {
    ("F9c", "full-model"): (
        "Alam et al. 2022 (FedRolex)",
        "AIoT-MLSys-Lab/FedRolex main_resnet.py:153-157 (test_model = server.global_model), :206-216 (Global: the "
        "full model on the whole test set)"),
    ("F9f", "full-model"): (
        "FedEcover (ICDE 2025)",
        "junesnow86/FedEcover main.py:529-535 (evaluate_acc(model=server.global_model, ...)), :551-555 ('Global "
        "Test Acc', the only test accuracy its logs report)"),
    ("F9g", "sub-model"): (
        "Wu et al. 2024 (FIARSE)",
        "HarliWu/FIARSE fiarse/server.py:103-107, 133-136 (each size's sub-model: the global model masked at that "
        "size, tested); README.md:54 ('the average test accuracy of the global model of four different sizes')"),
}
#: :data:`AUTHORS` as claims.
AUTHOR_CLAIMS: Mapping[tuple[str, str], AuthorClaim] = {
    key: AuthorClaim(who, key[1], evidence) for key, (who, evidence) in AUTHORS.items()}


def attribution(fid: str, estimand: str, asked: str | None = None) -> str | None:
    """Whose claim estimand ``estimand`` of finding ``fid`` is: the authors :data:`AUTHOR_CLAIMS` records, else None
    (this project's extension, or the paper's own claim). ``asked``: the authors a finding names for it; refused
    (:class:`AttributionError`) unless the registry records exactly them for this estimand."""
    claim = AUTHOR_CLAIMS.get((fid, estimand))
    if asked is not None and (claim is None or claim.authors != asked):
        where = [e for (f, e), c in AUTHOR_CLAIMS.items() if f == fid and c.authors == asked]
        raise AttributionError(
            f"finding {fid}: a verdict on estimand '{estimand}' attributed to {asked}, whose claim is "
            + (f"about estimand '{where[0]}'" if where else "not one this project tests")
            + " (hasfl.analysis.findings.claims.AUTHOR_CLAIMS, docs/decisions.md 'Whose claim a verdict is')")
    return claim.authors if claim else None
