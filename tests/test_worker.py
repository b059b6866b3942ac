"""The warm worker (hasfl.dag.worker): jobs forked from one process that has imported torch.

Real processes and a real Unix socket: a job module written to tmp_path, a worker started
with it importable, and job processes that call it the way the workflow's scripts do.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hasfl.dag import handover, worker

pytestmark = pytest.mark.processes  # every test starts a worker or a job process and signals it

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


def _job(jobdir: Path, call_args: str, socket: str | None, ack_timeout_s: float | None = None,
         **popen) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in (worker.ENV_SOCKET, worker.ENV_ACK_TIMEOUT)}
    env["WTEST"] = "from-the-job"
    if ack_timeout_s is not None:
        env[worker.ENV_ACK_TIMEOUT] = str(ack_timeout_s)
    if socket:
        env[worker.ENV_SOCKET] = socket
    code = f"from hasfl.dag.worker import call; call({call_args})"
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
    assert handover._wait_for(path, timeout_s=60)
    worker.stop_server(path)
    assert not os.path.exists(path) and not Path(path).parent.exists()
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    path2 = worker.start_server(parent_pid=parent.pid, idle_s=120)
    assert handover._wait_for(path2, timeout_s=60)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20
    while Path(path2).parent.exists():
        assert time.monotonic() < deadline, "worker outlived its parent"
        time.sleep(0.1)
    # jobs started after that run in their own processes
    assert handover.connect(path2) is None and not handover._wait_for(path2, timeout_s=1)


# --------------------------------------------------------------------------- a worker that does not answer
def _pid_of(path: str) -> int:
    return int(Path(path).with_name("pid").read_text())


def _ended(pid: int, timeout_s: float) -> bool:
    """``pid`` has exited within ``timeout_s`` (reaped here if it is our child; else gone or a zombie)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return True
        except ChildProcessError:
            if not handover.alive(pid) or handover.process_state(pid) in ("Z", "X"):
                return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def _stop(pid: int) -> None:
    """SIGSTOP ``pid`` and wait until it is stopped."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while handover.process_state(pid) != "T":
        assert time.monotonic() < deadline, "SIGSTOP did not stop the worker"
        time.sleep(0.01)


@contextlib.contextmanager
def _stopped(pid: int) -> Iterator[None]:
    """``pid`` SIGSTOPped for the block, SIGCONTed after it."""
    _stop(pid)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _kill(pid: int) -> None:
    for sig in (signal.SIGKILL, signal.SIGCONT):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def test_a_stopped_worker_is_bypassed_and_the_job_runs_in_its_own_process(jobdir: Path, server: str) -> None:
    """Issue 26 item 11: a SIGSTOPped worker blocked every job forever."""
    out, log = jobdir / "out.txt", jobdir / "job.log"
    pid = _pid_of(server)
    with _stopped(pid):
        p = _job(jobdir, f"'wjob:write', {{'path': {str(out)!r}, 'text': 'hi'}}, {str(log)!r}", server,
                 ack_timeout_s=2)
        _stdout, stderr = p.communicate(timeout=20)
    assert p.returncode == 0, stderr
    assert out.read_text().split("|")[:2] == ["hi", str(p.pid)]
    text = log.read_text()
    assert f"the warm worker (pid {pid}) is stopped (process state T); the job runs in this process" in text
    assert "its own process" in text and "is stopped" in stderr


def test_a_worker_that_never_answers_is_bypassed_after_the_timeout(jobdir: Path) -> None:
    """A socket that accepts connections but never takes the job: the job runs here after the timeout."""
    import socket

    out, log = jobdir / "out.txt", jobdir / "job.log"
    path = str(jobdir / "s")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    with listener:
        tic = time.monotonic()
        p = _job(jobdir, f"'wjob:write', {{'path': {str(out)!r}, 'text': 'late'}}, {str(log)!r}", path,
                 ack_timeout_s=1)
        _stdout, stderr = p.communicate(timeout=20)
        took = time.monotonic() - tic
    assert p.returncode == 0, stderr
    assert out.read_text().split("|")[:2] == ["late", str(p.pid)]
    assert "hasfl worker: the warm worker did not answer within 1 s; the job runs in this process" in log.read_text()
    assert took < 10, took


def test_a_job_given_up_on_is_never_run_by_the_worker_and_the_worker_serves_on(jobdir: Path, server: str) -> None:
    """The worker takes a job only on the job process's go-ahead: the connection a job gave up on
    (here: a stopped worker whose pid file is hidden, so only the timeout notices) is dropped when
    the worker runs again, and the worker then serves the next job as before."""
    out, log = jobdir / "out.txt", jobdir / "job.log"
    pid, pid_file = _pid_of(server), Path(server).with_name("pid")
    pid_file.rename(pid_file.with_name("pid.hidden"))
    try:
        with _stopped(pid):
            p = _job(jobdir, f"'wjob:write', {{'path': {str(out)!r}, 'text': 'once'}}, {str(log)!r}", server,
                     ack_timeout_s=1)
            _stdout, stderr = p.communicate(timeout=20)
    finally:
        pid_file.with_name("pid.hidden").rename(pid_file)
    assert p.returncode == 0, stderr
    assert "did not answer within 1 s" in log.read_text()
    time.sleep(1.5)  # the worker, running again, finds the job's connection closed
    assert out.read_text().split("|")[:2] == ["once", str(p.pid)]
    out2 = jobdir / "out2.txt"
    q = _job(jobdir, f"'wjob:write', {{'path': {str(out2)!r}, 'text': 'next'}}, None", server, ack_timeout_s=5)
    assert q.wait(timeout=30) == 0
    text, child, *_ = out2.read_text().split("|")
    assert text == "next" and int(child) != q.pid


def test_a_signal_while_waiting_for_the_worker_ends_the_job_at_once(jobdir: Path) -> None:
    """SIGTERM (Snakemake's Ctrl-C handling) before any child runs the job: exit 143 now, no run."""
    import socket

    out = jobdir / "never.txt"
    path = str(jobdir / "s")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    listener.settimeout(20)
    with listener:
        p = _job(jobdir, f"'wjob:write', {{'path': {str(out)!r}, 'text': 'x'}}, None", path, ack_timeout_s=60)
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(20)
            assert conn.recv(4)  # the job's request: it waits for the answer now
            tic = time.monotonic()
            p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=10) == 128 + signal.SIGTERM
            assert time.monotonic() - tic < 5
    assert not out.exists()


def test_sigterm_ends_an_idle_worker_at_once(jobdir: Path) -> None:
    path = worker.start_server(parent_pid=os.getpid(), idle_s=120)
    assert handover._wait_for(path, timeout_s=60)
    pid = _pid_of(path)
    try:
        tic = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        assert _ended(pid, 5), "the idle worker ignored SIGTERM"
        assert time.monotonic() - tic < 2
        assert not Path(path).parent.exists()
    finally:
        _kill(pid)


def test_sigterm_to_a_busy_worker_ends_its_jobs_and_leaves_no_process(jobdir: Path) -> None:
    out, log = jobdir / "never.txt", jobdir / "job.log"
    path = worker.start_server(parent_pid=os.getpid(), idle_s=120)
    assert handover._wait_for(path, timeout_s=60)
    pid = _pid_of(path)
    try:
        p = _job(jobdir, f"'wjob:write', {{'path': {str(out)!r}, 'text': 'x', 'sleep': 20.0}}, {str(log)!r}", path)
        assert p.stdout is not None and p.stdout.readline() == "to stdout\n"  # the child is running the job
        child = int(log.read_text().split(" in process ")[1].split()[0])
        assert child != p.pid
        os.kill(pid, signal.SIGTERM)
        assert p.wait(timeout=10) == 128 + signal.SIGTERM  # the child ended and said so
        assert _ended(pid, 5) and _ended(child, 1)
        assert not out.exists() and not Path(path).parent.exists()
    finally:
        _kill(pid)


def test_stop_server_ends_a_stopped_worker(jobdir: Path) -> None:
    """Snakemake's shutdown (stop_server) must not leave a SIGSTOPped worker behind."""
    path = worker.start_server(parent_pid=os.getpid(), idle_s=120)
    assert handover._wait_for(path, timeout_s=60)
    pid = _pid_of(path)
    try:
        _stop(pid)
        tic = time.monotonic()
        worker.stop_server(path)
        assert time.monotonic() - tic < 5
        assert _ended(pid, 2), "a stopped worker outlived stop_server"
        assert not Path(path).parent.exists()
    finally:
        _kill(pid)


def test_a_stopped_worker_whose_snakemake_is_gone_is_ended_at_the_next_start(jobdir: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    path = worker.start_server(parent_pid=parent.pid, idle_s=120)
    assert handover._wait_for(path, timeout_s=60)
    pid = _pid_of(path)
    try:
        _stop(pid)
        parent.kill()
        parent.wait()
        worker.remove_stale_folders(str(Path(path).parent.parent))
        assert _ended(pid, 5), "a stopped worker of a gone Snakemake was left running"
    finally:
        _kill(pid)
        parent.kill()
