"""The lab's Ethernet switch for 3-4 guests: one process relaying the guests' link frames.

Why a relay. Two guests share a link as a qemu `dgram` pair (each guest's netdev sends to the
other's unix datagram socket): point to point, no third party. Three or more need a shared
segment. qemu's `-netdev socket,mcast=` would give one without a process of ours, but it needs a
multicast-capable interface (this machine's loopback has no MULTICAST flag, and enabling it, or
using a real NIC, is host network configuration and would put the link's frames on an interface
other processes can join). A relay on unix datagram sockets in the lab's run directory reaches
nothing but the guests' sockets, needs no privilege, and is a process the lab owns and stops by
PID like its guests.

What it does. Guest i's netdev is `dgram,local.path=RUN/link-i.sock,remote.path=RUN/switch.sock`,
so every frame arrives here with the sender's socket path as source address. The switch learns
source MAC -> port, sends unicast frames to the learned port and floods broadcast, multicast and
unknown destinations to every other port (a learning switch: the rxe traffic between two guests
does not reach the third). Frames from a path that is not one of the lab's ports are dropped.
Backpressure, not loss: a unix datagram socket queues only net.unix.max_dgram_qlen (10) frames
for its reader, and a guest under emulation reads slowly, so a relay that dropped on a full
queue would lose most of rxe's 64-frame bursts (each loss costs RoCE a ~1 s retransmit timeout).
The switch therefore sends to each guest through its own *connected* socket, which polls
writable exactly when that guest's queue has room, and keeps a per-port queue meanwhile
(bounded: PORT_QUEUE frames, beyond which it drops, as a switch with a full buffer would). The
guests' own sends to the switch get the same backpressure from qemu. The listening socket is
created by the parent (recbench.lab.guests) and passed in as a descriptor, so it exists before
any guest starts and no ready line is needed. On SIGTERM it prints its counters
(`component=lab_switch event=stopped ...`) and exits.

Cost: one extra hop per frame in Python. Under TCG the guests' own network stacks are orders of
magnitude slower; two-guest labs do not use the switch.
"""

from __future__ import annotations

import argparse
import collections
import errno
import selectors
import signal
import socket
import sys

FRAME_MAX = 65536
PORT_QUEUE = 4096  # frames waiting for one guest (about 36 MiB at MTU 9000)


class Port:
    def __init__(self, path: str):
        self.path = path
        self.sock: socket.socket | None = None
        self.queue: collections.deque[bytes] = collections.deque()

    def connect(self) -> bool:
        """Connect once the guest's qemu has bound its socket."""
        if self.sock is not None:
            return True
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.setblocking(False)
        try:
            s.connect(self.path)
        except OSError:
            s.close()
            return False
        self.sock = s
        return True


class Switch:
    def __init__(self, sock: socket.socket, ports: list[str]):
        self.sock = sock
        self.ports = {p: Port(p) for p in ports}
        self.macs: dict[bytes, Port] = {}
        self.sel = selectors.DefaultSelector()
        self.sel.register(sock, selectors.EVENT_READ)
        self.frames = self.flooded = self.dropped = self.foreign = self.waits = 0

    def _flush(self, port: Port) -> None:
        while port.queue:
            try:
                port.sock.send(port.queue[0])  # type: ignore[union-attr]
            except BlockingIOError:  # its queue is full: wait until it reads
                self.waits += 1
                with_write = selectors.EVENT_WRITE
                try:
                    self.sel.modify(port.sock, with_write, port)  # type: ignore[arg-type]
                except KeyError:
                    self.sel.register(port.sock, with_write, port)  # type: ignore[arg-type]
                return
            except OSError as exc:  # the guest went away: forget its socket and its frames
                if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTCONN):
                    raise
                self.dropped += len(port.queue)
                port.queue.clear()
                self._close(port)
                return
            port.queue.popleft()
        if port.sock is not None and port.sock in self.sel.get_map():
            self.sel.unregister(port.sock)

    def _close(self, port: Port) -> None:
        if port.sock is not None:
            if port.sock in self.sel.get_map():
                self.sel.unregister(port.sock)
            port.sock.close()
            port.sock = None

    def _send(self, frame: bytes, port: Port) -> None:
        if not port.connect():  # that guest is not up yet (or gone): the frame is lost
            self.dropped += 1
            return
        if len(port.queue) >= PORT_QUEUE:
            self.dropped += 1
            return
        port.queue.append(frame)
        if len(port.queue) == 1:
            self._flush(port)

    def forward(self, frame: bytes, src_path: str) -> None:
        src = self.ports.get(src_path)
        if src is None or len(frame) < 14:
            self.foreign += 1
            return
        self.frames += 1
        dst, smac = frame[0:6], frame[6:12]
        if not smac[0] & 1:
            self.macs[smac] = src
        port = None if dst[0] & 1 else self.macs.get(dst)
        if port is not None:
            if port is not src:
                self._send(frame, port)
            return
        self.flooded += 1
        for p in self.ports.values():
            if p is not src:
                self._send(frame, p)

    def serve(self) -> None:
        while True:
            for key, _ in self.sel.select():
                if key.data is not None:
                    self._flush(key.data)
                    continue
                while True:
                    try:
                        frame, src = self.sock.recvfrom(FRAME_MAX, socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        break
                    self.forward(frame, src if isinstance(src, str) else "")

    def counters(self) -> str:
        return (f"component=lab_switch event=stopped ports={len(self.ports)} frames={self.frames} "
                f"flooded={self.flooded} dropped={self.dropped} waits={self.waits} "
                f"foreign={self.foreign} macs={len(self.macs)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m recbench.lab.switch",
                                 description="learning Ethernet switch between the lab's guests")
    ap.add_argument("--fd", type=int, required=True, help="bound unix datagram socket")
    ap.add_argument("ports", nargs="+", help="the guests' link socket paths")
    a = ap.parse_args(argv)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM, fileno=a.fd)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sw = Switch(sock, a.ports)

    def stop(signum, frame):
        print(sw.counters(), flush=True)
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"component=lab_switch event=ready ports={len(a.ports)}", flush=True)
    sw.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
