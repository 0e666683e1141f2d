"""YCSB driver: `python3 -m recbench.ycsb -load -run -db NAME -threads N -P FILE -p K=V -s`.

The command line is YCSB's. -P takes a property file (or a shipped workload name such as
`workloada`), repeatable; -p KEY=VALUE overrides, repeatable, applied after every -P file;
-threads N sets threadcount; -target N paces the process at N operations/s in total (split over
its threads; property target) and adds the Intended- latencies measured from each operation's
scheduled start (docs/open-loop.md). The load and run phases execute in C threads (recbench._ycsb)
and the result is printed in YCSB-cpp's format (see recbench.ycsb_report).

Exit status: 0 when every operation succeeded or ended as not-found / not-supported; 1 when some
operation failed (first error on stderr); 2 on a usage or configuration error.
"""

from __future__ import annotations

import argparse
import sys

from recbench import workloads
from recbench.errors import RecbenchError
from recbench.ycsb_report import format_report


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="recbench-ycsb", allow_abbrev=False,
                                 description="YCSB core workloads against recbench's engines and "
                                             "RocksDB/LevelDB/LMDB/SQLite/WiredTiger.")
    ap.add_argument("-load", action="store_true", help="run the load phase (insert recordcount records)")
    ap.add_argument("-run", "-t", dest="run", action="store_true",
                    help="run the transaction phase (operationcount operations)")
    ap.add_argument("-db", default="basic", help="DB binding (default basic)")
    ap.add_argument("-threads", type=int, help="client threads (sets threadcount)")
    ap.add_argument("-target", type=float, metavar="OPS",
                    help="total operations/s for the process, split over its threads (sets target)")
    ap.add_argument("-P", dest="files", action="append", default=[], metavar="FILE",
                    help="property file or shipped workload name (repeatable)")
    ap.add_argument("-p", dest="props", action="append", default=[], metavar="KEY=VALUE",
                    help="property override (repeatable)")
    ap.add_argument("-s", dest="status", action="store_true",
                    help="print status lines every status.interval seconds")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if not args.load and not args.run:
        ap.error("nothing to do: give -load and/or -run")
    if args.threads is not None and args.threads < 1:
        ap.error(f"-threads {args.threads}: must be >= 1")
    try:
        files = [workloads.resolve(f) for f in args.files]
    except FileNotFoundError as e:
        ap.error(str(e))
    props = list(args.props)
    for p in props:
        if "=" not in p or p.startswith("="):
            ap.error(f"-p '{p}': expected KEY=VALUE")
    if args.threads is not None:
        props.append(f"threadcount={args.threads}")
    if args.target is not None:
        if not args.target > 0:
            ap.error(f"-target {args.target:g}: must be > 0 operations/s")
        props.append(f"target={args.target:g}")
    from recbench import _ycsb

    print(f"# recbench-ycsb db={args.db} files={','.join(files) or '-'} props={' '.join(props) or '-'}",
          flush=True)
    try:
        report = _ycsb.run(args.db, files=files, props=props, load=args.load, run=args.run,
                           status=args.status)
    except RecbenchError as e:
        print(f"recbench-ycsb: error: {e}", file=sys.stderr)
        return 2
    print(f"# threads={report['threads']} seed={report['seed']}")
    for line in format_report(report):
        print(line)
    sys.stdout.flush()
    failed = [(k, report[k]) for k in ("load", "run") if report.get(k) and report[k]["errors"]]
    for phase, ph in failed:
        print(f"recbench-ycsb: {ph['errors']} {phase} operations failed; first: {ph['first_error']}",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
