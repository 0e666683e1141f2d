"""The runner's --auth-token-file: locally and over ssh (a real sshd on loopback), servers
require the token and clients send it; remote hosts get their copy of the file (mode 600) beside
the config, removed afterwards; the token is in no output file and in no command line."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from loopback_sshd import LoopbackSshd

from recbench.bench.tls_pki import make_test_pki

REPO = Path(__file__).resolve().parents[3]
RUNNER = REPO / "tools" / "benchmarks" / "run_benchmark_ps.py"
SMALL = ["--profile", "smoke", "--record-count", "2000", "--runtime-seconds", "0.5",
         "--server-worker-threads", "1", "--cluster-timeout", "30", "--client-timeout", "60"]
TOKEN = "runner-Token-51d0e3"


def run_runner(args, timeout=240):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(RUNNER)] + args, capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=str(REPO), stdin=subprocess.DEVNULL)


def free_port(host="127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class RunnerAuth(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rs_runner_auth_")
        self.out = os.path.join(self.tmp, "out")
        self.token = os.path.join(self.tmp, "token")
        Path(self.token).write_text(TOKEN + "\n")
        os.chmod(self.token, 0o600)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def check_run(self, res):
        self.assertEqual(res.returncode, 0, res.stdout[-1000:] + res.stderr[-3000:])
        self.assertNotIn(TOKEN, res.stdout + res.stderr)
        rows = list(Path(self.out, "summary.csv").read_text().splitlines())
        self.assertTrue(all(",success," in r for r in rows[1:]), rows)
        for f in Path(self.out).rglob("*"):
            if f.is_file():
                self.assertNotIn(TOKEN.encode(), f.read_bytes(), str(f))
        run = json.loads(Path(self.out, "run_config.json").read_text())
        argv = [a for case in run["cases"] for c in case["commands"] for a in c["argv"]]
        self.assertTrue(any(a.startswith("--auth_token_file=") for a in argv))
        return argv

    def test_local(self):
        res = run_runner(SMALL + ["--transports", "brpc", "--auth-token-file", self.token,
                                  "--output-dir", self.out])
        self.check_run(res)

    @unittest.skipIf(shutil.which("openssl") is None, "the openssl command is not installed")
    def test_grpc_tls_with_token(self):
        pki = make_test_pki(os.path.join(self.tmp, "pki"))
        res = run_runner(SMALL + ["--transports", "grpc,brpc", "--auth-token-file", self.token,
                                  "--grpc-tls-cert", pki.cert, "--grpc-tls-key", pki.key,
                                  "--grpc-tls-ca", pki.ca, "--output-dir", self.out])
        self.check_run(res)
        run = json.loads(Path(self.out, "run_config.json").read_text())
        for case in run["cases"]:
            argv = [a for c in case["commands"] for a in c["argv"]]
            tls = [a.split("=", 1)[0] for a in argv if a.startswith("--tls_")]
            if case["transport"].lower() == "grpc":
                self.assertEqual(sorted(set(tls)), ["--tls_ca", "--tls_cert", "--tls_key"])
            else:
                self.assertEqual(tls, [])  # TLS is for grpc only
        half = run_runner(SMALL + ["--transports", "grpc", "--grpc-tls-cert", pki.cert,
                                   "--output-dir", self.out + "2"])
        self.assertNotEqual(half.returncode, 0)
        self.assertIn("go together", half.stderr)

    def test_missing_token_file_refused(self):
        res = run_runner(SMALL + ["--transports", "brpc", "--auth-token-file",
                                  os.path.join(self.tmp, "nope"), "--output-dir", self.out])
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("--auth-token-file", res.stderr)

    @unittest.skipIf(LoopbackSshd.unavailable_reason(), LoopbackSshd.unavailable_reason() or "")
    def test_over_ssh(self):
        sshd = LoopbackSshd().start()
        try:
            remote = os.path.join(self.tmp, "remote")
            port = free_port("127.0.0.2")
            res = run_runner(SMALL + [
                "--execution-backend", "ssh", "--ssh-config", sshd.ssh_config,
                "--remote-repo", str(REPO), "--remote-python", sys.executable,
                "--remote-runtime-root", remote, "--remote-sync", "check",
                "--transports", "brpc", "--server-plan", f"0:127.0.0.2:{port}:0",
                "--client-plan", "0:client-a", "--auth-token-file", self.token,
                "--output-dir", self.out])
            argv = self.check_run(res)
            staged = {a.split("=", 1)[1] for a in argv if a.startswith("--auth_token_file=")}
            self.assertTrue(all(p.startswith(remote) for p in staged), staged)
            self.assertFalse(any(Path(remote).rglob("auth_token")))  # removed with the config
        finally:
            sshd.stop()


if __name__ == "__main__":
    unittest.main()
