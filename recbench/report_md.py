"""summary.md of the PS runner, in Chinese.

Layout (fixed): line 1 the git commit (`git rev-parse HEAD`), line 2 the hostname, a blank line,
then the sections 配置说明, Workload 说明, 并发与 RDMA 参数, 结果表 (M keys/s), Transport 对比,
失败与跳过. It is written from whatever rows exist, so a run with failures still gets its report.
"""

from recbench.results import FAILURE_STATUSES
from recbench.runner_config import resolve_rdma_get_response_mode

SECTIONS = ["配置说明", "Workload 说明", "并发与 RDMA 参数", "结果表", "Transport 对比", "失败与跳过"]


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _mk(v):
    x = _num(v)
    return "" if x is None else f"{x / 1e6:.3f}"


def _f(v, digits=1):
    x = _num(v)
    return "" if x is None else f"{x:.{digits}f}"


def _opt(v):
    return "未设置" if v in (None, "") else str(v)


def render(commit, hostname, args, rows, totals, cases, facts, output_dir, not_forwarded=()):
    a = args
    out = [commit, hostname, ""]
    out.append("# PS benchmark 结果 (recbench run_benchmark_ps.py)")
    out.append("")
    # 1. 配置说明
    out.append("## 配置说明")
    out.append("")
    build_types = sorted({f.get("recbench", {}).get("build_type", "unknown")
                          for f in facts.values()}) or ["unknown"]
    mode = "跨机 (ssh)" if a.execution_backend == "ssh" else "本机 (local)"
    out += [
        f"- 模式: {mode}; profile: {_opt(a.profile)}; 行类型 (row_kind): {a.effective_row_kind}",
        f"- Transports: {', '.join(a.transport_list)}",
        f"- 服务端 shard 地址: {a.server_plan or a.server_shard_ips}"
        + ("（显式 --server-plan）" if a.server_plan else ""),
        f"- 客户端地址: {a.client_plan or a.client_ips}"
        + ("（显式 --client-plan）" if a.client_plan else
           f"，每个地址 {a.client_processes_per_ip} 个进程"),
        f"- 执行后端: {a.execution_backend}"
        + (f"; 远端仓库 {a.remote_repo or '(与本机相同路径)'}; 容器 {_opt(a.remote_container)}; "
           f"--remote-sync {a.remote_sync}" if a.execution_backend == "ssh" else ""),
        f"- 构建类型: {', '.join(build_types)} (build dir {a.build_dir}"
        + (f", remote {a.remote_build_dir}" if a.execution_backend == "ssh" else "") + ")",
        f"- 输出目录: {output_dir}",
    ]
    labels = sorted({(r.get("fabric", ""), r.get("accelerator", "")) for r in rows})
    out.append("- Fabric / 加速器: " + ", ".join(f"{f or '?'}/{x or '?'}" for f, x in labels))
    if any(x not in ("", "native") for _, x in labels):
        out.append("- **注意: 这些行来自 recbench.lab 的 qemu 虚拟机 (软件 RoCE rxe，模拟执行)："
                   "是协议与正确性结果，不是网卡性能 (docs/lab.md)。**")
    if any(t != "Release" for t in build_types):
        out.append("- **注意: 存在非 Release 构建，本报告中的吞吐量不能作为性能结论。**")
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
        f"- record count: {a.record_count}（预加载 key 1..{a.record_count}）",
        f"- value size: {a.value_size} B（float32 × {a.value_size // 4}）",
        f"- batch keys: {a.batch_keys}（每个请求的 key 数）",
        f"- runtime: {a.runtime_seconds:g} s；repeat: {a.repeat}",
        f"- distribution: {a.distribution}"
        + (f"（zipfian alpha {a.zipfian_alpha}）" if a.distribution == "zipfian" else ""),
        f"- mode: {a.mode}；read ratio: {a.read_ratio}%",
        (f"- index type: {a.index_type}；value store: {a.value_store_type}；allocator: "
         f"{a.dram_allocator}"),
        f"- prefetch depth: {a.prefetch_depth}（0 = 客户端默认）",
        f"- skip load: {a.skip_load}；verify deterministic values: {a.verify_deterministic_values}",
        ("- 所有客户端进程在加载完成后通过 stdin `go` 屏障同时开始 run 阶段，因此各客户端吞吐量之和"
         "是同一时间窗口内的总吞吐量。"),
        "- payload GB/s 只统计 value 字节（不含 key 与报文头）。",
    ]
    out.append("")
    # 3. 并发与 RDMA 参数
    out.append("## 并发与 RDMA 参数")
    out.append("")
    load_threads = a.client_load_threads_per_process or a.client_threads_per_process
    out += [
        (f"- 客户端进程数: {len(cases[0]['topology']['clients']) if cases else '?'}；"
         f"每进程线程数: {a.client_threads_per_process}；每进程加载线程数: {load_threads}"),
        (f"- 服务端 worker 线程 (gRPC/bRPC): {a.server_worker_threads}；"
         f"服务端 RDMA/shm poll 线程: {a.server_rdma_threads}"),
    ]
    if any(t in ("RDMA", "SHM") for t in a.transport_list):
        out += [
            (f"- QP pool (每客户端每 shard): {_opt(a.rdma_rc_qps_per_client_per_shard)}；"
             f"slots per QP: {_opt(a.rdma_rc_slots_per_qp)}"),
            (f"- GET response mode: {a.rdma_get_response_mode} → "
             f"{resolve_rdma_get_response_mode(a.rdma_get_response_mode, a.index_type)}"),
            (f"- profile interval ms: {_opt(a.rdma_rc_profile_interval_ms)}；"
             f"server get workers: {_opt(a.rdma_rc_server_get_workers)}；"
             f"coroutines per thread: {_opt(a.rdma_rc_server_coroutines_per_thread)}"),
            (f"- NUMA: server {_opt(a.rdma_rc_server_numa_id)} / client "
             f"{_opt(a.rdma_rc_client_numa_id)}；绑核: server offset "
             f"{_opt(a.rdma_server_bind_core_offset)}，client offset "
             f"{_opt(a.rdma_client_bind_core_offset)}，stride {_opt(a.rdma_client_bind_core_stride)}"),
        ]
        if "SHM" in a.transport_list:
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
        out.append("每个 transport × repeat 的合计（同一窗口内各客户端之和；p50/p99 为各客户端最大值，"
                   "mean 为按批次加权的精确均值）：")
        out.append("")
        out.append("| transport | repeat | phase | clients | M keys/s | payload GB/s | mean_us | p99_us "
                   "| client CPU s | server CPU s | keys/CPU·s |")
        out.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for t in totals:
            if t.get("key_ops_per_sec") is None:
                continue
            out.append(f"| {t['transport']} | {t['repeat_index']} | {t['phase']} | "
                       f"{t.get('clients_ok', '')} | {_mk(t['key_ops_per_sec'])} | "
                       f"{_f(t.get('payload_gbps'), 3)} | {_f(t.get('mean_us'))} | "
                       f"{_f(t.get('p99_us'))} | {_f(t.get('client_cpu_s'), 2)} | "
                       f"{_f(t.get('server_cpu_s'), 2)} | {_f(t.get('keys_per_cpu_sec'), 0)} |")
    else:
        out.append("没有成功的行。")
    out.append("")
    # 5. Transport 对比
    out.append("## Transport 对比")
    out.append("")
    means = {t["transport"]: t for t in totals if t.get("repeat_index") == "mean"
             and t.get("phase") == "run" and t.get("key_ops_per_sec") is not None}
    if means:
        base = means.get("BRPC")
        out.append("| transport | run M keys/s (repeat 均值) | 标准差 | payload GB/s | 相对 BRPC "
                   "| row_kind |")
        out.append("|---|---:|---:|---:|---:|---|")
        for name, t in means.items():
            ratio = (f"{t['key_ops_per_sec'] / base['key_ops_per_sec']:.2f}×"
                     if base and base.get("key_ops_per_sec") else "")
            out.append(f"| {name} | {_mk(t['key_ops_per_sec'])} | "
                       f"{_mk(t.get('key_ops_per_sec_stdev'))} | {_f(t.get('payload_gbps'), 3)} | "
                       f"{ratio} | {t.get('row_kind', '')} |")
        kind = a.effective_row_kind
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
