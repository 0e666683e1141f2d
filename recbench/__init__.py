"""recbench: a benchmark toolkit and a real embedding parameter server.

The hot parts are C (recbench._kv, recbench._ps, recbench._ycsb); this package orchestrates.
"""

from recbench.build import build_info
from recbench.errors import RecbenchError
from recbench.kv import KVEngine
from recbench.ps_client import PSClient

__version__ = "0.1.0"

__all__ = ["KVEngine", "PSClient", "RecbenchError", "__version__", "build_info"]
