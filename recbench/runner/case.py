"""A case as a value: every process of one transport x repeat, and its config, built from the
plan before anything starts.

`build_case` is pure: from the plan, the case's topology, its config and what the session learned
of each host (`HostPlace`: where its copy of the config is, its core count, its copies of the
security files, the flags its programs accept) it gives a `Case` whose `ProcSpec`s hold the exact
argv, env and log paths of every shard server and client, and whose `RemoteFile`s are the files
each remote host gets through ssh stdin (its config.json with that host's data paths, the token
and TLS copies). The session (session.py) builds every case of the run once, after preflight and
before the first starts, then executes them in order: it writes the files the case names and
starts its specs. A case that cannot run says so in `status`/`message` (skipped or a preflight
failure) and still has its config. Tests check the commands of any plan without starting a process.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from recbench.runner.config import (
    bind_core_offset,
    build_benchmark_cmd,
    build_recstore_server_cmd,
    build_server_cmd,
    flag_name,
)
from recbench.runner.plan import Plan
from recbench.runner.results import RESULT_PREFIX
from recbench.runner.topology import Topology
from recbench.transports import Transport

READY_MARKER = "event=ready"
# RecStore's ps_server: `Server [shard <k>] listening on <addr>` (gRPC), `bRPC Server ... listening
# on ...`; what its own launcher waits for
RECSTORE_READY_MARKER = "listening on"
LOADED_MARKER = "PS_BENCHMARK_LOADED"
SERVER_MODULE = "recbench.ps_server"
CLIENT_MODULE = "recbench.ps_bench"
# the flags a program's --help lists, {"__error__": why} when --help failed, None when unknown
ProgramFlags = Union[set[str], dict[str, str], None]
# Process flags that only some builds of ps_bench know (RecStore's report/profile options), by the
# runner dest they come from. Every other flag is always passed.
OPTIONAL_PROCESS_FLAGS = {"report_mode": "report_mode",
                          "transaction_profile": "transaction_profile"}
# program flag -> (Execution field, file name of a remote host's copy beside its config.json)
SECURITY_FILES = {"auth_token_file": ("auth_token_file", "auth_token"),
                  "tls_cert": ("grpc_tls_cert", "tls_cert.pem"),
                  "tls_key": ("grpc_tls_key", "tls_key.pem"),
                  "tls_ca": ("grpc_tls_ca", "tls_ca.pem")}
SECURITY_ROLE_FLAGS = {"server": ("tls_cert", "tls_key"), "client": ("tls_ca",)}


class PreflightError(RuntimeError):
    """A case cannot run as planned (a program refuses a flag the user set, a remote write
    failed); the case gets a preflight_failure row."""


@dataclass(frozen=True)
class HostPlace:
    """One host as a case's commands see it."""
    label: str                  # "local" or the ssh target
    remote: bool
    repo: str                   # the source tree on that host (its PYTHONPATH)
    python: str                 # the interpreter that runs `-m recbench.…` there
    config_path: str            # that host's copy of the case's config.json
    data_base: str              # the directory under which each shard gets its data path
    cores: int | None = None    # None: unknown (no core wrap-around for bind offsets)
    secrets: Mapping[str, str] = field(default_factory=dict)  # program flag -> path there
    program_flags: Mapping[str, ProgramFlags] = field(default_factory=dict)  # module -> --help


@dataclass(frozen=True)
class ProcSpec:
    """One process to start: where, what, with which environment, logging where."""
    name: str                   # server_<server_index> / client_<client_index>
    role: str                   # "server" or "client"
    index: int                  # server_index / client_index
    host: str                   # HostPlace.label
    argv: tuple[str, ...]
    env: Mapping[str, str]
    stdout_log: str
    stderr_log: str | None      # None: stderr merged into stdout_log
    markers: tuple[str, ...]    # stdout lines the session waits for
    cwd: str | None = None

    def record(self) -> dict[str, Any]:
        """run_config.json's entry in a case's "commands"."""
        return {"name": self.name, "host": self.host, "env": dict(self.env),
                "argv": list(self.argv)}


@dataclass(frozen=True)
class RemoteFile:
    """A file a remote host gets through ssh stdin before the case starts."""
    host: str                   # HostPlace.label
    path: str
    text: str
    private: bool = False       # written with umask 077 (the token, TLS key and roots)
    mkdir: str = ""             # a directory made first (the host's data directory)


@dataclass(frozen=True)
class Case:
    transport: Transport
    repeat: int
    topology: Topology
    servers: tuple[ProcSpec, ...]
    clients: tuple[ProcSpec, ...]
    not_forwarded: tuple[str, ...] = ()   # "program: --flag" derived flags a program lacks
    config: Mapping[str, Any] = field(default_factory=dict)  # configs/<t>_repeat_<i>.json's text
    config_path: str = ""                 # that file (the local hosts' copy)
    logs: str = ""                        # logs/<t>/repeat_<i>
    data_root: str = ""                   # local scratch data directory (removed after the case)
    remote_dir: str = ""                  # each remote host's directory of this case
    remote_files: tuple[RemoteFile, ...] = ()
    status: str = ""                      # "": runs; skipped / preflight_failure: does not
    message: str = ""                     # why it does not run

    @property
    def procs(self) -> tuple[ProcSpec, ...]:
        return self.servers + self.clients

    def record(self) -> dict[str, Any]:
        """run_config.json's entry of this case (the session adds status, commands, processes)."""
        out: dict[str, Any] = {
            "transport": self.transport.label, "repeat_index": self.repeat,
            "topology": self.topology.to_dict(), "server_plan": self.topology.server_plan(),
            "client_plan": self.topology.client_plan(), "config_path": self.config_path}
        rdma = self.config.get("rdma")
        if self.transport.rc and rdma:
            out.update({"rdma_namespace": rdma["namespace"],
                        "rdma_control_plane_host": rdma["control_plane_host"],
                        "rdma_control_plane_port": self.topology.servers[0].port,
                        "rdma_get_response_mode": rdma["get_response_mode"]})
        return out


def remote_config(config: Mapping[str, Any], data_dir: str) -> dict[str, Any]:
    """A remote host's copy of a case config: the value store's paths under `data_dir` there (not
    this host's paths)."""
    out: dict[str, Any] = json.loads(json.dumps(config))
    value = out["cache_ps"]["base_kv_config"]["value"]
    if "path" in value:
        value["path"] = data_dir
    for alloc in ("dram_allocator", "ssd_allocator"):
        if alloc in value and "path" in value[alloc]:
            value[alloc]["path"] = f"{data_dir}/{os.path.basename(value[alloc]['path'])}"
    return out


def remote_files(plan: Plan, config: Mapping[str, Any], places: Mapping[str, HostPlace],
                 labels: Sequence[str]) -> tuple[RemoteFile, ...]:
    """What each remote host of `labels` gets: its config.json (data paths under its data_base)
    and its copies of the security files (read here from the local files the plan names)."""
    out = []
    for label in labels:
        place = places[label]
        if not place.remote:
            continue
        text = json.dumps(remote_config(config, place.data_base), indent=2)
        out.append(RemoteFile(label, place.config_path, text, mkdir=place.data_base))
        for flag, rpath in place.secrets.items():
            with open(getattr(plan.execution, SECURITY_FILES[flag][0]), encoding="ascii",
                      errors="replace") as f:
                out.append(RemoteFile(label, rpath, f.read(), private=True))
    return tuple(out)


def launcher(remote: bool, remote_repo: str, remote_python: str, module: str, binary: str,
             local_root: Path, local_python: str) -> list[str]:
    """The argv prefix of a program: `--server-binary` / `--benchmark-binary` when given (relative
    paths are under the repo on that host), else `python -m module`."""
    if binary:
        if remote:
            return [binary if os.path.isabs(binary) else f"{remote_repo}/{binary}"]
        path = Path(binary)
        return [str(path if path.is_absolute() else local_root / path)]
    return [remote_python if remote else local_python, "-m", module]


def process_env(place: HostPlace, local_root: str, bind_offset: int | None) -> dict[str, str]:
    env = {"PYTHONPATH": place.repo if place.remote else local_root,
           "RECSTORE_CONFIG": place.config_path, "RECBENCH_CONFIG": place.config_path}
    if bind_offset is not None:
        env["RECSTORE_BIND_CORE_OFFSET"] = str(bind_offset)
    return env


def secret_flags(place: HostPlace, transport: Transport, role: str) -> list[str]:
    """--auth_token_file for every process; the TLS files for grpc servers / clients."""
    out = []
    for flag, path in place.secrets.items():
        if flag == "auth_token_file" or (transport.name == "grpc" and
                                         flag in SECURITY_ROLE_FLAGS[role]):
            out.append(f"--{flag}={path}")
    return out


def filter_flags(argv: Sequence[str], supported: ProgramFlags, program: str,
                 explicit: frozenset[str]) -> tuple[list[str], list[str]]:
    """Drop derived-default flags the program does not accept; raise PreflightError for flags the
    user set. Returns (argv, the dropped flags as "program: --flag")."""
    if not supported or "__error__" in supported:
        return list(argv), []
    out, dropped = [], []
    for arg in argv:
        name = flag_name(arg)
        if name is None or name in supported or name not in OPTIONAL_PROCESS_FLAGS:
            out.append(arg)
            continue
        source = OPTIONAL_PROCESS_FLAGS[name]
        if source in explicit:
            raise PreflightError(f"{program} does not accept --{name} (from --"
                                 f"{source.replace('_', '-')}); drop that option")
        dropped.append(f"{program}: --{name}")
    return out, dropped


def _program(place: HostPlace, module: str, binary: str, local_root: Path,
             local_python: str) -> list[str]:
    return launcher(place.remote, place.repo, place.python, module, binary,
                    local_root, local_python)


def build_case(plan: Plan, transport: Transport, repeat: int, topo: Topology,
               places: Mapping[str, HostPlace], host_of: Mapping[str, str], logs: Path,
               local_root: Path, local_python: str, *, config: Mapping[str, Any] | None = None,
               config_path: str = "", data_root: str = "", remote_dir: str = "") -> Case:
    """Every process of one case, and with `config` the files its remote hosts get. `host_of`
    maps a spec's ssh_host (or "" for none) to the label of its HostPlace; `logs` is the case's
    log directory."""
    dropped: list[str] = []
    cwd_local = str(local_root)

    def place_of(ssh_host: str | None) -> HostPlace:
        return places[host_of[ssh_host or ""]]

    def spec(role: str, index: int, place: HostPlace, cmd: list[str], offset: int | None,
             module: str, stdout_log: Path, stderr_log: Path | None,
             markers: tuple[str, ...]) -> ProcSpec:
        cmd = cmd + secret_flags(place, transport, role)
        cmd, drop = filter_flags(cmd, place.program_flags.get(module), module, plan.explicit)
        dropped.extend(drop)
        return ProcSpec(f"{role}_{index}", role, index, place.label, tuple(cmd),
                        process_env(place, cwd_local, offset), str(stdout_log),
                        None if stderr_log is None else str(stderr_log), markers,
                        None if place.remote else cwd_local)

    servers = []
    binary = plan.execution.server_binary
    for s in topo.launched_servers():
        place = place_of(s.ssh_host)
        prog = _program(place, SERVER_MODULE, binary, local_root, local_python)
        offset = bind_core_offset(plan, transport, "server", s.server_index, place.cores)
        log_path = logs / "server" / f"server_{s.server_index}.log"
        if binary:  # a RecStore-compatible ps_server: RecStore's flags, its ready line too
            cmd = build_recstore_server_cmd(plan, transport, s, place.config_path, prog)
            servers.append(ProcSpec(f"server_{s.server_index}", "server", s.server_index,
                                    place.label, tuple(cmd),
                                    process_env(place, cwd_local, offset), str(log_path), None,
                                    (READY_MARKER, RECSTORE_READY_MARKER),
                                    None if place.remote else cwd_local))
            continue
        cmd = build_server_cmd(plan, transport, s, len(topo.servers), place.config_path, prog,
                               offset)
        # one data directory per shard process (file-backed indexes must not share files)
        cmd.append(f"--data_path={place.data_base}/shard_{s.shard}")
        servers.append(spec("server", s.server_index, place, cmd, offset, SERVER_MODULE,
                            log_path, None, (READY_MARKER,)))
    clients = []
    for c in topo.clients:
        place = place_of(c.ssh_host)
        prog = _program(place, CLIENT_MODULE, plan.execution.benchmark_binary, local_root,
                        local_python)
        offset = bind_core_offset(plan, transport, "client", c.client_index, place.cores)
        cmd = build_benchmark_cmd(plan, transport, topo, c, place.config_path, prog, offset)
        name = f"client_{c.client_index}"
        clients.append(spec("client", c.client_index, place, cmd, offset, CLIENT_MODULE,
                            logs / f"{name}.stdout.log", logs / f"{name}.stderr.log",
                            (LOADED_MARKER, RESULT_PREFIX)))
    labels = sorted({spec.host for spec in servers + clients})
    files = remote_files(plan, config, places, labels) if config is not None else ()
    return Case(transport, repeat, topo, tuple(servers), tuple(clients), tuple(dropped),
                config=dict(config or {}), config_path=config_path, logs=str(logs),
                data_root=data_root, remote_dir=remote_dir, remote_files=files)
