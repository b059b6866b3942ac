"""The console of a DAG run (issue 28): a training job's per-round progress goes to its job log only; without a log
file (`hasfl train` in a terminal) it is shown."""

from __future__ import annotations

import logging

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
    assert "15/30" not in err and "run finished" in err


def test_without_a_log_file_progress_is_shown(capsys):
    setup_logging(None)
    _LogStream(logging.getLogger("hasfl.train")).write("digits/hasfl/seed42:  10%| 3/30\n")
    assert "3/30" in capsys.readouterr().err
