"""Starting, watching and stopping the runner's processes, locally or over ssh (optionally inside
`docker exec`).

Every process is a `Proc`, a recbench.launch.LineProcess (the one launcher of PS processes, also
used by the harnesses and the tests) with the ssh/docker layer on top: its stdout is read by a
thread that copies each line into the log file and notices the marker lines the runner waits
for (a server's ready line, a client's `PS_BENCHMARK_LOADED`, result lines); the owner waits on
one condition variable that those threads notify, so nothing polls with sleeps. stdin stays a
pipe, which is how the `go` barrier reaches clients, even through ssh and `docker exec -i`.

Remote commands run as `ssh [opts] HOST bash -lc '<cd REPO && CMD>'`; with a container,
`ssh [opts] HOST bash -lc 'docker exec [-i] C bash -lc "<cd REPO && CMD>"'` (quoted with shlex, so
the remote shells see exactly one argument each). A remote process first echoes
`RECBENCH_REMOTE_PID=<pid>` and then `exec`s the program with its environment, so the runner knows
the remote PID, kills it on stop (SIGTERM, then SIGKILL), and reads its CPU time from /proc.
ssh runs with BatchMode and connection sharing (ControlMaster/ControlPersist in a private
directory); `Ssh.close()` ends the shared masters so nothing is left behind.

The `ProcessRegistry` holds every live Proc; `stop_all()` runs at the end of each case, on errors,
on Ctrl-C/SIGTERM (the runner turns SIGTERM into KeyboardInterrupt) and at interpreter exit.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from recbench import procfs
from recbench.launch import LineProcess

log = logging.getLogger(__name__)

REMOTE_PID_MARKER = "RECBENCH_REMOTE_PID="


def shell_join(argv: Iterable[object]) -> str:
    return " ".join(shlex.quote(str(a)) for a in argv)


def env_command(argv: Sequence[object], env: Mapping[str, object] | None = None) -> str:
    """`exec env K=V ... argv` as one shell string (env reaches the process on any host)."""
    parts = ["exec"]
    if env:
        parts.append("env")
        parts += [shlex.quote(f"{k}={v}") for k, v in sorted(env.items())]
    parts.append(shell_join(argv))
    return " ".join(parts)


def remote_shell_command(repo: str | None, command: str, container: str | None = None,
                         interactive: bool = False) -> str:
    """The string the remote login shell runs: `cd REPO && CMD`, wrapped in `docker exec` when a
    container is given."""
    inner = f"cd {shlex.quote(repo)} && {command}" if repo else command
    if container:
        flags = "-i " if interactive else ""
        return f"docker exec {flags}{shlex.quote(container)} bash -lc {shlex.quote(inner)}"
    return inner


class Ssh:
    """OpenSSH client settings shared by every remote command of a run."""

    def __init__(self, ssh_config: str | None = None, ssh_options: Iterable[str] = (),
                 control_persist: int = 60, connect_timeout: int = 10) -> None:
        self.ssh_config = ssh_config
        self.ssh_options = list(ssh_options or ())
        self.control_dir = tempfile.mkdtemp(prefix="rbssh-")
        self.control_persist = control_persist
        self.connect_timeout = connect_timeout
        self.hosts: set[str] = set()

    def base_args(self, ssh_host: str) -> list[str]:
        args = ["ssh"]
        if self.ssh_config:
            args += ["-F", self.ssh_config]
        args += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.connect_timeout}",
                 "-o", "ControlMaster=auto", "-o", f"ControlPath={self.control_dir}/%C",
                 "-o", f"ControlPersist={self.control_persist}"]
        for opt in self.ssh_options:
            args += ["-o", opt]
        self.hosts.add(ssh_host)
        return args + [ssh_host]

    def close(self) -> None:
        masters = []
        for host in sorted(self.hosts):
            args = ["ssh"] + (["-F", self.ssh_config] if self.ssh_config else [])
            args += ["-o", f"ControlPath={self.control_dir}/%C"]
            # "Master running (pid=N)": `-O exit` returns before that process is gone
            check = subprocess.run(args + ["-O", "check", host], stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True, timeout=10, check=False)
            m = re.search(r"pid=(\d+)", check.stderr)
            if m:
                masters.append(int(m.group(1)))
            subprocess.run(args + ["-O", "exit", host], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10,
                           check=False)
        self.hosts.clear()
        deadline = time.monotonic() + 10
        for pid in masters:  # bounded wait for each master to exit (not our child: no waitpid)
            while procfs.alive(pid) and time.monotonic() < deadline:
                time.sleep(0.01)
        try:
            for name in os.listdir(self.control_dir):
                os.unlink(os.path.join(self.control_dir, name))
            os.rmdir(self.control_dir)
        except OSError:
            pass


def build_remote_exec_cmd(ssh_host: str, repo: str | None, command: str,
                          container: str | None = None, ssh: Ssh | None = None,
                          interactive: bool = False) -> list[str]:
    """argv of one remote command: [ssh, opts..., HOST, bash, -lc, '<quoted remote command>']."""
    base = ssh.base_args(ssh_host) if ssh is not None else ["ssh", ssh_host]
    remote = remote_shell_command(repo, command, container, interactive)
    return base + ["bash", "-lc", shlex.quote(remote)]


class Host:
    """Where a process runs: local, or an ssh target with its repo and optional container."""

    def __init__(self, ssh_host: str | None = None, ssh: Ssh | None = None,
                 repo: str | None = None, container: str | None = None) -> None:
        self.ssh_host = ssh_host
        self.ssh = ssh
        self.repo = repo
        self.container = container

    @property
    def remote(self) -> bool:
        return self.ssh_host is not None

    def label(self) -> str:
        return self.ssh_host or "local"

    def run(self, command: str, input_text: str | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a shell command on this host and return CompletedProcess (text)."""
        if self.ssh_host is not None:
            argv = build_remote_exec_cmd(self.ssh_host, self.repo, command, self.container,
                                         self.ssh, interactive=input_text is not None)
        else:
            argv = ["bash", "-c", f"cd {shlex.quote(self.repo)} && {command}" if self.repo
                    else command]
        return subprocess.run(argv, input=input_text, capture_output=True, text=True,
                              timeout=timeout, stdin=None if input_text is not None
                              else subprocess.DEVNULL, check=False)

    def read_text(self, path: str) -> str | None:
        """A small file of this host (a /proc entry): read here, or with cat over ssh; None when
        it cannot be read."""
        if self.remote:
            try:
                res = self.run(f"cat {shlex.quote(path)}", timeout=15)
            except subprocess.TimeoutExpired:
                return None
            return res.stdout if res.returncode == 0 else None
        try:
            with open(path) as f:
                return f.read()
        except OSError:
            return None

    def cpu_ticks(self) -> tuple[int, int] | None:
        """(all, steal) CPU clock ticks of this host from its /proc/stat
        (procfs.host_cpu_ticks); None when it cannot be read."""
        text = self.read_text("/proc/stat")
        return None if text is None else procfs.host_cpu_ticks(text)


class Proc(LineProcess):
    """One started process (local, or the local ssh process carrying a remote one): recbench's
    one launcher (recbench.launch.LineProcess) plus where it runs, the remote PID, its CPU time
    from /proc, and signals that reach a remote program through ssh."""

    def __init__(self, name: str, host: Host, argv: Sequence[str], env: Mapping[str, str],
                 stdout_log: str, stderr_log: str | None, cond: threading.Condition,
                 markers: Iterable[str], cwd: str | None = None) -> None:
        self.name = name
        self.host = host
        self.remote_pid: int | None = None
        super().__init__(argv, stdin=subprocess.PIPE, cwd=cwd, env=env, stdout_log=stdout_log,
                         stderr_log=stderr_log, cond=cond, markers=markers,
                         line_hook=self._remote_pid_line if host.remote else None,
                         new_session=True)
        self.cond = self.cv

    @property
    def popen(self) -> subprocess.Popen[str]:
        return self.proc

    def _remote_pid_line(self, line: str) -> bool:
        if self.remote_pid is None and line.startswith(REMOTE_PID_MARKER):
            try:
                self.remote_pid = int(line[len(REMOTE_PID_MARKER):].strip())
            except ValueError:
                return False
            return True
        return False

    def target_pid(self) -> int | None:
        """PID of the program itself (remote PID for ssh processes)."""
        return self.remote_pid if self.host.remote else self.proc.pid

    def cpu_seconds(self) -> float | None:
        """utime+stime of the program from /proc (None if it is gone or unreadable)."""
        pid = self.target_pid()
        if pid is None:
            return None
        text = self.host.read_text(f"/proc/{int(pid)}/stat")
        return None if text is None else procfs.stat_cpu_seconds(text)

    def signal(self, sig: signal.Signals) -> None:
        if not self.host.remote:
            super().signal(sig)
            return
        if self.remote_pid is not None and not self.exited():
            try:
                self.host.run(f"kill -{sig.name[3:]} {int(self.remote_pid)} 2>/dev/null || true",
                              timeout=15)
            except subprocess.TimeoutExpired:
                log.warning("ssh kill of %s on %s timed out", self.name, self.host.label())
        if sig == signal.SIGKILL:
            super().signal(signal.SIGKILL)  # the local ssh process too


class ProcessRegistry:
    """Every Proc started by this runner, so that they can all be stopped from anywhere."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.live: list[Proc] = []
        # dicts recorded in run_config.json: role, host, pid, remote_pid
        self.history: list[dict[str, Any]] = []

    def add(self, proc: Proc) -> None:
        with self._lock:
            self.live.append(proc)

    def remove(self, proc: Proc) -> None:
        with self._lock:
            if proc in self.live:
                self.live.remove(proc)
            self.history.append({"name": proc.name, "host": proc.host.label(), "pid": proc.pid,
                                 "remote_pid": proc.remote_pid, "returncode": proc.returncode})

    def stop_all(self) -> None:
        with self._lock:
            procs = list(self.live)
        for p in procs:
            p.stop()
            self.remove(p)


REGISTRY = ProcessRegistry()
atexit.register(REGISTRY.stop_all)


def start_process(name: str, host: Host, argv: Sequence[object], env: Mapping[str, object] | None,
                  stdout_log: str, stderr_log: str | None = None,
                  cond: threading.Condition | None = None, markers: Iterable[str] = (),
                  registry: ProcessRegistry = REGISTRY, cwd: str | None = None) -> Proc:
    """Start `argv` on `host` with `env` added to its environment. stdout goes to `stdout_log`
    (via the reader thread); stderr to `stderr_log`, or merged into stdout when None. A remote
    command is wrapped in ssh (and docker exec) here; the process itself is recbench's one
    launcher (Proc, a recbench.launch.LineProcess)."""
    if host.ssh_host is not None:
        command = f"echo {REMOTE_PID_MARKER}$$ && {env_command(argv, env)}"
        full = build_remote_exec_cmd(host.ssh_host, host.repo, command, host.container, host.ssh,
                                     interactive=True)
        proc_env = dict(os.environ)
    else:
        full = [str(a) for a in argv]
        proc_env = dict(os.environ)
        proc_env.update({k: str(v) for k, v in (env or {}).items()})
    log.debug("start %s on %s: %s", name, host.label(), shell_join(full))
    proc = Proc(name, host, full, proc_env, stdout_log, stderr_log, cond or threading.Condition(),
                markers, cwd=cwd)
    registry.add(proc)
    return proc
