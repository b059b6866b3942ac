"""Snakemake glue for rule analysis_report (hasfl.analysis.jobs.job_report). The config files the DAG was given
(the command on the report) come from the session (``HASFL_CONFIGFILES``), not from a param: like the git commit,
they are provenance, so another overlay file that changes no key reruns nothing."""

import json
import os

from hasfl.dag.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:job_report",
     {"name": sm.params.name, "config_summary": sm.params.config_summary,
      "table_paths": {name: sm.input[name] for name in sm.params.tables}, "findings_path": sm.input.findings,
      "figure_slugs": sm.params.figures, "out_md": sm.output.md, "figure_context": dict(sm.params.figure_context),
      "configfiles": json.loads(os.environ.get("HASFL_CONFIGFILES", "[]"))},
     sm.log[0])
