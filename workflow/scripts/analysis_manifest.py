"""Snakemake glue for rule analysis_manifest (hasfl.analysis.manifest.write_analysis_manifest)."""

from pathlib import Path

from hasfl.dag.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
call("hasfl.analysis.manifest:write_analysis_manifest",
     {"results": str(Path(sm.output[0]).parent), "files": list(sm.input.files), "verified_json": sm.input.verified,
      "identity": sm.params.identity},
     sm.log[0])
