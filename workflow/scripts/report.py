"""Snakemake glue for rule analysis_report (hasfl.analysis.jobs.job_report)."""

from hasfl.dag.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.jobs:job_report",
     {"name": sm.params.name, "config_summary": sm.params.config_summary,
      "table_paths": {name: sm.input[name] for name in sm.params.tables}, "findings_path": sm.input.findings,
      "figure_slugs": sm.params.figures, "out_md": sm.output.md, "figure_context": dict(sm.params.figure_context),
      "configfiles": list(sm.params.configfiles)},
     sm.log[0])
