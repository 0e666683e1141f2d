"""Grammar-based fuzzing of the runner's plan strings (recbench.runner.topology), bounded and
deterministic: thousands of plan-like strings built from valid and hostile pieces (indices,
hosts, user@host, bracketed IPv6, ports and shards out of range, stray separators, control
characters, an ssh option disguised as a host) and then mutated. tools/build/fuzz_topology.py
check_one() holds the property: a plan parses into a consistent topology or raises ValueError
naming the offending entry; nothing else. (The same check runs coverage-guided under atheris in
`make fuzz`.) Also the specific cases that once got through: hosts an ssh command line would take
for options.
"""

import random
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools" / "build"))
import fuzz_topology

from recbench.runner import topology

INDICES = ["0", "1", "2", "7", "-1", "01", "x", "", "99999999999999999999", " 3", "1_0", "٣"]
HOSTS = ["127.0.0.1", "10.0.0.2", "host-a", "node_1.example", "user@host", "u@10.1.1.1",
         "[::1]", "[fe80::1%eth0]", "u@[::1]", "::1", "[::1", "::1]", "[]", "@host", "user@",
         "a b", "-oProxyCommand=touch${IFS}x", "u@-oProxyCommand=x", "-u@h", "ho\x01st",
         "h\u200bst", "[1.2.3.4]", "a@b@c", ""]
PORTS = ["1", "80", "15000", "65535", "65536", "0", "-5", "p", "", "1e3", "0x50"]
SHARDS = ["0", "1", "2", "-1", "s", "", "3"]
MODES = ["ib", "rocev1", "rocev2", "RoCEv2", "eth", ""]


def server_entry(r):
    parts = [r.choice(HOSTS), r.choice(PORTS), r.choice(SHARDS)]
    if r.random() < 0.5:
        parts.insert(0, r.choice(INDICES))
    return ":".join(parts)


def client_entry(r):
    return (r.choice(INDICES) + ":" if r.random() < 0.4 else "") + r.choice(HOSTS)


def fabric_entry(r):
    f = [r.choice(INDICES), r.choice(["mlx5_0", "", "rxe0"]), r.choice(PORTS),
         r.choice(SHARDS), r.choice(MODES)]
    if r.random() < 0.5:
        f += [r.choice(["64", "0", "300"]), r.choice(["0", "3"]), r.choice(["0", "1048576"])]
    return ":".join(f)


def mutate(r, s):
    s = list(s)
    for _ in range(r.randint(0, 3)):
        op = r.randint(0, 2)
        pos = r.randint(0, len(s))
        if op == 0:
            s.insert(pos, r.choice(":,@[]%- \t0a\x00é"))
        elif op == 1 and s:
            del s[min(pos, len(s) - 1)]
        elif s:
            s[min(pos, len(s) - 1)] = r.choice(":,@[]0123456789")
    return "".join(s)


class TopologyFuzzTest(unittest.TestCase):
    def test_generated_plans_parse_or_fail_naming_the_entry(self):
        r = random.Random(20261129)
        for i in range(3000):
            gen = (server_entry, client_entry, fabric_entry)[i % 3]
            text = ",".join(gen(r) for _ in range(r.randint(0, 4)))
            if r.random() < 0.5:
                text = mutate(r, text)
            try:
                fuzz_topology.check_one(text, selector=i)
            except Exception as e:  # noqa: BLE001 - report the input that broke the property
                self.fail(f"plan {text!r}: {type(e).__name__}: {e}")

    def test_ssh_option_hosts_are_refused(self):
        for text in ("-oProxyCommand=touch${IFS}x:15000:0", "u@-oProxyCommand=x:15000:0",
                     "-x@host:15000:0", "ho\x01st:15000:0"):
            with self.assertRaises(topology.TopologyError) as cm:
                topology.parse_server_plan(text)
            self.assertIn(repr(text), str(cm.exception))
        with self.assertRaises(topology.TopologyError):
            topology.build_topology_plan("BRPC", server_shard_ips="-oProxyCommand=x")
        # ordinary forms still work
        topo = topology.build_topology_plan("BRPC", server_plan="0:u@[::1]:25000:0,1:h-b:25001:1",
                                            client_plan="0:node_1.example,1:[fe80::1%eth0]")
        self.assertEqual([s.ssh_host for s in topo.servers], ["u@::1", "h-b"])


class FabricNodeIdsTest(unittest.TestCase):
    def test_sparse_server_indices_do_not_collide_with_clients(self):
        # found by the generator: server index 1 used to be node 1, and so was client 0
        topo = topology.build_topology_plan("RDMA", server_plan="1:10.0.0.1:25000:0",
                                            client_plan="0:10.0.0.2")
        nodes = topology.fabric_node_ids(topo)
        self.assertEqual(nodes, [("server", 1, 0), ("client", 0, 1)])
        plan = topology.parse_rdma_fabric_plan("0:mlx5_0:1:3:ib,1:mlx5_1:1:3:ib",
                                               [n for _, _, n in nodes])
        self.assertEqual(plan[1].device, "mlx5_1")


if __name__ == "__main__":
    unittest.main()
