"""Fuzz the PS runner's plan strings (recbench.runner.topology): --server-plan, --client-plan, the simple
--server-shard-ips / --client-ips lists, --transports and --rdma-fabric-plan.

The property: any text either parses into a consistent topology (unique indices, shards and
endpoints, ports in range) or raises ValueError (TopologyError) whose message names the offending
entry (or, for whole-list problems, the flag / node ids). Any other exception is a bug.

Two drivers share check_one():
  python3 tools/build/fuzz_topology.py [libFuzzer flags] [corpus dirs]   # atheris (coverage-guided)
  src/test/scripts/test_fuzz_topology.py                                # bounded grammar generator
`tools/build/fuzz.py run|smoke` runs the atheris driver next to the C targets when atheris is
installed (it is in the test extras).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recbench import transports
from recbench.runner import topology

# messages about a whole list rather than one entry
GLOBAL_PHRASES = ("--server-shard-ips is empty", "--client-ips is empty", "no transport given",
                  "missing node ids", "names node ids", "both listen on")


def _names_input(msg: str, text: str) -> bool:
    if any(p in msg for p in GLOBAL_PHRASES):
        return True
    for entry in topology.parse_csv_list(text) or [text]:
        if repr(entry) in msg or (entry.strip() and entry.strip() in msg):
            return True
    return False


def _check_servers(servers) -> None:
    idx = [s.server_index for s in servers]
    assert idx == sorted(idx) and len(set(idx)) == len(idx), idx
    assert len({s.shard for s in servers}) == len(servers)
    for s in servers:
        assert 1 <= s.port <= 65535 and s.shard >= 0 and s.host
        # nothing an ssh command line could take for an option or that is not a host name
        assert not s.ssh_host.startswith("-") and not any(ord(c) < 33 for c in s.ssh_host)


def _call(fn, text, *args):
    try:
        return fn(text, *args)
    except ValueError as e:  # TopologyError is a ValueError
        msg = str(e)
        if not _names_input(msg, text):
            raise AssertionError(f"{fn.__name__}({text!r}): error does not name the entry: "
                                 f"{msg!r}") from e
        return None


def check_one(text: str, selector: int = 0) -> None:
    """Run every plan parser on text; raises AssertionError on a property violation (any other
    exception escapes as the bug it is)."""
    servers = _call(topology.parse_server_plan, text)
    if servers is not None:
        _check_servers(servers)
    clients = _call(topology.parse_client_plan, text)
    if clients is not None:
        idx = [c.client_index for c in clients]
        assert idx == sorted(idx) and len(set(idx)) == len(idx)
    _call(topology.normalize_transport_list, text)
    transport = transports.NAMES[selector % len(transports.NAMES)]
    for kw in ({"server_shard_ips": text}, {"client_ips": text},
               {"server_plan": text}, {"client_plan": text}):
        topo = _call(lambda t, kw=kw: topology.build_topology_plan(
            transport, client_processes_per_ip=1 + selector % 3, **kw), text)
        if topo is not None:
            _check_servers(topo.servers)
            assert topo.clients
            ids = [n for _, _, n in topology.fabric_node_ids(topo)]
            assert len(set(ids)) == len(ids)
            _call(topology.parse_rdma_fabric_plan, text, ids)


def _atheris_main() -> None:
    import atheris

    def test_one(data: bytes) -> None:
        fdp = atheris.FuzzedDataProvider(data)
        selector = fdp.ConsumeIntInRange(0, 255)
        check_one(fdp.ConsumeUnicodeNoSurrogates(len(data)), selector)

    atheris.Setup(sys.argv, test_one)
    atheris.Fuzz()


if __name__ == "__main__":
    import atheris

    atheris.instrument_func(check_one)
    for name in dir(topology):  # coverage feedback from the parsers themselves
        obj = getattr(topology, name)
        if callable(obj) and getattr(obj, "__module__", "") == topology.__name__ and \
                hasattr(obj, "__code__"):
            setattr(topology, name, atheris.instrument_func(obj))
    _atheris_main()
