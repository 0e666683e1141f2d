"""recbench-ps-server: serve PS shards of a KV engine on one transport (RecStore's ps_server).

    python3 -m recbench.ps_server --config_path cfg.json --local_shard_id 0
    python3 -m recbench.ps_server --transport brpc --host 127.0.0.1 --port 15000 --value_size 512

Settings come from RecStore's config JSON (--config_path; see recbench.ps_config) and from flags;
a flag given explicitly wins over the config. Without --local_shard_id every shard of the config
is served by this process, each on its own endpoint. Each shard prints, once it accepts requests:

    component=ps_server event=ready transport=brpc shard=0 host=127.0.0.1 port=15000 ...

SIGTERM or SIGINT stops the process within a second; each shard then prints a final
``component=ps_server event=stopped ...`` line with its counters and the process CPU time.
Exit codes: 0 after a signal, 1 on errors, 2 on bad flags, 77 when the transport's device is
missing (RS_ENODEV: e.g. no RDMA verbs device) so runners can record a skip.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import select
import signal
import sys

from recbench import _ps, errors, rc_options, transports
from recbench.cli_flags import tls_options
from recbench.kv_bench import HUGE_PAGES
from recbench.ps_config import ConfigError, PSConfig, load_config
from recbench.transports import default_port

log = logging.getLogger("recbench.ps_server")

SKIP_EXIT_CODE = 77
COUNTERS = ("handled_get", "handled_put", "handled_update", "handled_command", "handled_error",
            "keys_get", "keys_put", "keys_update", "keys_found", "connections_accepted",
            "requests", "bad_frames", "bytes_in", "bytes_out", "auth_failures")
# gRPC core does not tell the application about connections: its count would be a made-up 0
NOT_COUNTED = {"grpc": {"connections_accepted"}}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="recbench-ps-server",
        description="Serve parameter-server shards of a KV engine on brpc, grpc, shm or rdma.")
    p.add_argument("--config_path", help="RecStore config JSON (cache_ps.*)")
    p.add_argument("--local_shard_id", type=int, default=None,
                   help="the shard this process serves (default: every shard of the config)")
    p.add_argument("--grpc_local_shard_id", type=int, default=None,
                   help="RecStore's gRPC spelling of --local_shard_id")
    p.add_argument("--brpc_server_port", type=int, default=None,
                   help="port of the brpc shard (RecStore's flag; same as --port for brpc)")
    p.add_argument("--transport", help="brpc | grpc | shm | rdma (default: the config's "
                   "cache_ps.ps_type, else brpc)")
    p.add_argument("--host", help="bind address (only this one); default the config's, else "
                   "127.0.0.1")
    p.add_argument("--port", type=int, default=None,
                   help="port of the first shard served (0 = any free port); default from the "
                   "config, else RecStore's (brpc 15000 / 25000+shard, grpc 15000+shard)")
    p.add_argument("--num_shards", type=int, default=None, help="shards in the deployment")
    p.add_argument("--index_type", help="DRAM_PET_HASH (default), DRAM_EXTENDIBLE_HASH or "
                   "SSD_EXTENDIBLE_HASH")
    p.add_argument("--value_size", type=int, default=None, help="row bytes (default 512)")
    p.add_argument("--capacity", type=int, default=None, help="keys per shard (default 1000000)")
    p.add_argument("--huge_pages", default="auto", choices=HUGE_PAGES,
                   help="pages of the shard's index and value slab: auto (default: explicit 2 MiB "
                   "pages when the hugetlb pool has room, else transparent huge pages advised), "
                   "explicit (hugetlb or fail), thp, off (4 KiB)")
    p.add_argument("--num_threads", type=int, default=None,
                   help="transport worker threads per shard (default 1)")
    p.add_argument("--max_keys_per_request", type=int, default=None,
                   help="largest batch a request may carry (default 500)")
    p.add_argument("--data_path", help="directory for file-backed indexes (SSD_EXTENDIBLE_HASH); "
                   "default the config's base_kv_config path")
    p.add_argument("--max_body_bytes", type=int, default=0,
                   help="largest request body accepted (default 64 MiB)")
    p.add_argument("--max_connections", type=int, default=0,
                   help="connections a shard accepts at once, more are closed (0 = the "
                   "transport's default: brpc 1024, rdma/shm 1024 control connections; grpc "
                   "cannot enforce one and refuses a non-zero value)")
    p.add_argument("--transport_options", default=None,
                   help="transport-specific options 'k=v;k=v' (e.g. RC poll_mode=adaptive)")
    p.add_argument("--checkpoint_root", default=None, metavar="DIR",
                   help="allow COMMAND save/load (PSClient.save/load) in this directory only "
                   "(created if missing; a command's directory is relative to it or inside it); "
                   "without it those commands are refused")
    p.add_argument("--load_checkpoint", default=None, metavar="DIR",
                   help="load each shard's rows from DIR/shard_<id>.rsckpt (saved with COMMAND "
                   "save / PSClient.save) before serving; a damaged or mismatched file is an "
                   "error naming it")
    p.add_argument("--auth_token_file", default=None, metavar="FILE",
                   help="require the token in FILE on every request (brpc RpcMeta "
                   "authentication_data, gRPC 'authorization: Bearer', RC attach); the token is "
                   "never logged; see docs/security.md")
    p.add_argument("--tls_cert", default=None, metavar="PEM",
                   help="grpc only: serve TLS with this certificate chain (with --tls_key)")
    p.add_argument("--tls_key", default=None, metavar="PEM", help="grpc only: the TLS private key")
    p.add_argument("--sync", default="none",
                   help="SSD_EXTENDIBLE_HASH only: none (default; survives the process dying, "
                   "not the OS), interval:MS (msync every MS ms) or always (msync before every "
                   "write is answered); see docs/durability.md")
    p.add_argument("--log_level", default="WARNING", help="Python logging level")
    rc_options.add_server_flags(p)  # --thread_num, --poll_mode, --rdma_rc_* (rdma/shm only)
    return p


def resolve(args, cfg: PSConfig | None) -> list[dict]:
    """One settings dict per shard to serve; ValueError naming the flag on inconsistencies."""
    cfg = cfg or PSConfig()
    transport = transports.get(args.transport or cfg.transport or "brpc").name
    num_shards = args.num_shards or cfg.num_shards or 1
    shard_id = args.local_shard_id if args.local_shard_id is not None else args.grpc_local_shard_id
    # shard ids are labels (RecStore's plans use ids such as 3 and 8): a config that lists every
    # shard names them, and the C shard serves the label's rank among them (clients route a key
    # to the (hash % num_shards)-th server in shard-id order); without one they are 0..n-1
    listed = sorted(s.shard for s in cfg.servers) if len(cfg.servers) == num_shards else None
    if shard_id is not None:
        if not (0 <= shard_id < num_shards or (listed and shard_id in listed)):
            raise ValueError(f"--local_shard_id {shard_id} is out of range for {num_shards} shards "
                             "and not a shard of the config's servers")
        shards = [shard_id]
    else:
        shards = listed or list(range(num_shards))
    port_flag = args.port
    if port_flag is None and args.brpc_server_port is not None and transport == "brpc":
        port_flag = args.brpc_server_port
    if args.max_connections < 0:
        raise ValueError(f"--max_connections {args.max_connections} must be >= 0 (0 = default)")
    if cfg.optimizer_options and not transports.get(transport).recstore_wire:
        raise ValueError(f"{cfg.path}: cache_ps.optimizer applies to RecStore's UpdateParameter, "
                         f"which the {transport} transport does not serve (brpc and grpc do)")
    value_size = args.value_size or cfg.value_size or 512
    if value_size % 4:
        raise ValueError(f"--value_size {value_size} is not a multiple of 4 (float32 rows)")
    out = []
    for i, shard in enumerate(shards):
        entry = cfg.server_for(shard)
        host = args.host or (entry.host if entry else None) or "127.0.0.1"
        if port_flag is not None:
            port = port_flag + i if port_flag else 0
        elif entry is not None:
            port = entry.port
        else:
            port = default_port(transport, shard, num_shards)
        data_path = args.data_path or cfg.data_path
        if data_path and len(shards) > 1:
            data_path = os.path.join(data_path, f"shard_{shard}")
        out.append({
            "transport": transport, "host": host, "port": port,
            "shard": listed.index(shard) if listed else shard, "shard_label": shard,
            "num_shards": num_shards,
            "index_type": args.index_type or cfg.index_type or "DRAM_PET_HASH",
            "value_size": value_size,
            "capacity": args.capacity or cfg.capacity or 1000000,
            "num_threads": args.num_threads or cfg.num_threads or 1,
            "max_keys_per_request": args.max_keys_per_request or cfg.max_keys_per_request or 500,
            "path": data_path, "max_body_bytes": args.max_body_bytes,
            "max_connections": args.max_connections,
            # the config's optimizer first: an option given in --transport_options wins
            "extra": ";".join(x for x in (cfg.optimizer_options, args.transport_options)
                              if x) or None,
            "load_checkpoint": args.load_checkpoint, "sync": args.sync,
            "auth_token_file": args.auth_token_file,
            "checkpoint_root": args.checkpoint_root,
            "huge_pages": args.huge_pages,
        })
    rc_options.apply_server(args, transport, out)
    tls = tls_options(transport, {"tls_cert": args.tls_cert, "tls_key": args.tls_key})
    if tls and not (args.tls_cert and args.tls_key):
        raise ValueError("--tls_cert and --tls_key go together")
    for s in out:
        s["extra"] = ";".join(x for x in (s["extra"], tls) if x) or None
    return out



def _cpu() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


def _stop_waiter():
    """Arrange for SIGTERM/SIGINT to wake the main thread, whichever thread the kernel delivers
    them to (numpy's and the transports' threads exist too): Python's C-level handler writes the
    signal number to a wakeup pipe that the main thread blocks on."""
    rfd, wfd = os.pipe()
    os.set_blocking(wfd, False)
    received = []
    old_handlers = {s: signal.signal(s, lambda signum, frame: received.append(signum))
                    for s in (signal.SIGTERM, signal.SIGINT)}
    old_fd = signal.set_wakeup_fd(wfd)

    def wait():
        while not received:
            select.select([rfd], [], [])
            data = os.read(rfd, 64)
            if any(b in (signal.SIGTERM, signal.SIGINT) for b in data):
                break
        return received[0] if received else None

    def restore():
        signal.set_wakeup_fd(old_fd)
        for s, h in old_handlers.items():
            signal.signal(s, h)
        os.close(rfd)
        os.close(wfd)

    return wait, restore


def serve(settings: list[dict], out=sys.stdout) -> int:
    """Start every shard, print ready lines, wait for SIGTERM/SIGINT, stop, print final lines."""
    wait_for_stop, restore = _stop_waiter()
    servers = []
    try:
        for s in settings:
            for d in (s["path"], s["checkpoint_root"]):
                if d:
                    os.makedirs(d, exist_ok=True)
            srv = _ps.Server(**{k: v for k, v in s.items() if k != "shard_label"})
            servers.append((srv, s.get("shard_label", s["shard"])))
            st = srv.stats()
            print(f"component=ps_server event=ready transport={s['transport']} "
                  f"shard={s.get('shard_label', s['shard'])} "
                  f"host={s['host']} port={srv.port} num_shards={s['num_shards']} "
                  f"value_size={s['value_size']} index_type={s['index_type']} "
                  f"num_threads={s['num_threads']} pid={os.getpid()} "
                  f"huge_pages={s['huge_pages']} index_pages={st['index_pages']} "
                  f"slab_pages={st['slab_pages']}"
                  + (f" tcp_congestion={st['tcp_congestion']}" if st["tcp_congestion"] else ""),
                  file=out, flush=True)
        sig = wait_for_stop()
        log.info("received signal %s, stopping", sig)
    finally:
        finals = []
        for srv, label in servers:
            stats = srv.stats() if srv.running else {}
            srv.stop()
            finals.append((srv, label, stats))
        user, sys_s = _cpu()
        for srv, label, stats in finals:
            hidden = NOT_COUNTED.get(srv.transport, set())
            counters = " ".join(f"{k}={stats.get(k, 0)}" for k in COUNTERS if k not in hidden)
            print(f"component=ps_server event=stopped transport={srv.transport} shard={label} "
                  f"port={srv.port} {counters} cpu_user_s={user:.3f} cpu_sys_s={sys_s:.3f}",
                  file=out, flush=True)
        restore()
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        cfg = load_config(args.config_path) if args.config_path else None
        settings = resolve(args, cfg)
    except (ConfigError, ValueError) as e:
        print(f"recbench-ps-server: error: {e}", file=sys.stderr)
        return 2
    try:
        return serve(settings)
    except errors.DeviceUnavailable as e:
        print(f"recbench-ps-server: skipped: {e}", file=sys.stderr)
        return SKIP_EXIT_CODE
    except errors.RecbenchError as e:
        print(f"recbench-ps-server: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
