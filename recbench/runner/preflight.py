"""Per-host preflight of the PS runner: what recbench build a host has, whether it has RDMA verbs
devices, and whether the server ports are free.

`host_facts(ports)` gathers the facts of the host it runs on; `python -m recbench.runner.preflight
--ports h:p,...` prints the same as one JSON line, which is how the runner asks a remote host
(over ssh, inside the container when there is one). The runner then compares each host with the
local one (`compare_with_local`) for `--remote-sync check`.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import socket
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from recbench import procfs, transports
from recbench.cpuinfo import cpu_model

PREFLIGHT_MARKER = "RECBENCH_PREFLIGHT="


def port_state(host: str, port: int) -> str:
    """'free', 'in use', 'not a local address' or 'unresolvable' (an ssh alias, say) for host:port,
    by binding it now with SO_REUSEADDR as servers do."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        return "free"
    except socket.gaierror:
        return "unresolvable"
    except OSError as exc:
        return "not a local address" if exc.errno == errno.EADDRNOTAVAIL else "in use"
    finally:
        s.close()


def port_free(host: str, port: int) -> bool:
    return port_state(host, port) == "free"


def recbench_build() -> dict[str, Any]:
    """build_info() of the recbench importable here, or {'error': ...}."""
    try:
        import recbench

        info: dict[str, Any] = recbench.build_info()
        info["package_version"] = recbench.__version__
        info["package_path"] = os.path.dirname(os.path.abspath(recbench.__file__))
        return info
    except Exception as exc:  # noqa: BLE001 — any import/build problem is reported, not raised
        return {"error": f"{type(exc).__name__}: {exc}"}


def transport_availability() -> dict[str, str | None]:
    """{transport: None when this build of recbench has it, else the reason it does not}, for every
    transport of recbench.transports."""
    try:
        from recbench import _ps
    except ImportError as exc:
        return {t: f"recbench._ps is not built ({exc})" for t in transports.NAMES}
    built: dict[str, str | None] = _ps.transports()
    return {t: built.get(t, "unknown to this build of recbench") for t in transports.NAMES}


def host_facts(ports: Iterable[tuple[str, int]] = ()) -> dict[str, Any]:
    from recbench import rdma
    from recbench.lab.facts import guest_facts

    devices, reason = rdma.devices_status()
    facts: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "python": sys.version.split()[0],
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "sched_autogroup": procfs.sched_autogroup(),
        "tcp_congestion_control": procfs.tcp_congestion_control(),
        "recbench": recbench_build(),
        "rdma_devices": devices,
        "rdma_reason": reason,
        "transports": transport_availability(),
        "lab": guest_facts(),
        "ports": {},
    }
    for host, port in ports:
        facts["ports"][f"{host}:{port}"] = port_state(host, port)
    return facts


def parse_ports(text: str | None) -> list[tuple[str, int]]:
    out = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, port = item.rsplit(":", 1)
        out.append((host.strip("[]"), int(port)))
    return out


def compare_with_local(local: dict[str, Any], remote: dict[str, Any], host_label: str,
                       check_commit: bool = True) -> list[str]:
    """Problems (list of sentences) that make a remote host unfit for the run."""
    problems = []
    rb = remote.get("recbench", {})
    lb = local.get("recbench", {})
    if "error" in rb:
        return [f"{host_label}: recbench does not import: {rb['error']}"]
    if rb.get("version") != lb.get("version"):
        problems.append(f"{host_label}: recbench version {rb.get('version')} differs from local "
                        f"{lb.get('version')}")
    if check_commit and rb.get("commit") != lb.get("commit"):
        problems.append(f"{host_label}: recbench commit {rb.get('commit')} differs from local "
                        f"{lb.get('commit')} (use --remote-sync rsync, or update the host)")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Print this host's recbench/RDMA/port facts as JSON.")
    ap.add_argument("--ports", default="", help="host:port,... to test for being free")
    args = ap.parse_args(argv)
    print(PREFLIGHT_MARKER + json.dumps(host_facts(parse_ports(args.ports))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
