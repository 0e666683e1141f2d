"""ps_server --huge_pages: the shard's KV engine gets the pages asked for (index and value slab),
and the server reports the mode and the pages it got in Server.stats() and its ready line."""

import subprocess
import sys
import unittest

from ps_testlib import ROOT, NoLeftoverServers, PSServerProcess, python_env

from recbench import _ps, build, errors


def hugetlb_free_pages() -> int:
    return build.huge_pages()["hugetlb_free_2m"] or 0


def thp_enabled() -> bool:
    return build.huge_pages()["thp"] in ("always", "madvise")


class HugePagesTest(NoLeftoverServers, unittest.TestCase):
    def server(self, mode: str):
        return _ps.Server(transport="brpc", host="127.0.0.1", port=0, value_size=64,
                          capacity=100000, huge_pages=mode)

    def test_off_gives_4k_pages(self):
        srv = self.server("off")
        try:
            st = srv.stats()
        finally:
            srv.stop()
        self.assertEqual((st["huge_pages"], st["index_pages"], st["slab_pages"]), ("off", "4k", "4k"))

    def test_thp_is_advised(self):
        if not thp_enabled():
            self.skipTest("transparent huge pages are 'never' on this kernel")
        srv = self.server("thp")
        try:
            st = srv.stats()
        finally:
            srv.stop()
        self.assertEqual((st["huge_pages"], st["index_pages"], st["slab_pages"]), ("thp", "thp", "thp"))

    def test_explicit_uses_hugetlb_or_names_the_pool(self):
        if hugetlb_free_pages() >= 64:
            srv = self.server("explicit")
            try:
                st = srv.stats()
            finally:
                srv.stop()
            self.assertEqual(st["index_pages"], "hugetlb")
        else:
            with self.assertRaises(errors.OutOfMemory) as cm:
                self.server("explicit")
            self.assertIn("nr_hugepages", str(cm.exception))

    def test_unknown_mode_is_refused(self):
        with self.assertRaises(errors.InvalidArgument) as cm:
            self.server("giant")
        self.assertIn("giant", str(cm.exception))

    def test_ps_server_flag_reaches_the_engine_and_the_ready_line(self):
        with PSServerProcess("brpc", extra_args=["--huge_pages", "off"]) as srv:
            ready = srv.ready_lines[0]
        self.assertEqual((ready["huge_pages"], ready["index_pages"], ready["slab_pages"]),
                         ("off", "4k", "4k"))

    def test_ps_server_refuses_a_bad_mode(self):
        r = subprocess.run([sys.executable, "-m", "recbench.ps_server", "--transport", "brpc",
                            "--port", "0", "--huge_pages", "giant"], capture_output=True, text=True,
                           env=python_env(), cwd=str(ROOT), timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--huge_pages", r.stderr)


if __name__ == "__main__":
    unittest.main()
