"""recbench: a benchmark toolkit and a real embedding parameter server.

The hot parts are C (recbench._kv, recbench._ps, recbench._ycsb); this package orchestrates.

KVEngine and PSClient are imported on first use: they need numpy, whose OpenBLAS starts a
thread that spins for about 0.1 CPU-second at import, and the C-driven entry points
(ps_server, ps_bench, kv_bench, launched many at a time on small machines) use neither.
"""

from typing import TYPE_CHECKING, Any

from recbench.build import build_info
from recbench.errors import RecbenchError

if TYPE_CHECKING:
    from recbench.kv import KVEngine
    from recbench.ps_client import PSClient

__version__ = "0.1.0"

__all__ = ["KVEngine", "PSClient", "RecbenchError", "__version__", "build_info"]


def __getattr__(name: str) -> Any:
    if name == "KVEngine":
        from recbench.kv import KVEngine

        return KVEngine
    if name == "PSClient":
        from recbench.ps_client import PSClient

        return PSClient
    raise AttributeError(f"module 'recbench' has no attribute {name!r}")
