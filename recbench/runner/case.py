"""A case as a value: every process of one transport x repeat, built from the plan before anything
starts.

`build_case` is pure: from the plan, the case's topology and what the session learned of each host
(`HostPlace`: where its copy of the config is, its core count, its copies of the security files,
the flags its programs accept) it gives a `Case` whose `ProcSpec`s hold the exact argv, env and
log paths of every shard server and client. The session (session.py) places the config files,
builds the case, then starts the specs in order; tests check the commands of any plan without
starting a process.
"""

from __future__ import annotations

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
class Case:
    transport: Transport
    repeat: int
    topology: Topology
    servers: tuple[ProcSpec, ...]
    clients: tuple[ProcSpec, ...]
    not_forwarded: tuple[str, ...] = ()   # "program: --flag" derived flags a program lacks

    @property
    def procs(self) -> tuple[ProcSpec, ...]:
        return self.servers + self.clients


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
               local_root: Path, local_python: str) -> Case:
    """Every process of one case. `host_of` maps a spec's ssh_host (or "" for none) to the label
    of its HostPlace; `logs` is the case's log directory."""
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
    return Case(transport, repeat, topo, tuple(servers), tuple(clients), tuple(dropped))
