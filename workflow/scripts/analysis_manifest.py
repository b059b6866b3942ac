"""Snakemake glue for rule analysis_manifest (hasfl.analysis.manifest.write_analysis_manifest)."""

from hasfl.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.manifest:write_analysis_manifest",
     {"results": sm.params.results, "files": list(sm.input.files), "verified_json": sm.input.verified},
     sm.log[0])
