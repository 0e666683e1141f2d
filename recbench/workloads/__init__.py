"""YCSB's standard workload property files workloada..workloadf, shipped with recbench."""

from pathlib import Path

NAMES = tuple(f"workload{c}" for c in "abcdef")
DIR = Path(__file__).resolve().parent


def resolve(name_or_path: str) -> str:
    """A path as given if it exists, else the shipped workload of that name ("workloada" or "a").

    Raises FileNotFoundError naming the input and the shipped names."""
    p = Path(name_or_path)
    if p.exists():
        return str(p)
    short = f"workload{name_or_path}" if name_or_path in tuple("abcdef") else name_or_path
    if short in NAMES:
        return str(DIR / short)
    raise FileNotFoundError(
        f"workload '{name_or_path}': no such file, and not one of the shipped workloads "
        f"({', '.join(NAMES)})")
