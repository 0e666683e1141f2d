"""The two record formats recbench's programs exchange, read and written in one place each.

- `k=v` lines: every result, ready, profile and stats line of ps_server, ps_bench, kv_bench and
  the C loops is whitespace-separated tokens, some `key=value` (`PS_BENCHMARK_RESULT phase=run
  ...`, `component=ps_server event=ready port=15000 ...`). parse_kv reads one.
- CSV files (summary.csv, summary_totals.csv, sweep.csv, the KV compare's summary.csv):
  write_csv writes one atomically (a temporary file renamed into place, so a reader never sees
  half a file), "\\n" line ends, cells formatted by the caller's `cell(column, value)`.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


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
