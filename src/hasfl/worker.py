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
once, so nothing outlives its job. The worker itself exits with Snakemake (it watches its
parent's pid), on :func:`stop_server`, or after ``idle_s`` without a job. Without a worker
(no ``$HASFL_WORKER_SOCKET``, a socket that does not answer, a SLURM job) :func:`call`
runs the function in the job's own process: same result, only slower to start.

The worker never runs torch code itself (no thread pools, no CUDA context before the
fork); each child sets its own thread count and initialises CUDA if it uses it.
"""

from __future__ import annotations

import importlib
import json
import os
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

__all__ = ["ENV_SOCKET", "PRELOAD", "call", "start_server", "stop_server", "serve"]

ENV_SOCKET = "HASFL_WORKER_SOCKET"
# Modules imported by the worker before it forks: what the train and data-stage jobs need.
PRELOAD: tuple[str, ...] = ("torch", "numpy", "pandas", "pyarrow.parquet", "hasfl.fl.train", "hasfl.data",
                            "hasfl.data.stage")
_HEADER = struct.Struct("!I")
_CHILD_MARK = "HASFL_WORKER_CHILD"


# --------------------------------------------------------------------------- job side
def run_logged(target: str, kwargs: Mapping[str, Any], log_file: str | None) -> None:
    """Set up the job's log, run ``target(**kwargs)``; log and re-raise its exception.

    The one log-and-raise wrapper of every workflow script (each calls :func:`call`).
    """
    from hasfl.logs import setup_logging
    from hasfl.registry import resolve

    log = setup_logging(log_file)
    log.info("%s in process %d (%s)", target, os.getpid(),
             "forked from the warm worker" if os.environ.get(_CHILD_MARK) else "its own process")
    from hasfl.errors import HasflError

    try:
        resolve(target)(**kwargs)
    except HasflError as exc:  # the message says it all: no traceback
        log.error("%s", exc)
        raise SystemExit(1) from None
    except Exception:
        log.exception("%s failed", target)
        raise


def _connect(path: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


def call(target: str, kwargs: Mapping[str, Any], log_file: str | os.PathLike[str] | None = None) -> None:
    """Run ``target`` ('module:function') with JSON-able ``kwargs``: in a fresh child of the
    warm worker named by ``$HASFL_WORKER_SOCKET`` when one answers, else in this process.

    Raises SystemExit with the child's exit code when the child fails (its traceback is
    already in the job's log), or the function's own exception when run here.
    """
    log = None if log_file is None else str(log_file)
    path = os.environ.get(ENV_SOCKET)
    sock = _connect(path) if path and _wait_for(path) else None
    if sock is None:
        run_logged(target, kwargs, log)
        return
    rc = _submit(sock, {"target": target, "kwargs": dict(kwargs), "log": log, "cwd": os.getcwd(),
                        "env": dict(os.environ)})
    if rc != 0:
        raise SystemExit(rc)


def _wait_for(path: str, timeout_s: float = 30.0) -> bool:
    """Wait while the worker that will listen at ``path`` is still importing (alive, no socket yet)."""
    pid_file = Path(path).with_name("pid")
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        try:
            pid = int(pid_file.read_text())
        except (OSError, ValueError):
            return False
        if not _alive(pid) or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _submit(sock: socket.socket, request: Mapping[str, Any]) -> int:
    """Send the request with this process's stdin/stdout/stderr; relay SIGINT/SIGTERM to the
    child (a signal that comes before the child's pid is known is held and sent as soon as it
    is); return the child's exit code."""
    payload = json.dumps(request).encode()
    child: list[int] = []
    pending: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        if not child:
            pending.append(signum)
            return
        try:
            os.kill(child[0], signum)
        except ProcessLookupError:
            pass

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with sock:
            socket.send_fds(sock, [_HEADER.pack(len(payload))], [0, 1, 2])
            sock.sendall(payload)
            reader = sock.makefile("r")
            first = reader.readline()
            if not first:
                print("hasfl worker: the warm worker closed the connection before starting the job", file=sys.stderr)
                return 1
            child.append(int(json.loads(first)["pid"]))
            for signum in pending[:1]:
                forward(signum, None)
            last = reader.readline()
            if not last:
                print(f"hasfl worker: job process {child[0]} ended without an exit code (killed?)", file=sys.stderr)
                return 1
            return int(json.loads(last)["rc"])
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


# --------------------------------------------------------------------------- worker side
def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("client closed the connection")
        buf += chunk
    return buf


def _child(conn: socket.socket, listener: socket.socket, fds: Sequence[int], request: Mapping[str, Any]) -> None:
    """In the forked child: become the job (fds, cwd, env), run it, report, exit."""
    rc = 1
    try:
        listener.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[_CHILD_MARK] = "1"
        conn.sendall((json.dumps({"pid": os.getpid()}) + "\n").encode())

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
    finally:
        os._exit(rc)


def serve(path: str, parent_pid: int | None = None, idle_s: float = 600.0,
          preload: Sequence[str] = PRELOAD) -> None:
    """Import ``preload``, listen on the Unix socket ``path``, fork one child per request.

    Returns when ``parent_pid`` is gone, after ``idle_s`` without a request, or on a
    request with ``{"stop": true}``. The socket file is created under a temporary name
    and renamed, so a client never connects to a worker that is still importing.
    """
    for name in preload:
        importlib.import_module(name)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel

    def leave(signum: int, frame: Any) -> None:  # SIGTERM / SIGINT: exit through the clean-up below
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, leave)
    signal.signal(signal.SIGINT, leave)
    tmp = f"{path}.{os.getpid()}.tmp"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(tmp)
    listener.listen(64)
    os.replace(tmp, path)
    listener.settimeout(1.0)
    last = time.monotonic()
    try:
        while True:
            if parent_pid is not None and not _alive(parent_pid):
                return
            if time.monotonic() - last > idle_s:
                return
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            last = time.monotonic()
            conn.settimeout(None)
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
            if request.get("stop"):
                conn.close()
                for fd in fds:
                    os.close(fd)
                return
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:
                _child(conn, listener, fds, request)
            for fd in fds:
                os.close(fd)
            conn.close()
    finally:
        listener.close()
        folder = Path(path).parent
        Path(path).unlink(missing_ok=True)
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
    args = [sys.executable, "-m", "hasfl.worker", "--socket", path, "--idle-s", str(idle_s)]
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


def remove_stale_folders(tmp: str | None = None) -> list[Path]:
    """Remove the socket folders of workers that are gone (a SIGKILLed worker cannot clean up
    after itself); a folder whose worker is alive, or still being set up, is left alone."""
    removed = []
    for folder in Path(tmp or tempfile.gettempdir()).glob("hasfl-w-*"):
        try:
            pid = int((folder / "pid").read_text())
        except (OSError, ValueError):
            continue  # no pid yet: a worker being started right now
        if _alive(pid):
            continue
        for item in folder.iterdir():
            item.unlink(missing_ok=True)
        try:
            folder.rmdir()
            removed.append(folder)
        except OSError:
            pass
    return removed


def stop_server(path: str | None) -> None:
    """Ask the worker at ``path`` to exit (no error if there is none)."""
    if not path:
        return
    sock = _connect(path)
    if sock is not None:
        with sock:
            payload = json.dumps({"stop": True}).encode()
            try:
                socket.send_fds(sock, [_HEADER.pack(len(payload))], [])
                sock.sendall(payload)
            except OSError:
                pass
        for _ in range(50):  # the worker removes its socket as it exits
            if not os.path.exists(path):
                break
            time.sleep(0.02)
    folder = Path(path).parent
    (folder / "pid").unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m hasfl.worker", description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--parent-pid", type=int, default=None)
    parser.add_argument("--idle-s", type=float, default=600.0)
    args = parser.parse_args(argv)
    serve(args.socket, args.parent_pid, args.idle_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
