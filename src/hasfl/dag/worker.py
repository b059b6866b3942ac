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

# the job's side and the wire (re-exported: every workflow script imports ``call`` from here)
from hasfl.dag.handover import (ACK_TIMEOUT_S, CHILD_MARK, ENV_ACK_TIMEOUT, ENV_SOCKET, GO, HEADER, alive, call,
                                connect, job_name, process_state, run_logged, worker_pid)

__all__ = ["ACK_TIMEOUT_S", "ENV_ACK_TIMEOUT", "ENV_SOCKET", "PRELOAD", "call", "job_name", "run_logged",
           "start_server", "stop_server", "serve"]

# On SIGTERM the worker sends SIGTERM to its running children and gives them this long to end
# (a training job stops at once and logs its last checkpoint) before SIGKILL.
TERM_GRACE_S = 10.0
# Modules imported by the worker before it forks: what the train, data-stage and evaluate jobs need (an evaluate job
# is one per run: importing its tables' modules in each would cost more than most evaluations).
PRELOAD: tuple[str, ...] = ("torch", "numpy", "pandas", "pyarrow.parquet", "hasfl.fl.train", "hasfl.data",
                            "hasfl.data.stage", "hasfl.dag.jobs", "hasfl.analysis.tables.bn_sensitivity",
                            "hasfl.analysis.tables.submodel_accuracy", "hasfl.analysis.tables.personal_accuracy",
                            "hasfl.analysis.tables.table4b_stale_coordinates",
                            "hasfl.analysis.tables.table4c_coverage_over_time")


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
        go, fds, _flags, _addr = socket.recv_fds(conn, len(GO), 3)
        if go != GO or len(fds) != 3:  # the job's process gave up on us (timeout, signal) or is gone: no run
            rc = 0
            return
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[CHILD_MARK] = "1"

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
        return not alive(parent_pid)

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
                msg, fds, _flags, _addr = socket.recv_fds(conn, HEADER.size, 3)
                header = msg + _recv_exact(conn, HEADER.size - len(msg))  # the rest, if the header came split
                request = json.loads(_recv_exact(conn, HEADER.unpack(header)[0]))
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
        if alive(pid):
            parent = _parent_of(pid)
            if (process_state(pid) in ("T", "t") and _is_worker(pid, str(folder / "s")) and parent is not None
                    and not alive(parent)):
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
    while os.path.exists(path) and (pid is None or alive(pid)):
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
    pid = worker_pid(path)
    if pid is not None and not _is_worker(pid, path):
        pid = None
    sock = connect(path, 1.0)
    if sock is not None:
        with sock:
            payload = json.dumps({"stop": True}).encode()
            try:
                sock.sendall(HEADER.pack(len(payload)) + payload)
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
