"""Warm worker: run a workflow job's Python function in a process that has already imported torch.

Every Snakemake job is its own process, and importing torch + pandas + our engine costs
about 3 s of CPU per job: 30% of the quick preset's core-seconds (docs/performance.md).
When Snakemake executes locally, the Snakefile's ``onstart`` handler starts
one warm worker (:func:`start_server`) and exports its socket in ``$HASFL_WORKER_SOCKET``;
the job scripts then call :func:`call`, which forks a child of the worker to run the
job. Every workflow script goes through :func:`call` (train, data stage, fetches and the
analysis jobs). The DAG does not change: still one Snakemake job (and log) per method x
dataset x seed, the same function with the same arguments, the same outputs.

The child gets the job's stdin/stdout/stderr (passed over the Unix socket), its working
directory and environment; it reports its pid and exit code to the job's process, which
forwards SIGINT/SIGTERM to it; if the job's process dies (e.g. SIGKILL) the child exits at
once, so nothing outlives its job. A worker that does not take the job within
:data:`ACK_TIMEOUT_S` (``$HASFL_WORKER_ACK_TIMEOUT_S``), or is stopped (SIGSTOP), is bypassed:
the job runs in its own process and its log says why. The worker itself exits with Snakemake
(it watches its parent's pid), on :func:`stop_server`, on SIGTERM / SIGINT (ending its running
children first), or after ``idle_s`` without a job. Without a worker (no
``$HASFL_WORKER_SOCKET``, a socket that does not answer, a SLURM job) :func:`call` runs the
function in the job's own process: same result, only slower to start.

The worker never runs torch code itself (no thread pools, no CUDA context before the
fork); each child sets its own thread count and initialises CUDA if it uses it.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ACK_TIMEOUT_S", "ENV_ACK_TIMEOUT", "ENV_SOCKET", "PRELOAD", "call", "job_name", "start_server",
           "stop_server", "serve"]

ENV_SOCKET = "HASFL_WORKER_SOCKET"
# How long a job waits for the warm worker to take it (a forked child's pid) before it runs in
# its own process instead; $HASFL_WORKER_ACK_TIMEOUT_S overrides it (the tests set it small).
# Taking a job is one accept + fork (milliseconds); the bound only matters for a worker that
# is stuck, and a false alarm costs one torch import, never a second run of the job.
ACK_TIMEOUT_S = 10.0
ENV_ACK_TIMEOUT = "HASFL_WORKER_ACK_TIMEOUT_S"
# On SIGTERM the worker sends SIGTERM to its running children and gives them this long to end
# (a training job stops at once and logs its last checkpoint) before SIGKILL.
TERM_GRACE_S = 10.0
# Modules imported by the worker before it forks: what the train, data-stage and evaluate jobs need (an evaluate job
# is one per run: importing its tables' modules in each would cost more than most evaluations).
PRELOAD: tuple[str, ...] = ("torch", "numpy", "pandas", "pyarrow.parquet", "hasfl.fl.train", "hasfl.data",
                            "hasfl.data.stage", "hasfl.dag.jobs", "hasfl.analysis.tables.bn_sensitivity",
                            "hasfl.analysis.tables.submodel_accuracy", "hasfl.analysis.tables.table4b_stale_coordinates",
                            "hasfl.analysis.tables.table4c_coverage_over_time")
_HEADER = struct.Struct("!I")
_CHILD_MARK = "HASFL_WORKER_CHILD"
_GO = b"g"  # the job's process to the child: run it (anything else, or EOF: do not)


# --------------------------------------------------------------------------- job side
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
             "forked from the warm worker" if os.environ.get(_CHILD_MARK) else "its own process",
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


def _connect(path: str, timeout_s: float | None = None) -> socket.socket | None:
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
        pid = _worker_pid(path)
        state = None if pid is None else _state(pid)
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


def _worker_pid(path: str) -> int | None:
    try:
        return int(Path(path).with_name("pid").read_text())
    except (OSError, ValueError):
        return None


_NOT_RUNNING = {"T": "stopped", "t": "stopped by a debugger", "Z": "gone", "X": "gone"}


def _state(pid: int) -> str | None:
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
        if not _alive(pid) or _state(pid) in _NOT_RUNNING or time.monotonic() > deadline:
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
        sock = _connect(path, timeout_s)
        if sock is None:
            return None, "hasfl worker: the warm worker refused the connection; the job runs in this process"
        opened.append(sock)
        sock.sendall(_HEADER.pack(len(payload)) + payload)
        first = _read_line(sock, buf, deadline)
        if first is None:
            return None, ("hasfl worker: the warm worker closed the connection before taking the job; "
                          "the job runs in this process")
        child.append(int(json.loads(first)["pid"]))
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        # The go-ahead carries stdin/stdout/stderr: a worker that never took the job holds none of them.
        socket.send_fds(sock, [_GO], [0, 1, 2])
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


# --------------------------------------------------------------------------- worker side
def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("client closed the connection")
        buf += chunk
    return buf


def _raise_exit(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def _child(conn: socket.socket, inherited: Sequence[socket.socket], request: Mapping[str, Any]) -> None:
    """In the forked child: report the pid, wait for the go-ahead (it brings the job's
    stdin/stdout/stderr), become the job (fds, cwd, env), run it, report the exit code, exit.
    SIGTERM ends the job with exit code 143."""
    rc = 1
    fds: list[int] = []
    try:
        signal.set_wakeup_fd(-1)
        for sock in inherited:  # the worker's listener and wake-up pair
            sock.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, _raise_exit)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)  # blocked by the worker around fork()
        conn.sendall((json.dumps({"pid": os.getpid()}) + "\n").encode())
        go, fds, _flags, _addr = socket.recv_fds(conn, len(_GO), 3)
        if go != _GO or len(fds) != 3:  # the job's process gave up on us (timeout, signal) or is gone: no run
            rc = 0
            return
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[_CHILD_MARK] = "1"

        def watch() -> None:  # the job's process went away: end the job now
            try:
                while conn.recv(1):
                    pass
            except OSError:
                pass
            os._exit(137)

        threading.Thread(target=watch, daemon=True).start()
        try:
            run_logged(request["target"], request["kwargs"], request.get("log"))
            rc = 0
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # already logged (with traceback) by run_logged, or KeyboardInterrupt
            rc = 130 if sys.exc_info()[0] is KeyboardInterrupt else 1
        sys.stdout.flush()
        sys.stderr.flush()
        conn.sendall((json.dumps({"rc": rc}) + "\n").encode())
    except SystemExit as exc:  # SIGTERM before the job started
        rc = exc.code if isinstance(exc.code, int) else 1
    finally:
        os._exit(rc)


def _hung_up(conn: socket.socket) -> bool:
    """The client has closed its end already (it gave up waiting for this worker)."""
    poller = select.poll()
    poller.register(conn, select.POLLHUP)
    return any(ev & (select.POLLHUP | select.POLLERR) for _fd, ev in poller.poll(0))


def _reap(children: set[int]) -> None:
    """Collect the children that have exited (without blocking) and forget them."""
    while children:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)


def _end_children(children: set[int], grace_s: float) -> None:
    """SIGTERM every running child, SIGKILL what is left after ``grace_s``, reap them all."""
    _reap(children)
    for pid in children:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while children and time.monotonic() < deadline:
        time.sleep(0.02)
        _reap(children)
    for pid in sorted(children):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    children.clear()


def serve(path: str, parent_pid: int | None = None, idle_s: float = 600.0,
          preload: Sequence[str] = PRELOAD) -> None:
    """Import ``preload``, listen on the Unix socket ``path``, fork one child per request.

    Returns when ``parent_pid`` is gone (checked every second), after ``idle_s`` without a
    request, on a request with ``{"stop": true}`` (running children go on: each ends with its
    job's process), or on SIGTERM / SIGINT: at once when no child runs, else after sending
    SIGTERM to the running children and reaping them (SIGKILL after :data:`TERM_GRACE_S`), so
    that the worker leaves no process behind. The socket file is created under a temporary
    name and renamed, so a client never connects to a worker that is still importing; it is
    removed first on the way out, so new jobs run in their own processes at once.
    """
    for name in preload:
        importlib.import_module(name)
    stop: list[int] = []

    def leave(signum: int, frame: Any) -> None:  # SIGTERM / SIGINT: leave the loop below
        stop.append(signum)

    wake_r, wake_w = socket.socketpair()  # a signal makes select() return at once
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # children are reaped by _reap
    signal.signal(signal.SIGTERM, leave)
    signal.signal(signal.SIGINT, leave)
    signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
    first_parent = os.getppid()
    children: set[int] = set()
    tmp = f"{path}.{os.getpid()}.tmp"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(tmp)
    listener.listen(64)
    os.replace(tmp, path)
    listener.setblocking(False)
    last = time.monotonic()

    def parent_gone() -> bool:
        if parent_pid is None:
            return False
        if parent_pid == first_parent and os.getppid() != first_parent:  # re-parented: also a zombie parent
            return True
        return not _alive(parent_pid)

    try:
        while not stop:
            _reap(children)
            if parent_gone() or time.monotonic() - last > idle_s:
                return
            ready, _, _ = select.select([listener, wake_r], [], [], 1.0)
            if wake_r in ready:
                try:
                    while wake_r.recv(64):
                        pass
                except BlockingIOError:
                    pass
            if stop or listener not in ready:
                continue
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionError):
                continue
            last = time.monotonic()
            conn.settimeout(5.0)  # a client sends its request at once; a stuck one does not block us
            fds: list[int] = []
            try:
                msg, fds, _flags, _addr = socket.recv_fds(conn, _HEADER.size, 3)
                header = msg + _recv_exact(conn, _HEADER.size - len(msg))  # the rest, if the header came split
                request = json.loads(_recv_exact(conn, _HEADER.unpack(header)[0]))
            except (OSError, ValueError, ConnectionError, struct.error):
                for fd in fds:
                    os.close(fd)
                conn.close()
                continue
            for fd in fds:  # clients send none with the request
                os.close(fd)
            if request.get("stop") or stop or _hung_up(conn):
                conn.close()
                if request.get("stop"):
                    return
                continue
            conn.settimeout(None)
            sys.stdout.flush()
            sys.stderr.flush()
            signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)  # the child unblocks them with its handlers
            try:
                pid = os.fork()
                if pid == 0:
                    _child(conn, [listener, wake_r, wake_w], request)
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
            children.add(pid)
            conn.close()
    finally:
        listener.close()
        folder = Path(path).parent
        Path(path).unlink(missing_ok=True)
        if stop:
            _end_children(children, TERM_GRACE_S)
        signal.set_wakeup_fd(-1)
        wake_r.close()
        wake_w.close()
        if folder.name.startswith("hasfl-w-"):  # made by start_server: leave nothing behind
            (folder / "pid").unlink(missing_ok=True)
            try:
                folder.rmdir()
            except OSError:
                pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_server(parent_pid: int | None = None, idle_s: float = 600.0) -> str:
    """Start a warm worker in the background (own session) and return its socket path.

    The path is short (Unix sockets allow ~107 bytes) and unique per call. The worker
    needs a few seconds to import; until its socket appears, :func:`call` runs jobs
    in their own processes.
    """
    remove_stale_folders()
    folder = Path(tempfile.mkdtemp(prefix="hasfl-w-"))
    path = str(folder / "s")
    args = [sys.executable, "-m", "hasfl.dag.worker", "--socket", path, "--idle-s", str(idle_s)]
    if parent_pid is not None:
        args += ["--parent-pid", str(parent_pid)]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, close_fds=True)
    (folder / "pid").write_text(str(proc.pid))
    return path


def _child_pids(pid: int) -> list[int]:
    """Direct children of process ``pid`` (from /proc; empty where there is no /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def stop_jobs_on_interrupt(stop_worker: Any = None) -> None:
    """On the first SIGINT to this (Snakemake's) process: say so in one line, send SIGTERM to
    every job process it started (each passes it to its forked child, which logs the round it
    stopped at and its last checkpoint), stop the warm worker, then let Snakemake shut down.

    Without this a SIGINT that reaches only Snakemake (not the terminal's whole process group)
    leaves the jobs training until they finish: Snakemake waits for them.
    """
    me = os.getpid()

    def handler(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C: Snakemake's own handling
        print("hasfl: interrupted: stopping the running jobs; finished runs are kept, and "
              "`snakemake ... --rerun-incomplete` resumes the others from their checkpoints", file=sys.stderr,
              flush=True)
        for pid in _child_pids(me):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if stop_worker is not None:
            stop_worker()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)


def _is_worker(pid: int, path: str) -> bool:
    """``pid`` is (still) the warm worker serving ``path``, not a process that got its pid since."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"hasfl.dag.worker" in args and os.fsencode(path) in args


def _parent_of(pid: int) -> int | None:
    """The ``--parent-pid`` that the worker ``pid`` was started with, from /proc."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        return int(args[args.index(b"--parent-pid") + 1])
    except (OSError, ValueError, IndexError):
        return None


def remove_stale_folders(tmp: str | None = None) -> list[Path]:
    """Remove the socket folders of workers that are gone (a SIGKILLed worker cannot clean up
    after itself); a folder whose worker is alive, or still being set up, is left alone. A
    worker that is stopped (SIGSTOP) and whose Snakemake is gone cannot notice that: it gets
    SIGTERM + SIGCONT and ends by itself."""
    removed = []
    for folder in Path(tmp or tempfile.gettempdir()).glob("hasfl-w-*"):
        try:
            pid = int((folder / "pid").read_text())
        except (OSError, ValueError):
            continue  # no pid yet: a worker being started right now
        if _alive(pid):
            parent = _parent_of(pid)
            if (_state(pid) in ("T", "t") and _is_worker(pid, str(folder / "s")) and parent is not None
                    and not _alive(parent)):
                _signal_worker(pid, signal.SIGTERM)
            continue
        for item in folder.iterdir():
            item.unlink(missing_ok=True)
        try:
            folder.rmdir()
            removed.append(folder)
        except OSError:
            pass
    return removed


def _signal_worker(pid: int, signum: int) -> None:
    """Send ``signum`` and SIGCONT (a stopped process acts on a signal only once continued)."""
    for sig in (signum, signal.SIGCONT):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            return


def _gone(path: str, pid: int | None, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for the worker to remove its socket (or to be gone)."""
    deadline = time.monotonic() + timeout_s
    while os.path.exists(path) and (pid is None or _alive(pid)):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def stop_server(path: str | None) -> None:
    """Ask the worker at ``path`` to exit (no error if there is none).

    A worker that does not exit within a second of the request (stopped, stuck) is sent
    SIGCONT, then SIGTERM + SIGCONT, a second each: it does not outlive Snakemake. Takes
    at most about 4 s.
    """
    if not path:
        return
    pid = _worker_pid(path)
    if pid is not None and not _is_worker(pid, path):
        pid = None
    sock = _connect(path, 1.0)
    if sock is not None:
        with sock:
            payload = json.dumps({"stop": True}).encode()
            try:
                sock.sendall(_HEADER.pack(len(payload)) + payload)
            except OSError:
                pass
    if sock is not None or pid is not None:  # a worker that may be running: give it a second
        if not _gone(path, pid, 1.0) and pid is not None:
            for signum in (signal.SIGCONT, signal.SIGTERM):
                _signal_worker(pid, signum)
                if _gone(path, pid, 1.0):
                    break
    folder = Path(path).parent
    (folder / "pid").unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m hasfl.dag.worker", description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--parent-pid", type=int, default=None)
    parser.add_argument("--idle-s", type=float, default=600.0)
    args = parser.parse_args(argv)
    serve(args.socket, args.parent_pid, args.idle_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
