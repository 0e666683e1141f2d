"""A real OpenSSH server on loopback for the ssh-backend tests.

It generates a host key and a client key in a fresh directory, writes its own sshd_config on a
free port listening on 127.0.0.1 and 127.0.0.2, runs `/usr/sbin/sshd -D -e -f CONFIG` and writes
an ssh_config whose host aliases (`client-a`, `client-b`, `server-a`, `127.0.0.1`, `127.0.0.2`) point at it.
`stop()` terminates the sshd it started (and only it). Tests skip when sshd or ssh-keygen is
missing or sshd cannot start here, with the reason.
"""

import os
import shutil
import subprocess
import tempfile
import threading

from recbench import launch
from recbench.sshd_config import sshd_config

SSHD = "/usr/sbin/sshd"
ALIASES = ("client-a", "client-b", "server-a")


class LoopbackSshd:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rbsshd-")
        self.port = None
        self.proc = None
        self.ssh_config = os.path.join(self.dir, "ssh_config")
        self.stderr_lines = []

    @staticmethod
    def unavailable_reason():
        if not os.path.exists(SSHD):
            return f"{SSHD} is not installed"
        if not shutil.which("ssh-keygen") or not shutil.which("ssh"):
            return "ssh / ssh-keygen are not installed"
        if os.geteuid() != 0:
            return "sshd on loopback needs root here (privilege separation)"
        return None

    def _keygen(self, name):
        path = os.path.join(self.dir, name)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path], check=True,
                       stdin=subprocess.DEVNULL)
        return path

    def start(self, timeout=20):
        host_key = self._keygen("host_key")
        client_key = self._keygen("client_key")
        shutil.copy(client_key + ".pub", os.path.join(self.dir, "authorized_keys"))
        os.chmod(self.dir, 0o700)
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation directory
        self.port = launch.free_port()
        config = os.path.join(self.dir, "sshd_config")
        with open(config, "w") as f:
            f.write(sshd_config(self.port, ["127.0.0.1", "127.0.0.2"], host_key,
                                f"{self.dir}/authorized_keys", f"{self.dir}/sshd.pid"))
        user = os.environ.get("USER") or "root"
        with open(self.ssh_config, "w") as f:
            f.write(f"""Host {' '.join(ALIASES)}
    HostName 127.0.0.1
Host {' '.join(ALIASES)} 127.0.0.1 127.0.0.2
    Port {self.port}
    User {user}
    IdentityFile {client_key}
    IdentitiesOnly yes
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
""")
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", config], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        listening = threading.Event()
        wanted = {f"Server listening on 127.0.0.1 port {self.port}",
                  f"Server listening on 127.0.0.2 port {self.port}"}

        def read():
            for line in self.proc.stderr:
                self.stderr_lines.append(line.rstrip())
                wanted.discard(next((w for w in wanted if w in line), None))
                if not wanted:
                    listening.set()
            listening.set()

        threading.Thread(target=read, daemon=True).start()
        listening.wait(timeout)
        if self.proc.poll() is not None or wanted:
            self.stop()
            raise RuntimeError("sshd did not start: " + " | ".join(self.stderr_lines[-5:]))
        return self

    def ssh(self, host, *command, timeout=30):
        return subprocess.run(["ssh", "-F", self.ssh_config, "-o", "BatchMode=yes", host, *command],
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def pids_mentioning(text):
    """PIDs of live (non-zombie) processes whose command line contains `text`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append((int(name), cmdline))
    return found


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
