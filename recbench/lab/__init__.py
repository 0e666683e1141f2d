"""recbench.lab: real RDMA verbs and real second kernels on a machine without a NIC.

Boots 1-4 qemu guests running Debian's own kernel (which has soft-RoCE, `rdma_rxe`) with this
host's root filesystem over virtio-9p (read-only, tmpfs overlay), so the recbench built here runs
in them unchanged. Each guest has `rxe0` on a private guest-to-guest link (198.18.0.0/24, MTU
9000) and an sshd reached from the host through a forwarded loopback port, so the runner's ssh
backend drives the guests as hosts. See docs/lab.md.

Results from the lab are protocol and correctness results (fabric=rxe, accelerator tcg or kvm),
never NIC performance.
"""

from recbench.lab.guests import Lab, attach, default_run_dir, load_state
from recbench.lab.kernel import LabError, fetch_kernel
from recbench.lab.qemu import choose_accel

__all__ = ["Lab", "LabError", "attach", "choose_accel", "default_run_dir", "fetch_kernel",
           "load_state"]
