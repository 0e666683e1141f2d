"""Test support for the parameter server: start real `recbench.ps_server` processes on loopback.

    from ps_testlib import PSServerProcess, require_transport

    require_transport(self, "grpc")                    # skips with the build's reason if absent
    with PSServerProcess("grpc", num_shards=2, value_size=64) as srv:
        client = recbench.PSClient(srv.uri)           # "grpc://127.0.0.1:p0,127.0.0.1:p1"
        ...
    srv.final_lines                                    # the 'event=stopped' lines, by shard

Servers are started by recbench.launch.PSServerLauncher (the one launcher of PS servers) and bind port 0 (a free ephemeral port, read back from the ready line), so tests can run
concurrently. Readiness is the server's own ready line, awaited with a deadline (no sleeps). Every
started process is stopped with SIGTERM (SIGKILL if it does not exit within the timeout) by stop(),
by the context manager, and at interpreter exit as a last resort, so no test leaves one behind.
Exit code 77 (the transport's device is missing) becomes unittest.SkipTest with the reason.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import unittest
from pathlib import Path

import numpy as np

from recbench import procfs, records
from recbench.launch import PSServerLauncher, python_env

ROOT = Path(__file__).resolve().parents[3]
SKIP_EXIT_CODE = 77
_live: set = set()


def rows_for(keys: np.ndarray, dim: int, *, scale: float = 4.0, step: float = 1.0,
             offset: float | np.ndarray = 0.0, modulus: int = 0) -> np.ndarray:
    """Rows a test can tell apart and check, dim float32 wide: column j of key k's row is
    (k mod modulus) * scale + offset + j * step (modulus 0: k itself; offset a number or one per
    key), computed in float64 and rounded once. A modulus keeps the rows of keys up to 2^64
    apart and exact."""
    k = np.asarray(keys, dtype=np.uint64)
    if modulus:
        k = k % np.uint64(modulus)
    off = np.asarray(offset, dtype=np.float64)
    if off.ndim:
        off = off[:, None]
    cols = np.arange(dim, dtype=np.float64)[None, :] * step
    return (k.astype(np.float64)[:, None] * scale + off + cols).astype(np.float32)


def loopback_congestion() -> str:
    """The TCP congestion control a brpc or gRPC connection on loopback gets by default
    (tcp_congestion=auto): cubic where the host's default is a BBR and this process may choose
    cubic, else the host's default."""
    default = procfs.tcp_congestion_control() or "?"
    if not default.startswith("bbr"):
        return default
    allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text().split()
    return "cubic" if "cubic" in allowed or os.geteuid() == 0 else default


def require_transport(test: unittest.TestCase | None, name: str) -> None:
    """Skip the test (with the build's reason) when transport `name` is not compiled in."""
    from recbench import _ps

    reason = _ps.transports().get(name, f"unknown transport {name}")
    if reason is not None:
        raise unittest.SkipTest(f"transport {name} unavailable: {reason}")


class PSServerProcess:
    """One `python -m recbench.ps_server` process serving num_shards shards on free ports."""

    def __init__(self, transport: str = "brpc", num_shards: int = 1, value_size: int = 64,
                 capacity: int = 100000, num_threads: int = 1, max_keys_per_request: int = 1000,
                 index_type: str = "DRAM_PET_HASH", extra_args: list[str] | None = None,
                 ready_timeout: float = 30.0):
        self.transport = transport
        self.num_shards = num_shards
        self.value_size = value_size
        self.args = [
            sys.executable, "-m", "recbench.ps_server", "--transport", transport,
            "--host", "127.0.0.1", "--port", "0", "--num_shards", str(num_shards),
            "--value_size", str(value_size), "--capacity", str(capacity),
            "--num_threads", str(num_threads), "--max_keys_per_request",
            str(max_keys_per_request), "--index_type", index_type,
        ] + list(extra_args or [])
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen | None = None
        self.stdout_lines: list[str] = []
        self.stderr_lines: list[str] = []
        self.ports: list[int] = []
        self.ready_lines: list[dict] = []
        self.final_lines: list[dict] = []
        self.returncode: int | None = None

    # ---- lifecycle --------------------------------------------------------------------------
    def start(self) -> PSServerProcess:
        self._launcher = PSServerLauncher(self.args, self.num_shards, cwd=ROOT)
        self.proc = self._launcher.proc
        self.stdout_lines = self._launcher.lines
        self.stderr_lines = self._launcher.err_lines
        _live.add(self)
        try:
            self.ready_lines = self._launcher.wait_ready(self.ready_timeout)
        except RuntimeError:
            self.stop()
            if self.returncode == SKIP_EXIT_CODE:
                raise unittest.SkipTest(f"{self.transport}: " + " ".join(self.stderr_lines)) from None
            raise RuntimeError(
                f"ps_server ({self.transport}) not ready within {self.ready_timeout}s "
                f"(exit {self.returncode}): stderr: {' | '.join(self.stderr_lines[-5:])}") from None
        self.ports = [int(kv["port"]) for kv in self.ready_lines]
        return self

    def wait_stderr(self, text: str, timeout: float = 30.0) -> str:
        """The first stderr line containing `text` (stderr is read by its own thread, so a line the
        server wrote before its ready line may not have been read yet when start() returns)."""
        try:
            return self._launcher.wait_err_line(text, timeout)
        except RuntimeError:
            raise AssertionError(f"no stderr line containing {text!r} within {timeout}s: "
                                 + " | ".join(self.stderr_lines[-5:])) from None

    def wait_for(self, find, what: str, timeout: float = 30.0):
        """The first non-None `find()`, re-evaluated whenever the server prints a line (stdout or
        stderr); None at the deadline or once the server has exited."""
        try:
            return self._launcher.wait_for(find, what, timeout)
        except RuntimeError:
            return None

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, wait up to timeout, SIGKILL if needed; returns the exit code."""
        if self.proc is None:
            return self.returncode
        self.returncode = self._launcher.stop(timeout)
        self.final_lines = self._launcher.stopped_lines()
        _live.discard(self)
        self.proc = None
        return self.returncode

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def endpoints(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", p) for p in self.ports]

    @property
    def uri(self) -> str:
        return f"{self.transport}://" + ",".join(f"{h}:{p}" for h, p in self.endpoints)

    def write_config(self, directory: str | Path) -> str:
        """A RecStore config naming this server's shards and ports; returns its path."""
        import json

        from recbench.ps_config import build_config

        path = Path(directory) / f"ps_{self.transport}_{self.ports[0]}.json"
        path.write_text(json.dumps(build_config(self.transport, self.endpoints,
                                                value_size=self.value_size)))
        return str(path)

    def bench_args(self, directory: str | Path) -> list[str]:
        """ps_bench flags that point at this server (through a config file in directory)."""
        return ["--config_path", self.write_config(directory)]

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def live_servers() -> list:
    """Servers started and not yet stopped."""
    return [srv for srv in _live if srv.proc is not None and srv.proc.poll() is None]


class NoLeftoverServers:
    """Mixin for TestCase: a test that leaves a ps_server running fails, and the server is
    stopped, so the leak is blamed on that test alone (not on every test after it)."""

    def setUp(self):
        super().setUp()
        self._servers_before = set(live_servers())

    def tearDown(self):
        left = [srv for srv in live_servers() if srv not in self._servers_before]
        names = [f"{srv.transport} pid {srv.pid}" for srv in left]
        for srv in left:
            srv.stop()
        super().tearDown()
        self.assertEqual(names, [], "the test left a ps_server running")


def run_ps_bench(args: list[str], input_text: str | None = None, timeout: float = 60.0):
    """Run `python -m recbench.ps_bench ARGS` to completion; returns CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "recbench.ps_bench"] + args, input=input_text,
                          capture_output=True, text=True, timeout=timeout, env=python_env(),
                          check=False,
                          cwd=str(ROOT))


def result_lines(stdout: str) -> dict:
    """PS_BENCHMARK_RESULT lines by phase -> key/value dict."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("PS_BENCHMARK_RESULT "):
            kv = records.parse_kv(line)
            out[kv["phase"]] = kv
    return out


@atexit.register
def _stop_leftovers():
    for srv in list(_live):
        srv.stop(timeout=2)
