# recbench — the two commands of the README are `make bench` and `make test`; the rest are parts.
PY      := .venv/bin/python
export PYTHONPATH := $(CURDIR)

.PHONY: deps build build-debug build-asan ctest pytest test bench lint format clean fuzz fuzz-smoke tsan lab

deps:
	@tools/build/deps.sh

build: deps
	@RS_BUILD_TYPE=Release $(PY) setup.py -q build_ext --inplace

build-debug: deps
	@RS_BUILD_TYPE=Debug $(PY) setup.py -q build_ext --inplace

build-asan: deps
	@RS_BUILD_TYPE=ASan $(PY) setup.py -q build_ext --inplace

ctest: deps
	@$(PY) tools/build/ctest.py

pytest: build
	@$(PY) -m pytest -q src/test

test: build lint ctest fuzz-smoke pytest

# libFuzzer targets (csrc/fuzz/) built with clang: `make fuzz` fuzzes each for FUZZ_SECONDS;
# fuzz-smoke (part of `make test`) replays the committed corpus and fuzzes each for a few seconds.
FUZZ_SECONDS ?= 60
fuzz: deps
	@$(PY) tools/build/fuzz.py run --seconds $(FUZZ_SECONDS)

fuzz-smoke: deps
	@$(PY) tools/build/fuzz.py smoke --seconds 3

# ThreadSanitizer build of the C core running the concurrent C tests.
tsan: deps
	@$(PY) tools/build/tsan.py

bench: build
	@$(PY) tools/benchmarks/run_benchmark_ps.py

# Three soft-RoCE qemu guests on one switched link (docs/lab.md): verbs tests, perftest, the
# runner's rdma rows (server in one guest, clients in two) and two-host grpc/brpc rows, the seed's
# local smoke, fair matrix and (scaled) GET capacity shapes in a guest; report in
# results/lab_MMDDHHMM/lab.md. `make test` runs the CI part of it (src/test/scripts/test_lab.py).
lab: build
	@$(PY) -m recbench.lab check --guests 3 --rpc --local-smoke --seeds

# C: clang-format (.clang-format) must leave every file unchanged; Python: ruff and mypy (both
# pinned in the test extra, rules and mypy's files in pyproject.toml). `make format` rewrites C.
lint: deps
	@clang-format --dry-run --Werror $$(git ls-files 'csrc/*.c' 'csrc/*.h')
	@$(PY) -m ruff check -q recbench tools src/test
	@$(PY) -m mypy
	@echo "[lint] ok"

format: deps
	@clang-format -i $$(git ls-files 'csrc/*.c' 'csrc/*.h')

clean:
	rm -rf build recbench/*.so csrc/proto/gen
