"""How recbench starts its own Python programs as child processes: the source tree they import
from (SOURCE_ROOT, the directory holding the `recbench` package) and the environment that makes a
child import this recbench (PYTHONPATH first, unbuffered output so ready lines arrive at once)."""

from __future__ import annotations

import os
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[1]


def python_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of `base` (default: os.environ) with SOURCE_ROOT first on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(SOURCE_ROOT) + (os.pathsep + old if old else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env
