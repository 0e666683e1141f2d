"""Every notebook under notebooks/ runs top to bottom on the committed sample data (nbclient) with
no error. The kernel is this interpreter (a kernel spec written to a temp dir), so a fresh clone
needs nothing registered."""

import json
import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL = "recbench-test-python"


class NotebookTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.jupyter_dir = Path(tempfile.mkdtemp(prefix="rb_nb_kernels_"))
        spec_dir = cls.jupyter_dir / "kernels" / KERNEL
        spec_dir.mkdir(parents=True)
        (spec_dir / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "recbench test kernel", "language": "python"}))
        cls.saved_env = {k: os.environ.get(k)
                         for k in ("JUPYTER_PATH", "PYTHONPATH", "MPLBACKEND", "TMPDIR")}
        os.environ["JUPYTER_PATH"] = str(cls.jupyter_dir) + os.pathsep + os.environ.get("JUPYTER_PATH", "")
        os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
        os.environ["MPLBACKEND"] = "Agg"
        # the notebooks save their plots under the temp dir: the kernels get one of ours
        cls.kernel_tmp = cls.jupyter_dir / "tmp"
        cls.kernel_tmp.mkdir()
        os.environ["TMPDIR"] = str(cls.kernel_tmp)

    @classmethod
    def tearDownClass(cls):
        for k, v in cls.saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(cls.jupyter_dir)

    def test_there_are_three_notebooks(self):
        self.assertEqual({p.name for p in NOTEBOOKS},
                         {"ps_summary.ipynb", "kvengine_compare.ipynb", "sweep.ipynb"})

    def test_notebooks_execute(self):
        for path in NOTEBOOKS:
            with self.subTest(notebook=path.name):
                nb = nbformat.read(path, as_version=4)
                client = NotebookClient(nb, kernel_name=KERNEL, timeout=120,
                                        resources={"metadata": {"path": str(path.parent)}})
                client.execute()  # raises CellExecutionError on the first failing cell
                outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
                self.assertFalse([o for o in outputs if o.get("output_type") == "error"])
                images = [o for o in outputs if "image/png" in o.get("data", {})]
                self.assertGreaterEqual(len(images), 1, f"{path.name} shows no plot")
        self.assertTrue(list((self.kernel_tmp / "recbench_notebook_plots").glob("*.png")))


class SampleDataTest(unittest.TestCase):
    """The committed samples have the columns today's tools write (a sample that lags behind its
    producer shows readers columns that no longer exist, or hides new ones)."""

    def header(self, name):
        import csv

        with open(ROOT / "notebooks" / "data" / name, newline="") as f:
            return next(csv.reader(f))

    def test_samples_have_the_producers_columns(self):
        from recbench import analysis, latency_curve
        from recbench.bench import kvengine_compare, thread_scaling
        from recbench.runner import results

        for name, columns in (("ps_baseline_summary.csv", results.SUMMARY_COLUMNS),
                              ("ps_candidate_summary.csv", results.SUMMARY_COLUMNS),
                              ("ps_baseline_summary_totals.csv", results.TOTALS_COLUMNS),
                              ("sweep_batch_keys.csv", analysis.SWEEP_COLUMNS),
                              ("open_loop_curve.csv", latency_curve.CURVE_COLUMNS),
                              ("thread_scaling_rounds.csv", thread_scaling.ROUND_COLUMNS),
                              ("kv_baseline_summary.csv", kvengine_compare.COLUMNS),
                              ("kv_candidate_summary.csv", kvengine_compare.COLUMNS)):
            with self.subTest(sample=name):
                self.assertEqual(self.header(name), columns)


if __name__ == "__main__":
    unittest.main()
