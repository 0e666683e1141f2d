"""summary.md of the PS runner, in Chinese, rendered from a run directory alone.

    recbench-report RUN_DIR                     # or: python -m recbench.runner.report RUN_DIR

reads RUN_DIR/run_config.json (the plan, the cases, every host's facts), summary.csv and
summary_totals.csv, writes plots/throughput.png and plots/latency.png (recbench.analysis' plot
functions, when pandas and matplotlib are installed) and summary.md. The runner ends every run by
calling the same function, so regenerating a run's summary.md gives the same bytes.

Layout (fixed): line 1 the git commit (`git rev-parse HEAD`), line 2 the hostname, a blank line,
then the sections 配置说明, Workload 说明, 并发与 RDMA 参数, 结果表 (M keys/s), Transport 对比,
失败与跳过. It is written from whatever rows exist, so a run with failures still gets its report.
Statements about the numbers come from the files (latency_merge says whether percentiles are exact
histogram merges or worst-client bounds); when the repeats of a transport spread more than
UNSTABLE_SPREAD_PCT, a warning says so and what to do (as pyperf does).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recbench import records, transports
from recbench.cli_flags import BUDGET_NONE
from recbench.procfs import STEAL_WARN_PCT
from recbench.runner.results import FAILURE_STATUSES, share_range

log = logging.getLogger("recbench.runner.report")

SECTIONS = ["配置说明", "Workload 说明", "并发与 RDMA 参数", "结果表", "Transport 对比", "失败与跳过"]
UNSTABLE_SPREAD_PCT = 10.0  # relative standard deviation of a transport's run keys/s over repeats
PLOTS = {"throughput": "plots/throughput.png", "latency": "plots/latency.png"}

Row = Mapping[str, Any]


def _num(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _mk(v: Any) -> str:
    x = _num(v)
    return "" if x is None else f"{x / 1e6:.3f}"


def _f(v: Any, digits: int = 1) -> str:
    x = _num(v)
    return "" if x is None else f"{x:.{digits}f}"


def _budget(value: int) -> str:
    """--client-max-inflight-bytes as summary.md says it."""
    if not value:
        return "各 transport 默认（brpc/grpc 每 CPU 8 MiB，shm/rdma 无）"
    return "无" if value == BUDGET_NONE else f"{value} B"


def _opt(v: Any) -> str:
    return "未设置" if v in (None, "") else str(v)


def _latency_sentence(totals: Sequence[Row]) -> str:
    merges = {t.get("latency_merge") for t in totals if _num(t.get("key_ops_per_sec")) is not None}
    if merges == {"exact"}:
        return ("p50/p99 由各客户端的延迟直方图精确合并而来 (latency_merge=exact)，"
                "mean 为按批次加权的精确均值")
    if merges == {"worst_client"}:
        return ("p50/p99 为各客户端最大值，是上界 (latency_merge=worst_client：有客户端没有输出直方图)，"
                "mean 为按批次加权的精确均值")
    return ("p50/p99 见 latency_merge 列：exact 为直方图精确合并，worst_client 为各客户端最大值"
            "（上界）；mean 为按批次加权的精确均值")


def stability_warnings(totals: Sequence[Row], spread_pct: float = UNSTABLE_SPREAD_PCT) -> list[str]:
    """One warning per transport whose run keys/s over repeats has a relative standard deviation
    above `spread_pct`, saying what to do."""
    out = []
    by_transport: dict[str, list[float]] = {}
    for t in totals:
        rate = _num(t.get("key_ops_per_sec"))
        if t.get("phase") == "run" and t.get("repeat_index") != "mean" and rate is not None \
                and t.get("status") == "success":
            by_transport.setdefault(str(t["transport"]), []).append(rate)
    for name, rates in by_transport.items():
        if len(rates) < 2 or statistics.mean(rates) <= 0:
            continue
        rel = statistics.stdev(rates) / statistics.mean(rates) * 100
        if rel > spread_pct:
            out.append(f"**警告: {name} 的 run 吞吐量在 {len(rates)} 次 repeat 之间的相对标准差为 "
                       f"{rel:.1f}%，超过 {spread_pct:g}%，结果不稳定。** 请让机器空闲（停止其他负载），"
                       "加长 --runtime-seconds、加 --warmup-seconds、增加 --repeat，必要时用 "
                       "--rdma-server-bind-core-offset / --rdma-client-bind-core-offset 绑核，然后重跑；"
                       "在此之前不要用这些数字下结论。")
    return out


def steal_lines(per_host: Mapping[str, float | None],
                threshold: float = STEAL_WARN_PCT) -> list[str]:
    """Console lines for the hosts of one case whose steal during the run window (percent of
    their CPU time, procfs.steal_pct) reached `threshold`."""
    return [f"host steal {pct:.1f} % on {label} during the run window: the hypervisor ran other "
            "work on these CPUs, so this case's rates are lower and noisier than the machine's"
            for label, pct in sorted(per_host.items())
            if pct is not None and pct >= threshold]


def steal_warnings(totals: Sequence[Row], threshold: float = STEAL_WARN_PCT) -> list[str]:
    """summary.md warnings for run totals (transport x repeat) whose host_steal_pct reached
    `threshold`."""
    hit = [(str(t["transport"]), str(t["repeat_index"]), _num(t.get("host_steal_pct")) or 0.0)
           for t in totals if t.get("phase") == "run" and t.get("repeat_index") != "mean"
           and (_num(t.get("host_steal_pct")) or 0.0) >= threshold]
    if not hit:
        return []
    cases = "，".join(f"{t} repeat {r} {pct:.1f}%" for t, r, pct in hit)
    return [(f"**警告: 运行窗口内虚拟机的 steal 时间（hypervisor 把这些 CPU 给了别的工作，"
             f"/proc/stat）达到 {threshold:g}% 以上: {cases}。** 这些 case 的吞吐量偏低、波动偏大，"
             "不代表机器本身；请在 steal 接近 0 时重跑（见 summary_totals.csv 的 host_steal_pct 列）。")]


def write_plots(run_dir: Path) -> dict[str, str]:
    """plots/throughput.png and plots/latency.png of a run directory: name -> path relative to
    the run directory, or -> the reason it was not drawn."""
    try:
        from recbench import analysis
    except ImportError as exc:
        return {name: f"未生成: 需要 pandas 与 matplotlib (pip install -e '.[analysis]'): {exc}"
                for name in PLOTS}
    out = {}
    try:
        totals = analysis.load_ps_totals(run_dir / "summary_totals.csv")
    except (analysis.SummaryFormatError, OSError) as exc:
        return {name: f"未生成: {exc}" for name in PLOTS}
    for name, fn in (("throughput", analysis.plot_ps_throughput),
                     ("latency", analysis.plot_ps_latency)):
        try:
            fn(totals, run_dir / PLOTS[name])
            out[name] = PLOTS[name]
        except ValueError as exc:
            (run_dir / PLOTS[name]).unlink(missing_ok=True)
            out[name] = "未生成: 没有成功的 run 行"
            log.debug("plot %s: %s", name, exc)
    return out


def write_report(run_dir: str | Path) -> Path:
    """Write RUN_DIR/summary.md (and its plots) from the files of the run directory."""
    run_dir = Path(run_dir)
    run_config = json.loads((run_dir / "run_config.json").read_text())
    rows = records.read_csv(run_dir / "summary.csv")
    totals = records.read_csv(run_dir / "summary_totals.csv")
    plots = write_plots(run_dir)
    path = run_dir / "summary.md"
    path.write_text(render(run_config, rows, totals, plots))
    return path


def _server_line(plan: Mapping[str, Any]) -> str:
    """Who served the rows and on which wire (summary.csv's server_impl and wire columns)."""
    ex = plan['execution']
    impl = plan.get('server_impl', "recbench")
    wire = plan['workload'].get('wire', "native")
    line = f"- 服务端实现 (server_impl): {impl}；wire: {wire}"
    if ex.get('server_endpoints'):
        line += (f"（已在运行的部署 --server-endpoints {ex['server_endpoints']}：runner 未启动"
                 "服务端，也读不到它的 CPU 时间）")
    elif ex.get('server_binary'):
        args = " ".join(ex.get('server_args') or [])
        line += f"（--server-binary {ex['server_binary']}{' ' + args if args else ''}）"
    return line


def _differing(run_config: Mapping[str, Any], key: str) -> list[tuple[str, Any]]:
    """The remote hosts whose fact `key` is known and differs from this host's (run_config's)."""
    local = run_config.get(key)
    return sorted({(label, f[key]) for label, f in run_config.get("hosts", {}).items()
                   if f.get(key) and f[key] != local})


def _cpu_line(run_config: Mapping[str, Any]) -> str:
    """The CPU the figures were measured on: this host's, then any other host's that differs."""
    local = run_config.get("cpu_model") or "unknown"
    setting = run_config.get("sched_autogroup")  # the kernel's CFS autogroup (None: unknown)
    autogroup = "" if setting is None else f"; 内核 autogroup {'开' if setting else '关'}"
    return (f"- CPU: {local} ({run_config.get('cpu_cores') or '?'} 核{autogroup})"
            + "".join(f"; {label}: {cpu}" for label, cpu in _differing(run_config, "cpu_model")))


def _tcp_line(run_config: Mapping[str, Any], rows: Sequence[Row]) -> list[str]:
    """The kernel's default TCP congestion control, this host's then any other host's that
    differs (bbr paces every connection with a timer; docs/scale.md), then what the PS servers'
    connections used (summary.csv's tcp_congestion: brpc and gRPC take cubic instead of a BBR on
    loopback); nothing when unknown."""
    local = run_config.get("tcp_congestion_control")
    used = sorted({r.get("tcp_congestion", "") for r in rows} - {""})
    if not local and not used:
        return []
    return [f"- TCP 拥塞控制: {local or '?'}"
            + "".join(f"; {label}: {cc}" for label, cc in
                      _differing(run_config, "tcp_congestion_control"))
            + (f"; PS 服务端连接实际使用 (tcp_congestion): {', '.join(used)}" if used else "")]


def render(run_config: Mapping[str, Any], rows: Sequence[Row], totals: Sequence[Row],
           plots: Mapping[str, str] | None = None) -> str:
    """summary.md's text from run_config.json's content and the CSV rows (strings)."""
    plan = run_config["plan"]
    w, srv, rc, ex = plan['workload'], plan['servers'], plan['rc'], plan['execution']
    cases = run_config.get("cases", [])
    facts = run_config.get("hosts", {})
    not_forwarded = run_config.get("not_forwarded_derived_flags", [])
    output_dir = str(Path(run_config["run_config_path"]).parent)
    labels = list(plan['transports'])
    out = [run_config["git"]["commit"], run_config["hostname"], ""]
    out.append("# PS benchmark 结果 (recbench run_benchmark_ps.py)")
    out.append("")
    # 1. 配置说明
    out.append("## 配置说明")
    out.append("")
    build_types = sorted({f.get("recbench", {}).get("build_type", "unknown")
                          for f in facts.values()}) or ["unknown"]
    mode = "跨机 (ssh)" if ex['execution_backend'] == "ssh" else "本机 (local)"
    out += [
        f"- 模式: {mode}; profile: {_opt(plan['profile'])}; 行类型 (row_kind): {plan['row_kind']}",
        f"- Transports: {', '.join(labels)}",
        _server_line(plan),
        f"- 服务端 shard 地址: {plan['server_plan'] or plan['server_shard_ips']}"
        + ("（显式 --server-plan）" if plan['server_plan'] else ""),
        f"- 客户端地址: {plan['client_plan'] or plan['client_ips']}"
        + ("（显式 --client-plan）" if plan['client_plan'] else
           f"，每个地址 {plan['client_processes_per_ip']} 个进程"),
        f"- 执行后端: {ex['execution_backend']}"
        + (f"; 远端仓库 {ex['remote_repo'] or '(与本机相同路径)'}; 容器 {_opt(ex['remote_container'])}; "
           f"--remote-sync {ex['remote_sync']}" if ex['execution_backend'] == "ssh" else ""),
        f"- 构建类型: {', '.join(build_types)} (build dir {ex['build_dir']}"
        + (f", remote {ex['remote_build_dir']}" if ex['execution_backend'] == "ssh" else "") + ")",
        f"- 输出目录: {output_dir}",
        _cpu_line(run_config),
        *_tcp_line(run_config, rows),
    ]
    if any(t != "Release" for t in build_types):
        out.append("- **注意: 存在非 Release 构建，本报告中的吞吐量不能作为性能结论。**")
    fab = sorted({(r.get("fabric", ""), r.get("accelerator", "")) for r in rows})
    out.append("- Fabric / 加速器: " + ", ".join(f"{f or '?'}/{x or '?'}" for f, x in fab))
    if any(x not in ("", "native") for _, x in fab):
        out.append("- **注意: 这些行来自 recbench.lab 的 qemu 虚拟机 (软件 RoCE rxe，模拟执行)："
                   "是协议与正确性结果，不是网卡性能 (docs/lab.md)。**")
    for case in cases:
        topo = case.get("topology", {})
        servers = ", ".join(f"{s['server_index']}:{s['ssh_host']}→{s['host']}:{s['port']}"
                            f"/shard{s['shard']}" for s in topo.get("servers", []))
        clients = ", ".join(f"{c['client_index']}:{c['ssh_host']}" for c in topo.get("clients", []))
        if case.get("repeat_index") == 0:
            out.append(f"- {case['transport']} 角色映射: 服务端 [{servers}]; 客户端 [{clients}]")
    if any(s.get("host") == "127.0.0.1" for c in cases for s in c.get("topology", {}).get(
            "servers", [])) and any(len(c.get("topology", {}).get("servers", [])) > 1 for c in cases):
        out.append("- 本机多 shard 只衡量客户端扇出与合并，不代表跨机扩展。")
    out.append("")
    # 2. Workload 说明
    out.append("## Workload 说明")
    out.append("")
    out += [
        f"- record count: {w['record_count']}（预加载 key 1..{w['record_count']}）",
        f"- value size: {w['value_size']} B（float32 × {w['value_size'] // 4}）",
        f"- batch keys: {w['batch_keys']}（每个请求的 key 数）",
        f"- runtime: {w['runtime_seconds']:g} s；repeat: {w['repeat']}",
        f"- distribution: {w['distribution']}"
        + (f"（zipfian alpha {w['zipfian_alpha']}）" if w['distribution'] == "zipfian" else ""),
        f"- mode: {w['mode']}；read ratio: {w['read_ratio']}%",
        (f"- index type: {srv['index_type']}；value store: {srv['value_store_type']}；allocator: "
         f"{srv['dram_allocator']}"),
        f"- prefetch depth: {w['prefetch_depth']}（0 = 客户端默认）",
        (f"- 在途字节预算: {_budget(w.get('client_max_inflight_bytes', 0))}"
         "（每个客户端进程一份，由有批次在途的线程均分；超出份额的请求在本线程内等待，见 docs/scale.md）"),
        f"- skip load: {w['skip_load']}；verify deterministic values: {w['verify_deterministic_values']}",
        ("- 所有客户端进程在加载完成后通过 stdin `go` 屏障同时开始 run 阶段，因此各客户端吞吐量之和"
         "是同一时间窗口内的总吞吐量。"),
        "- payload GB/s 只统计 value 字节（不含 key 与报文头）。",
    ]
    if w.get("target_rate"):
        out.append(f"- 负载模型: 开环，每个客户端进程 {w['target_rate']:g} 批次/秒（{w['arrival']} 到达）；"
                   "p50..max 从计划发送时刻算起（校正协调遗漏），service_* 列从实际发送时刻算起，"
                   "late_sends 为迟发批次数（见 docs/open-loop.md）。")
    out.append("")
    # 3. 并发与 RDMA 参数
    out.append("## 并发与 RDMA 参数")
    out.append("")
    load_threads = w['client_load_threads_per_process'] or w['client_threads_per_process']
    out += [
        (f"- 客户端进程数: {len(cases[0]['topology']['clients']) if cases else '?'}；"
         f"每进程线程数: {w['client_threads_per_process']}；每进程加载线程数: {load_threads}"),
        (f"- 服务端 worker 线程 (gRPC/bRPC): {srv['server_worker_threads']}；"
         f"服务端 RDMA/shm poll 线程: {srv['server_rdma_threads']}"),
    ]
    if any(t in ("RDMA", "SHM") for t in labels):
        out += [
            (f"- QP pool (每客户端每 shard): {_opt(rc['rdma_rc_qps_per_client_per_shard'])}；"
             f"slots per QP: {_opt(rc['rdma_rc_slots_per_qp'])}"),
            (f"- GET response mode: {rc['rdma_get_response_mode']} → "
             + "；".join(f"{t} {m}" for t, m in
                        plan.get('get_response_modes', {"RDMA": rc['get_response_mode']}).items())),
            (f"- profile interval ms: {_opt(rc['rdma_rc_profile_interval_ms'])}；"
             f"server get workers: {_opt(rc['rdma_rc_server_get_workers'])}；"
             f"coroutines per thread: {_opt(rc['rdma_rc_server_coroutines_per_thread'])}"),
            (f"- NUMA: server {_opt(rc['rdma_rc_server_numa_id'])} / client "
             f"{_opt(rc['rdma_rc_client_numa_id'])}；绑核: server offset "
             f"{_opt(rc['rdma_server_bind_core_offset'])}，client offset "
             f"{_opt(rc['rdma_client_bind_core_offset'])}，stride "
             f"{_opt(rc['rdma_client_bind_core_stride'])}"),
        ]
        if "SHM" in labels:
            out.append("- shm 行是同机共享内存 fabric 上的 RC slot 协议结果，不是网卡结果。")
    if not_forwarded:
        out.append(f"- 未转发的派生默认参数（程序不支持）: {', '.join(sorted(not_forwarded))}")
    out.append("")
    # 4. 结果表
    out.append("## 结果表")
    out.append("")
    ok = [r for r in rows if r["status"] == "success"]
    if ok:
        out.append("| transport | repeat | phase | client | M keys/s | payload GB/s | mean_us | p50_us "
                   "| p99_us | p999_us | client CPU s | row_kind | build | fabric/accel | get_path "
                   "| log_path |")
        out.append("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|---|")
        for r in ok:
            out.append(f"| {r['transport']} | {r['repeat_index']} | {r['phase']} | "
                       f"{r['client_index']} | {_mk(r['key_ops_per_sec'])} | "
                       f"{_f(r['payload_gbps'], 3)} | {_f(r['mean_us'])} | {_f(r['p50_us'])} | "
                       f"{_f(r['p99_us'])} | {_f(r['p999_us'])} | {_f(r['client_cpu_s'], 2)} | "
                       f"{r['row_kind']} | {r['build_type']} | {r.get('fabric', '')}/"
                       f"{r.get('accelerator', '')} | {r.get('get_path', '')} | {r['log_path']} |")
        out.append("")
        out.append(f"每个 transport × repeat 的合计（同一窗口内各客户端之和；{_latency_sentence(totals)}）：")
        out.append("")
        out.append("| transport | repeat | phase | clients | M keys/s | payload GB/s | mean_us | p99_us "
                   "| client CPU s | server CPU s | keys/CPU·s | steal % | 线程份额 |")
        out.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for t in totals:
            if _num(t.get("key_ops_per_sec")) is None:
                continue
            out.append(f"| {t['transport']} | {t['repeat_index']} | {t['phase']} | "
                       f"{t.get('clients_ok', '')} | {_mk(t['key_ops_per_sec'])} | "
                       f"{_f(t.get('payload_gbps'), 3)} | {_f(t.get('mean_us'))} | "
                       f"{_f(t.get('p99_us'))} | {_f(t.get('client_cpu_s'), 2)} | "
                       f"{_f(t.get('server_cpu_s'), 2)} | {_f(t.get('keys_per_cpu_sec'), 0)} | "
                       f"{_f(t.get('host_steal_pct'))} | "
                       f"{share_range(t.get('slowest_thread_share'), t.get('fastest_thread_share'))} |")
        out.append("")
        out.append("线程份额：最慢和最快的客户端线程完成的 batch 数相对于每线程平均值（1.00 为均分；"
                   "见 summary_totals.csv 的 slowest_thread_share / fastest_thread_share 列）。")
    else:
        out.append("没有成功的行。")
    out.append("")
    # 5. Transport 对比
    out.append("## Transport 对比")
    out.append("")
    means = {t["transport"]: t for t in totals if t.get("repeat_index") == "mean"
             and t.get("phase") == "run" and _num(t.get("key_ops_per_sec")) is not None}
    if means:
        base = transports.get("brpc").label
        base_rate = _num(means[base]["key_ops_per_sec"]) if base in means else None
        out.append(f"| transport | run M keys/s (repeat 均值) | 标准差 | payload GB/s | 相对 {base} "
                   "| row_kind |")
        out.append("|---|---:|---:|---:|---:|---|")
        for name, t in means.items():
            rate = _num(t["key_ops_per_sec"]) or 0.0
            ratio = f"{rate / base_rate:.2f}×" if base_rate else ""
            out.append(f"| {name} | {_mk(t['key_ops_per_sec'])} | "
                       f"{_mk(t.get('key_ops_per_sec_stdev'))} | {_f(t.get('payload_gbps'), 3)} | "
                       f"{ratio} | {t.get('row_kind', '')} |")
        plots = plots or {}
        out.append("")
        for name, what in (("throughput", "吞吐量 (M keys/s，误差线为 repeat 间标准差)"),
                           ("latency", "延迟 p50/p99/p99.9")):
            where = plots.get(name, "未生成")
            out.append(f"- {what}: [{where}]({where})" if where.startswith("plots/")
                       else f"- {what}: {where}")
        warnings = stability_warnings(totals) + steal_warnings(totals)
        if warnings:
            out.append("")
            out += warnings
        elif w["repeat"] < 2:
            out.append("")
            out.append("只有 1 次 repeat，无法估计结果的波动；要下结论请用 --repeat 3 或更多。")
        kind = plan['row_kind']
        if kind == "fair":
            out.append("")
            out.append("所有 transport 使用相同的客户端线程与加载线程，属于公平对比。")
        elif kind == "capacity":
            out.append("")
            out.append("本次为容量/压力观测 (capacity)，不作为公平 transport 对比。")
        else:
            out.append("")
            out.append("本次为诊断行 (diagnostic，开启了 profile 或 fake 模式)，与常规结果分开看待。")
    else:
        out.append("没有可对比的成功 run 行。")
    out.append("")
    # 6. 失败与跳过
    out.append("## 失败与跳过")
    out.append("")
    bad = [r for r in rows if r["status"] != "success"]
    if bad:
        out.append("| transport | status | repeat | client | message | log_path |")
        out.append("|---|---|---:|---:|---|---|")
        for r in bad:
            out.append(f"| {r['transport']} | {r['status']} | {r['repeat_index']} | "
                       f"{r['client_index']} | {r['message']} | {r['log_path']} |")
        n_fail = sum(1 for r in bad if r["status"] in FAILURE_STATUSES)
        out.append("")
        out.append(f"失败 {n_fail} 行，跳过 {len(bad) - n_fail} 行。"
                   + ("存在失败，退出码为 1。" if n_fail else "跳过不算失败。"))
        if any(r["transport"] == "RDMA" and r["status"] == "skipped" for r in bad):
            out.append("RDMA 行被跳过：本机没有 verbs 设备，只完成了构建与单元层面的验证。")
    else:
        out.append("无。")
    out.append("")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="recbench-report",
                                 description="Regenerate summary.md (and plots/) of a PS runner "
                                             "run directory from its run_config.json and CSVs.")
    ap.add_argument("run_dir", type=Path, help="the runner's --output-dir")
    args = ap.parse_args(argv)
    for name in ("run_config.json", "summary.csv", "summary_totals.csv"):
        if not (args.run_dir / name).is_file():
            print(f"recbench-report: {args.run_dir / name} does not exist (is {args.run_dir} a "
                  "run directory of run_benchmark_ps.py?)", file=sys.stderr)
            return 2
    try:
        path = write_report(args.run_dir)
    except (KeyError, ValueError) as exc:
        print(f"recbench-report: {args.run_dir}/run_config.json: not a run config of this "
              f"runner ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    print(f"[output] summary_md={path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
