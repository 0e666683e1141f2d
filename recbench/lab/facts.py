"""What a host tells about the lab: whether it is a lab guest (and under which accelerator), and
the fabric and accelerator labels of a runner row from the facts of the hosts it ran on.

A lab guest's kernel command line carries `recbench_lab.name=` and `recbench_lab.accel=` (set by
recbench.lab.qemu), which the preflight reports as facts["lab"] on every host. Rows then say
`fabric` (rdma: the verbs device kind, `rxe` in the lab; shm: `shm`; grpc/brpc: `tcp`) and
`accelerator` (`tcg`/`kvm` in lab guests, `native` elsewhere), so lab results can never pass for
NIC results.
"""

from __future__ import annotations

from recbench import records

CMDLINE = "/proc/cmdline"


def guest_facts(cmdline: str = CMDLINE) -> dict | None:
    """{"guest": name, "accel": tcg|kvm} when this kernel was booted by recbench.lab, else None."""
    try:
        with open(cmdline) as f:
            kv = records.parse_kv(f.read())
    except OSError:
        return None
    if "recbench_lab.accel" not in kv:
        return None
    return {"guest": kv.get("recbench_lab.name", ""), "accel": kv["recbench_lab.accel"]}


def row_labels(transport: str, host_facts: list[dict]) -> dict:
    """{"fabric": ..., "accelerator": ...} of a row run on hosts with these preflight facts."""
    t = transport.upper()
    if t == "RDMA":
        kinds = sorted({d.get("kind") or "unknown" for f in host_facts
                        for d in (f.get("rdma_devices") or [])[:1]})
        fabric = ";".join(kinds) or "none"
    else:
        fabric = {"SHM": "shm"}.get(t, "tcp")
    accels = sorted({(f.get("lab") or {}).get("accel") or "native" for f in host_facts}) or \
        ["native"]
    return {"fabric": fabric, "accelerator": ";".join(accels)}
