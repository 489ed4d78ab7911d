"""Builds jitgrad._C against the static libjitgrad built by CMake.

The library is found in $JITGRAD_BUILD_DIR (default: ../build next to this
directory); its headers in ../include.  The whole archive is linked in, so
the extension needs nothing at run time beyond OpenBLAS and libc.
"""
import os
from glob import glob

from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
build_dir = os.environ.get("JITGRAD_BUILD_DIR") or os.path.join(root, "build")
lib = os.path.join(build_dir, "libjitgrad.a")
include = os.environ.get("JITGRAD_INCLUDE_DIR") or os.path.join(root, "include")
if not os.path.exists(lib):
    raise SystemExit(
        f"jitgrad: {lib} not found; run `make` at the repository root first "
        "or set JITGRAD_BUILD_DIR to the CMake build directory"
    )

sources = sorted(os.path.relpath(p, here) for p in glob(os.path.join(here, "csrc", "*.c")))

setup(
    ext_modules=[
        Extension(
            "jitgrad._C",
            sources=sources,
            include_dirs=[include, os.path.join(here, "csrc")],
            extra_compile_args=[
                "-std=c11",
                "-Wall",
                "-Wextra",
            ]
            # warnings are errors in the project's own builds only (test-python.sh sets it)
            + (["-Werror"] if os.environ.get("JITGRAD_WERROR") == "1" else [])
            + [
                "-Wno-missing-field-initializers",
                "-Wno-cast-function-type",
                "-ffp-contract=off",
                "-fno-strict-aliasing",
            ],
            extra_link_args=[
                "-Wl,--whole-archive",
                lib,
                "-Wl,--no-whole-archive",
                "-lopenblas",
                "-lm",
                "-ldl",
                "-lpthread",
            ],
            depends=[lib] + glob(os.path.join(here, "csrc", "*.h")),
        )
    ],
)
