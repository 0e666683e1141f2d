"""Checkpoint speed next to the disk's own (tools/benchmarks/bench_checkpoint.py).

One run, in one directory, `repeats` times interleaved:
  1. dd: sequential write of the checkpoint's size (`conv=fdatasync`) and read back, cold (the
     file's pages dropped with posix_fadvise DONTNEED), both with `iflag=direct` and buffered;
  2. a real `recbench.ps_server` (brpc, DRAM_PET_HASH, 1 shard) holding `records` rows of
     `value_size` bytes: PSClient.save(); PSClient.clear() and, with the file's pages dropped,
     PSClient.load() into the empty shard (one pass, what a restarted server's --load_checkpoint
     does); then, pages dropped again, PSClient.load() over the full shard (verify while serving,
     then the second pass);
  3. the same save and load again while a GET client (batches of 500 random keys, one in
     flight) records when each batch completed, so the GET rate before and during each
     checkpoint, the lowest 50 ms bin, the time spent below 80 % of the rate before, and the
     longest single GET show what serving loses. (Speed is taken from step 2: on a 2-core machine
     the GET client and the server thread serving it take the CPUs a checkpoint needs.)
Save and load times are the server's own (save: scan + write + fsync + rename + directory fsync;
load into the empty shard: the one pass; reload: verify + the second pass); throughput is file
bytes over that time.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field

import numpy as np

import recbench
from recbench.cpuinfo import cpu_model
from recbench.launch import PSServerLauncher

log = logging.getLogger("recbench.bench.checkpoint")

BIN_S = 0.05
DIP_FRACTION = 0.8


@dataclass
class DiskRates:
    write_mb_s: float
    read_direct_mb_s: float
    read_buffered_mb_s: float

    @property
    def read_mb_s(self) -> float:
        """The faster of the two reads: the stricter reference for the load."""
        return max(self.read_direct_mb_s, self.read_buffered_mb_s)


@dataclass
class GetWindow:
    before_keys_s: float
    during_keys_s: float
    min_bin_keys_s: float
    below_80pct_s: float
    max_get_ms: float


@dataclass
class Repeat:
    disk: DiskRates
    file_bytes: int
    save_s: float
    load_empty_s: float
    load_read_verify_s: float
    load_swap_s: float
    save_get: GetWindow
    load_get: GetWindow

    @property
    def save_mb_s(self) -> float:
        return self.file_bytes / self.save_s / 1e6

    @property
    def load_s(self) -> float:
        return self.load_read_verify_s + self.load_swap_s

    @property
    def load_mb_s(self) -> float:
        return self.file_bytes / self.load_s / 1e6

    @property
    def load_empty_mb_s(self) -> float:
        return self.file_bytes / self.load_empty_s / 1e6


@dataclass
class Result:
    records: int
    value_size: int
    directory: str
    cpu: str
    repeats: list[Repeat] = field(default_factory=list)


def drop_cache(path: str) -> None:
    """Forget the (clean) page-cache pages of one file, so the next read comes from the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


_DD_RE = re.compile(r"(\d+) bytes .* copied, ([\d.e+-]+) s")


def _dd(args: list[str]) -> float:
    """Run dd, return MB/s from its own byte count and seconds."""
    p = subprocess.run(["dd", *args], capture_output=True, text=True, check=True)
    m = _DD_RE.search(p.stderr)
    if not m:
        raise RuntimeError(f"cannot read dd's summary: {p.stderr.strip()!r}")
    return int(m.group(1)) / float(m.group(2)) / 1e6


def disk_rates(directory: str, nbytes: int) -> DiskRates:
    path = os.path.join(directory, "dd_probe.bin")
    mib = max(1, nbytes >> 20)
    try:
        w = _dd(["if=/dev/zero", f"of={path}", "bs=1M", f"count={mib}", "conv=fdatasync"])
        drop_cache(path)
        rd = _dd([f"if={path}", "of=/dev/null", "bs=1M", "iflag=direct"])
        drop_cache(path)
        rb = _dd([f"if={path}", "of=/dev/null", "bs=1M"])
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return DiskRates(w, rd, rb)


class GetSampler(threading.Thread):
    """GETs of `batch` random keys back to back; records each completion time."""

    def __init__(self, uri: str, records: int, batch: int = 500):
        super().__init__(daemon=True)
        self.client = recbench.PSClient(uri, timeout_ms=60000)
        self.records, self.batch = records, batch
        self.done_ns: list[int] = []
        self.lat_ns: list[int] = []
        self.stop_flag = threading.Event()
        self.error: Exception | None = None

    def run(self):
        rng = np.random.default_rng(7)
        try:
            while not self.stop_flag.is_set():
                keys = rng.integers(0, self.records, self.batch, dtype=np.uint64)
                t0 = time.perf_counter_ns()
                self.client.get(keys)
                t1 = time.perf_counter_ns()
                self.done_ns.append(t1)
                self.lat_ns.append(t1 - t0)
        except recbench.errors.RecbenchError as e:  # reported by the caller
            self.error = e
        finally:
            self.client.close()

    def window(self, t0: int, t1: int, before_s: float = 1.0) -> GetWindow:
        done = np.array(self.done_ns, dtype=np.int64)
        lat = np.array(self.lat_ns, dtype=np.int64)

        def rate(a: int, b: int) -> float:
            n = int(((done >= a) & (done < b)).sum())
            return n * self.batch / max((b - a) / 1e9, 1e-9)

        b_ns = int(BIN_S * 1e9)
        before_bins = [rate(a, a + b_ns) for a in range(t0 - int(before_s * 1e9), t0, b_ns)]
        before = statistics.median(before_bins) if before_bins else 0.0
        # the window and one second after it: a slow recovery counts too
        bins = [rate(a, a + b_ns) for a in range(t0, t1 + int(1e9), b_ns)]
        during_bins = [rate(a, a + b_ns) for a in range(t0, max(t1, t0 + b_ns), b_ns)]
        in_win = (done >= t0) & (done < t1 + int(1e9))
        return GetWindow(
            before_keys_s=before,
            during_keys_s=rate(t0, t1) if t1 > t0 else 0.0,
            min_bin_keys_s=min(during_bins) if during_bins else 0.0,
            below_80pct_s=sum(BIN_S for r in bins if r < DIP_FRACTION * before),
            max_get_ms=float(lat[in_win].max()) / 1e6 if in_win.any() else 0.0)


def _reply_field(pattern: str, reply: str) -> re.Match:
    m = re.search(pattern, reply)
    if not m:
        raise RuntimeError(f"unexpected reply from the server: {reply!r}")
    return m


def fill(uri: str, records: int, value_size: int, batch: int = 500) -> None:
    dim = value_size // 4
    rng = np.random.default_rng(1)
    with recbench.PSClient(uri, timeout_ms=60000) as ps:
        for lo in range(0, records, batch):
            keys = np.arange(lo, min(lo + batch, records), dtype=np.uint64)
            ps.put(keys, rng.random((len(keys), dim), dtype=np.float32))


def run(records: int = 1_000_000, value_size: int = 512, repeats: int = 3,
        directory: str | None = None, num_threads: int = 2, settle_s: float = 1.0) -> Result:
    base = tempfile.mkdtemp(prefix="rs_ckpt_bench_", dir=directory)
    res = Result(records, value_size, base, cpu_model())
    srv = PSServerLauncher([sys.executable, "-m", "recbench.ps_server", "--transport", "brpc",
                            "--host", "127.0.0.1", "--port", "0", "--value_size", str(value_size),
                            "--capacity", str(records + records // 10), "--num_threads",
                            str(num_threads), "--max_keys_per_request", "500",
                            "--checkpoint_root", base])
    try:
        ready = srv.wait_ready(60)[0]
        uri = f"brpc://127.0.0.1:{ready['port']}"
        log.info("filling %d rows of %d B", records, value_size)
        fill(uri, records, value_size)
        ck = os.path.join(base, "ck")
        ckfile = os.path.join(ck, "shard_0.rsckpt")
        admin = recbench.PSClient(uri, timeout_ms=60000)
        expected_bytes = records * (8 + value_size)
        for rep in range(repeats):
            disk = disk_rates(base, expected_bytes)
            log.info("repeat %d: dd write %.0f MB/s, read direct %.0f / buffered %.0f MB/s",
                     rep, disk.write_mb_s, disk.read_direct_mb_s, disk.read_buffered_mb_s)
            # speed, with no other client, right after dd: save; load into the emptied shard
            # (one pass, as a restarted server's --load_checkpoint); reload the full shard
            # (verify while serving, then the second pass)
            save_reply = admin.save(ck)[0]
            admin.clear()
            drop_cache(ckfile)
            empty_reply = admin.load(ck)[0]
            drop_cache(ckfile)
            load_reply = admin.load(ck)[0]
            # serving: the same again while a GET client runs
            sampler = GetSampler(uri, records)
            sampler.start()
            # a warm-up second, then the second the rate before the checkpoint is measured over
            time.sleep(2 * settle_s)
            t0 = time.perf_counter_ns()
            admin.save(ck)
            t1 = time.perf_counter_ns()
            time.sleep(settle_s)
            drop_cache(ckfile)
            t2 = time.perf_counter_ns()
            admin.load(ck)
            t3 = time.perf_counter_ns()
            time.sleep(settle_s)
            sampler.stop_flag.set()
            sampler.join()
            if sampler.error:
                raise sampler.error
            m = _reply_field(r"read and verified in ([\d.]+) s, swapped in ([\d.]+) s", load_reply)
            r = Repeat(disk=disk, file_bytes=os.path.getsize(ckfile),
                       save_s=float(_reply_field(r"bytes, ([\d.]+) s\)", save_reply).group(1)),
                       load_empty_s=float(_reply_field(r"one pass in ([\d.]+) s", empty_reply)
                                          .group(1)),
                       load_read_verify_s=float(m.group(1)), load_swap_s=float(m.group(2)),
                       save_get=sampler.window(t0, t1), load_get=sampler.window(t2, t3))
            log.info("repeat %d: save %.0f MB/s (%.2f s), load into the empty shard %.0f MB/s "
                     "(%.2f s), reload %.0f MB/s (%.2f s + swap %.2f s)",
                     rep, r.save_mb_s, r.save_s, r.load_empty_mb_s, r.load_empty_s, r.load_mb_s,
                     r.load_read_verify_s, r.load_swap_s)
            res.repeats.append(r)
        admin.close()
    finally:
        srv.stop()
        shutil.rmtree(base, ignore_errors=True)
    return res


def summary(res: Result) -> dict:
    med = statistics.median
    reps = res.repeats
    out = {
        "records": res.records, "value_size": res.value_size, "cpu": res.cpu,
        "repeats": len(reps), "file_bytes": reps[0].file_bytes if reps else 0,
        "dd_write_mb_s": med(r.disk.write_mb_s for r in reps),
        "dd_read_direct_mb_s": med(r.disk.read_direct_mb_s for r in reps),
        "dd_read_buffered_mb_s": med(r.disk.read_buffered_mb_s for r in reps),
        "save_s": med(r.save_s for r in reps), "save_mb_s": med(r.save_mb_s for r in reps),
        "save_vs_dd_write": med(r.save_mb_s / r.disk.write_mb_s for r in reps),
        "load_empty_s": med(r.load_empty_s for r in reps),
        "load_empty_mb_s": med(r.load_empty_mb_s for r in reps),
        "load_empty_vs_dd_read": med(r.load_empty_mb_s / r.disk.read_mb_s for r in reps),
        "load_s": med(r.load_s for r in reps), "load_swap_s": med(r.load_swap_s for r in reps),
        "load_mb_s": med(r.load_mb_s for r in reps),
        "load_vs_dd_read": med(r.load_mb_s / r.disk.read_mb_s for r in reps),
    }
    for phase in ("save_get", "load_get"):
        for k in GetWindow.__dataclass_fields__:
            out[f"{phase}_{k}"] = med(asdict(getattr(r, phase))[k] for r in reps)
    return out


def format_summary(s: dict) -> str:
    mb = s["file_bytes"] / 1e6
    lines = [
        (f"checkpoint of {s['records']} x {s['value_size']} B rows ({mb:.1f} MB), "
         f"medians of {s['repeats']} repeats, CPU {s['cpu']}"),
        (f"  dd write (fdatasync) {s['dd_write_mb_s']:.0f} MB/s; dd read direct "
         f"{s['dd_read_direct_mb_s']:.0f} MB/s, buffered cold {s['dd_read_buffered_mb_s']:.0f} MB/s"),
        (f"  save {s['save_s']:.2f} s = {s['save_mb_s']:.0f} MB/s = "
         f"{100 * s['save_vs_dd_write']:.0f} % of dd write"),
        (f"  load into an empty shard (one pass) {s['load_empty_s']:.2f} s = "
         f"{s['load_empty_mb_s']:.0f} MB/s = {100 * s['load_empty_vs_dd_read']:.0f} % of the faster "
         f"dd read"),
        (f"  reload of the full shard (verify, then the second pass) {s['load_s']:.2f} s (second "
         f"pass {s['load_swap_s']:.2f} s) = {s['load_mb_s']:.0f} MB/s "
         f"= {100 * s['load_vs_dd_read']:.0f} % of the faster dd read"),
    ]
    for phase, name in (("save_get", "during save"), ("load_get", "during load")):
        lines.append(
            f"  GET {name}: before {s[f'{phase}_before_keys_s'] / 1e6:.2f} M keys/s, during "
            f"{s[f'{phase}_during_keys_s'] / 1e6:.2f} M, lowest 50 ms bin "
            f"{s[f'{phase}_min_bin_keys_s'] / 1e6:.2f} M, below 80 % for "
            f"{s[f'{phase}_below_80pct_s']:.2f} s, longest GET {s[f'{phase}_max_get_ms']:.1f} ms")
    return "\n".join(lines)
