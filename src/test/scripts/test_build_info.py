"""The package exposes what it was built with, and errors map to recbench.errors classes."""

import subprocess
import sys
import unittest

import recbench
from recbench import errors


class BuildInfoTest(unittest.TestCase):
    def test_build_info_fields(self):
        info = recbench.build_info()
        for key in ("version", "commit", "dirty", "build_type", "compiler", "cflags", "features",
                    "modules"):
            self.assertIn(key, info)
        self.assertIn(info["build_type"], ("Release", "Debug", "ASan", "TSan"))
        self.assertEqual(info["version"], recbench.__version__)
        self.assertIn("_kv", info["modules"])
        self.assertIsInstance(info["features"], list)
        self.assertIn(info["row_kernel"], ("avx512", "avx2", "plain"))
        self.assertIn("thp", info["huge_pages"])
        self.assertIn("hugetlb_free_2m", info["huge_pages"])

    def test_release_build_uses_O3(self):
        info = recbench.build_info()
        if info["build_type"] == "Release":
            self.assertIn("-O3", info["cflags"])
            self.assertIn("-DNDEBUG", info["cflags"])

    def test_error_classes_derive_from_builtins(self):
        self.assertTrue(issubclass(errors.InvalidArgument, ValueError))
        self.assertTrue(issubclass(errors.Timeout, TimeoutError))
        self.assertTrue(issubclass(errors.CapacityError, errors.RecbenchError))

    def test_entry_points_do_not_import_numpy(self):
        # numpy's OpenBLAS spins a thread at import; the C-driven entry points need none of it
        code = ("import sys, recbench.ps_server, recbench.ps_bench, recbench.kv_bench; "
                "print(sorted(m for m in sys.modules if m.split('.')[0] == 'numpy'))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout
        self.assertEqual(out.strip(), "[]")

    def test_lazy_public_names(self):
        from recbench import KVEngine, PSClient

        self.assertEqual(recbench.PSClient, PSClient)
        self.assertEqual(KVEngine.__name__, "KVEngine")
        with self.assertRaisesRegex(AttributeError, "no_such_name"):
            recbench.no_such_name  # noqa: B018


if __name__ == "__main__":
    unittest.main()
