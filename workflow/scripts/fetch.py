"""Snakemake glue for the fetch_<dataset> rules (hasfl.data.fetch.fetch_job; the registry names
each dataset's fetch function). The preset's datasets are read from the config only for the
error message (which other datasets miss files), not as params: they change no output."""

from hasfl.registry import raw_files
from hasfl.dag.worker import call

sm = snakemake  # noqa: F821 (injected by Snakemake)
cfg = sm.config
call("hasfl.data.fetch:fetch_job",
     {"dataset": sm.params.dataset, "data_dir": cfg["data_dir"], "params": dict(sm.params.dataset_params),
      "preset": {d: raw_files(d, cfg["data_dir"], cfg["dataset_params"][d]) for d in cfg["datasets"]}},
     sm.log[0])
