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

# jitgrad.distributed: libjitgrad_dist and MPI are linked in when the CMake
# build found MPI (it then writes mpi-flags.txt); otherwise the extension is
# built without them and jitgrad.distributed.is_available() is False.
dist_lib = os.path.join(build_dir, "libjitgrad_dist.a")
mpi_flags = os.path.join(build_dir, "mpi-flags.txt")
dist_macros, dist_incs, dist_link = [], [], []
if os.path.exists(dist_lib) and os.path.exists(mpi_flags):
    with open(mpi_flags) as f:
        kv = dict(line.strip().split("=", 1) for line in f if "=" in line)
    dist_macros = [("JITGRAD_HAVE_MPI", "1")]
    dist_incs = [d for d in kv.get("include", "").split(";") if d and "NOTFOUND" not in d]
    dist_link = [dist_lib] + [x for x in kv.get("libs", "").split(";") if x]

setup(
    ext_modules=[
        Extension(
            "jitgrad._C",
            sources=sources,
            include_dirs=[include, os.path.join(here, "csrc")] + dist_incs,
            define_macros=dist_macros,
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
            extra_link_args=dist_link
            + [
                "-Wl,--whole-archive",
                lib,
                "-Wl,--no-whole-archive",
                "-lopenblas",
                "-lm",
                "-ldl",
                "-lpthread",
            ],
            depends=[lib] + dist_link[:1] + glob(os.path.join(here, "csrc", "*.h")),
        )
    ],
)
