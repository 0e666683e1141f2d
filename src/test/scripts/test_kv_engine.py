"""recbench.KVEngine: the API on every index type, bad arguments, CCEH persistence across reopen,
capacity errors, and the no-torn-read property with Python threads (the GIL is released inside)."""

import os
import shutil
import tempfile
import threading
import unittest

import numpy as np

import recbench
from recbench import errors

INDEXES = ("DRAM_PET_HASH", "DRAM_EXTENDIBLE_HASH", "SSD_EXTENDIBLE_HASH")


class _TempDir:
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rs_kv_py_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def open(self, index_type, sub="kv", **kw):
        path = f"{self.tmp}/{sub}" if index_type == "SSD_EXTENDIBLE_HASH" else None
        return recbench.KVEngine(index_type=index_type, path=path, **kw)


class KVEngineApiTest(_TempDir, unittest.TestCase):
    def test_put_get_delete_every_index(self):
        for it in INDEXES:
            with self.subTest(index_type=it), self.open(it, sub=it, value_size=16, capacity=1000) as kv:
                self.assertEqual(kv.index_type, it)
                self.assertEqual(kv.value_size, 16)
                self.assertEqual(kv.capacity, 1000)
                kv.put(7, b"x" * 16)
                kv.put(2**64 - 1, np.arange(4, dtype=np.float32))  # any buffer
                self.assertEqual(kv.get(7), b"x" * 16)
                self.assertEqual(np.frombuffer(kv.get(2**64 - 1), np.float32).tolist(), [0, 1, 2, 3])
                self.assertIsNone(kv.get(8))
                self.assertIn(7, kv)
                self.assertNotIn(8, kv)
                self.assertEqual(len(kv), 2)
                kv.delete(7)
                self.assertIsNone(kv.get(7))
                with self.assertRaises(KeyError):
                    kv.delete(7)
                self.assertEqual(kv.count(), 1)

    def test_batches_and_update(self):
        for it in INDEXES:
            with self.subTest(index_type=it), self.open(it, sub=it, value_size=32, capacity=5000) as kv:
                keys = np.arange(1000, dtype=np.uint64) * 13
                rows = np.random.default_rng(1).random((1000, 8), dtype=np.float32)
                self.assertEqual(kv.batch_put(keys, rows), 1000)
                q = np.concatenate([keys[::7], np.array([5, 6], np.uint64)])
                got, found = kv.batch_get_flat(q)
                self.assertEqual(got.shape, (len(q), 32))
                self.assertEqual(got.dtype, np.uint8)
                self.assertEqual(found.dtype, np.bool_)
                self.assertTrue(found[:-2].all())
                self.assertFalse(found[-2:].any())
                np.testing.assert_array_equal(got[:-2].view(np.float32), rows[::7])
                self.assertFalse(got[-2:].any())
                # out= fills a caller's float32 array in place; keys as a list
                out = np.full((3, 8), 9, np.float32)
                res, found = kv.batch_get_flat([0, 13, 4], out=out)
                self.assertIs(res, out)
                np.testing.assert_array_equal(out[:2], rows[:2])
                self.assertFalse(out[2].any())
                # update adds float32 deltas; a missing key starts from zero
                kv.update(np.array([0, 99999], np.uint64), np.ones((2, 8), np.float32))
                np.testing.assert_allclose(np.frombuffer(kv.get(0), np.float32), rows[0] + 1)
                np.testing.assert_array_equal(np.frombuffer(kv.get(99999), np.float32), np.ones(8))
                self.assertEqual(kv.count(), 1001)
                kv.clear()
                self.assertEqual(kv.count(), 0)

    def test_variable_length_values(self):
        for it in INDEXES:
            with self.subTest(index_type=it), self.open(it, sub=it, capacity=100) as kv:
                self.assertIsNone(kv.value_size)
                vals = {k: bytes([k]) * (k * 997 % 5000) for k in range(50)}
                for k, v in vals.items():
                    kv.put(k, v)
                kv.put(3, b"a much longer value than before" * 100)
                vals[3] = b"a much longer value than before" * 100
                for k, v in vals.items():
                    self.assertEqual(kv.get(k), v)
                with self.assertRaises(errors.InvalidArgument):
                    kv.batch_get_flat([1])

    def test_capacity_error_names_capacity_and_index(self):
        for it in INDEXES:
            with self.subTest(index_type=it), self.open(it, sub=it, value_size=8, capacity=100) as kv:
                kv.batch_put(np.arange(100, dtype=np.uint64), bytes(800))
                with self.assertRaises(errors.CapacityError) as cm:
                    kv.put(1000, bytes(8))
                self.assertIn("100", str(cm.exception))
                self.assertIn(it, str(cm.exception))
                with self.assertRaises(errors.CapacityError) as cm:
                    kv.batch_put([5, 1001], bytes(16))
                self.assertIn("stored 1 of 2", str(cm.exception))

    def test_closed_engine_raises(self):
        kv = recbench.KVEngine(index_type="DRAM_PET_HASH", value_size=8, capacity=10)
        kv.close()
        kv.close()  # idempotent
        self.assertTrue(kv.closed)
        with self.assertRaises(errors.ClosedError):
            kv.get(1)
        with self.assertRaises(errors.ClosedError):
            kv.batch_get_flat([1])


class KVEngineBadArgumentsTest(unittest.TestCase):
    def assertNames(self, exc_type, word, **kw):
        with self.assertRaises(exc_type) as cm:
            recbench.KVEngine(**kw)
        self.assertIn(word, str(cm.exception))

    def test_constructor(self):
        self.assertNames(ValueError, "index_type", index_type="BTREE", value_size=8, capacity=10)
        self.assertNames(ValueError, "value_size", value_size=0, capacity=10)
        self.assertNames(ValueError, "value_size", value_size=7, capacity=10)
        self.assertNames(ValueError, "value_size", value_size=-8, capacity=10)
        self.assertNames(ValueError, "capacity", value_size=8, capacity=-1)
        self.assertNames(ValueError, "capacity", value_size=8, capacity=0)
        self.assertNames(TypeError, "capacity", value_size=8)
        self.assertNames(ValueError, "path", index_type="CCEH", value_size=8, capacity=10)

    def test_methods(self):
        with recbench.KVEngine(index_type="DRAM_PET_HASH", value_size=8, capacity=10) as kv:
            with self.assertRaises(ValueError) as cm:
                kv.put(1, b"short")
            self.assertIn("value", str(cm.exception))
            with self.assertRaises(ValueError) as cm:
                kv.put(-1, bytes(8))
            self.assertIn("key", str(cm.exception))
            with self.assertRaises(TypeError) as cm:
                kv.get("1")
            self.assertIn("key", str(cm.exception))
            with self.assertRaises(ValueError) as cm:
                kv.batch_put(np.arange(3, dtype=np.uint64), bytes(16))
            self.assertIn("rows", str(cm.exception))
            with self.assertRaises(ValueError) as cm:
                kv.batch_get_flat(np.arange(3, dtype=np.uint64), out=np.zeros(3, np.float32))
            self.assertIn("out", str(cm.exception))
            with self.assertRaises(ValueError) as cm:
                kv.batch_get_flat(np.arange(3, dtype=np.float64))
            self.assertIn("keys", str(cm.exception))
            with self.assertRaises(ValueError) as cm:
                kv.batch_get_flat(b"1234567")
            self.assertIn("keys", str(cm.exception))
            with self.assertRaises(ValueError) as cm:
                kv.update([1], np.zeros(3, np.float32))
            self.assertIn("deltas", str(cm.exception))


class CCEHPersistenceTest(_TempDir, unittest.TestCase):
    def test_reopen_keeps_rows_and_count(self):
        path = f"{self.tmp}/store"
        keys = np.arange(20000, dtype=np.uint64) * 31 + 5
        rows = np.random.default_rng(7).integers(0, 255, (20000, 64), dtype=np.uint8)
        with recbench.KVEngine(index_type="SSD_EXTENDIBLE_HASH", value_size=64, capacity=50000,
                               path=path) as kv:
            kv.batch_put(keys, rows)
            kv.delete(int(keys[0]))
        with recbench.KVEngine(index_type="CCEH", value_size=64, capacity=50000, path=path) as kv:
            self.assertEqual(kv.count(), 19999)
            self.assertEqual(kv.path, path)
            got, found = kv.batch_get_flat(keys)
            self.assertFalse(found[0])
            self.assertTrue(found[1:].all())
            np.testing.assert_array_equal(got[1:], rows[1:])
        with self.assertRaises(ValueError) as cm:
            recbench.KVEngine(index_type="CCEH", value_size=128, capacity=50000, path=path)
        self.assertIn("value_size", str(cm.exception))


    def test_missing_parents_are_created_and_a_file_in_the_way_is_named(self):
        path = f"{self.tmp}/a/b/store"
        with recbench.KVEngine(index_type="CCEH", value_size=8, capacity=100, path=path) as kv:
            kv.put(1, b"\x01" * 8)
        self.assertTrue(os.path.isfile(f"{path}/cceh.index"))
        with open(f"{self.tmp}/file", "w"):
            pass
        with self.assertRaises(errors.InvalidArgument) as cm:
            recbench.KVEngine(index_type="CCEH", value_size=8, capacity=100,
                              path=f"{self.tmp}/file/store")
        self.assertIn(f"'{self.tmp}/file' exists and is not a directory", str(cm.exception))


class NoTornReadsTest(unittest.TestCase):
    """Writers store rows derived from (key, version); readers check every row is whole. Python
    threads overlap inside the engine because every call releases the GIL; rows are large so
    the copies (GIL-free) dominate each call."""

    VS = 65536
    KEYS = 3

    def rows_for(self, keys, version):
        r = np.empty((len(keys), self.VS // 8), dtype=np.uint64)
        for i, k in enumerate(keys):
            r[i] = int(k) * 1_000_003 + version
        return r

    def check(self, index_type, tmp):
        kv = recbench.KVEngine(index_type=index_type, value_size=self.VS, capacity=100,
                               path=tmp if index_type == "SSD_EXTENDIBLE_HASH" else None)
        keys = np.arange(self.KEYS, dtype=np.uint64)
        kv.batch_put(keys, self.rows_for(keys, 0))
        stop = threading.Event()
        bad, reads = [], [0]

        versions = [self.rows_for(keys, v) for v in range(1, 5)]  # built before: writers stay in C

        def writer(wid):
            for v in range(600):
                kv.batch_put(keys, versions[(v + wid) % len(versions)])

        def reader():
            out = np.empty((self.KEYS, self.VS // 8), dtype=np.uint64)
            while not stop.is_set():
                _, found = kv.batch_get_flat(keys, out=out)
                whole = (out == out[:, :1]).all(axis=1)
                if not (found.all() and whole.all()):
                    bad.append((found.tolist(), whole.tolist()))
                one = kv.get(1)
                row = np.frombuffer(one, np.uint64)
                if not (row == row[0]).all():
                    bad.append("torn get")
                reads[0] += 1

        threads = [threading.Thread(target=reader) for _ in range(2)]
        threads += [threading.Thread(target=writer, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads[2:]:
            t.join()
        stop.set()
        for t in threads[:2]:
            t.join()
        kv.close()
        self.assertEqual(bad, [])
        self.assertGreater(reads[0], 0)

    def test_every_index(self):
        for it in INDEXES:
            with self.subTest(index_type=it):
                tmp = tempfile.mkdtemp(prefix="rs_kv_torn_")
                try:
                    self.check(it, tmp)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)


def _mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def _hugetlb_free() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("HugePages_Free:"):
                return int(line.split()[1])
    return 0


class MemoryAndPagesTest(unittest.TestCase):
    def test_memory_reports_index_and_slab_per_key(self):
        with recbench.KVEngine(index_type="DRAM_PET_HASH", value_size=512, capacity=100000) as kv:
            m = kv.memory()
            # 100000 / 0.7875 / 4 -> 32768 lines of 64 bytes and 2 bytes of writer state each,
            # reserved at open
            self.assertEqual(m["index_bytes"], 32768 * 66)
            self.assertEqual(m["slab_bytes"], 0)
            self.assertEqual(m["slab_bytes_at_capacity"], 100000 * 512)
            self.assertAlmostEqual(m["bytes_per_key"], 512 + 32768 * 66 / 100000)
            self.assertAlmostEqual(m["overhead_per_key"], 32768 * 66 / 100000)
            kv.batch_put(np.arange(10, dtype=np.uint64), bytes(5120))
            self.assertEqual(kv.memory()["slab_bytes"], 10 * 512)
        with recbench.KVEngine(index_type="DRAM_EXTENDIBLE_HASH", value_size=4, capacity=1000) as kv:
            m = kv.memory()
            self.assertEqual(m["row_stride"], 16)  # rows are at least 16 bytes apart
            self.assertGreater(m["index_bytes"], 0)

    def test_huge_page_modes(self):
        # every DRAM index honours the mode (extendible hash used to advise THP whatever it was)
        for index in ("DRAM_PET_HASH", "DRAM_EXTENDIBLE_HASH"):
            for mode, pages in (("off", "4k"), ("thp", "thp")):
                with self.subTest(index=index, mode=mode), recbench.KVEngine(
                        index_type=index, value_size=64, capacity=100000, huge_pages=mode) as kv:
                    kv.batch_put(np.arange(100000, dtype=np.uint64), bytes(64 * 100000))
                    m = kv.memory()  # after the splits: every bucket slab on the asked pages
                    self.assertEqual((m["index_pages"], m["slab_pages"]), (pages, pages))
                    self.assertEqual(kv.count(), 100000)
        with self.assertRaises(ValueError) as cm:
            recbench.KVEngine(value_size=64, capacity=10, huge_pages="big")
        self.assertIn("auto, explicit, thp or off", str(cm.exception))
        if _hugetlb_free() >= 4:
            for index in ("DRAM_PET_HASH", "DRAM_EXTENDIBLE_HASH"):
                with recbench.KVEngine(index_type=index, value_size=64, capacity=20000,
                                       huge_pages="explicit") as kv:
                    m = kv.memory()
                    self.assertEqual((m["index_pages"], m["slab_pages"]), ("hugetlb", "hugetlb"))
                    keys = np.arange(20000, dtype=np.uint64)
                    kv.batch_put(keys, np.repeat(keys.astype(np.float32), 16))
                    out, found = kv.batch_get_flat(keys)
                    self.assertTrue(found.all())
                    self.assertEqual(np.frombuffer(out[19999].tobytes(), np.float32)[0], 19999)
        else:
            with self.assertRaises(errors.OutOfMemory) as cm:
                recbench.KVEngine(value_size=64, capacity=20000, huge_pages="explicit")
            self.assertIn("nr_hugepages", str(cm.exception))


class BigTableTest(unittest.TestCase):
    """A PET shard beyond 2^27 keys (the old 27-bit record id limit): row ids above 2^27 store and
    read back. 4-byte values (16-byte slab rows) keep it near 6 GiB: 4.1 GiB of index lines and
    their writer state, 2 GiB slab."""

    N = (1 << 27) + (1 << 16)

    def test_pet_beyond_2_pow_27_keys(self):
        need = (1 << 26) * 66 + self.N * 16 + (1 << 30)
        if _mem_available() < need:
            self.skipTest(f"needs {need >> 30} GiB of available memory, "
                          f"{_mem_available() >> 30} GiB here")
        n = self.N
        with recbench.KVEngine(index_type="DRAM_PET_HASH", value_size=4, capacity=n) as kv:
            step = 1 << 22
            for lo in range(0, n, step):
                k = np.arange(lo, min(n, lo + step), dtype=np.uint64)
                kv.batch_put(k, (k * 7).astype(np.uint32))  # key i gets row id i + 1
            self.assertEqual(kv.count(), n)
            m = kv.memory()
            self.assertEqual(m["slab_bytes"], n * 16)
            # keys whose row ids are beyond 2^27, around it, and the first ones; one absent key
            probe = np.array([0, 1, (1 << 27) - 1, 1 << 27, (1 << 27) + 1, n - 1, n], np.uint64)
            out, found = kv.batch_get_flat(probe)
            self.assertEqual(found.tolist(), [True] * 6 + [False])
            got = np.frombuffer(out[:6].tobytes(), np.uint32)
            self.assertEqual(got.tolist(), (probe[:6] * 7).astype(np.uint32).tolist())
            self.assertEqual(kv.get(int(n - 2)), np.uint32((n - 2) * 7).tobytes())
            with self.assertRaises(errors.CapacityError):
                kv.put(n + 10, bytes(4))


if __name__ == "__main__":
    unittest.main()
