"""What this recbench was built with: `recbench.build_info()`."""

import importlib


def build_info():
    """Return a dict: version, commit, dirty, build_type (Release/Debug/ASan), compiler, cflags,
    features (optional libraries compiled in), row_kernel ("avx512" or "plain": the build of the
    KV batch-read loops this CPU runs) and modules (extension modules that import)."""
    from recbench import _kv

    info = dict(_kv.build_info())
    modules = []
    for name in ("_kv", "_ps", "_ycsb"):
        try:
            importlib.import_module(f"recbench.{name}")
        except ImportError:
            continue
        modules.append(name)
    info["modules"] = modules
    return info
