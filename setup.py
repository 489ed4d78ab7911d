"""`pip install .` at the repository root: builds the C library and the
Python extension jitgrad._C from source in one step (no prior `make`, no
network: Debian's setuptools and wheel do the work, so use a venv made with
--system-site-packages).  Needs a C11 compiler and OpenBLAS (libopenblas-dev).

The library's sources (src/**/*.c) are compiled into the extension itself
with the flags CMakeLists.txt uses, minus -Werror (a newer compiler's new
warning must not break a user's install).  Developers build with CMake and
python/setup.py instead (scripts/test-python.sh).

There is deliberately no pyproject.toml here: with one, pip would build in an
isolated environment and try to download setuptools.
"""
import os
import shlex
import subprocess
from glob import glob

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

here = os.path.dirname(os.path.abspath(__file__))


def _rel(paths):
    return sorted(os.path.relpath(p, here) for p in paths)


def _openblas_flags():
    """(include dirs, libraries, library dirs) for OpenBLAS: pkg-config when
    it knows openblas, else Debian's paths."""
    try:
        cflags = subprocess.run(["pkg-config", "--cflags", "openblas"], capture_output=True,
                                text=True, check=True).stdout
        libs = subprocess.run(["pkg-config", "--libs", "openblas"], capture_output=True,
                              text=True, check=True).stdout
        inc = [f[2:] for f in shlex.split(cflags) if f.startswith("-I")]
        libdirs = [f[2:] for f in shlex.split(libs) if f.startswith("-L")]
        return inc, libdirs
    except (OSError, subprocess.CalledProcessError):
        inc = [d for d in ("/usr/include/x86_64-linux-gnu/openblas-pthread",
                           "/usr/include/openblas") if os.path.exists(os.path.join(d, "cblas.h"))]
        return inc, []


def embed_text(src, out, name):
    """src's exact text as one C string constant in out (what
    cmake/embed_text.cmake writes: the c backend pastes it into the code it
    generates)."""
    with open(src, encoding="utf-8") as f:
        txt = f.read()
    txt = txt.replace("\\", "\\\\").replace('"', '\\"').replace("\n", '\\n"\n    "')
    body = (f"/* Generated from {src} by setup.py; do not edit. */\n"
            f'static const char {name}[] =\n    "{txt}";\n')
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if not os.path.exists(out) or open(out, encoding="utf-8").read() != body:
        with open(out, "w", encoding="utf-8") as f:
            f.write(body)


class BuildExt(build_ext):
    def build_extensions(self):
        gen = os.path.join(self.build_temp, "gen")
        embed_text(os.path.join(here, "src", "ops", "ew_math.h"),
                   os.path.join(gen, "ew_math_text.h"), "JG_EW_MATH_TEXT")
        for ext in self.extensions:
            ext.include_dirs.append(gen)
        super().build_extensions()


blas_inc, blas_libdirs = _openblas_flags()

ext = Extension(
    "jitgrad._C",
    sources=_rel(glob(os.path.join(here, "src", "**", "*.c"), recursive=True))
    + _rel(glob(os.path.join(here, "python", "csrc", "*.c"))),
    include_dirs=["include", "src", "python/csrc"] + blas_inc,
    define_macros=[("_POSIX_C_SOURCE", "200809L")],
    extra_compile_args=[
        "-std=c11",
        "-O2",
        "-Wall",
        "-Wno-missing-field-initializers",
        "-Wno-cast-function-type",
        "-ffp-contract=off",
        "-fno-math-errno",
        "-fno-strict-aliasing",
        "-ftls-model=initial-exec",
    ],
    libraries=["openblas", "m", "dl", "pthread"],
    library_dirs=blas_libdirs,
    depends=_rel(glob(os.path.join(here, "include", "*.h"))
                 + glob(os.path.join(here, "src", "**", "*.h"), recursive=True)
                 + glob(os.path.join(here, "src", "**", "*.def"), recursive=True)
                 + glob(os.path.join(here, "python", "csrc", "*.h"))),
)

setup(
    name="jitgrad",
    version="0.1.0",
    description="A C11 tensor library with autograd, custom functions and a tracing compiler, "
                "with a torch-like Python API",
    long_description=open(os.path.join(here, "README.md"), encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.9",
    package_dir={"": "python"},
    packages=find_packages("python", include=["jitgrad", "jitgrad.*"]),
    ext_modules=[ext],
    cmdclass={"build_ext": BuildExt},
    extras_require={"numpy": ["numpy"]},
    options={"build": {"build_base": "build/setuptools"}},
    zip_safe=False,
)
