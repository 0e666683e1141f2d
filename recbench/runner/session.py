"""One invocation of the PS runner: preflight every host, run every transport x repeat case, and
write the outputs.

A case: write the config (locally, and on every remote host through ssh stdin), start the shard
servers and wait for their ready lines (or, after --startup-delay, for their ports) within
--cluster-timeout; start every client process; wait until each has printed PS_BENCHMARK_LOADED
(or exited); write `go` to all of them at once so their run phases share one window; wait for
them within --client-timeout (counted from the client start, for the whole group); read the
servers' CPU time over that window from /proc; stop everything. A failed or skipped case gives
rows with its status and never stops the other cases; the summary files are always written.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType
from typing import Any

from recbench import latency_hist, procfs, records
from recbench.lab import facts as lab_facts
from recbench.launch import SOURCE_ROOT
from recbench.runner import case as case_procs
from recbench.runner import preflight, report, results
from recbench.runner.case import (
    LOADED_MARKER,
    SECURITY_FILES,
    Case,
    HostPlace,
    PreflightError,
    ProcSpec,
    ProgramFlags,
)
from recbench.runner.config import build_runtime_config
from recbench.runner.execution import REGISTRY, Host, Proc, Ssh, shell_join, start_process
from recbench.runner.plan import Plan
from recbench.runner.topology import ClientSpec, ServerSpec, Topology, format_hostport
from recbench.transports import Transport

log = logging.getLogger("recbench.runner")

SKIP_EXIT_CODE = 77
REPO_ROOT = SOURCE_ROOT
RUNNER_VERSION = 1
RESULT_DIR_PREFIX = "benchmark_ps_"


def git_state(root: Path = REPO_ROOT) -> dict[str, Any]:
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True, timeout=10).stdout.strip()
        dirty = bool(subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                     "--untracked-files=no"], capture_output=True, text=True,
                                    timeout=10, check=False).stdout.strip())
        return {"commit": commit, "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "dirty": False}


def _tail(path: str | None, n: int = 3) -> str:
    if path is None:
        return ""
    try:
        with open(path, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
        return " | ".join(lines[-n:])
    except OSError:
        return ""


class Session:
    def __init__(self, plan: Plan, argv: list[str]):
        self.plan = plan
        self.argv = argv
        self.started = time.monotonic()
        self.output_dir = self._output_dir()
        self.rows: list[dict[str, Any]] = []           # summary.csv rows, in order
        self.cases: list[dict[str, Any]] = []          # run_config.json "cases"
        self.case_cpu: list[tuple[str, int, float | None, str]] = []
        self.ssh: Ssh | None = None
        self.hosts: dict[str, Host] = {}
        self.facts: dict[str, dict[str, Any]] = {}     # host label -> preflight facts
        self.host_problems: dict[str, list[str]] = {}
        self.help_cache: dict[tuple[str, tuple[str, ...]], ProgramFlags] = {}
        self.not_forwarded: set[str] = set()
        self.run_tag = f"run_{os.getpid()}_{int(time.time())}"
        self.remote_repo = plan.execution.remote_repo or str(REPO_ROOT)
        self.remote_python = plan.execution.remote_python or f"{self.remote_repo}/.venv/bin/python"
        self.interrupted = False

    # ---- setup ---------------------------------------------------------------------------
    def _output_dir(self) -> Path:
        if not self.plan.execution.output_dir:
            return records.new_result_dir(REPO_ROOT / "results", RESULT_DIR_PREFIX)
        path = Path(self.plan.execution.output_dir)
        if not path.is_absolute():
            path = REPO_ROOT / path
        path.mkdir(parents=True, exist_ok=True)
        return path

    def host(self, ssh_host: str | None) -> Host:
        if self.plan.execution.execution_backend == "local":
            ssh_host = None
        key = ssh_host or "local"
        if key not in self.hosts:
            if ssh_host is None:
                self.hosts[key] = Host(None, repo=str(REPO_ROOT))
            else:
                if self.ssh is None:
                    # a host cut off from the network must be reported within --cluster-timeout,
                    # not after ssh's connect timeout (10 s) or the kernel's (minutes)
                    self.ssh = Ssh(self.plan.execution.ssh_config or None, self.plan.execution.ssh_option,
                                   connect_timeout=max(1, min(10, int(self.plan.execution.cluster_timeout))))
                self.hosts[key] = Host(ssh_host, self.ssh, self.remote_repo,
                                       self.plan.execution.remote_container or None)
        return self.hosts[key]

    def launcher(self, host: Host, module: str, binary: str) -> list[str]:
        return case_procs.launcher(host.remote, self.remote_repo, self.remote_python, module,
                                   binary, REPO_ROOT, sys.executable)

    # ---- preflight -----------------------------------------------------------------------
    def _remote_facts(self, host: Host,
                      ports: Sequence[tuple[str, int]]) -> tuple[dict[str, Any] | None, str | None]:
        port_arg = ",".join(f"{h}:{p}" for h, p in ports)
        cmd = (f"PYTHONPATH={host.repo} {shell_join([self.remote_python])} -m recbench.runner.preflight"
               f" --ports {shell_join([port_arg])}" if port_arg else
               f"PYTHONPATH={host.repo} {shell_join([self.remote_python])} -m recbench.runner.preflight")
        try:
            res = host.run(cmd, timeout=max(30, self.plan.execution.cluster_timeout))
        except subprocess.TimeoutExpired:
            return None, f"{host.label()}: preflight over ssh timed out"
        for line in res.stdout.splitlines():
            if line.startswith(preflight.PREFLIGHT_MARKER):
                return json.loads(line[len(preflight.PREFLIGHT_MARKER):]), None
        detail = (res.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"{host.label()}: preflight failed (exit {res.returncode}): {detail}"

    def _rsync(self, host: Host) -> str | None:
        """--remote-sync rsync: copy the source tree (not .venv, builds, results) and build it."""
        plan = self.plan
        ssh = self.ssh
        assert ssh is not None and host.ssh_host is not None, "rsync needs the ssh backend"
        excludes = ["/.venv", "/build", "/results", "*.so", "__pycache__", "/.git",
                    "/csrc/proto/gen", ".pytest_cache"]
        if plan.execution.remote_container:
            staging = f"/tmp/recbench_sync_{os.getpid()}"
            target = f"{host.ssh_host}:{staging}/"
        else:
            target = f"{host.ssh_host}:{self.remote_repo}/"
        mk = staging if plan.execution.remote_container else self.remote_repo
        res = subprocess.run(ssh.base_args(host.ssh_host) + ["mkdir", "-p", mk],
                             capture_output=True, text=True, timeout=60, check=False)
        if res.returncode != 0:
            return f"{host.label()}: mkdir -p {mk} failed: {res.stderr.strip()}"
        rsh = shell_join(ssh.base_args(host.ssh_host)[:-1])
        cmd = ["rsync", "-a", "--delete", "-e", rsh] + [f"--exclude={e}" for e in excludes] + [
            f"{REPO_ROOT}/", target]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        if res.returncode != 0:
            return f"{host.label()}: rsync failed: {res.stderr.strip()[-300:]}"
        if plan.execution.remote_container:
            res = subprocess.run(ssh.base_args(host.ssh_host) + [
                "docker", "exec", plan.execution.remote_container, "mkdir", "-p", self.remote_repo],
                capture_output=True, text=True, timeout=120, check=False)
            if res.returncode != 0:
                return f"{host.label()}: docker exec mkdir failed: {res.stderr.strip()}"
            res = subprocess.run(ssh.base_args(host.ssh_host) + [
                "docker", "cp", f"{staging}/.", f"{plan.execution.remote_container}:{self.remote_repo}"],
                capture_output=True, text=True, timeout=600, check=False)
            if res.returncode != 0:
                return f"{host.label()}: docker cp failed: {res.stderr.strip()}"
        res = host.run(plan.execution.remote_build_command, timeout=1800)
        if res.returncode != 0:
            return (f"{host.label()}: {plan.execution.remote_build_command!r} failed "
                    f"(exit {res.returncode}): "
                    f"{(res.stderr or res.stdout).strip()[-300:]}")
        return None

    def preflight_hosts(self, topologies: Mapping[str, Topology]) -> None:
        plan = self.plan
        ports_by_host: dict[str, set[tuple[str, int]]] = {}
        for topo in topologies.values():
            for s in topo.launched_servers():
                ports_by_host.setdefault(self.host(s.ssh_host).label(), set()).add((s.host, s.port))
            for c in topo.clients:
                ports_by_host.setdefault(self.host(c.ssh_host).label(), set())
        local_facts = preflight.host_facts(sorted(ports_by_host.get("local", ())))
        self.facts["local"] = local_facts
        if "local" in ports_by_host:
            self.host_problems["local"] = self._build_problems("local", local_facts)
        remote = [label for label in ports_by_host if label != "local"]
        if plan.execution.remote_sync == "rsync":  # sequential: two aliases may name one host and directory
            for label in remote:
                err = self._rsync(self.hosts[label])
                if err:
                    self.host_problems[label] = [err]
        todo = [label for label in remote if not self.host_problems.get(label)]
        local = Host(None, repo=str(REPO_ROOT))
        with ThreadPoolExecutor(max_workers=max(2, min(8, len(todo) + 2))) as pool:
            helps = [pool.submit(self.program_flags, local, [sys.executable, "-m", module])
                     for module in ("recbench.ps_server", "recbench.ps_bench")]
            for label, problems in zip(todo, pool.map(
                    lambda lbl: self._check_remote(lbl, local_facts, sorted(ports_by_host[lbl])),
                    todo)):
                self.host_problems[label] = problems
            for f in helps:
                f.result()

    def _check_remote(self, label: str, local_facts: dict[str, Any],
                      ports: Sequence[tuple[str, int]]) -> list[str]:
        """Facts and problems of one remote host; also reads its programs' --help once."""
        plan = self.plan
        host = self.hosts[label]
        facts, err = self._remote_facts(host, ports)
        if err or facts is None:
            return [err or f"{label}: preflight gave no facts"]
        self.facts[label] = facts
        problems = []
        if plan.execution.remote_sync in ("check", "rsync"):
            problems += preflight.compare_with_local(local_facts, facts, label,
                                                     check_commit=plan.execution.remote_sync == "check")
        problems += self._build_problems(label, facts)
        if not problems:
            for module, binary in (("recbench.ps_server", plan.execution.server_binary),
                                   ("recbench.ps_bench", plan.execution.benchmark_binary)):
                if module == "recbench.ps_server" and binary:
                    continue  # a RecStore-compatible binary: its --help is not asked (gflags)
                self.program_flags(host, self.launcher(host, module, binary))
        return problems

    def _build_problems(self, label: str, facts: dict[str, Any]) -> list[str]:
        info = facts.get("recbench", {})
        if "error" in info:
            return [f"{label}: recbench does not import: {info['error']}"]
        build_type = info.get("build_type", "unknown")
        ex = self.plan.execution
        build_dir = ex.build_dir if label == "local" else ex.remote_build_dir
        if build_type != "Release":
            if "release" in build_dir.lower():
                return [(f"{label}: build dir {build_dir!r} demands a Release build, found "
                         f"{build_type} (run make build)")]
            if not self.plan.execution.allow_debug_build:
                return [(f"{label}: recbench is a {build_type} build; numbers need Release "
                         "(run make build, or pass --allow-debug-build to run and label the rows)")]
        return []

    def program_flags(self, host: Host, launcher: Sequence[str]) -> ProgramFlags:
        """Flags a program accepts, from its --help (None when it cannot tell). recbench's own
        modules on a remote host are the local ones (preflight compares version and commit), so
        their --help is read locally, once."""
        if host.remote and list(launcher[:2]) == [self.remote_python, "-m"]:
            host, launcher = Host(None, repo=str(REPO_ROOT)), [sys.executable] + list(launcher[1:])
        key = (host.label(), tuple(launcher))
        if key in self.help_cache:
            return self.help_cache[key]
        flags: ProgramFlags = None
        try:
            if host.remote:
                res = host.run(f"PYTHONPATH={host.repo} {shell_join(launcher)} --help", timeout=60)
            else:
                res = subprocess.run(list(launcher) + ["--help"], capture_output=True, text=True,
                                     timeout=60, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                                     cwd=str(REPO_ROOT), stdin=subprocess.DEVNULL, check=False)
            if res.returncode == 0:
                flags = {tok[2:].split("=")[0].split("[")[0].rstrip(",")
                         for tok in res.stdout.split() if tok.startswith("--")}
            else:
                flags = {"__error__": (res.stderr.strip().splitlines() or ["no output"])[-1]}
        except (OSError, subprocess.SubprocessError) as exc:
            flags = {"__error__": str(exc)}
        self.help_cache[key] = flags
        return flags

    def filter_flags(self, argv: list[str], supported: ProgramFlags, program: str) -> list[str]:
        """Drop derived-default flags the program does not accept; raise for flags the user set."""
        out, dropped = case_procs.filter_flags(argv, supported, program, self.plan.explicit)
        self.not_forwarded.update(dropped)
        return out

    # ---- cases ---------------------------------------------------------------------------
    def base_row(self, transport: Transport, repeat: int, topo: Topology) -> dict:
        plan = self.plan
        return {
            "transport": transport.label, "repeat_index": repeat,
            "server_shards": len(topo.servers),
            "client_processes": len(topo.clients),
            "server_shard_ips": [s.host for s in topo.servers],
            "client_ips": topo.client_hosts(), "record_count": plan.workload.record_count,
            "value_size": plan.workload.value_size, "batch_keys": plan.workload.batch_keys,
            "client_threads_per_process": plan.workload.client_threads_per_process,
            "runtime_seconds": plan.workload.runtime_seconds,
            "distribution": plan.workload.distribution, "mode": plan.workload.mode,
            "index_type": plan.servers.index_type, "row_kind": plan.row_kind,
            "wire": plan.workload.wire, "server_impl": plan.server_impl,
            "build_type": self._build_type(topo), "client_index": -1, "phase": "",
            **lab_facts.row_labels(transport.label, [self.facts.get(lbl, {})
                                                     for lbl in self._topo_labels(topo)]),
        }

    def _topo_labels(self, topo: Topology) -> list[str]:
        return sorted({self.host(s.ssh_host).label() for s in topo.launched_servers()}
                      | {self.host(c.ssh_host).label() for c in topo.clients})

    def _build_type(self, topo: Topology) -> str:
        types = sorted({self.facts.get(lbl, {}).get("recbench", {}).get("build_type", "unknown")
                        for lbl in self._topo_labels(topo)})
        return ";".join(types)

    def case_skip_reason(self, transport: Transport, topo: Topology) -> str | None:
        labels = self._topo_labels(topo)
        # recbench's transports are needed where recbench's programs run: every client, and the
        # servers unless a --server-binary serves
        ours = sorted({self.host(c.ssh_host).label() for c in topo.clients}
                      | ({self.host(s.ssh_host).label() for s in topo.launched_servers()}
                         if not self.plan.execution.server_binary else set()))
        for lbl in ours:
            missing = self.facts.get(lbl, {}).get("transports", {}).get(transport.name)
            if missing:
                return f"recbench on {lbl} has no {transport.name} transport: {missing}"
        if transport.needs_verbs:
            for lbl in labels:
                facts = self.facts.get(lbl)
                if facts is not None and not facts.get("rdma_devices"):
                    reason = str(facts.get("rdma_reason") or "")
                    reason = reason.split("no RDMA verbs device: ", 1)[-1]
                    return f"no RDMA verbs device on {lbl}: {reason}"
        return None

    def host_level_problems(self, topo: Topology) -> list[str]:
        labels = self._topo_labels(topo)
        problems = []
        for lbl in labels:
            problems += self.host_problems.get(lbl, [])
        return problems

    def fabric_problems(self, transport: Transport, topo: Topology) -> list[str]:
        """--rdma-fabric-plan: each process's device and port exist on its host, with the link
        layer its mode needs."""
        from recbench.runner.topology import EXPECTED_LINK_LAYER

        problems: list[str] = []
        if transport.name != "rdma":
            return problems
        for role, specs in (("server", topo.servers), ("client", topo.clients)):
            for spec in specs:
                index = spec.server_index if isinstance(spec, ServerSpec) else spec.client_index
                entry = self.plan.rc.fabric.get((role, index))
                label = self.host(spec.ssh_host).label()
                devices = self.facts.get(label, {}).get("rdma_devices") or []
                if entry is None or not devices:
                    continue
                dev = next((d for d in devices if d["name"] == entry.device), None)
                if dev is None:
                    problems.append(f"{role} {index}: device {entry.device} is not on {label} "
                                    f"(it has {', '.join(d['name'] for d in devices)})")
                    continue
                port = next((p for p in dev["ports"] if p["port"] == entry.port), None)
                if port is None:
                    problems.append(f"{role} {index}: {entry.device} on {label} has no port "
                                    f"{entry.port}")
                elif port["link_layer"] != EXPECTED_LINK_LAYER[entry.mode]:
                    problems.append(f"{role} {index}: mode {entry.mode} needs an "
                                    f"{EXPECTED_LINK_LAYER[entry.mode]} port, {entry.device} port "
                                    f"{entry.port} on {label} is {port['link_layer']}")
        return problems

    def case_problems(self, topo: Topology, transport: Transport | None = None) -> list[str]:
        problems = self.fabric_problems(transport, topo) if transport else []
        # a --server-binary is RecStore's kind of program (gflags: --help exits 1), so its
        # --help is not asked; recbench's own programs must answer theirs
        for spec, module, binary in ([(s, "recbench.ps_server", "") for s in topo.launched_servers()
                                      if not self.plan.execution.server_binary]
                                     + [(c, "recbench.ps_bench", self.plan.execution.benchmark_binary)
                                        for c in topo.clients]):
            host = self.host(spec.ssh_host)
            if host.label() in self.host_problems and self.host_problems[host.label()]:
                continue
            flags = self.program_flags(host, self.launcher(host, module, binary))
            if isinstance(flags, dict) and "__error__" in flags:
                msg = f"{binary or module} cannot run on {host.label()}: {flags['__error__']}"
                if msg not in problems:
                    problems.append(msg)
        for s in topo.servers if topo.external else ():
            if not _port_accepts(s.host, s.port):
                problems.append(f"--server-endpoints: {format_hostport(s.host, s.port)} does not "
                                "accept TCP connections from this host (is the deployment up?)")
        for s in topo.launched_servers():
            facts = self.facts.get(self.host(s.ssh_host).label(), {})
            state = facts.get("ports", {}).get(f"{s.host}:{s.port}")
            if state == "in use":
                problems.append(f"server {s.server_index}: port {format_hostport(s.host, s.port)} "
                                "is in use (pick another with --server-plan)")
            elif state == "not a local address":
                problems.append(f"server {s.server_index}: {s.host} is not an address of "
                                f"{self.host(s.ssh_host).label()} (check --server-plan / "
                                "--server-shard-ips and --execution-backend)")
        return problems

    # ---- the cases, built once ----------------------------------------------------------
    def build_cases(self) -> list[Case]:
        """Every case of the plan, built after preflight and before the first runs: its config,
        its processes and the files its remote hosts get, or why it cannot run (skipped,
        preflight_failure). Each case's config is written to configs/ now, so every case (a
        skipped or failed one too) has configs/<transport>_repeat_<i>.json."""
        cases = []
        for transport, repeat in self.plan.cases():
            topo = self.plan.topology(transport)
            try:
                case = self._build_case(transport, repeat, topo)
            except Exception as exc:  # a runner bug in one case: record it, build the others
                log.exception("building %s repeat %s", transport, repeat)
                case = Case(transport, repeat, topo, (), (), status="startup_failure",
                            message=f"runner error: {type(exc).__name__}: {exc}")
            if case.config_path:
                Path(case.config_path).parent.mkdir(parents=True, exist_ok=True)
                Path(case.config_path).write_text(json.dumps(case.config, indent=2) + "\n")
            cases.append(case)
        return cases

    def _build_case(self, transport: Transport, repeat: int, topo: Topology) -> Case:
        plan = self.plan
        t = transport.name
        logs = self.output_dir / "logs" / t / f"repeat_{repeat}"
        config_path = str(self.output_dir / "configs" / f"{t}_repeat_{repeat}.json")
        data_root = (Path(plan.execution.local_data_root or self.output_dir / "data")
                     / f"{t}_repeat_{repeat}")
        config = build_runtime_config(plan, transport, topo, str(data_root / "value"))
        if transport.rc:
            config["rdma"]["namespace"] = f"{plan.rc.rdma_namespace}-{repeat}"
        remote_dir = f"{plan.execution.remote_runtime_root}/{self.run_tag}/{t}/repeat_{repeat}"
        bare = Case(transport, repeat, topo, (), (), config=config, config_path=config_path,
                    logs=str(logs), data_root=str(data_root), remote_dir=remote_dir)
        problems = self.host_level_problems(topo)
        skip = None if problems else self.case_skip_reason(transport, topo)
        if skip:
            return dataclasses.replace(bare, status="skipped", message=skip)
        problems = problems or self.case_problems(topo, transport)
        if problems:
            return dataclasses.replace(bare, status="preflight_failure",
                                       message="; ".join(problems))
        try:
            built = self.case_procs(transport, repeat, topo, config, config_path, logs,
                                    str(data_root), remote_dir)
        except PreflightError as exc:
            return dataclasses.replace(bare, status="preflight_failure", message=str(exc))
        self.not_forwarded.update(built.not_forwarded)
        return built

    def _places(self, topo: Topology, config_path: str, data_root: str,
                remote_dir: str) -> tuple[dict[str, HostPlace], dict[str, str]]:
        """Each host of a case as its commands see it, and each spec's ssh_host -> host label."""
        places: dict[str, HostPlace] = {}
        host_of: dict[str, str] = {}
        flags: dict[str, dict[str, ProgramFlags]] = {}
        ex = self.plan.execution
        for module, binary, specs in ((case_procs.SERVER_MODULE, ex.server_binary,
                                       topo.launched_servers()),
                                      (case_procs.CLIENT_MODULE, ex.benchmark_binary, topo.clients)):
            for spec in specs:
                host = self.host(spec.ssh_host)
                host_of[spec.ssh_host or ""] = host.label()
                seen = flags.setdefault(host.label(), {})
                if module not in seen:  # only the programs a host runs
                    seen[module] = (None if module == case_procs.SERVER_MODULE and binary
                                    else self.program_flags(host,
                                                            self.launcher(host, module, binary)))
        files = {flag: getattr(ex, attr) for flag, (attr, _) in SECURITY_FILES.items()
                 if getattr(ex, attr)}
        for label, programs in flags.items():
            host = self.hosts[label]
            if host.remote:
                where, data_base = f"{remote_dir}/config.json", f"{remote_dir}/data/value"
                secrets = {f: f"{remote_dir}/{SECURITY_FILES[f][1]}" for f in files}
            else:
                where, data_base = config_path, f"{data_root}/value"
                secrets = {f: os.path.abspath(p) for f, p in files.items()}
            places[label] = HostPlace(
                label=label, remote=host.remote, repo=str(host.repo), python=self.remote_python,
                config_path=where, data_base=data_base, cores=self._cores(host), secrets=secrets,
                program_flags=programs)
        return places, host_of

    def case_procs(self, transport: Transport, repeat: int, topo: Topology,
                   config: dict[str, Any], config_path: str, logs: Path, data_root: str,
                   remote_dir: str) -> Case:
        """The case's processes and remote files as values (case.py), from what this session
        knows of each host."""
        places, host_of = self._places(topo, config_path, data_root, remote_dir)
        return case_procs.build_case(self.plan, transport, repeat, topo, places, host_of, logs,
                                     REPO_ROOT, sys.executable, config=config,
                                     config_path=config_path, data_root=data_root,
                                     remote_dir=remote_dir)

    def _cores(self, host: Host) -> int | None:
        return self.facts.get(host.label(), {}).get("cpu_cores") or (
            None if host.remote else os.cpu_count())

    # ---- executing a case -----------------------------------------------------------------
    def run_case(self, case: Case) -> tuple[list[dict[str, Any]], float | None]:
        """Rows and server CPU seconds of one built case."""
        transport, repeat, topo = case.transport, case.repeat, case.topology
        t = transport.name
        base = self.base_row(transport, repeat, topo)
        record = case.record()
        self.cases.append(record)
        if case.status:
            record["status"] = case.status
            return [results.failure_row(base, case.status, case.message)], None
        logs = Path(case.logs)
        (logs / "server").mkdir(parents=True, exist_ok=True)
        Path(case.data_root, "value").mkdir(parents=True, exist_ok=True)
        cond = threading.Condition()
        servers: list[Proc] = []
        clients: list[Proc] = []
        server_logs = [spec.stdout_log for spec in case.servers]
        try:
            try:
                self._place_files(case)
                servers = self._start(case.servers, cond)
                err = self._wait_servers_ready(topo, servers, cond)
                log.info("%s repeat %s: servers %s", t, repeat, err or "ready")
                if err:
                    record["status"] = "startup_failure"
                    return [results.failure_row(base, "startup_failure", err,
                                                log_paths=server_logs)], None
                clients = self._start(case.clients, cond)
            except PreflightError as exc:
                record["status"] = "preflight_failure"
                return [results.failure_row(base, "preflight_failure", str(exc))], None
            except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
                record["status"] = "startup_failure"
                return [results.failure_row(base, "startup_failure",
                                            f"{type(exc).__name__}: {exc}",
                                            log_paths=server_logs)], None
            rows, server_cpu = self._drive_clients(base, topo, servers, clients, cond, server_logs)
            statuses = {r["status"] for r in rows}
            record["status"] = next((s for s in results.FAILURE_STATUSES if s in statuses),
                                    "skipped" if statuses == {"skipped"} else "success")
            return rows, server_cpu
        finally:
            log.debug("%s repeat %s: stopping %d processes", t, repeat,
                      len(clients) + len(servers))
            for p in clients + servers:
                p.stop()
                REGISTRY.remove(p)
            log.debug("%s repeat %s: stopped", t, repeat)
            shutil.rmtree(case.data_root, ignore_errors=True)  # scratch: file-backed indexes
            record["processes"] = [{"name": p.name, "host": p.host.label(), "pid": p.pid,
                                    "remote_pid": p.remote_pid, "returncode": p.returncode}
                                   for p in servers + clients]
            if case.remote_files:
                self._remove_remote_dir(case)

    def _place_files(self, case: Case) -> None:
        """Write the case's remote files (configs, token and TLS copies) through ssh stdin."""
        for f in case.remote_files:
            host = self.hosts[f.host]
            write = f"cat > {shell_join([f.path])}"
            if f.private:  # readable by its owner only
                write = f"umask 077 && {write}"
            if f.mkdir:
                write = f"mkdir -p {shell_join([f.mkdir])} && {write}"
            res = host.run(write, input_text=f.text, timeout=60)
            if res.returncode != 0:
                raise PreflightError(f"{f.host}: writing {f.path} failed: {res.stderr.strip()}")

    def _remove_remote_dir(self, case: Case) -> None:
        for label in sorted({f.host for f in case.remote_files}):
            try:
                self.hosts[label].run(f"rm -rf {shell_join([case.remote_dir])}", timeout=30)
            except subprocess.TimeoutExpired:
                log.warning("removing %s on %s timed out", case.remote_dir, label)

    def _start(self, specs: tuple[ProcSpec, ...], cond: threading.Condition) -> list[Proc]:
        procs = []
        for spec in specs:
            self.cases[-1].setdefault("commands", []).append(spec.record())
            procs.append(start_process(spec.name, self.hosts[spec.host], list(spec.argv),
                                       dict(spec.env), spec.stdout_log, spec.stderr_log, cond,
                                       list(spec.markers), cwd=spec.cwd))
        return procs

    def _wait_servers_ready(self, topo: Topology, servers: list[Proc],
                            cond: threading.Condition) -> str | None:
        plan = self.plan
        start = time.monotonic()
        deadline = start + plan.execution.cluster_timeout
        ready = set()
        launched = topo.launched_servers()
        # recbench's ps_server always prints its ready line, so only that counts for it. A
        # port that accepts counts only for a --server-binary on this host: a connect from here
        # to another host can succeed with nothing listening there (an outgoing proxy does
        # that; the lab's guests showed it), which started clients too early.
        probe_ports = bool(plan.execution.server_binary) and plan.execution.execution_backend == "local"
        while True:
            with cond:
                for i, p in enumerate(servers):
                    if any(m in p.seen for m in p.markers):  # its ready line (spec.markers)
                        ready.add(i)
                    elif p.exited():
                        return (f"server {launched[i].server_index} on {p.host.label()} exited "
                                f"with code {p.returncode} before it was ready: "
                                f"{_tail(p.stdout_log)}")
                if len(ready) == len(servers):
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = [launched[i].server_index for i in range(len(servers))
                               if i not in ready]
                    return (f"servers {missing} not ready within --cluster-timeout "
                            f"{plan.execution.cluster_timeout:g}s")
                probing = time.monotonic() - start >= plan.execution.startup_delay
                cond.wait(min(left, 0.25) if probing else min(left, plan.execution.startup_delay))
            if probe_ports and time.monotonic() - start >= plan.execution.startup_delay:
                for i, s in enumerate(launched):
                    if i not in ready and _port_accepts(s.host, s.port):
                        ready.add(i)

    def _drive_clients(self, base: dict[str, Any], topo: Topology, servers: list[Proc], clients: list[Proc],
                       cond: threading.Condition,
                       server_logs: list[str]) -> tuple[list[dict[str, Any]], float | None]:
        plan = self.plan
        deadline = time.monotonic() + plan.execution.client_timeout
        dead_server = None

        def server_down() -> int | None:
            for i, p in enumerate(servers):
                if p.exited():
                    return i
            return None

        with cond:  # barrier: every client loaded (or gone)
            while not all(LOADED_MARKER in p.seen or p.exited() for p in clients):
                dead_server = server_down()
                left = deadline - time.monotonic()
                if dead_server is not None or left <= 0:
                    break
                cond.wait(left)
        hosts = {p.host.label(): p.host for p in servers + clients}
        ticks_start = {label: h.cpu_ticks() for label, h in hosts.items()}
        cpu_start = [p.cpu_seconds() for p in servers]
        go_sent = []
        if dead_server is None:
            for p in clients:
                if LOADED_MARKER in p.seen and not p.exited():
                    go_sent.append(p.send_line("go"))
        log.info("%s repeat %s: go sent to %d of %d clients", base["transport"],
                 base["repeat_index"], sum(go_sent), len(clients))
        with cond:  # run phase
            while not all(p.exited() for p in clients):
                dead_server = dead_server if dead_server is not None else server_down()
                left = deadline - time.monotonic()
                if dead_server is not None or left <= 0:
                    break
                cond.wait(left)
        log.debug("%s repeat %s: clients done", base["transport"], base["repeat_index"])
        cpu_end = [p.cpu_seconds() for p in servers]
        steal = {label: procfs.steal_pct(ticks_start[label], h.cpu_ticks())
                 for label, h in hosts.items()}
        self.cases[-1]["host_steal_pct"] = {k: None if v is None else round(v, 2)
                                            for k, v in steal.items()}
        server_cpu = None
        if all(x is not None for x in cpu_start + cpu_end) and servers:
            server_cpu = sum((e or 0.0) - (s or 0.0) for s, e in zip(cpu_start, cpu_end))
        grace_deadline = time.monotonic() + 5.0
        if dead_server is not None:  # give clients a moment to report the broken connection
            with cond:
                while not all(p.exited() for p in clients):
                    left = grace_deadline - time.monotonic()
                    if left <= 0:
                        break
                    cond.wait(left)
        still_running = [p for p in clients if not p.exited()]
        for p in still_running:
            p.stop()
        rows = []
        for spec, p in zip(topo.clients, clients):
            rows += self._client_rows(base, spec, p, p in still_running, dead_server, servers,
                                      server_cpu, server_logs)
        with cond:
            congestion = results.servers_tcp_congestion(
                p.seen.get(case_procs.READY_MARKER, "") for p in servers)
        worst = max((v for v in steal.values() if v is not None), default=None)
        for r in rows:
            r["tcp_congestion"] = congestion
            if r.get("phase") == "run" and r["status"] == "success" and worst is not None:
                r["host_steal_pct"] = round(worst, 2)
        return rows, server_cpu

    def _client_rows(self, base: dict[str, Any], spec: ClientSpec, proc: Proc, timed_out: bool,
                     dead_server: int | None, servers: list[Proc], server_cpu: float | None,
                     server_logs: list[str]) -> list[dict[str, Any]]:
        plan = self.plan
        b = dict(base, client_index=spec.client_index,
                 log_path=[proc.stdout_log, proc.stderr_log])
        with proc.cond:
            text = "\n".join(proc.lines)
        parsed = results.collect_ps_result_rows(text)
        rows = [results.result_row(b, r, server_cpu) for r in parsed]
        try:
            hists = latency_hist.collect(text)
        except ValueError as e:
            log.warning("client %s: %s (its percentiles are merged as a bound)",
                        spec.client_index, e)
            hists = {}
        for r in rows:
            r["client_index"] = spec.client_index
            r["_hist"] = hists.get(r.get("phase"))
        if results.apply_get_summary(rows, text):  # RecStore's op=get summary line wins
            for r in rows:
                if r.get("phase") == "run":
                    r["_hist"] = None
        have_run = any(r.get("phase") == "run" for r in parsed)
        logs: list[str | None] = [proc.stdout_log, proc.stderr_log]
        if timed_out and dead_server is not None:
            srv = servers[dead_server]
            rows.append(results.failure_row(
                b, "client_failure", f"stopped: server_{dead_server} exited with code "
                f"{srv.returncode} during the run", "run", spec.client_index,
                [*logs, *server_logs]))
        elif timed_out:
            rows.append(results.failure_row(b, "timeout", f"client timeout after "
                                            f"{plan.execution.client_timeout:g}s", "run" if parsed else "",
                                            spec.client_index, logs))
        elif proc.returncode == SKIP_EXIT_CODE:
            rows.append(results.failure_row(b, "skipped", f"client exited with code 77 (skip): "
                                            f"{_tail(proc.stderr_log, 1)}", "", spec.client_index,
                                            logs))
        elif proc.returncode != 0:
            rows.append(results.failure_row(
                b, "client_failure", f"client exited with code {proc.returncode}: "
                f"{_tail(proc.stderr_log, 2)}", "run" if parsed else "load", spec.client_index,
                [*logs, *(server_logs if dead_server is not None else [])]))
        elif not have_run:
            rows.append(results.failure_row(b, "client_failure", "client exited 0 without a run "
                                            "result line", "run", spec.client_index, logs))
        return rows

    # ---- outputs -------------------------------------------------------------------------
    def write_outputs(self) -> dict[str, Path]:
        """summary.csv and summary_totals.csv from the rows, run_config.json from the plan and
        what the run saw, then summary.md and its plots from those files alone (report.py)."""
        out = self.output_dir
        paths = {"run_config": out / "run_config.json", "summary_csv": out / "summary.csv",
                 "summary_totals_csv": out / "summary_totals.csv", "summary_md": out / "summary.md"}
        results.write_summary_csv(paths["summary_csv"], self.rows)
        totals = results.build_totals(self.rows, self.case_cpu)
        results.write_totals_csv(paths["summary_totals_csv"], totals)
        git = git_state()
        hostname = socket.gethostname()
        run_config = {
            "benchmark_ps_runner_version": RUNNER_VERSION,
            "run_config_path": str(paths["run_config"]),
            "summary_csv_path": str(paths["summary_csv"]),
            "summary_totals_csv_path": str(paths["summary_totals_csv"]),
            "summary_md_path": str(paths["summary_md"]),
            "git": git, "hostname": hostname, "cpu_model": preflight.cpu_model(),
            "cpu_cores": os.cpu_count(), "sched_autogroup": procfs.sched_autogroup(),
            "tcp_congestion_control": procfs.tcp_congestion_control(),
            "platform": platform.platform(),
            "python": sys.version.split()[0], "argv": self.argv,
            "args": dict(self.plan.flags), "plan": self.plan.record(),
            # RecStore's keys: the resolved plans per transport and the GET response mode
            "server_plan": {t.label: self.plan.topology(t).server_plan()
                            for t in self.plan.transports},
            "client_plan": {t.label: self.plan.topology(t).client_plan()
                            for t in self.plan.transports},
            # RecStore's key holds one mode: the first RC transport's (shm and verbs can differ;
            # the plan's get_response_modes has each)
            "rdma_get_response_mode": next(iter(self.plan.get_response_modes().values()),
                                           self.plan.rc.get_response_mode),
            # what the rows measured: the clients' wire and the servers' implementation
            "wire": self.plan.workload.wire, "server_impl": self.plan.server_impl,
            "server_endpoints": self.plan.execution.server_endpoints,
            "hosts": self.facts, "host_problems": self.host_problems,
            "not_forwarded_derived_flags": sorted(self.not_forwarded),
            "cases": self.cases, "processes": REGISTRY.history,
            "fabric_labels": sorted({f"{r['transport']} fabric={r.get('fabric')} "
                                     f"accelerator={r.get('accelerator')}" for r in self.rows}),
            "interrupted": self.interrupted,
        }
        paths["run_config"].write_text(json.dumps(run_config, indent=2, default=str) + "\n")
        report.write_report(out)
        print_table([t.label for t in self.plan.transports], totals, self.rows)
        for key in ("run_config", "summary_csv", "summary_totals_csv", "summary_md"):
            print(f"[output] {key}={paths[key]}", flush=True)
        return paths


def print_table(transports: Sequence[str], totals: Sequence[dict[str, Any]],
                rows: Sequence[dict[str, Any]]) -> None:
    """The run's headline on stdout: per transport, the mean over repeats of the run total."""
    print(f"{'transport':<10} {'status':<18} {'run M keys/s':>12} {'stdev':>8} {'p99 us':>9} "
          f"{'repeats':>7} {'steal %':>7} {'threads':>9}")
    for t in transports:
        mean: dict[str, Any] = next((x for x in totals if x["transport"] == t
                                     and x["repeat_index"] == "mean" and x["phase"] == "run"), {})
        statuses = sorted({r["status"] for r in rows if r["transport"] == t and
                           r["status"] != "success"})
        status = ",".join(statuses) if statuses else "success"
        rate = mean.get("key_ops_per_sec")
        cells = [f"{rate / 1e6:12.3f}" if rate is not None else f"{'-':>12}",
                 f"{(mean.get('key_ops_per_sec_stdev') or 0) / 1e6:8.3f}" if rate is not None
                 else f"{'-':>8}",
                 f"{mean['p99_us']:9.1f}" if mean.get("p99_us") is not None else f"{'-':>9}"]
        steal = mean.get("host_steal_pct")  # the worst repeat's
        cells.append(f"{mean.get('repeats', 0):>7}")
        cells.append(f"{steal:7.1f}" if steal is not None else f"{'-':>7}")
        # the slowest and the fastest client thread's share of the mean (the worst repeat's)
        shares = results.share_range(mean.get("slowest_thread_share"),
                                     mean.get("fastest_thread_share"))
        cells.append(f"{shares:>9}")
        print(f"{t:<10} {status:<18} {' '.join(cells)}")


def _port_accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(plan: Plan, argv: list[str]) -> int:
    """Execute `plan`: preflight, every case, the outputs. Exit code: 0 when nothing failed
    (skips are not failures), 1 when a row failed, 130 when interrupted."""
    level = logging.DEBUG if plan.execution.show_runner_logs else logging.WARNING
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="[runner %(relativeCreated)7.0fms] %(levelname)s %(message)s")
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    session = Session(plan, argv)
    try:
        try:
            try:
                session.preflight_hosts(plan.topologies)
            except Exception as exc:  # a broken host answer must not lose the reports
                log.exception("preflight")
                for label in set(session.hosts) | {"local"}:
                    session.host_problems.setdefault(label, []).append(
                        f"preflight error: {type(exc).__name__}: {exc}")
            cases = session.build_cases()  # every case, built and checked before the first runs
            for n, case in enumerate(cases, 1):
                t0 = time.monotonic()
                transport, repeat, topo = case.transport, case.repeat, case.topology
                n_cases = len(session.cases)
                try:
                    rows, server_cpu = session.run_case(case)
                except Exception as exc:  # a runner bug in one case: record it, go on
                    log.exception("%s repeat %s", transport, repeat)
                    del session.cases[n_cases:]
                    session.cases.append({**case.record(), "status": "startup_failure"})
                    rows = [results.failure_row(session.base_row(transport, repeat, topo),
                                                "startup_failure",
                                                f"runner error: {type(exc).__name__}: {exc}")]
                    server_cpu = None
                session.rows += rows
                status = session.cases[-1].get("status", "?")
                session.case_cpu.append((transport.label, repeat, server_cpu, status))
                print(f"[case {n}/{len(cases)}] {transport.label} repeat {repeat}: {status} "
                      f"({time.monotonic() - t0:.1f}s, elapsed "
                      f"{time.monotonic() - session.started:.1f}s, {len(cases) - n} cases left)",
                      file=sys.stderr, flush=True)
                for line in report.steal_lines(session.cases[-1].get("host_steal_pct") or {}):
                    print(f"[case {n}/{len(cases)}]   {line}", file=sys.stderr, flush=True)
                if status in results.FAILURE_STATUSES:
                    bad = [r["message"] for r in rows if r["status"] == status]
                    print(f"[case {n}/{len(cases)}]   {bad[0] if bad else ''}", file=sys.stderr,
                          flush=True)
        except KeyboardInterrupt:
            session.interrupted = True
            print("[runner] interrupted: stopping every started process", file=sys.stderr)
        finally:
            REGISTRY.stop_all()
            if session.ssh is not None:
                session.ssh.close()
        session.write_outputs()
    finally:
        signal.signal(signal.SIGTERM, previous)
    failed = any(r["status"] in results.FAILURE_STATUSES for r in session.rows)
    if session.interrupted:
        return 130
    return 1 if failed else 0

