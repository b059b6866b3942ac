"""The warm worker (hasfl.worker): jobs forked from one process that has imported torch.

Real processes and a real Unix socket: a job module written to tmp_path, a worker started
with it importable, and job processes that call it the way the workflow's scripts do.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hasfl import worker

JOB = textwrap.dedent('''
    import logging, os, sys, time

    def write(path, text, sleep=0.0):
        logging.getLogger("hasfl.test").info("job starts")
        print("to stdout", flush=True)
        print("to stderr", file=sys.stderr, flush=True)
        time.sleep(sleep)
        with open(path, "w") as f:
            f.write(f"{text}|{os.getpid()}|{os.getcwd()}|{os.environ.get('WTEST')}")

    def fail():
        raise RuntimeError("boom in the job")
''')


@pytest.fixture()
def jobdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "wjob.py").write_text(JOB)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return tmp_path


@pytest.fixture()
def server(jobdir: Path):
    path = worker.start_server(parent_pid=os.getpid(), idle_s=120)
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        assert time.monotonic() < deadline, "warm worker did not come up in 60 s"
        time.sleep(0.05)
    yield path
    worker.stop_server(path)


def _job(jobdir: Path, call_args: str, socket: str | None, **popen) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != worker.ENV_SOCKET}
    env["WTEST"] = "from-the-job"
    if socket:
        env[worker.ENV_SOCKET] = socket
    code = f"from hasfl.worker import call; call({call_args})"
    return subprocess.Popen([sys.executable, "-c", code], env=env, cwd=jobdir, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)


def test_job_runs_in_a_forked_child_with_the_jobs_fds_cwd_env_and_log(jobdir: Path, server: str) -> None:
    out, log = jobdir / "out.txt", jobdir / "job.log"
    p = _job(jobdir, f"'wjob:write', {{'path': {str(out)!r}, 'text': 'hi'}}, {str(log)!r}", server)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 0, stderr
    text, pid, cwd, env = out.read_text().split("|")
    assert (text, cwd, env) == ("hi", str(jobdir), "from-the-job")
    assert int(pid) != p.pid                                  # ran in the worker's child, not the job process
    assert stdout == "to stdout\n" and "to stderr" in stderr  # through the job's own stdout / stderr
    assert "forked from the warm worker" in log.read_text() and "job starts" in log.read_text()


def test_without_a_worker_the_job_runs_in_its_own_process(jobdir: Path) -> None:
    out, log = jobdir / "out.txt", jobdir / "job.log"
    for socket in (None, str(jobdir / "no-such-socket")):
        p = _job(jobdir, f"'wjob:write', {{'path': {str(out)!r}, 'text': 'direct'}}, {str(log)!r}", socket)
        assert p.wait(timeout=120) == 0
        assert out.read_text().split("|")[:2] == ["direct", str(p.pid)]
        assert "its own process" in log.read_text()


def test_failing_job_exits_nonzero_with_its_traceback_in_the_log(jobdir: Path, server: str) -> None:
    log = jobdir / "fail.log"
    p = _job(jobdir, f"'wjob:fail', {{}}, {str(log)!r}", server)
    p.communicate(timeout=60)
    assert p.returncode == 1
    text = log.read_text()
    assert "wjob:fail failed" in text and "RuntimeError: boom in the job" in text


@pytest.mark.parametrize("sig, rc", [(signal.SIGKILL, -signal.SIGKILL), (signal.SIGINT, 130)])
def test_a_killed_job_process_ends_its_child(jobdir: Path, server: str, sig: int, rc: int) -> None:
    """SIGKILL: the child notices the closed socket and exits; SIGINT is forwarded to it."""
    out = jobdir / f"never-{int(sig)}.txt"
    p = _job(jobdir, f"'wjob:write', {{'path': {str(out)!r}, 'text': 'x', 'sleep': 3.0}}, None", server)
    assert p.stdout is not None and p.stdout.readline() == "to stdout\n"  # the child is running the job
    p.send_signal(sig)
    assert p.wait(timeout=30) == rc
    time.sleep(4.0)
    assert not out.exists()


def test_stop_and_parent_exit_end_the_worker(jobdir: Path) -> None:
    """serve() returns (and removes its socket folder) on stop, and when its parent is gone."""
    path = worker.start_server(parent_pid=os.getpid(), idle_s=120)
    assert worker._wait_for(path, timeout_s=60)
    worker.stop_server(path)
    assert not os.path.exists(path) and not Path(path).parent.exists()
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    path2 = worker.start_server(parent_pid=parent.pid, idle_s=120)
    assert worker._wait_for(path2, timeout_s=60)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20
    while Path(path2).parent.exists():
        assert time.monotonic() < deadline, "worker outlived its parent"
        time.sleep(0.1)
    # jobs started after that run in their own processes
    assert worker._connect(path2) is None and not worker._wait_for(path2, timeout_s=1)
