"""Not a library: makes src/test discoverable by `python3 -m unittest` from the repository root."""
