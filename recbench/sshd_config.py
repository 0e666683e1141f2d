"""The sshd_config of the sshd servers recbench starts itself (the lab's guests, the loopback sshd
of the ssh-backend tests): key-only root login for one authorized_keys file, no PAM, no strict
modes (the keys live in a run directory, not in ~/.ssh), room for the runner's many sessions."""


def sshd_config(port: int, listen: list[str], host_key: str, authorized_keys: str,
                pid_file: str) -> str:
    lines = [f"Port {port}", *(f"ListenAddress {a}" for a in listen), f"HostKey {host_key}",
             f"AuthorizedKeysFile {authorized_keys}", f"PidFile {pid_file}",
             "PasswordAuthentication no", "KbdInteractiveAuthentication no",
             "PubkeyAuthentication yes", "PermitRootLogin prohibit-password", "StrictModes no",
             "UsePAM no", "UseDNS no", "X11Forwarding no", "PrintMotd no", "MaxSessions 64",
             "MaxStartups 64:30:128", "LogLevel INFO"]
    return "\n".join(lines) + "\n"
