"""The benchmark suite (what `make bench` runs, through bench/run.sh): jitgrad
and PyTorch side by side in one invocation, at 1 thread and at all cores,
then ratio tables (markdown) and a machine-readable results file.

  1. kernels   bench/kernels.py --lib jitgrad|torch (the same script for
               both, as a user would run it), ROUNDS rounds alternating the
               two libraries, median over rounds
  2. fused     (a*b+c).relu().sum() fwd+bwd, 4M f32: PyTorch and jitgrad
               from Python, jitgrad eager/interp/c from C (bench/roofline),
               against the memory bound (bytes / STREAM-triad rate, same run);
               gradients set to None after each step, and (C only, `_acc`)
               accumulated into the existing .grad; `fused_one_program`
               (C): the backward traced into the compiled program with the
               forward, against its one-pass bound (24 B per element)
  3. mlp       784-256-256-10, batch 64, one SGD step: the same, against the
               sgemm bound (the step's matmul FLOPs / cblas_sgemm's rate)
  4. latency   the compiled (c backend) MLP step's first call with an empty
               cache directory, then in a new process with that warm cache
  5. the older workloads: build/bench/eager_ops + bench/torch_eager.py
               (per-op eager overhead; with valgrind, the chain's callgrind
               instruction count per op from build/bench/chain_iters),
               compile_backends, compile_overhead, dynamic_sizes, and build/bench/chains
               when it exists
  6. gpt       examples/gpt/train.py (GPT-2-style, default config): median
               ms per training step for PyTorch and jitgrad eager / interp /
               c (the whole step compiled as one graph), and the C trainer
               (examples/gpt/train.c) eager and c, builtin and custom attention,
               five rounds of every run (100 steps each), the median over rounds,
               against the FLOP bound (6 x params x tokens + attention, at
               the sgemm rate of item 3 measured in the same run); PyTorch
               with OpenBLAS's own kernels and, where jitgrad selected others,
               again with OPENBLAS_CORETYPE set to jitgrad's
  7. gpt_stats bench/gpt_stats.py: the same step on jitgrad at 1 thread,
               tokens/s, peak tensor bytes, graphs traced and calls run
               eagerly over 100 steps, with a fixed and a changing batch size
  8. steps     bench/step_modes.py: a whole training step (forward, backward,
               SGD, zero_grad) of the MLP (784-256-256-10, batch 64) and a
               small transformer block (width 64, sequence 32, batch 16):
               PyTorch eager, jitgrad eager, and compiled as one graph in
               each mode (default, reduce-overhead, max-autotune), median
               us per step (wall, and CPU time); ROUNDS rounds alternating
               the libraries; then the graphs traced over 100 steps whose
               batch size changes (an epoch's partial last batch, random)

Environment: JITGRAD_BUILD_DIR (default ./build), JITGRAD_PYTHON (PyTorch's
interpreter, default /usr/bin/python3), JITGRAD_BENCH_PYTHON (an interpreter
that imports jitgrad, default $JITGRAD_BUILD_DIR/python-venv/bin/python),
BENCH_QUICK=1 (one short round, the slow C workloads skipped: a smoke test,
not a measurement), BENCH_THREADS (default: 1 and the number of cores),
BENCH_SECTIONS (a comma-separated subset of kernels, roofline, latency,
older, gpt, gpt_stats, steps; default all: e.g. BENCH_SECTIONS=steps runs
section 8 alone), BENCH_KEEP_CORETYPE=1 (keep an OPENBLAS_CORETYPE set in
the environment for every run; by default it is dropped, so that OpenBLAS
and jitgrad choose the kernels the tables name).
Output: the tables on stdout, $JITGRAD_BUILD_DIR/bench/results.json (quick
runs: results-quick.json, so a smoke run leaves the last measurement alone;
BENCH_SECTIONS=a,b: results-a-b.json; BENCH_RESULTS overrides the path)."""

import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("JITGRAD_BUILD_DIR", os.path.join(ROOT, "build"))
TORCH_PY = os.environ.get("JITGRAD_PYTHON", "/usr/bin/python3")
JG_PY = os.environ.get("JITGRAD_BENCH_PYTHON", os.path.join(BUILD, "python-venv", "bin", "python"))
QUICK = os.environ.get("BENCH_QUICK", "0") not in ("", "0")
ROUNDS = 1 if QUICK else 5
BIN = os.path.join(BUILD, "bench")
KERNELS_PY = os.path.join(ROOT, "bench", "kernels.py")

SECTIONS = [x for x in os.environ.get("BENCH_SECTIONS", "").split(",") if x]


def want(section):
    return not SECTIONS or section in SECTIONS


LINE = re.compile(r"^(\S+) (\S+)((?: \S+=\S*)+)\s*$")


def parse(text):
    """`<impl> <workload> k=v ...` lines -> list of (impl, workload, {k: v})."""
    rows = []
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        kv = {}
        for tok in m.group(3).split():
            k, _, v = tok.partition("=")
            try:
                kv[k] = float(v)
            except ValueError:
                kv[k] = v
        rows.append((m.group(1), m.group(2), kv))
    return rows


# OpenBLAS's kernels are the suite's to choose (blas_cores, section 6): an
# OPENBLAS_CORETYPE in the environment (some machines set one for every
# process) would give every run those kernels, while the tables name the
# cores chosen without it.  It is dropped from the runs' environment, and the
# report says so; BENCH_KEEP_CORETYPE=1 keeps it for every run (the tables
# then name it).
ENV_CORETYPE = os.environ.get("OPENBLAS_CORETYPE")
KEEP_CORETYPE = os.environ.get("BENCH_KEEP_CORETYPE", "0") not in ("", "0")


def base_env(**extra):
    env = dict(os.environ, **extra)
    if not KEEP_CORETYPE:
        env.pop("OPENBLAS_CORETYPE", None)
    return env


def thread_env(n):
    env = base_env()
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "JITGRAD_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(n)
    env.setdefault("JITGRAD_CACHE_DIR", os.path.join(BUILD, "jg-cache"))
    return env


RAW = {}


def run(tag, cmd, env=None, cwd=None, timeout=900):
    """Runs cmd, echoes and keeps its output (returned even when cmd fails
    part way: the figures it printed before failing still count)."""
    print(f"== {tag}: {' '.join(cmd)}", flush=True)
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"# {tag} failed: {e}", flush=True)
        RAW[tag] = f"failed: {e}"
        return ""
    out = p.stdout
    sys.stdout.write(out)
    if p.returncode != 0:
        print(f"# {tag} failed (rc={p.returncode}): {p.stderr.strip()[-500:]}", flush=True)
    print(f"   ({time.time() - t0:.1f} s)", flush=True)
    RAW[tag] = out + (p.stderr if p.returncode else "")
    return out


def have(py, module):
    if not (os.path.isfile(py) or shutil.which(py)):
        return False
    return subprocess.run([py, "-c", f"import {module}"], capture_output=True).returncode == 0


def blas_cores(libs):
    """The OpenBLAS kernels each library runs on in its own process: jitgrad's
    (jitgrad.backends.openblas.corename()) and PyTorch's (OpenBLAS's own
    choice: its "Core: X" line under OPENBLAS_VERBOSE=2, the first sgemm
    loading it)."""
    cores = {}
    for lib, exe in libs:
        env = base_env(OPENBLAS_VERBOSE="2")
        code = ("import jitgrad; print('Core:', jitgrad.backends.openblas.corename())"
                if lib == "jitgrad" else "import torch; torch.ones(2, 2) @ torch.ones(2, 2)")
        p = subprocess.run([exe, "-c", code], env=env, capture_output=True, text=True)
        found = re.findall(r"^Core: (\S+)", p.stdout + p.stderr, re.M)
        if p.returncode == 0 and found:
            cores[lib] = found[-1]
    return cores


def fmt(v, digits=4):
    if v is None:
        return "-"
    if isinstance(v, Ratio):
        return f"{v:.2f}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


class Ratio(float):
    """A ratio: printed with two decimals in the tables."""


def ratio(a, b):
    return Ratio(a / b) if a and b else None


def table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(fmt(c) if not isinstance(c, str) else c for c in r) + " |")
    return "\n".join(lines)


def main():
    threads = sorted({1, os.cpu_count() or 1})
    if os.environ.get("BENCH_THREADS"):
        threads = [int(t) for t in os.environ["BENCH_THREADS"].split(",")]
    libs = []
    if have(JG_PY, "jitgrad"):
        libs.append(("jitgrad", JG_PY))
    else:
        print(f"# {JG_PY} cannot import jitgrad: run bench/run.sh (it installs it)", flush=True)
    if have(TORCH_PY, "torch"):
        libs.append(("torch", TORCH_PY))
    else:
        print(f"# {TORCH_PY} cannot import torch: the PyTorch columns stay empty", flush=True)
    t_start = time.time()
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": platform.machine(),
        "cpu": next(
            (
                line.split(":", 1)[1].strip()
                for line in open("/proc/cpuinfo")
                if line.startswith("model name")
            ),
            "?",
        ),
        "nproc": os.cpu_count(),
        "loadavg_start": os.getloadavg()[0],
        "threads": threads,
        "rounds": ROUNDS,
        "quick": QUICK,
        "git": subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
    }
    print(f"== machine: {meta['nproc']} cores, {meta['cpu']}, load {meta['loadavg_start']:.2f}")

    # ---- (1)-(3) from Python: kernels, fused, mlp; per (lib, name, threads) a list of medians
    groups = "kernels,fused,mlp"
    py = {}
    thread_note = {}
    for r in range(ROUNDS if want("kernels") else 0):
        order = libs if r % 2 == 0 else libs[::-1]
        for n in threads:
            for lib, exe in order:
                cmd = [exe, KERNELS_PY, "--lib", lib, "--threads", str(n), "--groups", groups]
                if QUICK:
                    cmd.append("--quick")
                out = run(f"kernels.py {lib} threads={n} round {r + 1}", cmd, env=thread_env(n))
                for impl, name, kv in parse(out):
                    if name == "meta":
                        thread_note[(impl, n)] = kv.get("thread_control", "?")
                    elif "us" in kv:
                        py.setdefault((impl, name, n), []).append(kv["us"])
    pym = {k: statistics.median(v) for k, v in py.items()}

    # ---- (2), (3) from C: eager/interp/c and the bounds, per thread count
    croof = {}
    roof = os.path.join(BIN, "roofline")
    for n in threads if want("roofline") else []:
        for what in ("fused", "mlp"):
            if os.access(roof, os.X_OK):
                out = run(f"roofline {what} threads={n}", [roof, what, str(n)], env=thread_env(n))
                for impl, name, kv in parse(out):
                    croof[(impl, name, n)] = kv

    # ---- (4) compile latency: empty cache, then a new process on the warm cache
    latency = {}
    if os.access(roof, os.X_OK) and want("latency"):
        cache = tempfile.mkdtemp(prefix="jg-bench-cache-")
        try:
            for phase in ("empty_cache", "warm_disk_cache"):
                env = thread_env(1)
                env["JITGRAD_CACHE_DIR"] = cache
                out = run(f"latency {phase}", [roof, "latency"], env=env)
                for impl, name, kv in parse(out):
                    if name == "compile_latency_mlp_c":
                        latency[phase] = kv
        finally:
            shutil.rmtree(cache, ignore_errors=True)

    # ---- (5) the older workloads, single threaded
    older, older_text = {}, {}
    env1 = thread_env(1)
    eo = os.path.join(BIN, "eager_ops")
    if os.access(eo, os.X_OK) and want("older"):
        out = run("eager_ops", [eo] + (["chain"] if QUICK else []), env=env1)
        for impl, name, kv in parse(out):
            older[(impl, name)] = kv
    if any(lib == "torch" for lib, _ in libs) and not QUICK and want("older"):
        out = run("torch_eager.py", [TORCH_PY, os.path.join(ROOT, "bench", "torch_eager.py")],
                  env=env1)
        for impl, name, kv in parse(out):
            older[(impl, name)] = kv
    # instruction counts of the eager chain: the stable per-op overhead figure
    ci = os.path.join(BIN, "chain_iters")
    if os.access(ci, os.X_OK) and shutil.which("valgrind") and want("older"):
        counts = {}
        for n in (10, 30):
            cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", ci, str(n)]
            print(f"== callgrind: {' '.join(cmd)}", flush=True)
            p = subprocess.run(cmd, env=env1, capture_output=True, text=True)
            m = re.search(r"Collected : (\d+)", p.stderr)
            if p.returncode == 0 and m:
                counts[n] = int(m.group(1))
        if len(counts) == 2:
            per_iter = (counts[30] - counts[10]) / 20
            older[("jitgrad", "chain100_f32x16_instructions")] = {
                "instr_per_op": per_iter / 100, "instr_per_iter": per_iter}
    for prog in ("chains", "compile_backends", "compile_overhead", "dynamic_sizes"):
        path = os.path.join(BIN, prog)
        if os.access(path, os.X_OK) and not (QUICK and prog != "chains") and want("older"):
            older_text[prog] = run(prog, [path], env=env1, cwd=BUILD)

    # ---- (6) the GPT training step (examples/gpt/train.py)
    # PyTorch runs in its own process with OpenBLAS's own choice of kernels,
    # as a user running it here gets; where jitgrad selected other kernels
    # (docs/threads.md, "OpenBLAS's kernels") PyTorch runs a second time
    # with OPENBLAS_CORETYPE set to them, the same sgemm as jitgrad's.
    gpt = {}
    train_py = os.path.join(ROOT, "examples", "gpt", "train.py")
    # (100 steps: a run's median then outlasts the machine's short bursts of
    # other load, which moved 40-step medians by up to 1 ms)
    gpt_steps = "6" if QUICK else "100"
    cores = blas_cores(libs)
    meta["blas_cores"] = cores
    meta["env_openblas_coretype"] = ENV_CORETYPE
    meta["env_openblas_coretype_kept"] = KEEP_CORETYPE
    gpt_libs = list(libs)
    if cores.get("torch") and cores.get("jitgrad") and cores["torch"] != cores["jitgrad"]:
        gpt_libs += [("torch_core", exe) for lib, exe in libs if lib == "torch"]
    # every configuration once per round, the rounds one after the other (a
    # change in the machine's load then touches every column alike); the
    # figure is the median over rounds of each run's median step
    gpt_rounds = 1 if QUICK else 5
    gpt_c = os.path.join(BUILD, "examples", "gpt_train")
    gpt_runs = []
    for n in threads if want("gpt") else []:
        for lib, exe in gpt_libs:
            torch_lib = lib.startswith("torch")
            for comp in (("none",) if torch_lib else ("none", "interp", "c")):
                for attn in ("builtin", "custom"):
                    if QUICK and attn == "custom":
                        continue
                    cmd = [exe, train_py, "--quiet", "--steps", gpt_steps, "--threads", str(n),
                           "--compile", comp, "--attn", attn] + (["--torch"] if torch_lib
                                                                 else [])
                    env = thread_env(n)
                    if lib == "torch_core":
                        env["OPENBLAS_CORETYPE"] = cores["jitgrad"]
                    gpt_runs.append(((lib, comp, attn, n), cmd, env))
        # the C trainer (examples/gpt/train.c), the same model and steps
        for comp in ("none", "c") if os.path.exists(gpt_c) else ():
            for attn in ("builtin", "custom"):
                if QUICK and attn == "custom":
                    continue
                cmd = [gpt_c, "--quiet", "--steps", gpt_steps, "--threads", str(n), "--compile",
                       comp, "--attn", attn]
                gpt_runs.append((("jitgrad-c", comp, attn, n), cmd, thread_env(n)))
    gpt_samples = {}
    for r in range(gpt_rounds):
        for key, cmd, env in gpt_runs:
            lib, comp, attn, n = key
            out = run(f"gpt {lib} compile={comp} attn={attn} threads={n} round={r}", cmd, env=env)
            m = re.search(r"median ([0-9.]+) ms/step", out)
            if m:
                gpt_samples.setdefault(key, []).append(float(m.group(1)))
    gpt = {key: statistics.median(v) for key, v in gpt_samples.items()}

    # ---- (7) the GPT step from the inside (bench/gpt_stats.py, 1 thread):
    # tokens/s, peak bytes, graphs and eager calls over 100 steps, and with a
    # batch size that changes every 10th step
    gpt_stats = []
    stats_py = os.path.join(ROOT, "bench", "gpt_stats.py")
    for vary in ([], ["--vary"], ["--vary", "--attn", "custom"]) if want("gpt_stats") else ():
        cmd = [JG_PY, stats_py, "--steps", "12" if QUICK else "100"] + vary
        if vary:
            cmd += ["--modes", "interp,c,step-c"]
        out = run(f"gpt_stats {' '.join(vary)}", cmd, env=thread_env(1))
        for line in out.splitlines():
            if line.startswith("gpt_stats "):
                gpt_stats.append(dict(kv.split("=", 1) for kv in line.split()[1:]))

    # ---- (8) whole training steps in each compile mode (bench/step_modes.py)
    steps = {}
    traces = []
    step_py = os.path.join(ROOT, "bench", "step_modes.py")
    for r in range((1 if QUICK else ROUNDS) if want("steps") else 0):
        order = libs if r % 2 == 0 else libs[::-1]
        for n in threads:
            for model in ("mlp", "block"):
                for lib, exe in order:
                    cmd = [exe, step_py, "--lib", lib, "--model", model, "--threads", str(n),
                           "--steps", "10" if QUICK else "40"]
                    out = run(f"steps {lib} {model} threads={n} round {r + 1}", cmd,
                              env=thread_env(n))
                    for impl, name, kv in parse(out):
                        steps.setdefault((impl, name, kv.get("mode"), n), []).append(kv)
    for model in ("mlp", "block") if want("steps") else ():
        if any(lib == "jitgrad" for lib, _ in libs):
            cmd = [JG_PY, step_py, "--lib", "jitgrad", "--model", model, "--vary",
                   "--modes", "default,reduce-overhead"]
            for impl, name, kv in parse(run(f"steps traces {model}", cmd, env=thread_env(1))):
                traces.append(dict(kv, workload=name))

    # ---- tables
    res = {"meta": meta, "kernels": [], "fused": [], "fused_acc": [], "fused_one_program": [], "mlp": [], "latency": latency,
           "eager_ops": [], "thread_control": {f"{k[0]}@{k[1]}": v for k, v in thread_note.items()}}
    names = []
    for (lib, name, n) in py:
        if name not in names:
            names.append(name)
    kernel_names = [k for k in names if not k.startswith(("fused_", "mlp_"))]
    hi = threads[-1]
    out = []
    out.append(f"## Kernels (us, median of {ROUNDS} rounds; jitgrad/torch < 1: jitgrad faster)\n")
    hdr = ["kernel"]
    for n in threads:
        hdr += [f"jitgrad {n}T", f"torch {n}T", f"ratio {n}T"]
    if hi > 1:
        hdr += [f"jitgrad 1->{hi}T", f"torch 1->{hi}T"]
    rows = []
    for k in kernel_names:
        row = [k]
        for n in threads:
            j, t = pym.get(("jitgrad", k, n)), pym.get(("torch", k, n))
            row += [j, t, ratio(j, t)]
            res["kernels"].append({"name": k, "threads": n, "jitgrad_us": j, "torch_us": t,
                                   "ratio": ratio(j, t)})
        if hi > 1:
            row += [ratio(pym.get(("jitgrad", k, 1)), pym.get(("jitgrad", k, hi))),
                    ratio(pym.get(("torch", k, 1)), pym.get(("torch", k, hi)))]
        rows.append(row)
    out.append(table(hdr, rows))
    if hi > 1:
        out.append(f"\n(1->{hi}T: speed-up from 1 to {hi} threads; jitgrad thread control: "
                   + ", ".join(f"{n}T {thread_note.get(('jitgrad', n), '?')}" for n in threads)
                   + ")")

    for key, pyname, cname, bound_note in (
        ("fused", "fused_relu_4M_fwd_bwd", "fused_relu_4M_fwd_bwd",
         "grads set to None after each step; bound = bytes (forward reads a, b, c; backward "
         "reads them again, writes 3 grads) / STREAM triad rate"),
        ("fused_acc", "fused_relu_4M_fwd_bwd_acc", "fused_relu_4M_fwd_bwd_acc",
         "grads accumulated into .grad; bound = bytes (as above, plus reading the 3 .grad) / "
         "STREAM triad rate"),
        ("fused_one_program", "fused_relu_4M_fwd_bwd", "fused_one_program",
         "forward and backward traced into one compiled program, grads set to None after each "
         "step; Python rows: the same step eagerly; bound = bytes (a, b, c read once, 3 grads "
         "written: 24 B per element) / STREAM triad rate"),
        ("mlp", "mlp_784_256_256_10_b64_sgd_step", "mlp_784_256_256_10_b64_sgd_step",
         "bound = FLOPs of the 8 matmuls / cblas_sgemm rate at those shapes"),
    ):
        out.append(f"\n## {cname} (us; {bound_note})\n")
        rows = []
        for n in threads:
            b = croof.get(("bound", cname, n), {})
            bound = b.get("us")
            entry = {"threads": n, "bound_us": bound,
                     "torch_py_us": pym.get(("torch", pyname, n)),
                     "jitgrad_py_us": pym.get(("jitgrad", pyname, n))}
            for be in ("eager", "interp", "c"):
                entry[f"jitgrad_{be}_us"] = croof.get(("jitgrad", f"{cname}_{be}", n), {}).get("us")
            for k in ("bytes", "triad_GBps", "flops", "sgemm_GFLOPs"):
                if k in b:
                    entry[k] = b[k]
            res[key].append(entry)
            for label, field in (("PyTorch (Python)", "torch_py_us"),
                                 ("jitgrad eager (Python)", "jitgrad_py_us"),
                                 ("jitgrad eager (C)", "jitgrad_eager_us"),
                                 ("jitgrad interp (C)", "jitgrad_interp_us"),
                                 ("jitgrad c (C)", "jitgrad_c_us")):
                v = entry[field]
                if v is None and key == "fused_acc" and field.endswith("_py_us"):
                    continue  # the Python workload sets the gradients to None
                rows.append([f"{n}T", label, v, ratio(v, bound),
                             ratio(v, entry["torch_py_us"]) if field != "torch_py_us" else None])
            extra = (f"{b.get('bytes', 0) / 2**20:.0f} MiB at {b.get('triad_GBps', 0):.3g} GB/s"
                     if "bytes" in b else
                     f"{b.get('flops', 0) / 1e6:.1f} MFLOP at {b.get('sgemm_GFLOPs', 0):.3g} GFLOP/s"
                     if "flops" in b else "n/a")
            rows.append([f"{n}T", f"bound ({extra})", bound, Ratio(1) if bound else None, None])
        out.append(table(["threads", "implementation", "us", "/ bound", "/ torch"], rows))

    out.append("\n## Compile latency, c backend, MLP step (first call: trace + codegen + gcc + run)\n")
    rows = []
    for phase, label in (("empty_cache", "empty cache dir"), ("warm_disk_cache", "warm disk cache, new process")):
        kv = latency.get(phase, {})
        rows.append([label, kv.get("first_call_us"), kv.get("hot_call_us")])
    out.append(table(["first call with", "first call us", "later calls us (median)"], rows))

    eo_rows = []
    for (impl, name), kv in older.items():
        if impl != "jitgrad" or not kv:
            continue
        head = next(iter(kv))
        j = kv[head]
        t = older.get(("torch", name), {}).get(head)
        eo_rows.append([name, head, j, t, ratio(j, t)])
        res["eager_ops"].append({"name": name, "unit": head, "jitgrad": j, "torch": t,
                                 "ratio": ratio(j, t)})
    if eo_rows:
        out.append("\n## Eager overhead (build/bench/eager_ops vs bench/torch_eager.py, 1 thread)\n")
        out.append(table(["workload", "unit", "jitgrad", "torch", "jitgrad/torch"], eo_rows))
        c100 = older.get(("jitgrad", "chain100_f32x16"), {}).get("per_op_us")
        if c100:
            out.append(f"\nper-op eager overhead target < 0.5 us: {c100:.3g} us per op "
                       f"({'met' if c100 < 0.5 else 'missed'})")

    if gpt:
        # FLOPs per step: 6 x params x tokens + 12 x layers x width x T per token
        # (PaLM's estimate; the default config of examples/gpt)
        L_, C_, T_, B_, V_ = 4, 128, 64, 4, 128
        n_params = V_ * C_ + T_ * C_ + L_ * (11 * C_ * C_ + 12 * C_) + 2 * C_  # tied head
        flops = B_ * T_ * (6 * n_params + 12 * L_ * C_ * T_)
        out.append(f"\n## GPT training step (examples/gpt/train.py and the C trainer "
                   f"examples/gpt/train.c, default config, {n_params:,} parameters; ms per "
                   f"step: the median over {gpt_rounds} rounds of each run's median of "
                   f"{gpt_steps} steps)\n")
        out.append(f"OpenBLAS kernels: jitgrad {cores.get('jitgrad')}, PyTorch "
                   f"{cores.get('torch')} (its own process); \"/ torch same kernels\": "
                   f"PyTorch with OPENBLAS_CORETYPE={cores.get('jitgrad')}"
                   + (f" (the environment's OPENBLAS_CORETYPE={ENV_CORETYPE} "
                      f"{'kept: BENCH_KEEP_CORETYPE=1' if KEEP_CORETYPE else 'dropped for the runs'})"
                      if ENV_CORETYPE else "") + "\n")
        rows = []
        res["gpt"] = []
        for n in threads:
            # each jitgrad row against PyTorch's with the same attention
            t_ref = {a: gpt.get(("torch", "none", a, n)) for a in ("builtin", "custom")}
            t_same = {a: gpt.get(("torch_core", "none", a, n), t_ref[a])
                      for a in ("builtin", "custom")}
            rate = next((e.get("sgemm_GFLOPs") for e in res["mlp"] if e["threads"] == n), None)
            bound = flops / (rate * 1e9) * 1e3 if rate else None
            for (lib, comp, attn, nn_), ms in gpt.items():
                if nn_ != n:
                    continue
                label = {"torch": "PyTorch eager",
                         "torch_core": f"PyTorch eager, OPENBLAS_CORETYPE={cores.get('jitgrad')}"
                         }.get(lib, f"jitgrad {comp if comp != 'none' else 'eager'}" +
                               (" (C trainer)" if lib == "jitgrad-c" else ""))
                jg = lib.startswith("jitgrad")
                rows.append([f"{n}T", label, attn, ms, ratio(ms, t_ref[attn]) if jg else None,
                             ratio(ms, t_same[attn]) if jg else None, ratio(ms, bound)])
                res["gpt"].append({"threads": n, "lib": lib, "compile": comp, "attn": attn,
                                   "ms": ms, "bound_ms": bound})
            if bound:
                rows.append([f"{n}T", f"bound ({flops / 1e6:.0f} MFLOP at {rate:.3g} GFLOP/s)",
                             "-", bound, None, None, Ratio(1)])
        out.append(table(["threads", "implementation", "attention", "ms/step", "/ torch",
                          "/ torch same kernels", "/ bound"], rows))

    if gpt_stats:
        res["gpt_stats"] = gpt_stats
        out.append(f"\n## GPT step on jitgrad (bench/gpt_stats.py, 1 thread, "
                   f"{gpt_stats[0]['steps']} steps; peak: tensor bytes above the steady "
                   f"state, jitgrad.max_memory_allocated)\n")
        rows = [[{"step-c": "whole step compiled (c)"}.get(e["mode"], e["mode"]) +
                 (", custom attention" if e.get("attn") == "custom" else ""),
                  "every 10th batch smaller" if e["vary"] == "1" else "fixed",
                  float(e["ms"]), float(e["cpu_ms"]) if "cpu_ms" in e else None,
                  float(e["tokens_per_s"]), float(e["peak_MB"]),
                  int(e["graphs"]), int(e["eager_calls"])] for e in gpt_stats]
        out.append(table(["mode", "batch size", "ms/step", "CPU ms/step", "tokens/s", "peak MB",
                          "graphs", "eager calls"], rows))

    if steps:
        res["steps"] = []
        out.append(f"\n## Whole training step per compile mode (bench/step_modes.py; us per step, "
                   f"median of {1 if QUICK else ROUNDS} rounds of per-step medians; CPU: "
                   f"process CPU time; / torch: wall time over PyTorch eager's)\n")
        rows = []
        for n in threads:
            for name in sorted({k[1] for k in steps}):
                t_ref = steps.get(("torch", name, "eager", n))
                t_us = statistics.median(kv["us"] for kv in t_ref) if t_ref else None
                for (impl, nm, mode, nn_), kvs in steps.items():
                    if nm != name or nn_ != n:
                        continue
                    us = statistics.median(kv["us"] for kv in kvs)
                    cpu = statistics.median(kv["cpu_us"] for kv in kvs)
                    label = "PyTorch eager" if impl == "torch" else f"jitgrad {mode}"
                    rows.append([f"{n}T", name, label, us, cpu,
                                 ratio(us, t_us) if impl != "torch" else None])
                    res["steps"].append({"threads": n, "workload": name, "lib": impl,
                                         "mode": mode, "us": us, "cpu_us": cpu})
        out.append(table(["threads", "workload", "implementation", "us", "CPU us", "/ torch"],
                         rows))
    if traces:
        res["step_traces"] = traces
        out.append("\n## Graphs traced by a compiled step over 100 steps with a changing batch "
                   "size (bench/step_modes.py --vary, 1 thread)\n")
        out.append(table(["workload", "mode", "batches", "graphs traced", "eager calls"],
                         [[e["workload"], e["mode"], e["batches"], int(e["traces"]),
                           int(e["eager_calls"])] for e in traces]))

    for prog, text in older_text.items():
        if text.strip():
            out.append(f"\n## {prog} (build/bench/{prog}, 1 thread)\n\n```\n{text.rstrip()}\n```")

    meta["seconds"] = round(time.time() - t_start, 1)
    meta["loadavg_end"] = os.getloadavg()[0]
    res["raw"] = RAW
    text = "\n".join(out)
    print("\n" + text)
    print(f"\n(suite: {meta['seconds']} s, load average {meta['loadavg_start']:.2f} -> "
          f"{meta['loadavg_end']:.2f}, {meta['date']}, git {meta['git']}"
          f"{', QUICK: not a measurement' if QUICK else ''})")
    res["markdown"] = text
    path = os.environ.get(
        "BENCH_RESULTS",
        os.path.join(BIN, "results-quick.json" if QUICK
                     else f"results-{'-'.join(SECTIONS)}.json" if SECTIONS else "results.json"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print(f"== results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
