"""How recbench starts its own programs as child processes: the source tree they import from
(SOURCE_ROOT, the directory holding the `recbench` package), the environment that makes a child
import this recbench (PYTHONPATH first, unbuffered output so ready lines arrive at once), a free
port to give a server (free_port), and a child whose output lines are awaited with deadlines
(LineProcess: `PS_BENCHMARK_LOADED`, ...; no sleeps), and PSServerLauncher, the one way to start
a ps_server and wait for every shard's `component=ps_server event=ready` line.

The PS runner's processes (local, ssh, docker) go through recbench.runner.execution, which adds
hosts, PID tracking and stop-on-error on top of the same readiness rule.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TypeVar

from recbench import records

SOURCE_ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def python_env(base: dict[str, str] | None = None) -> dict[str, str]:
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
    collected by threads; waits for lines with deadlines."""

    def __init__(self, args: Sequence[str], stdin: int | None = subprocess.DEVNULL, *,
                 separate_stderr: bool = False, cwd: str | Path | None = None):
        self.args = list(args)
        self.proc = subprocess.Popen(self.args, stdin=stdin, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE if separate_stderr else subprocess.STDOUT,
                                     text=True, env=python_env(),
                                     cwd=None if cwd is None else str(cwd))
        self.lines: list[str] = []
        self.err_lines: list[str] = []  # only with separate_stderr (else stderr is in lines)
        self.cv = threading.Condition()
        self.reader = threading.Thread(target=self._read, args=(self.proc.stdout, self.lines),
                                       daemon=True)
        self.readers = [self.reader]
        if separate_stderr:
            self.readers.append(threading.Thread(target=self._read,
                                                 args=(self.proc.stderr, self.err_lines),
                                                 daemon=True))
        for t in self.readers:
            t.start()

    def _read(self, stream: IO[str] | None, sink: list[str]) -> None:
        assert stream is not None
        for line in stream:
            with self.cv:
                sink.append(line.rstrip("\n"))
                self.cv.notify_all()
        with self.cv:
            self.cv.notify_all()

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

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, wait up to timeout, then SIGKILL; joins the readers and closes the pipes."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for t in self.readers:
            t.join(5)
        for t, stream in zip(self.readers, (self.proc.stdout, self.proc.stderr)):
            if stream is not None and not t.is_alive():
                stream.close()
        return self.proc.returncode


def _ps_server_events(lines: Sequence[str], event: str) -> list[dict[str, str]]:
    return [records.parse_kv(x) for x in lines if "component=ps_server" in x
            and f"event={event}" in x]


class PSServerLauncher(LineProcess):
    """A ps_server process (`args`: its whole argv, usually `python -m recbench.ps_server ...`;
    stderr kept apart) whose readiness is every shard's `component=ps_server event=ready` line.
    The one way the tests and the harnesses start a PS server (the runner's ssh/docker processes
    go through recbench.runner.execution)."""

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
