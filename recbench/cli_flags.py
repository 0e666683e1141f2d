"""argparse helpers for RecStore's gflags-style command lines.

RecStore's binaries take booleans as ``--flag``, ``--flag=true`` or ``--flag=false`` (gflags), and
its runner passes them that way; add_bool_flag accepts all three spellings.
"""

from __future__ import annotations

import argparse
import os

_TRUE = {"1", "true", "yes", "on", "t", "y"}
_FALSE = {"0", "false", "no", "off", "f", "n"}


def parse_bool(text: str) -> bool:
    t = str(text).strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean (use true or false)")


def positive_int(text: str) -> int:
    """An argparse type: an integer of 1 or more."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return v


BUDGET_NONE = 2**64 - 1  # max_inflight_bytes meaning "no budget" (UINT64_MAX in ps_client.h)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_inflight_budget(text: str) -> int:
    """The process's budget of PS bytes in flight (ps_client.h's max_inflight_bytes): bytes, with
    an optional K/M/G (binary) suffix, 0 for the transport's default, or "none" for no budget."""
    t = str(text).strip().lower()
    if t == "none":
        return BUDGET_NONE
    num, unit = (t[:-1], t[-1]) if t and t[-1] in "kmg" else (t, "")
    if not num.isdigit():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a byte count (e.g. 16777216, 16M, 0 for the default, none)")
    value = int(num) * _UNITS[unit]
    if value >= BUDGET_NONE:
        raise argparse.ArgumentTypeError(f"{text!r} is too large (use none for no budget)")
    return value


def format_inflight_budget(value: int) -> str:
    """parse_inflight_budget's inverse: "none" or the byte count."""
    return "none" if value == BUDGET_NONE else str(value)


def add_bool_flag(parser: argparse.ArgumentParser, name: str, help: str, default: bool = False):
    """--name, --name=true, --name=false."""
    parser.add_argument(name, nargs="?", const=True, default=default, type=parse_bool,
                        metavar="true|false", help=help)


def tls_options(transport: str, files: dict) -> str:
    """'tls_cert=P;tls_key=K' (or tls_ca) for the grpc transport's option string; ValueError
    naming the flag for another transport or a path the option syntax cannot carry."""
    given = {k: v for k, v in files.items() if v}
    if not given:
        return ""
    if transport != "grpc":
        raise ValueError(f"--{next(iter(given))}: TLS is served by the grpc transport only "
                         f"(not {transport})")
    for k, v in given.items():
        if ";" in v or "=" in v:
            raise ValueError(f"--{k} {v!r}: the path must not contain ';' or '='")
    return ";".join(f"{k}={os.path.abspath(v)}" for k, v in given.items())
