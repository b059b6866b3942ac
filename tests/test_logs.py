"""The console of a DAG run (issues 28, 38): a job's per-round progress and its info lines (a data stage's dict of
sha256s, a run's summary) go to its job log only, and the console shows one line at the job's start and one at its
end, plus warnings and errors; without a log file (`hasfl train` in a terminal) everything is shown."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

from hasfl.dag.worker import job_name
from hasfl.fl.train import _LogStream
from hasfl.logs import setup_logging


def test_progress_lines_go_to_the_job_log_only(tmp_path, capsys):
    log_file = tmp_path / "job.log"
    setup_logging(log_file)
    stream = _LogStream(logging.getLogger("hasfl.train"))
    stream.write("digits/hasfl/seed42:  50%|#####     | 15/30 [00:01<00:01, acc=0.8]\r")
    logging.getLogger("hasfl.train").info("run finished: {'status': 'completed'}")
    for h in logging.getLogger().handlers:
        h.flush()
    err = capsys.readouterr().err
    text = log_file.read_text()
    assert "15/30" in text and "run finished" in text
    assert "15/30" not in err and "run finished" not in err


def test_a_dag_job_shows_one_line_at_its_start_and_one_at_its_end(tmp_path):
    """A 6-job variant printed 1,469 console lines (issue 38): every job's info records, a data stage's whole dict
    of sha256s among them. Through the job side of every workflow script (hasfl.dag.worker.run_logged)."""
    log_file = tmp_path / "results" / "quick" / "logs" / "data" / "digits" / "seed42.log"
    code = ("import logging\n"
            "from hasfl.dag.worker import run_logged\n"
            "run_logged('logging:getLogger', {'name': 'x'}, %r)\n"
            "logging.getLogger('hasfl.data').info('wrote {\"sha256\": \"f00\"}')\n"
            "logging.getLogger('hasfl.data').warning('a warning')\n") % str(log_file)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "HASFL_WORKER_SOCKET": ""})
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 3, lines
    assert "data/digits/seed42: started, logging:getLogger in process" in lines[0]
    assert "data/digits/seed42: done in" in lines[1] and str(log_file) in lines[1]
    assert "a warning" in lines[2]
    text = log_file.read_text()
    assert "wrote {" in text and "started" in text and "done in" in text


def test_a_job_is_named_by_its_log_file_below_logs():
    assert job_name("results/medium/logs/train/shakespeare/hasfl/seed43.log", "m:f") == "train/shakespeare/hasfl/seed43"
    assert job_name("/x/logs/a/results/q/logs/report.log", "m:f") == "report"
    assert job_name(None, "hasfl.dag.jobs:train_run") == "train_run"


def test_without_a_log_file_progress_is_shown(capsys):
    setup_logging(None)
    _LogStream(logging.getLogger("hasfl.train")).write("digits/hasfl/seed42:  10%| 3/30\n")
    assert "3/30" in capsys.readouterr().err
