"""recbench.cpuinfo: the one-line CPU description every benchmark prints, from /proc/cpuinfo and
sysfs texts of the two kinds of machine this project runs on."""

import tempfile
import unittest
from pathlib import Path

from recbench import cpuinfo

ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx2 sha_ni

processor\t: 1
model name\t: something else
"""
XEON = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 167
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu sse2 avx2 avx512f avx512bw
"""


class TestCpuInfo(unittest.TestCase):
    def test_names_family_model_and_avx512(self):
        self.assertEqual(cpuinfo.describe(ZEN3), "AMD EPYC (family 25 model 1, no AVX-512)")
        self.assertEqual(cpuinfo.describe(XEON, 105 << 20),
                         "Intel(R) Xeon(R) Processor (family 6 model 167, AVX-512, L3 105 MiB)")

    def test_binary_size_takes_the_largest_unit_that_divides(self):
        self.assertEqual(cpuinfo.binary_size(4 << 20), "4 MiB")
        self.assertEqual(cpuinfo.binary_size(1536 << 10), "1536 KiB")
        self.assertEqual(cpuinfo.binary_size(2 << 30), "2 GiB")
        self.assertEqual(cpuinfo.binary_size(128), "128 B")

    def test_reads_the_l3_size_from_sysfs(self):
        with tempfile.TemporaryDirectory() as d:
            for idx, level, size in (("index0", "1", "48K"), ("index3", "3", "32768K")):
                p = Path(d, "cpu0", "cache", idx)
                p.mkdir(parents=True)
                (p / "level").write_text(level + "\n")
                (p / "size").write_text(size + "\n")
            info = Path(d, "cpuinfo")
            info.write_text(ZEN3)
            self.assertEqual(cpuinfo.cpu_model(str(info), d),
                             "AMD EPYC (family 25 model 1, no AVX-512, L3 32 MiB)")
            # no cache directory: the line without the L3 size
            self.assertEqual(cpuinfo.cpu_model(str(info), str(Path(d, "none"))),
                             "AMD EPYC (family 25 model 1, no AVX-512)")


if __name__ == "__main__":
    unittest.main()
