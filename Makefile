# recbench — the two commands of the README are `make bench` and `make test`; the rest are parts.
PY      := .venv/bin/python
export PYTHONPATH := $(CURDIR)

.PHONY: deps build build-debug build-asan ctest pytest test bench lint clean

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

test: build ctest pytest

bench: build
	@$(PY) tools/benchmarks/bench_kv_indexes.py

lint: deps
	@clang-format --dry-run --Werror $$(git ls-files 'csrc/*.c' 'csrc/*.h') || true
	@$(PY) -m ruff check recbench tools src/test 2>/dev/null || echo "[lint] ruff not installed: pip install ruff"

clean:
	rm -rf build recbench/*.so csrc/proto/gen
