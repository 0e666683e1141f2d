"""The package exposes what it was built with, and errors map to recbench.errors classes."""

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


if __name__ == "__main__":
    unittest.main()
