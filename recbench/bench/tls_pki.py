"""A throw-away PKI for gRPC TLS tests and benchmarks, made with the openssl command line: a CA,
a server certificate it signed for 127.0.0.1 / ::1 / localhost (subjectAltName), and a second,
unrelated CA a client can wrongly trust. Keys are unencrypted and live in the given directory."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class TestPKI:
    ca: str          # PEM roots that verify `cert`
    cert: str        # server certificate chain
    key: str         # server private key
    other_ca: str    # a CA that did not sign `cert`


def _openssl(*args: str) -> None:
    p = subprocess.run(["openssl", *args], check=False, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {p.stderr.strip()[-400:]}")


def make_test_pki(directory: str, days: int = 2) -> TestPKI:
    d = os.path.abspath(directory)
    os.makedirs(d, exist_ok=True)
    def j(name: str) -> str:
        return os.path.join(d, name)

    for ca in ("ca", "other_ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", j(f"{ca}.key"),
                 "-out", j(f"{ca}.pem"), "-days", str(days), "-subj", f"/CN=recbench test {ca}")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", j("server.key"), "-out",
             j("server.csr"), "-subj", "/CN=localhost")
    with open(j("san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", j("server.csr"), "-CA", j("ca.pem"), "-CAkey", j("ca.key"),
             "-CAcreateserial", "-out", j("server.pem"), "-days", str(days), "-extfile",
             j("san.ext"))
    os.chmod(j("server.key"), 0o600)
    return TestPKI(ca=j("ca.pem"), cert=j("server.pem"), key=j("server.key"),
                   other_ca=j("other_ca.pem"))
