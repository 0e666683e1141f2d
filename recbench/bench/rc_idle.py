"""What an idle RC server costs while a client stays attached (tools/benchmarks/bench_rc_idle.py).

A PS server for one shard with one poll thread runs in this process (``recbench._ps.Server``), a
client attaches (``recbench.PSClient``), PUTs and GETs 10 keys, then does nothing for
``--idle_seconds`` while the process's CPU time is read; then one more GET (checked) and it
detaches. The client's thread sleeps in that window, so the CPU time is the server's pollers (and
their fabric's kernel work). Cases, interleaved ``--repeats`` times:

* ``ringing``      the client's lanes ring (shm doorbells; verbs WRITE WITH IMM, RS_RC_CAP_RING):
                   the idle poller blocks
* ``not_ringing``  65 slots per QP, which on verbs is above the 64 a lane may have to ring, so the
                   poller naps (what every verbs poller did before doorbells); on shm the lanes
                   ring anyway and the case says so (``lanes_ringing``)

Output: a table (median CPU-s per idle second, the server's naps and blocks in the window) and a
JSON list with ``--json``. For the verbs path run it where a device is, e.g. in a lab guest:
``ssh -F build/lab/ssh_config lab-a 'cd REPO && .venv/bin/python tools/benchmarks/bench_rc_idle.py
--transport rdma --transport_options device=rxe0'``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import recbench
from recbench import _ps, errors
from recbench.cpuinfo import cpu_model

CASES = {
    "ringing": "qps_per_client_per_shard=2;request_slot_bytes=16384;response_slot_bytes=16384",
    "not_ringing": ("qps_per_client_per_shard=2;slots_per_qp=65;request_slot_bytes=16384;"
                    "response_slot_bytes=16384"),
}


def _join(*parts: str) -> str:
    return ";".join(p for p in parts if p)


def idle_case(transport: str, case: str, idle_seconds: float, fabric: str) -> dict:
    srv = _ps.Server(transport=transport, host="127.0.0.1", port=0, shard=0, num_shards=1,
                     index_type="DRAM_PET_HASH", value_size=64, capacity=1000, num_threads=1,
                     max_keys_per_request=1000, extra=fabric)
    try:
        keys = np.arange(1, 11, dtype=np.uint64)
        rows = keys.astype(np.float32)[:, None] + np.arange(16, dtype=np.float32)[None, :]
        with recbench.PSClient(f"{transport}://127.0.0.1:{srv.port}",
                               transport_options=_join(fabric, CASES[case])) as ps:
            ps.put(keys, rows)
            np.testing.assert_array_equal(ps.get(keys), rows)
            st0, c0, t0 = srv.stats(), time.process_time(), time.monotonic()
            time.sleep(idle_seconds)  # the window measured: nobody sends anything
            c1, t1, st1 = time.process_time(), time.monotonic(), srv.stats()
            np.testing.assert_array_equal(ps.get(keys), rows)
        return {"case": case, "transport": transport, "idle_s": t1 - t0,
                "cpu_s_per_idle_s": (c1 - c0) / (t1 - t0),
                "lanes_ringing": st1["lanes_ringing"],
                "naps": st1["poller_naps"] - st0["poller_naps"],
                "blocks": st1["poller_blocks"] - st0["poller_blocks"]}
    finally:
        srv.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transport", choices=("rdma", "shm"), default="rdma")
    ap.add_argument("--transport_options", default="",
                    help="fabric options for server and client (e.g. device=rxe0)")
    ap.add_argument("--idle_seconds", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--cases", default="ringing,not_ringing")
    ap.add_argument("--json", help="write every measurement to this file")
    a = ap.parse_args(argv)
    names = [c for c in a.cases.split(",") if c]
    for c in names:
        if c not in CASES:
            ap.error(f"unknown case {c!r} (known: {', '.join(CASES)})")
    if a.idle_seconds <= 0 or a.repeats < 1:
        ap.error("--idle_seconds must be > 0 and --repeats >= 1")
    reason = _ps.transports().get(a.transport, "unknown transport")
    if reason is not None:
        print(f"skipped: {a.transport}: {reason}")
        return 0
    rows = []
    try:
        for rep in range(a.repeats):
            for c in names:
                r = idle_case(a.transport, c, a.idle_seconds, a.transport_options)
                r["repeat"] = rep
                rows.append(r)
                print(f"# repeat {rep} {c}: {r['cpu_s_per_idle_s']:.4f} CPU-s/s", file=sys.stderr,
                      flush=True)
    except (errors.DeviceUnavailable, errors.NotSupported) as e:  # no verbs device here
        print(f"skipped: {a.transport}: {e}")
        return 0
    print(f"{a.transport}, 1 poll thread, one attached client idle {a.idle_seconds:g} s, "
          f"x {a.repeats} (median); CPU {cpu_model()}")
    print(f"{'case':<13}{'CPU-s per idle s':>18}{'naps':>8}{'blocks':>8}{'lanes ringing':>15}")
    for c in names:
        rs = [r for r in rows if r["case"] == c]
        print(f"{c:<13}{statistics.median(r['cpu_s_per_idle_s'] for r in rs):>18.4f}"
              f"{statistics.median(r['naps'] for r in rs):>8.0f}"
              f"{statistics.median(r['blocks'] for r in rs):>8.0f}{rs[-1]['lanes_ringing']:>15}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
