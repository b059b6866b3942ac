"""The RO-Crate of `hasfl export rocrate` checked by an independent validator: roc-validator (CRS4, the SHACL shapes
of the RO-Crate 1.1, Workflow RO-Crate 1.0, Workflow Run Crate 0.5 and Process Run Crate 0.5 profiles), at the
REQUIRED level, offline.

The validator resolves the crate's JSON-LD context (``https://w3id.org/ro/crate/1.1/context``) over HTTP through its
cache; the tests run without a network, so the cache is primed with the context document itself:
``tests/data/ro-crate-1.1-context.jsonld``, the file ro-crate-py 0.9.0 ships as ``rocrate/data/ro-crate.jsonld``
(its wheel from PyPI; ``@id`` that URL, version 1.1.0), byte for byte."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from hasfl.crate import export_rocrate
from test_crate import results  # noqa: F401  (the fixture: a finished results folder)

rocrate_validator = pytest.importorskip("rocrate_validator")

CONTEXT_URL = "https://w3id.org/ro/crate/1.1/context"
CONTEXT = Path(__file__).parent / "data" / "ro-crate-1.1-context.jsonld"
PROFILES = ("ro-crate-1.1", "workflow-ro-crate-1.0", "workflow-run-crate-0.5", "process-run-crate-0.5")


def _primed_cache(folder: Path) -> Path:
    """A roc-validator HTTP cache (requests-cache, SQLite) holding the RO-Crate 1.1 context at its URL."""
    import requests
    import urllib3
    from requests_cache import CachedSession

    body = CONTEXT.read_bytes()
    assert json.loads(body)["@id"] == CONTEXT_URL
    cache = folder / "http-cache"
    session = CachedSession(cache_name=str(cache), backend="sqlite", expire_after=-1)
    response = requests.Response()
    response.status_code, response._content, response.url = 200, body, CONTEXT_URL
    response.headers["Content-Type"] = "application/ld+json"
    response.request = requests.Request("GET", CONTEXT_URL).prepare()
    response.raw = urllib3.HTTPResponse(body=io.BytesIO(body), headers=dict(response.headers), status=200,
                                        preload_content=False, request_url=CONTEXT_URL)
    session.cache.save_response(response)
    return cache


def _issues(crate: Path, profile: str, cache: Path) -> list[str]:
    from rocrate_validator import models, services

    settings = services.ValidationSettings(rocrate_uri=str(crate), profile_identifier=profile,
                                           requirement_severity=models.Severity.REQUIRED,
                                           enable_profile_inheritance=True, offline=True, cache_path=str(cache))
    result = services.validate(settings)
    issues = [f"{i.check.identifier if i.check else '?'}: {i.message}" for i in result.get_issues()]
    assert result.passed() == (not issues), issues
    return issues


def test_the_crate_passes_every_profile_it_declares(results, tmp_path) -> None:  # noqa: F811
    crate = tmp_path / "crate"
    export_rocrate(results, crate)
    declared = {p["@id"] for e in json.loads((crate / "ro-crate-metadata.json").read_text())["@graph"]
                if e["@id"] == "./" for p in e["conformsTo"]}
    assert {"https://w3id.org/ro/wfrun/workflow/0.5", "https://w3id.org/ro/wfrun/process/0.5",
            "https://w3id.org/workflowhub/workflow-ro-crate/1.0"} <= declared
    cache = _primed_cache(tmp_path)
    for profile in PROFILES:
        assert _issues(crate, profile, cache) == [], profile


def test_a_crate_missing_a_file_it_lists_fails(results, tmp_path) -> None:  # noqa: F811
    crate = tmp_path / "crate"
    export_rocrate(results, crate)
    (crate / "workflow" / "pyproject.toml").unlink()
    issues = _issues(crate, "workflow-run-crate-0.5", _primed_cache(tmp_path))
    assert any("workflow/pyproject.toml" in i for i in issues), issues
