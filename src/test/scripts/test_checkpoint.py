"""Checkpoints through real servers: COMMAND save/load on every transport this host serves,
PSClient.save()/load(), `ps_server --load_checkpoint`, all three index types, and refusals that
leave the running shard untouched (a damaged file, another shard count)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
from ps_testlib import PSServerProcess, python_env, require_transport, rows_for

import recbench
from recbench import errors

VS = 64
DIM = VS // 4




def put_all(ps, keys: np.ndarray, rows: np.ndarray) -> None:
    for i in range(0, len(keys), 500):
        ps.put(keys[i:i + 500], rows[i:i + 500])


def get_all(ps, keys: np.ndarray) -> np.ndarray:
    return np.concatenate([ps.get(keys[i:i + 500]) for i in range(0, len(keys), 500)])


class CheckpointTransports(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rs_ckpt_test_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _round_trip(self, transport: str, index_type: str = "DRAM_PET_HASH"):
        require_transport(self, transport)
        root = os.path.join(self.tmp, "root")
        extra = ["--checkpoint_root", root]
        if index_type == "SSD_EXTENDIBLE_HASH":
            extra += ["--data_path", os.path.join(self.tmp, "data")]
        ck = os.path.join(root, "ck", transport)
        keys = np.arange(1, 5001, dtype=np.uint64) * 3
        with PSServerProcess(transport, num_shards=2, value_size=VS, index_type=index_type,
                             extra_args=extra) as srv, recbench.PSClient(srv.uri) as ps:
            put_all(ps, keys, rows_for(keys, DIM, offset=1.0))
            replies = ps.save(ck)
            self.assertEqual(len(replies), 2)
            self.assertTrue(all(r.startswith("saved ") for r in replies), replies)
            self.assertEqual(sorted(os.listdir(ck)), ["shard_0.rsckpt", "shard_1.rsckpt"])
            ps.put(keys[:100], rows_for(keys[:100], DIM, offset=9.0))   # changed after the save
            ps.put(np.array([7], dtype=np.uint64), rows_for(np.array([7], np.uint64), DIM, offset=0))
            replies = ps.load(ck)
            self.assertTrue(all(r.startswith("loaded ") for r in replies), replies)
            np.testing.assert_array_equal(get_all(ps, keys), rows_for(keys, DIM, offset=1.0))
            self.assertFalse(ps.get(np.array([7], dtype=np.uint64)).any())  # gone again
            self.assertEqual(sum(s["keys"] for s in ps.stats()), len(keys))

            # damage shard 1's file: its load is refused naming file and offset, rows stay
            path = os.path.join(ck, "shard_1.rsckpt")
            with open(path, "r+b") as f:
                f.seek(4096 + 32 + 10)
                b = f.read(1)
                f.seek(4096 + 32 + 10)
                f.write(bytes([b[0] ^ 0xFF]))
            ps.put(keys[:10], rows_for(keys[:10], DIM, offset=5.0))
            with self.assertRaises(errors.ServerError) as cm:
                ps.load(ck, shards=[1])
            msg = str(cm.exception)
            self.assertIn("shard_1.rsckpt", msg)
            self.assertIn("offset 4096", msg)
            self.assertIn("checksum mismatch", msg)
            self.assertIn("shard unchanged", msg)
            got = ps.get(keys[:10])
            np.testing.assert_array_equal(got, rows_for(keys[:10], DIM, offset=5.0))

            with self.assertRaises(errors.ServerError) as cm:
                ps.command("load", 0)
            self.assertIn("needs a directory", str(cm.exception))
            with self.assertRaises(errors.ServerError) as cm:
                ps.load("nonexistent", shards=[0])   # relative to the root
            self.assertIn(os.path.join(os.path.realpath(root), "nonexistent", "shard_0.rsckpt"),
                          str(cm.exception))
            self.assertEqual(ps.command("checkpoint_status", 0)[:8], "failed: ")
            # a client cannot make the server write outside its checkpoint root
            for bad in (self.tmp, f"{root}/../x", "a/../../x", "/etc"):
                with self.assertRaises(errors.ServerError) as cm:
                    ps.save(bad)
                self.assertIn("inside the checkpoint root", str(cm.exception))
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "shard_0.rsckpt")))

    def test_brpc(self):
        self._round_trip("brpc")

    def test_commands_off_without_a_root(self):
        with PSServerProcess("brpc", value_size=VS) as srv, recbench.PSClient(srv.uri) as ps:
            with self.assertRaises(errors.ServerError) as cm:
                ps.save(os.path.join(self.tmp, "ck"))
            self.assertIn("--checkpoint_root", str(cm.exception))
        self.assertEqual(os.listdir(self.tmp), [])

    def test_grpc(self):
        self._round_trip("grpc")

    def test_shm(self):
        self._round_trip("shm")

    def test_extendible_hash(self):
        self._round_trip("brpc", "DRAM_EXTENDIBLE_HASH")

    def test_cceh(self):
        self._round_trip("grpc", "SSD_EXTENDIBLE_HASH")

    def test_empty_shard_loads_in_one_pass_and_a_failure_leaves_it_empty(self):
        """An emptied shard loads in one pass (direct I/O); a block damaged after good ones
        clears what that pass inserted, so the shard is empty again and keeps serving."""
        ck = os.path.join(self.tmp, "ck")
        keys = np.arange(1, 40001, dtype=np.uint64)  # 72-byte rows: 3 blocks of 14563 rows
        with PSServerProcess("brpc", value_size=VS,
                             extra_args=["--checkpoint_root", self.tmp]) as srv, \
                recbench.PSClient(srv.uri) as ps:
            put_all(ps, keys, rows_for(keys, DIM, offset=3.0))
            ps.save(ck)
            ps.clear()
            reply = ps.load(ck)[0]
            self.assertIn("into the empty shard", reply)
            self.assertIn("one pass", reply)
            self.assertIn("direct I/O", reply)   # the test dir is on ext4, which takes O_DIRECT
            np.testing.assert_array_equal(get_all(ps, keys), rows_for(keys, DIM, offset=3.0))
            ps.clear()
            block_bytes = 32 + ((1 << 20) // (8 + VS)) * (8 + VS)
            path = os.path.join(ck, "shard_0.rsckpt")
            with open(path, "r+b") as f:   # a payload byte of block 2: blocks 0 and 1 go in first
                f.seek(4096 + 2 * block_bytes + 32 + 100)
                b = f.read(1)
                f.seek(4096 + 2 * block_bytes + 32 + 100)
                f.write(bytes([b[0] ^ 0xFF]))
            with self.assertRaises(errors.ServerError) as cm:
                ps.load(ck)
            msg = str(cm.exception)
            self.assertIn("shard unchanged (empty)", msg)
            self.assertIn(f"block 2 at offset {4096 + 2 * block_bytes}", msg)
            self.assertEqual(ps.stats()[0]["keys"], 0)
            self.assertFalse(ps.get(keys[:500]).any())
            put_all(ps, keys[:500], rows_for(keys[:500], DIM, offset=6.0))
            np.testing.assert_array_equal(ps.get(keys[:500]), rows_for(keys[:500], DIM, offset=6.0))


class LoadAtStart(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rs_ckpt_test_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_server_starts_with_checkpoint_and_refuses_other_layouts(self):
        ck = os.path.join(self.tmp, "ck")
        keys = np.arange(10, 3010, dtype=np.uint64)
        with PSServerProcess("brpc", num_shards=2, value_size=VS,
                             extra_args=["--checkpoint_root", self.tmp]) as srv, \
                recbench.PSClient(srv.uri) as ps:
            put_all(ps, keys, rows_for(keys, DIM, offset=2.0))
            ps.save(ck)
        with PSServerProcess("brpc", num_shards=2, value_size=VS, index_type="DRAM_EXTENDIBLE_HASH",
                             extra_args=["--load_checkpoint", ck]) as srv, \
                recbench.PSClient(srv.uri) as ps:
            np.testing.assert_array_equal(get_all(ps, keys), rows_for(keys, DIM, offset=2.0))
        # one shard of a different deployment: refused at start, naming the shard count
        for flags, words in ((["--num_shards", "1"], "shard count"),
                             (["--num_shards", "2", "--value_size", "128"], "value_size 64")):
            args = [sys.executable, "-m", "recbench.ps_server", "--transport", "brpc",
                    "--host", "127.0.0.1", "--port", "0", "--local_shard_id", "0",
                    "--load_checkpoint", ck] + flags
            if "--value_size" not in flags:
                args += ["--value_size", str(VS)]
            p = subprocess.run(args, capture_output=True, text=True, env=python_env(), timeout=60)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(words, p.stderr)
            self.assertIn("shard_0.rsckpt", p.stderr)


if __name__ == "__main__":
    unittest.main()


class RecStoreWireCheckpoint(unittest.TestCase):
    """RecStore's SAVE_CHECKPOINT / LOAD_CHECKPOINT (PSCommand 4, 5) through its gRPC wire, with
    a real grpcio client: arg1 = [directory in the checkpoint root], arg2 = [metadata JSON]."""

    def test_save_load_and_refusals(self):
        require_transport(self, "grpc")
        import grpc
        from recstore_wire_py import stubs

        pb, pb_grpc = stubs("recstore_ps")
        tmp = tempfile.mkdtemp(prefix="rs_ckpt_rs_")
        meta = json.dumps({"identity": {"model": "m"}, "checkpoint_id": "c1"}).encode()
        try:
            with PSServerProcess("grpc", value_size=VS,
                                 extra_args=["--checkpoint_root", tmp]) as srv, \
                    recbench.PSClient(srv.uri) as ps, \
                    grpc.insecure_channel(f"127.0.0.1:{srv.ports[0]}") as ch:
                stub = pb_grpc.ParameterServiceStub(ch)
                keys = np.arange(1, 1001, dtype=np.uint64)
                put_all(ps, keys, rows_for(keys, DIM, offset=4.0))
                r = stub.Command(pb.CommandRequest(command=pb.SAVE_CHECKPOINT, arg1=[b"c1"],
                                                   arg2=[meta]), timeout=600)
                self.assertEqual(r.reply, b"ok")
                self.assertTrue(os.path.exists(os.path.join(tmp, "c1", "shard_0.rsckpt")))
                ps.clear()
                r = stub.Command(pb.CommandRequest(command=pb.LOAD_CHECKPOINT, arg1=[b"c1"],
                                                   arg2=[meta]), timeout=600)
                self.assertEqual(r.reply, b"ok")
                np.testing.assert_array_equal(get_all(ps, keys), rows_for(keys, DIM, offset=4.0))
                for arg1, arg2, code, words in (
                        ([b"c1"], [b"[]"], grpc.StatusCode.INVALID_ARGUMENT, "JSON object"),
                        ([b"c1"], [b'{"identity": {}}'], grpc.StatusCode.INVALID_ARGUMENT,
                         "checkpoint_id"),
                        ([b"/etc"], [meta], grpc.StatusCode.INVALID_ARGUMENT,
                         "inside the checkpoint root"),
                        ([b"missing"], [meta], grpc.StatusCode.FAILED_PRECONDITION,
                         "shard_0.rsckpt")):
                    with self.assertRaises(grpc.RpcError) as cm:
                        stub.Command(pb.CommandRequest(command=pb.LOAD_CHECKPOINT, arg1=arg1,
                                                       arg2=arg2), timeout=60)
                    self.assertEqual(cm.exception.code(), code, cm.exception.details())
                    self.assertIn(words, cm.exception.details())
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
