"""Builds the static C core (tools/build/rsbuild.py) and links recbench._kv, recbench._ps and
recbench._ycsb against it. Metadata lives in pyproject.toml. RS_BUILD_TYPE=Release|Debug|ASan
selects the flags (Release by default)."""

import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

sys.path.insert(0, str(Path(__file__).resolve().parent / "tools" / "build"))
import rsbuild  # noqa: E402

BUILD_TYPE = os.environ.get("RS_BUILD_TYPE", "Release")
if BUILD_TYPE not in rsbuild.BUILD_FLAGS:
    sys.exit(f"RS_BUILD_TYPE={BUILD_TYPE!r} is not one of {sorted(rsbuild.BUILD_FLAGS)}")
FEATURES = rsbuild.detect_features()


class BuildCoreThenExt(build_ext):
    def run(self):
        lib = rsbuild.build_core_lib(BUILD_TYPE, FEATURES,
                                     rsbuild.ROOT / "build" / f"core-{BUILD_TYPE.lower()}")
        for ext in self.extensions:
            ext.extra_objects = [str(lib)]
            ext.depends = list(ext.depends or []) + [str(lib)]  # relink when the core changed
        super().run()


def extensions():
    exts = []
    inc = [str(rsbuild.INCLUDE), str(rsbuild.ROOT / "csrc"), str(rsbuild.PROTO_GEN)]
    defines = rsbuild.compile_defines(BUILD_TYPE, FEATURES)
    cflags = rsbuild.COMMON_CFLAGS + rsbuild.BUILD_FLAGS[BUILD_TYPE] + defines
    for f in FEATURES.values():
        cflags += f["cflags"]
    for mod in rsbuild.python_modules():
        ldflags = rsbuild.module_libs(mod, FEATURES)
        if BUILD_TYPE == "ASan":
            ldflags = ["-fsanitize=address,undefined"] + ldflags
        exts.append(Extension(
            f"recbench._{mod}",
            sources=[str(p.relative_to(rsbuild.ROOT)) for p in rsbuild.module_sources(mod)],
            include_dirs=inc,
            extra_compile_args=cflags,
            extra_link_args=ldflags,
        ))
    return exts


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildCoreThenExt})
