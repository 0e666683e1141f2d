"""Every plot function writes a non-empty PNG; plotting nothing is a clear error."""

import shutil
import tempfile
import unittest
from pathlib import Path

from recbench import analysis

DATA = Path(__file__).resolve().parents[3] / "notebooks" / "data"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class PlotTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="rb_plot_"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def assertPng(self, path):
        path = Path(path)
        self.assertTrue(path.exists(), path)
        data = path.read_bytes()
        self.assertTrue(data.startswith(PNG_MAGIC), path)
        self.assertGreater(len(data), 5000, path)  # axes, bars and labels, not an empty canvas

    def test_ps_plots(self):
        df = analysis.load_ps_summary(DATA / "ps_baseline_summary.csv")
        self.assertPng(analysis.plot_ps_throughput(df, self.tmp / "sub" / "tp.png"))
        self.assertPng(analysis.plot_ps_latency(df, self.tmp / "lat.png"))
        self.assertPng(analysis.plot_ps_throughput(df, self.tmp / "tp_load.png", phase="load"))

    def test_kv_plot(self):
        df = analysis.load_kv_summary(DATA / "kv_baseline_summary.csv")
        self.assertPng(analysis.plot_kv_engines(df, self.tmp / "kv.png"))

    def test_sweep_and_eventual_plots(self):
        sweep = analysis.load_sweep(DATA / "sweep_batch_keys.csv")
        for p in analysis.plot_sweep(sweep, self.tmp / "r.png", self.tmp / "c.png"):
            self.assertPng(p)
        dats = {m: analysis.load_eventual_dat(DATA / f"eventual_{m}.dat") for m in ("block", "spin")}
        for p in analysis.plot_eventual(dats, self.tmp / "er.png", self.tmp / "ec.png"):
            self.assertPng(p)

    def test_nothing_to_plot(self):
        df = analysis.load_ps_summary(DATA / "ps_baseline_summary.csv")
        only_skipped = df[df["status"] == "skipped"].copy()
        only_skipped.attrs.update(df.attrs)
        with self.assertRaisesRegex(ValueError, "nothing to plot"):
            analysis.plot_ps_throughput(only_skipped, self.tmp / "x.png")
        self.assertFalse((self.tmp / "x.png").exists())
        with self.assertRaisesRegex(ValueError, "nothing to plot"):
            analysis.plot_eventual({}, self.tmp / "a.png", self.tmp / "b.png")


if __name__ == "__main__":
    unittest.main()
