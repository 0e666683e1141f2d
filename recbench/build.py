"""What this recbench was built with: `recbench.build_info()`."""

from __future__ import annotations

import importlib

from recbench.procfs import read_host


def build_info():
    """Return a dict: version, commit, dirty, build_type (Release/Debug/ASan), compiler, cflags,
    features (optional libraries compiled in), row_kernel ("avx512", "avx2" or "plain": the build of the
    KV batch-read loops this CPU runs), huge_pages (what this machine offers the KV engine's
    regions: the transparent-huge-page mode and the hugetlb pool's free 2 MiB pages) and modules
    (extension modules that import)."""
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
    info["huge_pages"] = huge_pages()
    return info


def huge_pages() -> dict:
    """{'thp': 'madvise'|'always'|'never'|None, 'hugetlb_free_2m': int|None} of this machine."""
    thp = read_host("/sys/kernel/mm/transparent_hugepage/enabled")
    mode = None
    if thp and "[" in thp:
        mode = thp.split("[", 1)[1].split("]", 1)[0]
    free = None
    for line in (read_host("/proc/meminfo") or "").splitlines():
        if line.startswith("HugePages_Free:"):
            free = int(line.split()[1])
    return {"thp": mode, "hugetlb_free_2m": free}
