"""recbench's Python test suite (src/test/scripts); leak_guard is the no-process-left rule."""
