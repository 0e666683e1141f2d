"""The lab's suite (`python -m recbench.lab check`, `make lab`, and the CI test test_lab.py).

Steps, each PASS/FAIL/SKIP with a one-line detail, all labelled with the accelerator:
  devices       recbench.rdma in guest A lists rxe0 with an ACTIVE port; finds its IPv4 GID
  verbs_tests   src/test/scripts/test_rc_verbs.py in guest A (the RC protocol over rxe)
  perftest      ib_write_bw / ib_write_lat, server in guest A, client in guest B: the reference
  runner_rdma   run_benchmark_ps.py --execution-backend ssh --remote-sync check, server in guest
                A, a client in each other guest (B; B and C with 3 guests, through the lab's
                switch) ("Canonical two-host RDMA PET_HASH run", scaled down)
  runner_rpc    the same for grpc,brpc ("Canonical two-host GRPC/BRPC smoke")     [--rpc]
  local_smoke   "Local RDMA smoke" run by the runner inside guest A               [--local-smoke]
  fair_small    "Fair local small matrix across RDMA/GRPC/BRPC" inside guest A    [--seeds]
  rdma_capacity "Local optimized RDMA GET capacity", scaled down, inside guest A  [--seeds]
Then it writes lab.json and lab.md in --out: the steps, the runner's rdma GET figures beside
perftest's as ratios, the accelerator, the kernel and the CPU. These are protocol/correctness
results under emulation, not NIC performance.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import datetime
import json
import logging
import os
import selectors
import statistics
import subprocess
import sys
import time
from pathlib import Path

from recbench import records
from recbench.lab.guests import Lab
from recbench.lab.kernel import LabError

log = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parents[2]
PY = REPO / ".venv" / "bin" / "python"
PERFTEST_BW = "ib_write_bw -d rxe0 -x {gid} -F -s 65536 -n 256 --report_gbits"
PERFTEST_LAT = "ib_write_lat -d rxe0 -x {gid} -F -s 64 -n 1000"
# RC settings a 2-vCPU emulated guest holds (the seed's capacity shapes scaled down)
RC_SMALL = ["--prefetch-depth", "4", "--rdma-rc-qps-per-client-per-shard", "4",
            "--rdma-rc-slots-per-qp", "1", "--server-rdma-threads", "1",
            "--rdma-rc-server-get-workers", "0", "--rdma-rc-server-coroutines-per-thread", "1",
            "--rdma-get-response-mode", "auto", "--client-threads-per-process", "1",
            "--client-load-threads-per-process", "1"]


@dataclasses.dataclass
class Step:
    name: str
    status: str  # PASS, FAIL, SKIP
    detail: str
    seconds: float
    data: dict = dataclasses.field(default_factory=dict)


def add_arguments(p) -> None:
    p.add_argument("--out", default="", help="results directory (default "
                                             "results/lab_MMDDHHMM under the repo)")
    p.add_argument("--only", default="", help="comma list of steps to run (default: all of "
                                              "devices,verbs_tests,perftest,runner_rdma)")
    p.add_argument("--rpc", action="store_true", help="also the two-host grpc,brpc smoke")
    p.add_argument("--local-smoke", action="store_true",
                   help="also the runner's Local RDMA smoke inside guest A")
    p.add_argument("--seeds", action="store_true",
                   help="also the seed's fair local rdma,grpc,brpc matrix and the local RDMA GET "
                        "capacity shape (scaled down) inside guest A")
    p.add_argument("--runtime-seconds", type=float, default=2.0, help="runner run phase")
    p.add_argument("--netem-sweep", default="",
                   help="comma list of added RTTs in ms (e.g. 0,0.1,1): at each, the two-host "
                        "rdma run at prefetch depth 1 and 4 and grpc,brpc; medians in lab.md")
    p.add_argument("--netem-repeats", type=int, default=3, help="runner repeats per RTT")


def wait_for_line(proc: subprocess.Popen, needle: str, timeout: float) -> str | None:
    """The first line of proc's (binary) stdout containing needle, or None (EOF or timeout).
    Reads the pipe's descriptor directly: a buffered reader could hold the line while select()
    sees nothing more to read."""
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if needle.encode() in line:
                    return line.decode("utf-8", "replace")
    return None


def _tail(text: str, n: int = 400) -> str:
    return " ".join(text.strip().split())[-n:]


class Suite:
    def __init__(self, lab: Lab, out: Path, runtime_s: float = 2.0):
        self.lab = lab
        self.out = out
        self.runtime_s = runtime_s
        self.steps: list[Step] = []
        self.gid: int | None = None

    def step(self, name: str, fn) -> Step:
        t0 = time.monotonic()
        try:
            status, detail, data = fn()
        except (LabError, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as exc:
            status, detail, data = "FAIL", f"{type(exc).__name__}: {exc}", {}
        s = Step(name, status, detail, round(time.monotonic() - t0, 1), data)
        self.steps.append(s)
        print(f"[lab] accel={self.lab.accel} {name}: {status} — {detail} ({s.seconds} s)",
              flush=True)
        return s

    # ---- steps ----------------------------------------------------------------------------
    def devices(self):
        res = self.lab.ssh("lab-a", f"cd {REPO} && {PY} -m recbench.rdma", check=False)
        found = json.loads(res.stdout or "{}").get("devices", [])
        rxe = [d for d in found if d["name"] == "rxe0"]
        if not rxe or not rxe[0]["ports"] or rxe[0]["ports"][0]["state"] != "ACTIVE":
            return "FAIL", f"no ACTIVE rxe0 in recbench.rdma.devices(): {_tail(res.stdout)}", {}
        port = rxe[0]["ports"][0]
        ipv4 = [g["index"] for g in port["gids"] if g["gid"].startswith("0000:0000:0000:0000:0000:ffff")]
        self.gid = ipv4[0] if ipv4 else 0
        return "PASS", (f"rxe0 kind={rxe[0].get('kind')} port 1 ACTIVE {port['link_layer']} "
                        f"active_mtu={port['active_mtu']} gids={len(port['gids'])} "
                        f"ipv4_gid_index={self.gid}"), {"device": rxe[0]}

    def verbs_tests(self):
        cmd = (f"cd {REPO} && RECBENCH_RDMA_DEVICE=rxe0 timeout 900 {PY} -m pytest -q -rs "
               "-p no:cacheprovider src/test/scripts/test_rc_verbs.py")
        res = self.lab.ssh("lab-a", cmd, timeout=960, check=False)
        (self.out / "verbs_tests.txt").write_text(res.stdout + res.stderr)
        last = next((ln for ln in reversed(res.stdout.splitlines()) if " in " in ln), "")
        if res.returncode == 0 and "skipped" not in last:
            return "PASS", last.strip("= "), {}
        return "FAIL", f"exit {res.returncode}: {last.strip('= ')} {_tail(res.stdout, 600)}", {}

    def _perftest(self, template: str, name: str) -> dict:
        cmd = template.format(gid=self.gid or 0)
        # line-buffered, so "Waiting for client" reaches us; bounded, so it never outlives us
        server = subprocess.Popen(self.lab.ssh_argv("lab-a", f"exec stdbuf -oL timeout 300 {cmd}"),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL)
        ok = False
        try:
            head = wait_for_line(server, "Waiting for client", 120)
            if head is None:
                raise LabError(f"{name} server on lab-a did not start listening")
            peer = self.lab.guest("lab-a").spec.ip
            res = self.lab.ssh("lab-b", f"timeout 180 {cmd} {peer}", timeout=240, check=False)
            (self.out / f"{name}.txt").write_text(res.stdout + res.stderr)
            if res.returncode != 0:
                raise LabError(f"{name} client exit {res.returncode}: "
                               f"{_tail(res.stdout + res.stderr)}")
            rows = res.stdout.splitlines()
            for i, line in enumerate(rows):
                if line.strip().startswith("#bytes") and i + 1 < len(rows):
                    ok = True
                    return {"header": " ".join(line.split()), "values": rows[i + 1].split()}
            raise LabError(f"{name}: no result row in {_tail(res.stdout)}")
        finally:
            try:
                server.wait(timeout=60 if ok else 0.1)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            server.stdout.close()

    def perftest(self):
        if self.lab.n < 2:
            return "SKIP", "needs two guests", {}
        bw = self._perftest(PERFTEST_BW, "ib_write_bw")
        lat = self._perftest(PERFTEST_LAT, "ib_write_lat")
        gbps = float(bw["values"][3])  # bytes iterations BW_peak BW_average MsgRate
        typical = float(lat["values"][4])  # bytes iterations t_min t_max t_typical ...
        return "PASS", (f"ib_write_bw 64 KiB {gbps:.3f} Gb/s; ib_write_lat 64 B typical "
                        f"{typical:.1f} us"), {"write_bw_gbps": gbps, "write_lat_typical_us": typical,
                                               "bw_row": bw, "lat_row": lat}

    def _runner(self, name: str, args: list[str], ssh: bool = True,
                repeat: int = 1) -> tuple[str, str, dict]:
        out = self.out / name
        argv = ["tools/benchmarks/run_benchmark_ps.py", *args,
                "--runtime-seconds", str(self.runtime_s), "--repeat", str(repeat),
                "--cluster-timeout", "240", "--client-timeout", "600", "--output-dir", str(out)]
        if ssh:
            # only the servers' ready lines count over ssh: the runner used to probe the
            # endpoint (198.18.0.x:port) from this host, which cannot reach the guests' link;
            # an egress proxy accepting any connect made that probe "succeed" before a slow
            # guest's server listened (docs/lab.md). The runner no longer probes remote ports;
            # --startup-delay 240 stays as a belt for runners older than that fix.
            argv += ["--execution-backend", "ssh", "--remote-sync", "check",
                     "--ssh-config", str(self.lab.ssh_config), "--startup-delay", "240"]
            for g in self.lab.guests:  # {A} -> lab-a's link address, ...
                argv = [str(x).replace("{" + g.name[-1].upper() + "}", g.spec.ip) for x in argv]
            res = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True,
                                 timeout=1500, stdin=subprocess.DEVNULL, check=False)
            text = res.stdout + res.stderr
        else:  # the runner itself inside guest A, its output in the share
            out = self.lab.share_dir / name
            argv[argv.index("--output-dir") + 1] = str(out)
            res = self.lab.ssh("lab-a", f"cd {REPO} && {PY} " + " ".join(argv), timeout=1500,
                               check=False)
            text = res.stdout + res.stderr
        (self.out / f"{name}.log").write_text(text)
        try:
            with open(out / "summary.csv") as f:
                rows = list(csv.DictReader(f))
        except OSError:
            return "FAIL", f"no summary.csv (exit {res.returncode}): {_tail(text)}", {}
        bad = [r for r in rows if r["status"] != "success"]
        summary = "; ".join(f"{r['transport']} {r['phase']} {r['status']} "
                            f"{float(r['key_ops_per_sec'] or 0) / 1e6:.4f} M keys/s"
                            for r in rows)
        data = {"rows": rows, "output_dir": str(out)}
        if bad or res.returncode != 0:
            return "FAIL", f"exit {res.returncode}: {summary} {bad[0]['message'] if bad else ''}", data
        return "PASS", summary, data

    def runner_rdma(self):
        if self.lab.n < 2:
            return "SKIP", "needs two guests", {}
        # one client guest per guest after A: with 3-4 guests they share the link's switch
        clients = ",".join(f"{i}:root@{{{g.name[-1].upper()}}}"
                           for i, g in enumerate(self.lab.guests[1:]))
        return self._runner("runner_rdma", [
            "--transports", "rdma", "--server-plan", "0:root@{A}:25000:0",
            "--client-plan", clients, "--record-count", "20000", "--value-size", "512",
            "--batch-keys", "500", "--index-type", "DRAM_PET_HASH", *RC_SMALL,
            "--rdma-rc-profile-interval-ms", "0", "--rdma-control-plane-port", "25100"])

    def runner_rpc(self):
        return self._runner("runner_rpc", [
            "--transports", "grpc,brpc", "--server-plan", "0:root@{A}:15000:0",
            "--client-plan", "0:root@{B}", "--record-count", "5000", "--value-size", "128",
            "--batch-keys", "64", "--client-threads-per-process", "2",
            "--client-load-threads-per-process", "2", "--server-worker-threads", "2"])

    def local_smoke(self):
        return self._runner("local_smoke", [
            "--transports", "rdma", "--client-ips", "127.0.0.1", "--server-shard-ips", "127.0.0.1",
            "--client-processes-per-ip", "1", "--record-count", "10000", "--value-size", "128",
            "--batch-keys", "64", "--rdma-wait-timeout-ms", "8000", *RC_SMALL,
            "--execution-backend", "local"], ssh=False)

    def netem(self, rtt_ms: float, repeat: int) -> tuple[str, str, dict]:
        """At rtt_ms added round trip (tc netem on both guests' link NICs): the two-host rdma run
        at prefetch depth 1 and 4, and grpc,brpc, `repeat` times each; medians per row kind."""
        if self.lab.n < 2:
            return "SKIP", "needs two guests", {}
        self.lab.set_netem(rtt_ms)
        tag = f"{rtt_ms:g}".replace(".", "p")
        rc = list(RC_SMALL)
        runs = {}
        for depth in (1, 4):
            rc[rc.index("--prefetch-depth") + 1] = str(depth)
            runs[f"rdma d{depth}"] = self._runner(f"netem_{tag}ms_rdma_d{depth}", [
                "--transports", "rdma", "--server-plan", "0:root@{A}:25000:0",
                "--client-plan", "0:root@{B}", "--record-count", "20000", "--value-size", "512",
                "--batch-keys", "500", "--index-type", "DRAM_PET_HASH", *rc,
                "--rdma-rc-profile-interval-ms", "0", "--rdma-control-plane-port", "25100"],
                repeat=repeat)
        runs["grpc,brpc"] = self._runner(f"netem_{tag}ms_rpc", [
            "--transports", "grpc,brpc", "--server-plan", "0:root@{A}:15000:0",
            "--client-plan", "0:root@{B}", "--record-count", "20000", "--value-size", "512",
            "--batch-keys", "500", "--index-type", "DRAM_PET_HASH",
            "--client-threads-per-process", "1", "--client-load-threads-per-process", "1",
            "--server-worker-threads", "2"], repeat=repeat)
        table = []
        for kind, (_, _, data) in runs.items():
            by_t: dict[str, list[dict]] = {}
            for r in data.get("rows", []):
                if r["phase"] == "run" and r["status"] == "success":
                    by_t.setdefault(r["transport"], []).append(r)
            for t, rows in sorted(by_t.items()):
                table.append({"rtt_ms": rtt_ms, "transport": t,
                              "prefetch_depth": kind[-1] if kind.startswith("rdma") else "",
                              "runs": len(rows),
                              "median_keys_per_s": statistics.median(
                                  float(r["key_ops_per_sec"]) for r in rows),
                              "median_p50_us": statistics.median(float(r["p50_us"]) for r in rows)})
        failed = [k for k, (st, _, _) in runs.items() if st != "PASS"]
        detail = "; ".join(f"{x['transport']}{' d' + x['prefetch_depth'] if x['prefetch_depth'] else ''}"
                           f" {x['median_keys_per_s'] / 1e3:.1f} k keys/s p50 "
                           f"{x['median_p50_us'] / 1e3:.1f} ms" for x in table)
        return ("FAIL" if failed else "PASS",
                (f"failed: {', '.join(failed)}; " if failed else "") + detail, {"table": table})

    def fair_small(self):
        """The seed's "Fair local small matrix across RDMA/GRPC/BRPC", as written: it fits."""
        return self._runner("fair_small", [
            "--transports", "rdma,grpc,brpc", "--client-ips", "127.0.0.1",
            "--server-shard-ips", "127.0.0.1", "--client-processes-per-ip", "1",
            "--record-count", "10000", "--value-size", "128", "--batch-keys", "64",
            "--client-threads-per-process", "1", "--client-load-threads-per-process", "1",
            "--execution-backend", "local", "--server-worker-threads", "4",
            "--server-rdma-threads", "1", "--rdma-rc-server-get-workers", "0",
            "--rdma-rc-server-coroutines-per-thread", "1", "--rdma-get-response-mode", "auto"],
            ssh=False)

    def rdma_capacity(self):
        """The seed's "Local optimized RDMA GET capacity" scaled to a 2-vCPU, 2 GiB guest: its
        PET_HASH / 512 B / 500-key batches / depth 16 / 16 QPs / 1 slot / no profile / NUMA 0,
        with 100k records (not 1M), 2 client processes x 1 thread (not 4 x 3), 2 server RDMA
        threads (not 16) and no core binding (its offsets name cores 0..22)."""
        return self._runner("rdma_capacity", [
            "--transports", "rdma", "--client-ips", "127.0.0.1", "--server-shard-ips", "127.0.0.1",
            "--client-processes-per-ip", "2", "--record-count", "100000", "--value-size", "512",
            "--batch-keys", "500", "--index-type", "DRAM_PET_HASH",
            "--client-threads-per-process", "1", "--client-load-threads-per-process", "1",
            "--execution-backend", "local", "--prefetch-depth", "16",
            "--rdma-rc-qps-per-client-per-shard", "16", "--rdma-rc-slots-per-qp", "1",
            "--server-rdma-threads", "2", "--rdma-rc-server-get-workers", "0",
            "--rdma-rc-server-coroutines-per-thread", "1", "--rdma-get-response-mode", "auto",
            "--rdma-rc-profile-interval-ms", "0", "--rdma-rc-server-numa-id", "0",
            "--rdma-rc-client-numa-id", "0"], ssh=False)

    # ---- report ---------------------------------------------------------------------------
    def comparison(self) -> dict:
        perf = next((s.data for s in self.steps if s.name == "perftest" and s.status == "PASS"), None)
        run = next((s.data for s in self.steps if s.name == "runner_rdma" and s.data.get("rows")),
                   None)
        if not perf or not run:
            return {}
        rows = [r for r in run["rows"] if r["phase"] == "run" and r["status"] == "success"]
        if not rows:
            return {}
        # summary.csv's payload_gbps is GB/s (value bytes); perftest's --report_gbits is Gbit/s
        gbps = sum(float(r["key_ops_per_sec"] or 0) * int(r["value_size"]) for r in rows) * 8 / 1e9
        p50 = float(rows[0]["p50_us"] or 0)
        return {"rdma_get_payload_gbps": gbps, "ib_write_bw_gbps": perf["write_bw_gbps"],
                "get_payload_over_write_bw": gbps / perf["write_bw_gbps"]
                if perf["write_bw_gbps"] else None,
                "rdma_get_p50_us": p50, "ib_write_lat_typical_us": perf["write_lat_typical_us"],
                "get_p50_over_write_lat": p50 / perf["write_lat_typical_us"]
                if perf["write_lat_typical_us"] else None,
                "batch_keys": int(rows[0]["batch_keys"]), "value_size": int(rows[0]["value_size"])}

    def write_report(self) -> None:
        from recbench.cpuinfo import cpu_model

        cmp_ = self.comparison()
        doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "lab": self.lab.describe(), "host_cpu": cpu_model(), "comparison": cmp_,
               "steps": [dataclasses.asdict(s) for s in self.steps]}
        (self.out / "lab.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
        lines = [f"# recbench lab run ({self.lab.accel}, fabric=rxe)", "",
                 (f"- date: {doc['date']}; host CPU: {doc['host_cpu']}; guest kernel: "
                  f"{doc['lab']['kernel']}; accelerator: **{self.lab.accel}** "
                  f"({self.lab.accel_reason}); link MTU {self.lab.mtu}; added RTT "
                  f"{self.lab.netem_rtt_ms} ms"),
                 ("- Protocol/correctness results under emulation on a shared machine: "
                  "**not NIC performance**."),
                 "", "| step | status | detail | s |", "|---|---|---|---|"]
        lines += [f"| {s.name} | {s.status} | {s.detail} | {s.seconds} |" for s in self.steps]
        if cmp_ and None not in cmp_.values():
            lines += ["", "## recbench rdma GET beside perftest (same link, same run)", "",
                      (f"- GET payload {cmp_['rdma_get_payload_gbps']:.4f} Gb/s vs ib_write_bw "
                       f"{cmp_['ib_write_bw_gbps']:.3f} Gb/s: ratio "
                       f"{cmp_['get_payload_over_write_bw']:.3f}"),
                      (f"- GET p50 {cmp_['rdma_get_p50_us']:.0f} us per {cmp_['batch_keys']}-key "
                       f"batch vs ib_write_lat typical {cmp_['ib_write_lat_typical_us']:.1f} us: "
                       f"ratio {cmp_['get_p50_over_write_lat']:.1f}")]
        sweep = [row for st in self.steps if st.name.startswith("netem_")
                 for row in st.data.get("table", [])]
        if sweep:
            lines += ["", "## Added round trip (tc netem on the link), run phase, medians", "",
                      ("| added RTT ms | transport | prefetch depth | runs | median keys/s | "
                       "median p50 ms |"), "|---|---|---|---|---|---|"]
            lines += [f"| {x['rtt_ms']:g} | {x['transport']} | {x['prefetch_depth']} | "
                      f"{x['runs']} | {x['median_keys_per_s']:.0f} | "
                      f"{x['median_p50_us'] / 1e3:.1f} |" for x in sweep]
        (self.out / "lab.md").write_text("\n".join(lines) + "\n")


DEFAULT_STEPS = ("devices", "verbs_tests", "perftest", "runner_rdma")
SEED_STEPS = ("fair_small", "rdma_capacity")


def run_suite(lab: Lab, a) -> int:
    out = Path(a.out) if a.out else records.new_result_dir(REPO / "results", "lab_")
    out.mkdir(parents=True, exist_ok=True)
    sweep = [float(x) for x in getattr(a, "netem_sweep", "").split(",") if x.strip()]
    if any(not 0 <= x <= 10000 for x in sweep):
        raise ValueError(f"--netem-sweep {a.netem_sweep}: RTTs in 0..10000 ms")
    names = [n for n in (a.only.split(",") if a.only else DEFAULT_STEPS) if n]
    if a.rpc and "runner_rpc" not in names:
        names.append("runner_rpc")
    if a.local_smoke and "local_smoke" not in names:
        names.append("local_smoke")
    for n in SEED_STEPS if getattr(a, "seeds", False) else ():
        if n not in names:
            names.append(n)
    unknown = [n for n in names if n not in (*DEFAULT_STEPS, "runner_rpc", "local_smoke",
                                             *SEED_STEPS)]
    if unknown:
        raise ValueError(f"--only {','.join(unknown)}: unknown step")
    # a lab that is already up (a test's, or `lab up`'s) stays up; otherwise booted and stopped
    with contextlib.nullcontext(lab) if lab.guests else lab:
        s = Suite(lab, out, a.runtime_seconds)
        print(f"[lab] accel={lab.accel} ({lab.accel_reason}) fabric=rxe netem_rtt_ms="
              f"{lab.netem_rtt_ms} guests="
              f"{','.join(g.name for g in lab.guests)} out={out}", flush=True)
        s.step("devices", s.devices)  # every other step needs the GID index
        for n in names:
            if n != "devices":
                s.step(n, getattr(s, n))
        for rtt in sweep:
            s.step(f"netem_{rtt:g}ms", lambda rtt=rtt: s.netem(rtt, a.netem_repeats))
        if sweep:
            lab.set_netem(0)
        s.write_report()
    failed = [x.name for x in s.steps if x.status == "FAIL"]
    print(f"[lab] accel={lab.accel}: {len(s.steps) - len(failed)} ok, {len(failed)} failed"
          + (f" ({', '.join(failed)})" if failed else "") + f"; report {out / 'lab.md'}")
    return 1 if failed else 0
