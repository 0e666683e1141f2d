"""Build knowledge shared by setup.py and the C unit-test runner (tools/build/ctest.py).

What lives here: the C core source set, optional system libraries and how they are detected,
the compile flags of each build type, protobuf-c code generation, and the static core library
build. setup.py links the three extension modules against that static library; ctest.py builds
the same sources with ASan+UBSan for the C unit tests.
"""

from __future__ import annotations

import concurrent.futures
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "csrc" / "include"
PROTO_DIR = ROOT / "csrc" / "proto"
PROTO_GEN = PROTO_DIR / "gen"
CORE_DIRS = ["common", "kv", "ps", "transport", "transport/rc", "ycsb"]

BUILD_FLAGS = {
    "Release": ["-O3", "-DNDEBUG"],
    "Debug": ["-O0", "-g"],
    "ASan": ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
             "-fno-sanitize-recover=undefined"],
    "TSan": ["-O1", "-g", "-fsanitize=thread"],
}
# -Werror=implicit-function-declaration: a call to an undeclared function compiles as returning
# int (it once turned the latest generator's double zeta into garbage).
COMMON_CFLAGS = ["-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                 "-Wno-format-truncation", "-Wno-missing-field-initializers",
                 "-Werror=implicit-function-declaration", "-pthread"]

# Optional system libraries: feature -> how to find it and which Debian package brings it.
FEATURES = {
    "grpc": {"pkg": "grpc", "header": "grpc/grpc.h", "libs": ["-lgrpc", "-lgpr"], "deb": "libgrpc-dev"},
    "protobuf_c": {"pkg": "libprotobuf-c", "header": "protobuf-c/protobuf-c.h",
                   "libs": ["-lprotobuf-c"], "deb": "libprotobuf-c-dev"},
    "verbs": {"pkg": "libibverbs", "header": "infiniband/verbs.h", "libs": ["-libverbs"],
              "deb": "libibverbs-dev"},
    "numa": {"pkg": None, "header": "numa.h", "libs": ["-lnuma"], "deb": "libnuma-dev"},
    "rocksdb": {"pkg": None, "header": "rocksdb/c.h", "libs": ["-lrocksdb"], "deb": "librocksdb-dev"},
    "leveldb": {"pkg": None, "header": "leveldb/c.h", "libs": ["-lleveldb"], "deb": "libleveldb-dev"},
    "lmdb": {"pkg": None, "header": "lmdb.h", "libs": ["-llmdb"], "deb": "liblmdb-dev"},
    "sqlite": {"pkg": "sqlite3", "header": "sqlite3.h", "libs": ["-lsqlite3"], "deb": "libsqlite3-dev"},
    "wiredtiger": {"pkg": None, "header": "wiredtiger.h", "libs": ["-lwiredtiger"],
                   "deb": "libwiredtiger-dev"},
    # baidu_std compress_type: snappy (1), gzip (2) and zlib (3) messages
    "snappy": {"pkg": None, "header": "snappy-c.h", "libs": ["-lsnappy"], "deb": "libsnappy-dev"},
    "zlib": {"pkg": "zlib", "header": "zlib.h", "libs": ["-lz"], "deb": "zlib1g-dev"},
}

# Extension module -> optional features it links (only those detected are used).
MODULE_FEATURES = {
    "kv": [],
    "ps": ["grpc", "protobuf_c", "verbs", "numa", "snappy", "zlib"],
    "ycsb": ["rocksdb", "leveldb", "lmdb", "sqlite", "wiredtiger"],
}
BASE_LIBS = ["-lm", "-lpthread"]


def cc() -> str:
    return os.environ.get("CC") or sysconfig.get_config_var("CC").split()[0] or "gcc"


def _header_exists(header: str) -> bool:
    for d in ("/usr/include", "/usr/local/include", f"/usr/include/{_multiarch()}"):
        if (Path(d) / header).exists():
            return True
    return False


def _multiarch() -> str:
    return sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"


def _pkg_config(pkg: str, what: str) -> list[str] | None:
    if not shutil.which("pkg-config"):
        return None
    r = subprocess.run(["pkg-config", what, pkg], capture_output=True, text=True, check=False)
    return shlex.split(r.stdout) if r.returncode == 0 else None


def detect_features() -> dict[str, dict]:
    """Detected optional libraries: name -> {"cflags": [...], "libs": [...]}.

    RS_DISABLE_FEATURES=a,b pretends the named libraries are missing (used to test the
    'built without X' paths)."""
    disabled = {x.strip() for x in os.environ.get("RS_DISABLE_FEATURES", "").split(",") if x.strip()}
    found = {}
    for name, spec in FEATURES.items():
        if name in disabled or not _header_exists(spec["header"]):
            continue
        cflags, libs = [], list(spec["libs"])
        if spec["pkg"]:
            pc_libs = _pkg_config(spec["pkg"], "--libs")
            if pc_libs is None:
                continue
            cflags = _pkg_config(spec["pkg"], "--cflags") or []
            libs = pc_libs
        found[name] = {"cflags": cflags, "libs": libs}
    # protobuf-c code needs the generator too
    if "protobuf_c" in found and not shutil.which("protoc-c"):
        del found["protobuf_c"]
    return found


def git_commit() -> tuple[str, bool]:
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                     "--untracked-files=no"], capture_output=True, text=True,
                                    check=False).stdout.strip())
        return commit, dirty
    except (OSError, subprocess.CalledProcessError):
        return "unknown", False


def version() -> str:
    for line in (ROOT / "pyproject.toml").read_text().splitlines():
        if line.startswith("version"):
            return line.split("=", 1)[1].strip().strip('"')
    return "0"


def compile_defines(build_type: str, features: dict) -> list[str]:
    commit, dirty = git_commit()
    flags = " ".join(BUILD_FLAGS[build_type])
    defs = [f"-DRS_HAVE_{name.upper()}=1" for name in sorted(features)]
    defs += [
        f'-DRS_BUILD_TYPE="{build_type}"',
        f'-DRS_BUILD_CC="{compiler_version()}"',
        f'-DRS_BUILD_CFLAGS="{flags}"',
        f'-DRS_BUILD_FEATURES="{",".join(sorted(features))}"',
        f'-DRS_BUILD_COMMIT="{commit}"',
        f"-DRS_BUILD_DIRTY={1 if dirty else 0}",
        f'-DRS_VERSION="{version()}"',
    ]
    return defs


_CC_VERSION = None


def compiler_version() -> str:
    global _CC_VERSION
    if _CC_VERSION is None:
        try:
            out = subprocess.run([cc(), "--version"], capture_output=True, text=True, check=False).stdout
            _CC_VERSION = out.splitlines()[0].replace('"', "'") if out else cc()
        except OSError:
            _CC_VERSION = cc()
    return _CC_VERSION


# Protos the C core links as protobuf-c code (the rest are served or answered by hand-written
# codecs; protoc-c cannot generate C for proto3 `optional`, which RecStore's messages use).
C_CODE_PROTOS = ("baidu_rpc_meta.proto", "ps.proto")
DESCRIPTORS_C = "proto_descriptors.c"


def generate_protos() -> list[Path]:
    """Into csrc/proto/gen (only when out of date): protoc-c C code for C_CODE_PROTOS, and
    proto_descriptors.c, the FileDescriptorSet of every csrc/proto/*.proto as a C array that gRPC
    server reflection answers from (rs_proto_descriptor_set)."""
    protos = sorted(PROTO_DIR.glob("*.proto"))
    if not protos:
        return []
    if not shutil.which("protoc-c"):
        return []
    PROTO_GEN.mkdir(parents=True, exist_ok=True)
    outs = []
    for p in protos:
        if p.name not in C_CODE_PROTOS:
            continue
        c_out = PROTO_GEN / (p.stem + ".pb-c.c")
        if not c_out.exists() or c_out.stat().st_mtime < p.stat().st_mtime:
            subprocess.run(["protoc-c", f"--proto_path={PROTO_DIR}", f"--c_out={PROTO_GEN}", str(p)],
                           check=True)
        outs.append(c_out)
    desc_c = PROTO_GEN / DESCRIPTORS_C
    if not desc_c.exists() or desc_c.stat().st_mtime < max(p.stat().st_mtime for p in protos):
        pb = PROTO_GEN / "descriptors.pb"
        subprocess.run(["protoc-c", f"--proto_path={PROTO_DIR}", f"--descriptor_set_out={pb}"]
                       + [str(p) for p in protos], check=True)
        data = pb.read_bytes()
        rows = ",\n".join(", ".join(str(b) for b in data[i:i + 24]) for i in range(0, len(data), 24))
        desc_c.write_text(
            "/* Generated by tools/build/rsbuild.py from the csrc/proto files: their FileDescriptorSet\n"
            " * (protoc --descriptor_set_out), answered by gRPC server reflection. */\n"
            "#include <stddef.h>\n\n"
            f"const unsigned char rs_proto_descriptor_set[{len(data)}] = {{\n{rows}}};\n"
            f"const size_t rs_proto_descriptor_set_len = {len(data)};\n")
    outs.append(desc_c)
    return outs


def core_sources(features: dict) -> list[Path]:
    srcs = []
    for d in CORE_DIRS:
        srcs += sorted((ROOT / "csrc" / d).glob("*.c"))
    if "protobuf_c" in features:
        srcs += generate_protos()
    return srcs


def _newest_header() -> float:
    newest = 0.0
    for p in list(INCLUDE.rglob("*.h")) + list((ROOT / "csrc").rglob("*.h")):
        newest = max(newest, p.stat().st_mtime)
    return newest


def build_core_lib(build_type: str, features: dict, out_dir: Path, pic: bool = True,
                   jobs: int | None = None, verbose: bool = False) -> Path:
    """Compile the C core into out_dir/librecstore_core.a; recompiles only stale objects."""
    out_dir.mkdir(parents=True, exist_ok=True)
    obj_dir = out_dir / "obj"
    obj_dir.mkdir(exist_ok=True)
    srcs = core_sources(features)
    cflags = COMMON_CFLAGS + BUILD_FLAGS[build_type] + compile_defines(build_type, features)
    if pic:
        cflags.append("-fPIC")
    inc = [f"-I{INCLUDE}", f"-I{ROOT / 'csrc'}", f"-I{PROTO_GEN}"]
    for f in features.values():
        inc += f["cflags"]
    header_time = _newest_header()
    flag_file = obj_dir / "flags.txt"
    flag_text = " ".join(cflags + inc)
    flags_changed = not flag_file.exists() or flag_file.read_text() != flag_text

    def compile_one(src: Path) -> Path:
        rel = src.relative_to(ROOT / "csrc")
        obj = obj_dir / (str(rel).replace("/", "__") + ".o")
        if (not flags_changed and obj.exists() and obj.stat().st_mtime >= src.stat().st_mtime
                and obj.stat().st_mtime >= header_time):
            return obj
        cmd = [cc()] + cflags + inc + ["-c", str(src), "-o", str(obj)]
        if verbose:
            print(" ".join(cmd), file=sys.stderr)
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"compiling {rel} failed:\n{r.stderr}")
        if r.stderr.strip():
            print(r.stderr, file=sys.stderr, end="")
        return obj

    with concurrent.futures.ThreadPoolExecutor(jobs or os.cpu_count() or 2) as ex:
        objs = list(ex.map(compile_one, srcs))
    flag_file.write_text(flag_text)
    lib = out_dir / "librecstore_core.a"
    stale = not lib.exists() or any(o.stat().st_mtime > lib.stat().st_mtime for o in objs)
    # drop objects of sources that were deleted
    known = {o.name for o in objs}
    for o in obj_dir.glob("*.o"):
        if o.name not in known:
            o.unlink()
            stale = True
    if stale:
        if lib.exists():
            lib.unlink()
        subprocess.run(["ar", "rcs", str(lib)] + [str(o) for o in objs], check=True)
    return lib


def module_libs(module: str, features: dict) -> list[str]:
    libs = []
    for name in MODULE_FEATURES.get(module, []):
        if name in features:
            libs += features[name]["libs"]
    return libs + BASE_LIBS


def all_libs(features: dict) -> list[str]:
    libs = []
    for f in features.values():
        libs += f["libs"]
    return libs + BASE_LIBS


def python_modules() -> list[str]:
    """Extension modules whose module file exists: csrc/python/<name>_module.c -> recbench._<name>."""
    return [m for m in MODULE_FEATURES if (ROOT / "csrc" / "python" / f"{m}_module.c").exists()]


def module_sources(module: str) -> list[Path]:
    py = ROOT / "csrc" / "python"
    return sorted(py.glob(f"{module}_*.c")) + sorted(py.glob("py_*.c"))
