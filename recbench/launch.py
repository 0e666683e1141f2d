"""How recbench starts its own programs as child processes: the source tree they import from
(SOURCE_ROOT, the directory holding the `recbench` package), the environment that makes a child
import this recbench (PYTHONPATH first, unbuffered output so ready lines arrive at once), a free
port to give a server (free_port), and a child whose output lines are awaited with deadlines
(LineProcess: `component=ps_server event=ready`, `PS_BENCHMARK_LOADED`, ...; no sleeps).

The PS runner's processes (local, ssh, docker) go through recbench.runner.execution, which adds
hosts, PID tracking and stop-on-error on top of the same readiness rule.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[1]


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
    """A child process whose stdout lines are collected by a thread; waits with deadlines."""

    def __init__(self, args: list[str], stdin: int | None = subprocess.DEVNULL):
        self.args = list(args)
        self.proc = subprocess.Popen(self.args, stdin=stdin, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=python_env())
        self.lines: list[str] = []
        self.cv = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.cv:
                self.lines.append(line.rstrip("\n"))
                self.cv.notify_all()
        with self.cv:
            self.cv.notify_all()

    def wait_line(self, needle: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                for line in self.lines:
                    if needle in line:
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.reader.is_alive()):
                    raise RuntimeError(f"{list(self.args)[:4]}: no '{needle}' within {timeout}s; "
                                       f"exit={self.proc.poll()} output: {self.lines[-5:]}")
                self.cv.wait(min(left, 0.5))

    def stop(self, timeout: float = 10.0) -> int | None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(5)
        return self.proc.returncode
