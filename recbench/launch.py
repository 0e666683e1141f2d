"""How recbench starts its own programs as child processes — the one launcher of PS processes,
used by the runner (recbench.runner.execution wraps it for ssh and docker), the harnesses
(recbench.bench) and the tests: the source tree they import from (SOURCE_ROOT, the directory
holding the `recbench` package), the environment that makes a child import this recbench
(PYTHONPATH first, unbuffered output so ready lines arrive at once), a free port to give a server
(free_port), a child whose output lines are read by threads and awaited with deadlines
(LineProcess: marker lines, a copy into a log file, a stdin pipe for the `go` barrier, stop with
SIGTERM then SIGKILL; no sleeps), and PSServerLauncher, the one way to wait for every shard's
`component=ps_server event=ready` line.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, TypeVar

from recbench import records

SOURCE_ROOT = Path(__file__).resolve().parents[1]
STOP_GRACE_SECONDS = 5.0
T = TypeVar("T")


def python_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of `base` (default: os.environ) with SOURCE_ROOT first on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(SOURCE_ROOT) + (os.pathsep + old if old else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the OS says is free on `host` now (IPv6 literals work too)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class LineProcess:
    """A child process whose stdout lines (and, with separate_stderr, its stderr lines) are
    collected by threads; waits for lines with deadlines.

    `env` is the child's whole environment (default python_env()); `stdout_log` gets a copy of
    every stdout line; `stderr_log` takes stderr instead of the pipe; `markers` are texts whose
    first line is kept in `seen`; `cond` is the condition the readers notify (several processes
    may share one, so that an owner waits on all of them at once); `line_hook(line)` sees each
    stdout line first and returns True to consume it; `new_session` puts the child in its own
    process group, which stop() signals as a whole."""

    def __init__(self, args: Sequence[str], stdin: int | None = subprocess.DEVNULL, *,
                 separate_stderr: bool = False, cwd: str | Path | None = None,
                 env: Mapping[str, str] | None = None, stdout_log: str | None = None,
                 stderr_log: str | None = None, cond: threading.Condition | None = None,
                 markers: Iterable[str] = (), line_hook: Callable[[str], bool] | None = None,
                 new_session: bool = False):
        self.args = list(args)
        self.stdout_log = stdout_log
        self.stderr_log = stderr_log
        self.markers = list(markers)
        self.seen: dict[str, str] = {}  # marker -> the first line containing it
        self.lines: list[str] = []
        self.err_lines: list[str] = []  # only with separate_stderr (else stderr is in lines)
        self.cv = cond or threading.Condition()
        self.new_session = new_session
        self.stdout_closed = False
        self.returncode: int | None = None
        self._line_hook = line_hook
        if stdout_log:
            os.makedirs(os.path.dirname(stdout_log) or ".", exist_ok=True)
        err_file = open(stderr_log, "wb") if stderr_log else None  # noqa: SIM115 — closed below
        stderr: int | IO[bytes] = (err_file if err_file else
                                   subprocess.PIPE if separate_stderr else subprocess.STDOUT)
        try:
            self.proc = subprocess.Popen(self.args, stdin=stdin, stdout=subprocess.PIPE,
                                         stderr=stderr, text=True, errors="replace",
                                         env=dict(python_env() if env is None else env),
                                         cwd=None if cwd is None else str(cwd),
                                         start_new_session=new_session)
        finally:
            if err_file:
                err_file.close()
        log_file = open(stdout_log, "w") if stdout_log else None  # noqa: SIM115 — reader closes
        self.reader = threading.Thread(target=self._read_stdout, args=(log_file,), daemon=True)
        self.readers = [self.reader]
        if separate_stderr and not stderr_log:
            self.readers.append(threading.Thread(target=self._read,
                                                 args=(self.proc.stderr, self.err_lines),
                                                 daemon=True))
        for t in self.readers:
            t.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read_stdout(self, log_file: IO[str] | None) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.rstrip("\n")
            if self._line_hook is not None and self._line_hook(line):
                with self.cv:
                    self.cv.notify_all()
                continue
            if log_file is not None:
                log_file.write(raw)
                log_file.flush()
            with self.cv:
                self.lines.append(line)
                for marker in self.markers:
                    if marker not in self.seen and marker in line:
                        self.seen[marker] = line
                self.cv.notify_all()
        if log_file is not None:
            log_file.close()
        self.proc.wait()
        with self.cv:
            self.stdout_closed = True
            self.returncode = self.proc.returncode
            self.cv.notify_all()

    def _read(self, stream: IO[str] | None, sink: list[str]) -> None:
        assert stream is not None
        for line in stream:
            with self.cv:
                sink.append(line.rstrip("\n"))
                self.cv.notify_all()
        with self.cv:
            self.cv.notify_all()

    def exited(self) -> bool:
        """The process has exited and all of its stdout has been read."""
        return self.stdout_closed

    def wait_for(self, find: Callable[[], T | None], what: str, timeout: float) -> T:
        """The first non-None `find()` (called under the lock whenever a line arrives); raises
        RuntimeError when the deadline passes or the process has exited with all its output read."""
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                found = find()
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                done = self.proc.poll() is not None and not any(t.is_alive() for t in self.readers)
                if left <= 0 or done:  # every reader, not only stdout's: stderr may lag behind
                    break
                self.cv.wait(min(left, 0.5))
        for t in self.readers[1:]:  # the whole stderr, for the message and the caller
            t.join(5)
        tail = self.lines[-5:] + self.err_lines[-5:]
        raise RuntimeError(f"{list(self.args)[:4]}: no {what} within {timeout}s; "
                           f"exit={self.proc.poll()} output: {tail}")

    def wait_line(self, needle: str, timeout: float) -> str:
        return self.wait_for(lambda: next((x for x in self.lines if needle in x), None),
                             f"'{needle}'", timeout)

    def wait_err_line(self, needle: str, timeout: float) -> str:
        return self.wait_for(lambda: next((x for x in self.err_lines if needle in x), None),
                             f"stderr line '{needle}'", timeout)

    def wait(self, timeout: float) -> bool:
        """Until the process has exited and its stdout is read; False at the deadline."""
        deadline = time.monotonic() + timeout
        with self.cv:
            while not self.stdout_closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cv.wait(left)
        return True

    def send_line(self, text: str) -> bool:
        """Write one line to the child's stdin (a pipe); False when it is gone."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(text + "\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def signal(self, sig: signal.Signals) -> None:
        """`sig` to the child (to its whole process group with new_session)."""
        if self.new_session:
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        elif self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stop(self, timeout: float = STOP_GRACE_SECONDS) -> int | None:
        """SIGTERM, wait up to timeout, then SIGKILL; always reaps, joins the readers and closes
        the pipes. Returns the exit code."""
        if not self.exited():
            self.signal(signal.SIGTERM)
            self.wait(timeout)
        if not self.exited():
            self.signal(signal.SIGKILL)
            self.wait(timeout)
        if self.proc.poll() is None:  # e.g. the local ssh process of a vanished remote one
            self.proc.kill()
            self.proc.wait()
        for t in self.readers:
            t.join(timeout)
        for t, stream in zip(self.readers, (self.proc.stdout, self.proc.stderr)):
            if stream is not None and not t.is_alive():
                stream.close()
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except (OSError, ValueError):
            pass
        return self.proc.returncode


def _ps_server_events(lines: Sequence[str], event: str) -> list[dict[str, str]]:
    return [records.parse_kv(x) for x in lines if "component=ps_server" in x
            and f"event={event}" in x]


class PSServerLauncher(LineProcess):
    """A ps_server process (`args`: its whole argv, usually `python -m recbench.ps_server ...`;
    stderr kept apart) whose readiness is every shard's `component=ps_server event=ready` line.
    How the tests and the harnesses start a PS server; the runner's processes are LineProcesses
    too (recbench.runner.execution.Proc adds the host, ssh/docker and the remote PID)."""

    def __init__(self, args: Sequence[str], num_shards: int = 1, *,
                 cwd: str | Path | None = None):
        super().__init__(args, separate_stderr=True, cwd=cwd)
        self.num_shards = num_shards

    def wait_ready(self, timeout: float) -> list[dict[str, str]]:
        """The ready lines (k=v dicts) of every shard, in shard order. RuntimeError when the
        server exits first (exit code 77: its transport's device is missing) or is late."""
        def find() -> list[dict[str, str]] | None:
            by_shard = {int(kv["shard"]): kv for kv in _ps_server_events(self.lines, "ready")}
            return [by_shard[s] for s in sorted(by_shard)] if len(by_shard) >= self.num_shards \
                else None
        return self.wait_for(find, f"event=ready of {self.num_shards} shard(s)", timeout)

    def stopped_lines(self) -> list[dict[str, str]]:
        """The `event=stopped` lines (each shard's final counters) printed so far."""
        with self.cv:
            return _ps_server_events(self.lines, "stopped")
