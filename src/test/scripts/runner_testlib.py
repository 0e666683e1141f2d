"""Helpers of the runner's unit tests (test_runner_*.py): parse flags into a plan, read a plan's
fields by their flag names, read a command line's --transport_options."""

import contextlib
import dataclasses
import io
import types
import unittest
from pathlib import Path

from recbench import transports
from recbench.runner import cli as runner_cli

REPO = Path(__file__).resolve().parents[3]
T = transports.TRANSPORTS


def parse(*argv):
    return runner_cli.parse_args(list(argv))


def flat(plan):
    """Every field of a plan by its flag's dest name (the plan groups them by consumer)."""
    out = {}
    for part in (plan, plan.workload, plan.servers, plan.rc, plan.execution):
        out.update({f.name: getattr(part, f.name) for f in dataclasses.fields(part)})
    out["transport_list"] = [t.label for t in plan.transports]
    out["effective_row_kind"] = plan.row_kind
    return types.SimpleNamespace(**out)


def parse_error(*argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), unittest.TestCase().assertRaises(SystemExit):
        runner_cli.parse_args(list(argv))
    return err.getvalue()


def sample_args(*argv, **kw):
    """The plan of `--transports grpc` plus flags: kw name=value is --name value (True: --name)."""
    flags = list(argv)
    for k, v in kw.items():
        if v is True:
            flags.append(f"--{k.replace('_', '-')}")
        elif v is not False:
            flags += [f"--{k.replace('_', '-')}", str(v)]
    if "--transports" not in flags:
        flags = ["--transports", "grpc"] + flags
    return parse(*flags)


def transport_options(cmd):
    text = next(a for a in cmd if a.startswith("--transport_options=")).split("=", 1)[1]
    return dict(item.split("=", 1) for item in text.split(";"))
