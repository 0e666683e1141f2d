"""Fault tests: kill -9 a server or a client in the middle of a run, on every transport this host
serves (brpc, grpc and shm; rdma needs a verbs device).

- Server killed: a client with requests in flight (ps_bench in its run phase) and an idle
  PSClient both fail fast with an error naming the server's address; nothing is left running and
  no shared-memory object is left behind.
- Client killed: the server keeps serving the other clients (rows verified) and frees what the
  dead client held: its sockets and, for shm, its lanes' shared-memory mappings.
"""

import os
import signal
import tempfile
import unittest

import numpy as np
from fault_support import BenchProcess, host_transports, wait_until
from ps_testlib import PSServerProcess, rows_for

import recbench
from recbench import errors, procfs

VS = 64


def shm_objects(pid: int) -> list[str]:
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"recbench-rc-{pid}-")]


def run_started(client) -> bool:
    """True once the bench's run phase reached the server (mixed mode GETs; load only PUTs)."""
    return sum(s.get("handled_get", 0) for s in client.stats()) > 0


class ServerKilledTest(unittest.TestCase):
    def test_clients_fail_fast_naming_the_server(self):
        transports = host_transports()
        self.assertIn("brpc", transports)
        for t in transports:
            with self.subTest(transport=t), tempfile.TemporaryDirectory() as d:
                srv = PSServerProcess(t, num_shards=2, value_size=VS).start()
                bench = None
                try:
                    idle = recbench.PSClient(srv.uri, timeout_ms=5000)
                    keys = np.arange(1, 201, dtype=np.uint64)
                    idle.put(keys, rows_for(keys, VS // 4))
                    bench = BenchProcess(srv, d, seconds=120).start()
                    bench.go()
                    wait_until(lambda c=idle: run_started(c), 30, "the run phase to reach the server")
                    server_pid = srv.pid
                    os.kill(server_pid, signal.SIGKILL)
                    srv.stop()
                    # far below the bench's 120 s run and its 5 s request timeout: it noticed
                    rc = bench.wait(timeout=30)
                    err = "\n".join(bench.stderr)
                    self.assertEqual(rc, 1, err)
                    ports = "|".join(str(p) for p in srv.ports)
                    self.assertRegex(err, rf"error: .*127\.0\.0\.1:({ports})")
                    self.assertFalse(any("phase=run" in ln for ln in bench.stdout))
                    with self.assertRaises(errors.RecbenchError) as cm:
                        idle.get(keys)
                    self.assertIsInstance(cm.exception, (errors.ConnectionFailed, errors.Timeout))
                    self.assertRegex(str(cm.exception), r"127\.0\.0\.1:\d+")
                    idle.close()
                    self.assertFalse(procfs.alive(server_pid))
                    self.assertFalse(procfs.alive(bench.pid))
                    self.assertEqual(shm_objects(server_pid), [])
                    self.assertEqual(shm_objects(bench.pid), [])
                finally:
                    if bench:
                        bench.kill()
                    srv.stop()


WORKERS = 2  # server threads


def fd_split(pid: int) -> tuple[int, int]:
    """(sockets, every other descriptor) the process has open."""
    kinds = procfs.fd_kinds(pid)
    socks = kinds.get("socket", 0)
    return socks, sum(kinds.values()) - socks


class ClientKilledTest(unittest.TestCase):
    def test_server_keeps_serving_and_frees_the_dead_client(self):
        for t in host_transports():
            with self.subTest(transport=t), tempfile.TemporaryDirectory() as d:
                with PSServerProcess(t, num_shards=1, value_size=VS, num_threads=WORKERS) as srv:
                    other = recbench.PSClient(srv.uri, timeout_ms=5000)
                    keys = np.arange(100001, 100301, dtype=np.uint64)
                    other.put(keys, rows_for(keys, VS // 4))
                    socks0, other0 = fd_split(srv.pid)
                    maps0 = procfs.shm_mappings(srv.pid)
                    bench = BenchProcess(srv, d, seconds=120, threads=2, depth=4).start()
                    try:
                        bench.go()
                        wait_until(lambda c=other: run_started(c), 30, "the run phase to start")
                        self.assertGreater(fd_split(srv.pid)[0], socks0)  # the bench's sockets
                        if t == "shm":
                            self.assertGreater(procfs.shm_mappings(srv.pid), maps0)
                    finally:
                        bench.kill()
                    self.assertEqual(bench.proc.returncode, -signal.SIGKILL)
                    # sockets back to their count exactly; other descriptors (epoll, eventfd,
                    # pipes) at most one more per worker thread: gRPC core creates a worker's
                    # wakeup fd the first time that worker polls, which may be during the bench
                    wait_until(lambda p=srv.pid, n=socks0, o=other0:
                               fd_split(p)[0] == n and fd_split(p)[1] <= o + WORKERS, 20,
                               "the server to close the dead client's sockets")
                    wait_until(lambda p=srv.pid, n=maps0: procfs.shm_mappings(p) == n, 20,
                               "the server to unmap the dead client's lanes")
                    np.testing.assert_array_equal(other.get(keys), rows_for(keys, VS // 4))
                    other.update(keys[:10], np.ones((10, VS // 4), np.float32))
                    np.testing.assert_array_equal(other.get(keys[:10]), rows_for(keys[:10], VS // 4) + 1)
                    with recbench.PSClient(srv.uri, timeout_ms=5000) as fresh:
                        np.testing.assert_array_equal(fresh.get(keys[10:]), rows_for(keys[10:], VS // 4))
                    other.close()
                    self.assertEqual(shm_objects(bench.pid), [])
                    self.assertTrue(procfs.alive(srv.pid))
                self.assertEqual(srv.returncode, 0)


if __name__ == "__main__":
    unittest.main()
