"""The job's side of the warm worker (:mod:`hasfl.dag.worker`): a workflow script hands its function to the worker,
which forks a child to run it (:func:`call`), or runs it in its own process when there is no worker or the worker does
not take it; either way through :func:`run_logged`, the one log-and-raise wrapper of every job.

The wire between the two: a JSON request framed by a 4-byte length (:data:`HEADER`), the child's pid and exit code
as JSON lines back, the job's stdin/stdout/stderr passed over the Unix socket, and one go-ahead byte (:data:`GO`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["ACK_TIMEOUT_S", "ENV_ACK_TIMEOUT", "ENV_SOCKET", "ack_timeout_s", "call", "job_name", "run_logged"]

ENV_SOCKET = "HASFL_WORKER_SOCKET"
# How long a job waits for the warm worker to take it (a forked child's pid) before it runs in
# its own process instead; $HASFL_WORKER_ACK_TIMEOUT_S overrides it (the tests set it small).
# Taking a job is one accept + fork (milliseconds); the bound only matters for a worker that
# is stuck, and a false alarm costs one torch import, never a second run of the job.
ACK_TIMEOUT_S = 10.0
ENV_ACK_TIMEOUT = "HASFL_WORKER_ACK_TIMEOUT_S"
HEADER = struct.Struct("!I")
CHILD_MARK = "HASFL_WORKER_CHILD"
GO = b"g"  # the job's process to the child: run it (anything else, or EOF: do not)

def run_logged(target: str, kwargs: Mapping[str, Any], log_file: str | None, note: str | None = None) -> None:
    """Set up the job's log, run ``target(**kwargs)``; log and re-raise its exception.

    The one log-and-raise wrapper of every workflow script (each calls :func:`call`).
    ``note`` (why a warm worker was bypassed) is logged as a warning first.
    """
    from hasfl.logs import CONSOLE, setup_logging
    from hasfl.registry import resolve

    log = setup_logging(log_file)
    if note:
        log.warning("%s", note)
    job = job_name(log_file, target)
    log.info("%s: started, %s in process %d (%s)", job, target, os.getpid(),
             "forked from the warm worker" if os.environ.get(CHILD_MARK) else "its own process",
             extra={CONSOLE: True})
    from hasfl.errors import HasflError

    start = time.monotonic()
    try:
        resolve(target)(**kwargs)
    except HasflError as exc:  # the message says it all: no traceback
        log.error("%s: %s", job, exc)
        raise SystemExit(1) from None
    except Exception:
        log.exception("%s: %s failed", job, target)
        raise
    log.info("%s: done in %.1f s%s", job, time.monotonic() - start, "" if log_file is None else f"; log {log_file}",
             extra={CONSOLE: True})


def job_name(log_file: str | None, target: str) -> str:
    """A DAG job's name on the console: its log file's path below ``logs/`` without the suffix (the rule's folder
    and its wildcards, e.g. ``train/digits/hasfl/seed42``), else the function's name."""
    if log_file is None:
        return target.rsplit(":", 1)[-1]
    parts = Path(log_file).with_suffix("").parts
    return "/".join(parts[len(parts) - parts[::-1].index("logs"):]) if "logs" in parts else Path(log_file).stem


def connect(path: str, timeout_s: float | None = None) -> socket.socket | None:
    """A connection to the socket ``path``, or None. With ``timeout_s`` a full backlog (a worker
    that stopped accepting) fails at once instead of blocking; the socket keeps that timeout."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


def ack_timeout_s() -> float:
    """:data:`ACK_TIMEOUT_S`, or ``$HASFL_WORKER_ACK_TIMEOUT_S`` when that is a positive number."""
    try:
        value = float(os.environ.get(ENV_ACK_TIMEOUT, ""))
    except ValueError:
        return ACK_TIMEOUT_S
    return value if value > 0 else ACK_TIMEOUT_S


def call(target: str, kwargs: Mapping[str, Any], log_file: str | os.PathLike[str] | None = None) -> None:
    """Run ``target`` ('module:function') with JSON-able ``kwargs``: in a fresh child of the
    warm worker named by ``$HASFL_WORKER_SOCKET`` when one takes the job, else in this process.

    Taking the job means the worker has forked a child and the child has sent its pid, within
    :func:`ack_timeout_s` of the connection (:data:`ACK_TIMEOUT_S`, ``$HASFL_WORKER_ACK_TIMEOUT_S``).
    A worker that is stopped (SIGSTOP: seen in /proc at once), that does not answer in time, or
    that closes the connection first is bypassed: the same function runs here with the same
    arguments and log file, whose first line says why. The job can never run twice: the child
    starts only on this process's go-ahead, sent once its pid has arrived in time; a child forked
    after this process gave up finds the connection closed and exits without running the job.

    Once the child runs the job there is no timeout (jobs take many minutes): this process waits
    for the child's exit code on the connection, which only the child holds. The worker may then
    stop or die without harm: the child is a process of its own and goes on. If the child dies
    without an exit code (SIGKILL, a crash) the connection closes and the job fails (exit 1, or
    128 + the signal that this process forwarded to it). A child that is itself stopped is
    waited for, like a stopped job process; SIGCONT resumes both. A SIGINT / SIGTERM that reaches
    this process before the go-ahead ends the job here at once (exit 128 + signal), without a run.

    Raises SystemExit with the child's exit code when the child fails (its traceback is
    already in the job's log), or the function's own exception when run here.
    """
    log = None if log_file is None else str(log_file)
    path = os.environ.get(ENV_SOCKET)
    note = None
    if path and _wait_for(path):
        pid = worker_pid(path)
        state = None if pid is None else process_state(pid)
        if state is not None and state in _NOT_RUNNING:
            note = (f"hasfl worker: the warm worker (pid {pid}) is {_NOT_RUNNING[state]} (process state {state}); "
                    "the job runs in this process")
        else:
            rc, note = _submit(path, {"target": target, "kwargs": dict(kwargs), "log": log, "cwd": os.getcwd(),
                                      "env": dict(os.environ)}, ack_timeout_s())
            if rc is not None:
                if rc != 0:
                    raise SystemExit(rc)
                return
    run_logged(target, kwargs, log, note)


def worker_pid(path: str) -> int | None:
    try:
        return int(Path(path).with_name("pid").read_text())
    except (OSError, ValueError):
        return None


_NOT_RUNNING = {"T": "stopped", "t": "stopped by a debugger", "Z": "gone", "X": "gone"}


def process_state(pid: int) -> str | None:
    """The process state letter of ``pid`` from /proc (R, S, D, T stopped, Z zombie, ...), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _wait_for(path: str, timeout_s: float = 30.0) -> bool:
    """Wait while the worker that will listen at ``path`` is still importing (alive, no socket yet)."""
    pid_file = Path(path).with_name("pid")
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        try:
            pid = int(pid_file.read_text())
        except (OSError, ValueError):
            return False
        if not alive(pid) or process_state(pid) in _NOT_RUNNING or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class _Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _read_line(sock: socket.socket, buf: bytearray, deadline: float | None) -> bytes | None:
    """The next line from ``sock`` (``buf`` keeps what came after it); None at EOF; TimeoutError
    when none has come by ``deadline`` (time.monotonic), no timeout without one."""
    while b"\n" not in buf:
        sock.settimeout(None if deadline is None else max(deadline - time.monotonic(), 0.0))
        try:
            chunk = sock.recv(4096)
        except BlockingIOError:  # deadline passed (timeout 0: one look at what has arrived)
            raise TimeoutError from None
        if not chunk:
            return None
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line


def _submit(path: str, request: Mapping[str, Any], timeout_s: float) -> tuple[int | None, str | None]:
    """Hand the job to the worker at ``path`` with this process's stdin/stdout/stderr and wait
    for its exit code, relaying SIGINT/SIGTERM to the child; see :func:`call` for the rules.

    Returns ``(exit code, None)``, or ``(None, why)`` when the worker did not take the job and
    it is to run here.
    """
    child: list[int] = []
    received: list[int] = []
    phase = ["handing over"]  # -> "running" once the go-ahead is sent, "done" while leaving

    def forward(signum: int, _frame: Any) -> None:
        received.append(signum)
        if phase[0] == "handing over":  # nothing runs yet: end the job here and now
            raise _Interrupted(signum)
        if phase[0] == "running":
            try:
                os.kill(child[0], signum)
            except ProcessLookupError:
                pass

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    sock: list[socket.socket] = []
    try:
        result = _hand_over(path, request, timeout_s, sock, child, phase, received)
    except _Interrupted as stop:
        result = 128 + stop.signum, None
    finally:
        phase[0] = "done"
        for s in sock:
            s.close()
        for s, h in previous.items():
            signal.signal(s, h)
    if result[0] is None and received:  # a signal came as the job was given up on: do not run it here
        return 128 + received[0], None
    return result


def _hand_over(path: str, request: Mapping[str, Any], timeout_s: float, opened: list[socket.socket],
               child: list[int], phase: list[str], received: list[int]) -> tuple[int | None, str | None]:
    payload = json.dumps(request).encode()
    deadline = time.monotonic() + timeout_s
    buf = bytearray()
    try:
        sock = connect(path, timeout_s)
        if sock is None:
            return None, "hasfl worker: the warm worker refused the connection; the job runs in this process"
        opened.append(sock)
        sock.sendall(HEADER.pack(len(payload)) + payload)
        first = _read_line(sock, buf, deadline)
        if first is None:
            return None, ("hasfl worker: the warm worker closed the connection before taking the job; "
                          "the job runs in this process")
        child.append(int(json.loads(first)["pid"]))
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        # The go-ahead carries stdin/stdout/stderr: a worker that never took the job holds none of them.
        socket.send_fds(sock, [GO], [0, 1, 2])
        phase[0] = "running"
    except TimeoutError:
        return None, (f"hasfl worker: the warm worker did not answer within {timeout_s:g} s; "
                      "the job runs in this process")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"hasfl worker: the warm worker did not take the job ({exc!r}); the job runs in this process"
    try:
        last = _read_line(sock, buf, None)
    except OSError:
        last = None
    if last is None:
        if received:
            return 128 + received[0], None
        log = request.get("log")
        print(f"hasfl worker: {job_name(log, str(request.get('target')))}: job process {child[0]} ended without an "
              f"exit code (killed?){'' if log is None else f'; log {log}'}", file=sys.stderr)
        return 1, None
    return int(json.loads(last)["rc"]), None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
