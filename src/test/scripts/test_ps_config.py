"""RecStore config reading/writing, PS uri parsing, flag resolution of ps_server and ps_bench."""

import json
import tempfile
import unittest
from pathlib import Path

from recbench import ps_bench, ps_server
from recbench.ps_client import parse_stats, parse_uri
from recbench.ps_config import ConfigError, build_config, load_config, parse_config
from recbench.transports import default_port


class ConfigTest(unittest.TestCase):
    def test_round_trip_recstore_shape(self):
        doc = build_config("brpc", [("10.0.0.1", 25000), ("10.0.0.2", 25001)], num_threads=4,
                           capacity=1234, index_type="DRAM_EXTENDIBLE_HASH", value_size=128,
                           max_keys_per_request=700, data_path="/data")
        self.assertEqual(doc["cache_ps"]["ps_type"], "BRPC")
        self.assertEqual(doc["distributed_client"]["hash_method"], "rs_mix64")
        self.assertEqual(doc["client"]["port"], 25000)
        cfg = parse_config(doc)
        self.assertEqual(cfg.transport, "brpc")
        self.assertEqual(cfg.num_shards, 2)
        self.assertEqual(cfg.server_for(1).host, "10.0.0.2")
        self.assertEqual((cfg.capacity, cfg.index_type, cfg.value_size), (1234, "DRAM_EXTENDIBLE_HASH", 128))
        self.assertEqual(cfg.max_keys_per_request, 700)
        self.assertEqual(cfg.num_threads, 4)
        self.assertEqual(cfg.data_path, "/data")

    def test_errors_name_file_and_field(self):
        with tempfile.TemporaryDirectory() as d:
            p = f"{d}/c.json"
            Path(p).write_text(json.dumps({"cache_ps": {"ps_type": "QUIC"}}))
            with self.assertRaisesRegex(ConfigError, "c.json.*ps_type"):
                load_config(p)
            Path(p).write_text("{not json")
            with self.assertRaisesRegex(ConfigError, "not valid JSON"):
                load_config(p)
            with self.assertRaisesRegex(ConfigError, "cannot read"):
                load_config(f"{d}/missing.json")
        with self.assertRaisesRegex(ConfigError, r"servers\[0\] needs host and port"):
            parse_config({"cache_ps": {"servers": [{"shard": 0}]}})

    def test_default_ports_follow_recstore(self):
        self.assertEqual(default_port("brpc", 0, 1), 15000)
        self.assertEqual(default_port("BRPC", 1, 2), 25001)
        self.assertEqual(default_port("grpc", 2, 3), 15002)


class UriTest(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(parse_uri("grpc://h:15000,h:15001"), ("grpc", [("h", 15000), ("h", 15001)]))
        self.assertEqual(parse_uri("BRPC://[::1]:15000"), ("brpc", [("::1", 15000)]))
        for bad in ("h:1", "brpc://h", "brpc://h:0", "brpc://:5", "brpc://h:99999", "://h:1"):
            with self.assertRaises(ValueError, msg=bad):
                parse_uri(bad)

    def test_parse_stats(self):
        self.assertEqual(parse_stats("shard=1 keys=10 index_type=DRAM_PET_HASH"),
                         {"shard": 1, "keys": 10, "index_type": "DRAM_PET_HASH"})


class FlagsTest(unittest.TestCase):
    def test_server_flags_override_config(self):
        doc = build_config("brpc", [("127.0.0.1", 25000), ("127.0.0.1", 25001)], value_size=128)
        cfg = parse_config(doc)
        args = ps_server.build_parser().parse_args(["--local_shard_id", "1", "--value_size", "256"])
        (s,) = ps_server.resolve(args, cfg)
        self.assertEqual((s["shard"], s["port"], s["value_size"], s["num_shards"]), (1, 25001, 256, 2))
        args = ps_server.build_parser().parse_args(["--local_shard_id", "0",
                                                    "--brpc_server_port", "26000"])
        self.assertEqual(ps_server.resolve(args, cfg)[0]["port"], 26000)
        # without a shard id every shard of the config is served
        args = ps_server.build_parser().parse_args([])
        self.assertEqual([s["shard"] for s in ps_server.resolve(args, cfg)], [0, 1])
        args = ps_server.build_parser().parse_args(["--local_shard_id", "2"])
        with self.assertRaisesRegex(ValueError, "out of range"):
            ps_server.resolve(args, cfg)

    def test_sparse_shard_ids_of_a_config(self):
        # RecStore's ids 3 and 8: the server serves the id's rank, the client lists the servers
        # in id order (config order does not matter)
        doc = build_config("brpc", [("h8", 25008, 8), ("h3", 25003, 3)])
        cfg = parse_config(doc)
        args = ps_server.build_parser().parse_args(["--local_shard_id", "8"])
        (s,) = ps_server.resolve(args, cfg)
        self.assertEqual((s["shard"], s["shard_label"], s["port"], s["num_shards"]), (1, 8, 25008, 2))
        args = ps_server.build_parser().parse_args(["--local_shard_id", "5"])
        with self.assertRaisesRegex(ValueError, "--local_shard_id 5 is out of range"):
            ps_server.resolve(args, cfg)
        with tempfile.TemporaryDirectory() as d:
            path = Path(d, "c.json")
            path.write_text(json.dumps(doc))
            kw = ps_bench.resolve(ps_bench.build_parser().parse_args(["--config_path", str(path)]))
        self.assertEqual(kw["endpoints"], [("h3", 25003), ("h8", 25008)])

    def test_bench_flags(self):
        p = ps_bench.build_parser()
        args = p.parse_args(["--transport", "brpc", "--num_shards", "2", "--port", "30000",
                             "--verify_deterministic_values=true", "--skip_load=false",
                             "--no_barrier"])
        kw = ps_bench.resolve(args)
        self.assertEqual(kw["endpoints"], [("127.0.0.1", 30000), ("127.0.0.1", 30001)])
        self.assertTrue(kw["verify"])
        self.assertFalse(args.skip_load)
        self.assertTrue(args.no_barrier)
        self.assertEqual(kw["prefetch_depth"], 1)
        args = p.parse_args(["--transport", "shm"])
        self.assertEqual(ps_bench.resolve(args)["prefetch_depth"], 16)
        with self.assertRaises(SystemExit):
            p.parse_args(["--verify_deterministic_values=maybe"])
        with self.assertRaises(SystemExit):
            p.parse_args(["--workload", "micro"])
        args = p.parse_args(["--value_size", "30"])
        with self.assertRaisesRegex(ValueError, "value_size 30"):
            ps_bench.resolve(args)

    def test_result_line_keeps_recstore_keys_first(self):
        kw = {"transport": "brpc", "mode": "fetch", "distribution": "uniform",
              "zipfian_alpha": 0.9, "threads": 2, "load_threads": 0, "batch_keys": 500,
              "record_count": 1000, "value_size": 512, "prefetch_depth": 8,
              "endpoints": [("h", 1)]}
        res = {"runtime_s": 2.0, "batches": 10, "key_ops": 5000, "mean_us": 1, "p50_us": 1,
               "p95_us": 2, "p99_us": 3, "p999_us": 4, "max_us": 5, "cpu_user_s": 0.5,
               "cpu_sys_s": 0.25, "keys_missing": 0}
        line = ps_bench.result_line("run", kw, res)
        keys = [t.split("=")[0] for t in line.split()[1:]]
        self.assertEqual(keys[:13], ["phase", "transport", "mode", "distribution", "zipfian_alpha",
                                     "threads", "batch_size", "records", "runtime_s", "batches",
                                     "key_ops", "throughput_batches_sec", "throughput_keys_sec"])
        self.assertIn("throughput_keys_sec=2500.000", line)
        self.assertIn("payload_gbps=0.001280", line)


if __name__ == "__main__":
    unittest.main()
