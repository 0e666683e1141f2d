"""The record formats recbench's programs exchange, read and written in one place each, and the
results directory of a run.

- `k=v` lines: every result, ready, profile and stats line of ps_server, ps_bench, kv_bench and
  the C loops is whitespace-separated tokens, some `key=value` (`PS_BENCHMARK_RESULT phase=run
  ...`, `component=ps_server event=ready port=15000 ...`). parse_kv reads one.
- CSV files (summary.csv, summary_totals.csv, sweep.csv, the KV compare's summary.csv):
  write_csv writes one atomically (a temporary file renamed into place, so a reader never sees
  half a file), "\\n" line ends, cells formatted by the caller's `cell(column, value)`.
- Result directories: every tool's default output directory is `<prefix>MMDDHHMM` (RecStore's
  naming); new_result_dir makes one that no earlier run owns, so two runs in the same minute
  (a loop of `make bench`, a script's A/B rounds) never write into each other's files.
"""

from __future__ import annotations

import csv
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


def new_result_dir(parent: str | os.PathLike[str], prefix: str, create: bool = True) -> Path:
    """`parent/<prefix>MMDDHHMM`, or `..._2`, `_3`, ... when that name is taken, created empty
    (mkdir without exist_ok, so two processes starting together get different directories).
    create=False only picks the name (a dry run)."""
    base = Path(parent) / (prefix + time.strftime("%m%d%H%M"))
    for n in range(1, 10000):
        path = base if n == 1 else base.with_name(f"{base.name}_{n}")
        if not create:
            if not path.exists():
                return path
            continue
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"{base}: 9999 result directories of this minute already exist")


def parse_kv(line: str) -> dict[str, str]:
    """The `key=value` tokens of a line (other tokens are ignored; the first '=' splits)."""
    out = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep:
            out[key] = value
    return out


def read_csv(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """The rows of a CSV file with a header, as strings (empty cells are '')."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _plain(_column: str, value: Any) -> str:
    return "" if value is None else str(value)


def write_csv(path: str | os.PathLike[str], columns: Sequence[str],
              rows: Iterable[Mapping[str, Any]],
              cell: Callable[[str, Any], str] = _plain) -> Path:
    """Write `rows` (missing keys are empty cells, extra keys ignored) under header `columns`."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(columns)
        for row in rows:
            w.writerow([cell(c, row.get(c)) for c in columns])
    tmp.replace(path)
    return path
