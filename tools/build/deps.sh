#!/usr/bin/env bash
# make deps: install what is missing, quickly when nothing is.
#  1. Debian packages (apt-get, only the missing ones; `apt-get update` only if something is missing)
#  2. .venv with pip, setuptools, wheel
#  3. the package itself (editable, Release build) with its test and analysis extras, re-run only
#     when pyproject.toml or setup.py changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/../.."

DEBS=(build-essential pkg-config python3-dev libibverbs-dev rdma-core libgrpc-dev
      protobuf-c-compiler libprotobuf-c-dev librocksdb-dev libleveldb-dev liblmdb-dev
      libsqlite3-dev libwiredtiger-dev libnuma-dev libsnappy-dev zlib1g-dev openssh-server openssh-client rsync
      redis-server clang clang-format libclang-rt-14-dev iproute2 procps valgrind
      qemu-system-x86 ibverbs-utils ibverbs-providers perftest busybox-static kmod)
# (the lab's guest kernel, linux-image-amd64's image package, is fetched with apt-get download at
#  lab time into ~/.cache/recbench-lab; nothing is installed on the host: docs/lab.md)

missing=()
for p in "${DEBS[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "[deps] installing Debian packages: ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "[deps] creating .venv"
    "$PY" -m venv .venv
fi
stamp=.venv/.recbench-deps-stamp
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ]; then
    echo "[deps] pip-installing recbench (editable, Release) with test and analysis extras"
    .venv/bin/python -m pip install -q --upgrade pip setuptools wheel
    .venv/bin/python -m pip install -q --no-build-isolation -e '.[test,analysis]'
    touch "$stamp"
fi
echo "[deps] ok"
