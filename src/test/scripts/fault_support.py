"""Shared pieces of the fault tests (test_faults_*.py, test_open_loop.py, ...): the transports a
fault test runs on, a ps_bench client process that can be released and killed, waiting for a
condition with a deadline (a condition that is polled, never a sleep that hopes something
happened), and stalling a process for a known time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from ps_testlib import ROOT

from recbench import _ps
from recbench.launch import LineProcess

# Transports whose server runs on this host without hardware (rdma needs a verbs device).
HOST_TRANSPORTS = ("brpc", "grpc", "shm")


def host_transports() -> list[str]:
    have = _ps.transports()
    return [t for t in HOST_TRANSPORTS if have.get(t, "absent") is None]


def wait_until(pred, timeout: float, what: str, interval: float = 0.02):
    """Poll pred() until it returns a truthy value (returned) or fail with `what` after timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = pred()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def stall(pid: int, seconds: float) -> None:
    """Stop process `pid` (SIGSTOP) for `seconds`, then continue it (SIGCONT, also on error): a
    stall of known length, the stimulus of a test, not a synchronisation."""
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)


class BenchProcess:
    """`python -m recbench.ps_bench` against a server, with the start barrier: start() returns
    once the load phase is done (PS_BENCHMARK_LOADED); go() releases the run phase."""

    def __init__(self, server, workdir: str, mode: str = "mixed", records: int = 2000,
                 threads: int = 2, depth: int = 4, seconds: float = 120, extra: list | None = None):
        self.args = [sys.executable, "-m", "recbench.ps_bench"] + server.bench_args(workdir) + [
            "--transport", server.transport, "--mode", mode, "--record_count", str(records),
            "--value_size", str(server.value_size), "--batch_keys", "100",
            "--thread_num", str(threads), "--prefetch_depth", str(depth),
            "--running_seconds", str(seconds), "--verify_deterministic_values",
            "--timeout_ms", "5000"] + list(extra or [])
        self.proc: subprocess.Popen | None = None
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._lp: LineProcess | None = None

    def start(self, timeout: float = 60) -> BenchProcess:
        self._lp = LineProcess(self.args, stdin=subprocess.PIPE, separate_stderr=True, cwd=ROOT)
        self.proc, self.stdout, self.stderr = self._lp.proc, self._lp.lines, self._lp.err_lines
        try:
            self._lp.wait_for(lambda: True if "PS_BENCHMARK_LOADED" in self.stdout else None,
                              "PS_BENCHMARK_LOADED", timeout)
        except RuntimeError:
            self.kill()
            raise AssertionError(f"ps_bench did not finish loading: {self.stderr[-5:]}") from None
        return self

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def wait(self, timeout: float) -> int:
        rc = self.proc.wait(timeout)
        for t in self._lp.readers:
            t.join(5)
        return rc

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc:
            self.proc.wait()
            for t in self._lp.readers:
                t.join(5)
            for s in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                try:
                    s.close()
                except OSError:
                    pass

    @property
    def pid(self) -> int:
        return self.proc.pid
