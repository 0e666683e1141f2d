"""recbench's Python tests: unittest.TestCase classes, run the same by pytest (`make test`) and by
bare `python3 -m unittest` from the repository root.

The tests import their helpers (ps_testlib, loopback_sshd, ...) as top-level modules, so this
directory goes on sys.path. Under unittest, load_tests runs every test_*.py here inside
leak_guard.GuardedSuite: the same no-process-left check pytest's conftest.py applies.
"""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


def load_tests(loader, standard_tests, pattern):
    from src.test import leak_guard

    suite = leak_guard.GuardedSuite()
    suite.addTests(loader.discover(_HERE, pattern=pattern or "test*.py",
                                   top_level_dir=str(Path(_HERE).parents[2])))
    return suite
