#!/usr/bin/env python3
"""jitgrad's differential fuzzer (docs/fuzzing.md).

  fuzz.py run [-n N] [--seed S] [--jobs J] [--features a,b | --disable a,b]
              [--modes eager,interp,c,torch] [--out DIR] [--minimize]
  fuzz.py show SEED [feature options]       print the program of SEED
  fuzz.py check SEED|FILE [feature options] run one program, print every mode
  fuzz.py minimize SEED|FILE [-o FILE]      shrink a failing program to a
                                            standalone script
  fuzz.py features                          list the feature switches

Programs run in forked processes (jitgrad and torch are imported once,
before the forks), --batch of them per process; a crash or a hang is
caught per program and reported with its seed, and the programs its batch
had not reached run in a new process.  Every program that fails in a batch
is run again alone, and that run is its result, so a reported failure
never depends on the programs before it (one that fails only after others
is reported as "batch-only")."""
import argparse
import ast
import faulthandler
import json
import os
import re
import select
import signal
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)

import gen  # noqa: E402
import runner  # noqa: E402

ALL_MODES = ("eager", "interp", "c", "torch")


# ------------------------------------------------------------------ features

def parse_features(args):
    feats = list(gen.DEFAULT)
    if args.features:
        feats = [f for f in args.features.split(",") if f]
    if args.disable:
        off = {f for f in args.disable.split(",") if f}
        feats = [f for f in feats if f not in off]
    bad = [f for f in feats + (args.disable or "").split(",") if f and f not in gen.FEATURES]
    if bad:
        sys.exit(f"fuzz: unknown feature(s) {', '.join(bad)}; see `fuzz.py features`")
    return feats


# ------------------------------------------------------------------ one program, forked

def _modules(modes):
    mods = {}
    import jitgrad

    for m in modes:
        if m == "torch":
            try:
                import torch

                mods[m] = torch
            except ImportError:
                pass
        elif m == "c" and not jitgrad.HAS_COMPILER:
            continue
        else:
            mods[m] = jitgrad
    return mods


def evaluate(src, mods, note=lambda m: None):
    """In the current process: {"fails": [[oracle, diff]], "invalid": str}.
    note(mode) is called before each mode runs (a crash names the last)."""
    recs = {}
    for m, T in mods.items():
        note(m)
        recs[m] = runner.run_mode(T, src, m)
    out = {"fails": [], "invalid": None,
           "errored": any("error" in r for r in recs.get("eager", [])) and
           all(any("error" in r for r in rs) for rs in recs.values())}
    for oracle, d in runner.compare(recs):
        if oracle == "eager!=torch" and "no error here, reference" in d:
            # PyTorch rejects the program: a generator limit, not a jitgrad bug
            out["invalid"] = d[:300]
            continue
        out["fails"].append([oracle, d[:300]])
    return out


def _write(fd, data):
    while data:
        data = data[os.write(fd, data):]


class Child:
    """One forked process running a batch of programs one after another.
    It writes "start I", "mode M" and "result JSON" lines; the parent knows
    from them which program a crash or a hang belongs to."""

    def __init__(self, batch, timeout):
        self.batch, self.timeout = batch, timeout
        self.start = self.started = time.time()
        self.deadline = self.start + timeout
        self.cur, self.mode, self.results, self.buf = None, None, {}, b""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: run, write the results, leave without cleanup
            os.close(r)
            if not os.environ.get("JGFUZZ_VERBOSE"):
                faulthandler.disable()  # a crash is the result, not noise on stderr
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
            for i, (_key, src, mods) in enumerate(batch):
                _write(w, f"start {i}\n".encode())
                try:
                    res = evaluate(src, mods, lambda m: _write(w, f"mode {m}\n".encode()))
                except BaseException as e:  # noqa: BLE001
                    res = {"fails": [["harness", repr(e)[:300]]], "invalid": None}
                _write(w, b"result " + json.dumps(res).encode() + b"\n")
            os._exit(0)
        os.close(w)
        self.pid, self.fd = pid, r

    def read(self):
        while True:
            ready, _, _ = select.select([self.fd], [], [], 0)
            if not ready:
                break
            chunk = os.read(self.fd, 65536)
            if not chunk:
                break
            self.buf += chunk
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            text = line.decode(errors="replace")
            if text.startswith("start "):
                self.cur, self.mode = int(text[6:]), None
                self.started = time.time()
                self.deadline = self.started + self.timeout
            elif text.startswith("mode "):
                self.mode = text[5:]
            elif text.startswith("result ") and self.cur is not None:
                try:
                    res = json.loads(text[7:])
                except ValueError:
                    res = {"fails": [["harness", "unreadable result"]], "invalid": None}
                res["secs"] = time.time() - self.started
                self.results[self.cur] = res

    def finish(self, status, hung=False):
        """(done, rest): [(item, result)] in batch order, and the items that
        never started (to run again in another process)."""
        self.read()
        os.close(self.fd)
        where = f" in mode {self.mode}" if self.mode else ""
        done, rest = [], []
        for i, item in enumerate(self.batch):
            if i in self.results:
                done.append((item, self.results[i]))
            elif self.cur is not None and i == self.cur:
                if hung:
                    bad = ["hang", f"over {self.timeout}s{where}"]
                elif os.WIFSIGNALED(status):
                    bad = ["crash", signal.Signals(os.WTERMSIG(status)).name + where]
                else:
                    bad = ["crash", f"exit {os.WEXITSTATUS(status)}{where}, no result"]
                done.append((item, {"fails": [bad], "invalid": None,
                                    "secs": time.time() - self.started}))
            elif self.cur is None and i == 0:
                done.append((item, {"fails": [["crash", "the process died before the program"]],
                                    "invalid": None, "secs": 0.0}))
            else:
                rest.append(item)
        return done, rest


def run_many(items, mods, jobs, timeout, on_result, batch=1):
    """items: iterable of (key, src) or (key, src, mods).  Runs up to `jobs`
    processes at once, each taking up to `batch` programs (a fork costs more
    than a typical program once torch is imported); the programs a crash or
    a hang cut off run again in a new process."""
    items = iter(items)
    pending = []  # programs cut off by a crash in their batch, run first
    running = {}
    done = False

    def take():
        nonlocal done
        out = []
        while len(out) < batch and pending:
            out.append(pending.pop(0))
        while len(out) < batch and not done:
            try:
                item = next(items)
            except StopIteration:
                done = True
                break
            out.append((item[0], item[1], item[2] if len(item) > 2 else mods))
        return out

    def report(c, status, hung=False):
        finished, rest = c.finish(status, hung)
        pending[:0] = rest
        for (key, src, _m), res in finished:
            on_result(key, src, res)

    while True:
        while len(running) < jobs:
            b = take()
            if not b:
                break
            c = Child(b, timeout)
            running[c.pid] = c
        if not running:
            return
        for c in running.values():
            c.read()
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.time()
            for c in list(running.values()):
                if now > c.deadline:
                    os.kill(c.pid, signal.SIGKILL)
                    os.waitpid(c.pid, 0)
                    del running[c.pid]
                    report(c, 0, hung=True)
            time.sleep(0.002)
            continue
        c = running.pop(pid, None)
        if c is not None:
            report(c, status)


# ------------------------------------------------------------------ classes

def klass(oracle, d):
    """A failure's class: the oracle and the kind of difference, without
    call numbers, indices and numbers in messages."""
    d = re.sub(r"call\d+: ", "", d)
    d = re.sub(r"\[\d+\]", "", d)
    d = re.sub(r"0x[0-9a-f]+", "ADDR", d)
    d = re.sub(r"\d+", "N", d)
    return f"{oracle}: {d[:110]}"


# ------------------------------------------------------------------ minimizer

def _candidates(tree):
    """Paths of statements that can be removed, then expression reductions."""
    out = []

    def bodies(node, path):
        for field in ("body", "orelse", "finalbody"):
            seq = getattr(node, field, None)
            if isinstance(seq, list) and seq and isinstance(seq[0], ast.stmt):
                for i, s in enumerate(seq):
                    out.append(("del", path + ((field, i),)))
                    bodies(s, path + ((field, i),))

    bodies(tree, ())
    return out


def _get(tree, path):
    node = tree
    for field, i in path:
        node = getattr(node, field)[i]
    return node


def _transforms(src):
    """Yields smaller variants of src, biggest cuts first."""
    tree = ast.parse(src)
    paths = [p for k, p in _candidates(tree)]
    # statement deletion (deepest last so whole defs go first)
    for p in sorted(paths, key=len):
        t = ast.parse(src)
        field, i = p[-1]
        parent = _get(t, p[:-1])
        seq = getattr(parent, field)
        del seq[i]
        if not seq and field == "body":
            seq.append(ast.Pass())
        yield ast.unparse(t)
    # a parameter of fn dropped, with its argument in every call
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "fn"), None)
    for j in range(len(fn.args.args) if fn else 0):
        t = ast.parse(src)
        for n in t.body:
            if isinstance(n, ast.FunctionDef) and n.name == "fn":
                del n.args.args[j]
            elif isinstance(n, ast.FunctionDef) and n.name.startswith("call"):
                for r in ast.walk(n):
                    if isinstance(r, ast.Return) and isinstance(r.value, ast.List) and \
                            j < len(r.value.elts):
                        del r.value.elts[j]
        yield ast.unparse(t)
    # an alias `a = b` removed, a renamed to b
    for idx, n in enumerate(ast.walk(tree)):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and \
                isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Name):
            t = ast.parse(src)
            tn = [x for x in ast.walk(t)][idx]
            old, new = tn.targets[0].id, tn.value.id
            _replace(t, tn, ast.Pass())
            for x in ast.walk(t):
                if isinstance(x, ast.Name) and x.id == old:
                    x.id = new
            yield ast.unparse(t)
    # expression reductions: a binary op -> one operand; a tuple/list element
    # dropped; a conditional expression -> one branch; calls "double"/"grad"
    # -> "backward"; a method call -> its receiver
    nodes = [n for n in ast.walk(tree)]
    for idx, n in enumerate(nodes):
        subs = []
        if isinstance(n, ast.BinOp):
            subs = [n.left, n.right]
        elif isinstance(n, ast.IfExp):
            subs = [n.body, n.orelse]
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr != "apply" and not (isinstance(n.func.value, ast.Name)
                                                and n.func.value.id in ("T", "ctx")):
            subs = [n.func.value]
        elif isinstance(n, ast.Constant) and n.value in ("double", "grad"):
            subs = [ast.Constant("backward")]
        for sub in subs:
            t = ast.parse(src)
            tn = [x for x in ast.walk(t)][idx]
            if not _replace(t, tn, sub):
                continue
            yield ast.unparse(t)
        if isinstance(n, (ast.Tuple, ast.List)) and len(n.elts) > 1:
            for j in range(len(n.elts)):
                t = ast.parse(src)
                tn = [x for x in ast.walk(t)][idx]
                del tn.elts[j]
                yield ast.unparse(t)


def _replace(tree, target, new):
    import copy

    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, copy.deepcopy(new))
                return True
            if isinstance(value, list):
                for i, v in enumerate(value):
                    if v is target:
                        value[i] = copy.deepcopy(new)
                        return True
    return False


def minimize(src, target, mods, timeout, log=print, budget=600):
    """Shrinks src while its failures still include the class `target`."""

    def still(s):
        res = {}
        run_many([(0, s)], mods, 1, timeout, lambda k, _s, r: res.update(r))
        return any(klass(o, d) == target for o, d in res.get("fails", []))

    t0 = time.time()
    changed = True
    tries = 0
    while changed and time.time() - t0 < budget:
        changed = False
        for cand in _transforms(src):
            if time.time() - t0 > budget:
                break
            if len(cand) >= len(src):
                continue
            try:
                compile(cand, "<cand>", "exec")
            except SyntaxError:
                continue
            tries += 1
            if still(cand):
                src = cand
                changed = True
                log(f"  minimize: {len(src)} chars after {tries} tries")
                break
    return src


def standalone(src, header):
    """A runnable script: the program and runner.py, comparing every mode."""
    with open(os.path.join(here, "runner.py")) as f:
        rsrc = f.read()
    lines = ["#!/usr/bin/env python3", f"# {header}",
             "# Run: JITGRAD_CACHE_DIR=/tmp/jg-cache python3 THIS_FILE", "PROGRAM = r'''",
             src.rstrip(), "'''", "", rsrc, "",
             "if __name__ == '__main__':", "    import sys", "    sys.exit(report(PROGRAM))", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------ commands

def cmd_run(args):
    feats = parse_features(args)
    modes = [m for m in args.modes.split(",") if m]
    mods = _modules(modes)
    missing = [m for m in modes if m not in mods]
    if missing:
        print(f"fuzz: mode(s) {', '.join(missing)} unavailable here (no torch / no C compiler); "
              "skipped", flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    print(f"fuzz: {args.n} programs from seed {args.seed}, {args.jobs} job(s), modes "
          f"{','.join(mods)}; features off: {','.join(f for f in gen.DEFAULT if f not in feats) or '-'}",
          flush=True)
    invalid, crashed = [], []
    classes, stats = {}, {"n": 0, "fail": 0, "invalid": 0, "crash": 0, "errored": 0}
    t0 = time.time()

    no_c = {m: T for m, T in mods.items() if m != "c"}

    def _mods_of(seed):
        return mods if (seed - args.seed) % args.c_every == 0 else no_c

    def items():
        for s in range(args.seed, args.seed + args.n):
            yield s, gen.gen(s, feats), _mods_of(s)

    def on_result(seed, src, res):
        stats["n"] += 1
        if res.get("errored") and not res["fails"]:
            stats["errored"] += 1
        if res.get("invalid") and not res["fails"]:
            stats["invalid"] += 1
            invalid.append(seed)
            if args.verbose:
                print(f"seed {seed}: invalid: {res['invalid']}", flush=True)
        if res["fails"]:
            stats["fail"] += 1
            if any(o in ("crash", "hang") for o, _ in res["fails"]):
                stats["crash"] += 1
                crashed.append((seed, src))
            seen = set()
            for o, d in res["fails"]:
                k = klass(o, d)
                if k in seen:
                    continue
                seen.add(k)
                first = k not in classes
                classes.setdefault(k, []).append(seed)
                if first or args.verbose:
                    print(f"seed {seed}: {o}: {d}", flush=True)
            if args.out:
                with open(os.path.join(args.out, f"seed{seed}.py"), "w") as f:
                    f.write(standalone(src, f"jitgrad fuzz seed {seed}: "
                                       + "; ".join(f"{o}: {d}" for o, d in res["fails"])[:300]))
        if args.progress and stats["n"] % args.progress == 0:
            el = time.time() - t0
            print(f"  {stats['n']} programs, {stats['fail']} failing, {el:.0f}s, "
                  f"{stats['n'] / el:.1f} programs/s", flush=True)

    deferred = []

    def first_pass(seed, src, res):
        # a failure seen in a batch is judged by a run of the program alone
        if args.batch > 1 and res["fails"]:
            deferred.append((seed, src, res))
        else:
            on_result(seed, src, res)

    run_many(items(), mods, args.jobs, args.timeout, first_pass, batch=args.batch)
    if deferred:
        alone = {}
        run_many(((s, src, _mods_of(s)) for s, src, _r in deferred), mods, args.jobs,
                 args.timeout, lambda k, _s, r: alone.update({k: r}))
        for seed, src, res in sorted(deferred, key=lambda d: d[0]):
            r = alone[seed]
            if not r["fails"]:
                # passes alone: state left behind by an earlier program in the
                # same process (a leak of grad mode, a cache, heap damage)
                o, d = res["fails"][0]
                r = dict(r, fails=[["batch-only", f"{o}: {d}"[:300]]])
            on_result(seed, src, r)
    el = time.time() - t0
    if crashed:
        # each program already ran alone in its fork; a second run tells a
        # deterministic crash from one that depends on heap layout or timing
        again = {}
        run_many(((s, src, _mods_of(s)) for s, src in crashed), mods, args.jobs, args.timeout,
                 lambda k, _s, r: again.update({k: r}))
        flaky = [s for s, _ in crashed
                 if not any(o in ("crash", "hang") for o, _ in again[s]["fails"])]
        print(f"fuzz: crashes and hangs rerun: {len(crashed) - len(flaky)} of {len(crashed)} "
              f"again; not on the rerun: seeds {' '.join(map(str, flaky)) or '-'}", flush=True)
    print(f"fuzz: {stats['n']} programs in {el:.1f}s ({stats['n'] / max(el, 1e-9):.1f} programs/s): "
          f"{stats['fail']} failing ({stats['crash']} crashes or hangs), "
          f"{stats['invalid']} rejected by PyTorch (skipped), {stats['errored']} raising an error "
          "in every mode", flush=True)
    if invalid:
        print(f"  rejected by PyTorch: seeds {' '.join(map(str, invalid[:10]))}", flush=True)
    for k, seeds in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(seeds):5d}  {k}   seeds {' '.join(map(str, seeds[:6]))}", flush=True)
    if args.minimize and classes:
        for k, seeds in classes.items():
            seed = seeds[0]
            print(f"minimizing seed {seed} ({k})", flush=True)
            small = minimize(gen.gen(seed, feats), k, _mods_for(k, mods), args.timeout,
                             log=lambda *a: None, budget=args.min_budget)
            path = os.path.join(args.out or ".", f"min-seed{seed}.py")
            with open(path, "w") as f:
                f.write(standalone(small, f"jitgrad fuzz seed {seed}, minimized: {k}"))
            print(f"  -> {path}", flush=True)
    return 1 if stats["fail"] else 0


def _mods_for(k, mods):
    """Only the modes a failure class needs (fewer runs while minimizing)."""
    if k.startswith("interp!="):
        want = ("eager", "interp")
    elif k.startswith("c!="):
        want = ("eager", "c")
    elif k.startswith("eager!=torch"):
        want = ("eager", "torch")
    else:
        # a crash or hang in mode X: the modes up to X (they run in order in
        # one process, and a crash may depend on what ran before)
        m = re.search(r"in mode (\w+)", k)
        names = list(mods)
        want = names[:names.index(m.group(1)) + 1] if m and m.group(1) in names else names
    return {m: T for m, T in mods.items() if m in want}


def _load(what, feats):
    if os.path.exists(what):
        with open(what) as f:
            text = f.read()
        m = re.search(r"PROGRAM = r'''\n(.*?)'''", text, re.S)
        return m.group(1) if m else text
    return gen.gen(int(what), feats)


def cmd_show(args):
    print(_load(args.what, parse_features(args)), end="")


def cmd_check(args):
    src = _load(args.what, parse_features(args))
    return runner.report(src, [m for m in args.modes.split(",") if m])


def cmd_minimize(args):
    feats = parse_features(args)
    src = _load(args.what, feats)
    mods = _modules([m for m in args.modes.split(",") if m])
    res = {}
    run_many([(0, src)], mods, 1, args.timeout, lambda k, s, r: res.update(r))
    if not res.get("fails"):
        print("minimize: the program does not fail")
        return 0
    o, d = res["fails"][0]
    k = klass(o, d)
    if args.klass:
        ks = [klass(o, d) for o, d in res["fails"] if args.klass in klass(o, d)]
        if not ks:
            sys.exit(f"minimize: no failure matching {args.klass!r}")
        k = ks[0]
    print(f"minimize: keeping {k}", flush=True)
    small = minimize(src, k, _mods_for(k, mods), args.timeout, budget=args.min_budget)
    text = standalone(small, f"jitgrad fuzz {args.what}, minimized: {k}")
    if args.o:
        with open(args.o, "w") as f:
            f.write(text)
        print(f"minimize: wrote {args.o}")
    else:
        print(small)
    return 1


def main(argv=None):
    p = argparse.ArgumentParser(prog="fuzz.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    def feat_opts(q):
        q.add_argument("--features", help="comma-separated feature list (default: all)")
        q.add_argument("--disable", help="comma-separated features to switch off")
        q.add_argument("--modes", default=",".join(ALL_MODES))
        q.add_argument("--timeout", type=float, default=60.0, help="seconds per program")

    q = sub.add_parser("run")
    feat_opts(q)
    q.add_argument("-n", type=int, default=100)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--jobs", type=int, default=1)
    q.add_argument("--batch", type=int, default=25,
                   help="programs per forked process (failures are rerun alone)")
    q.add_argument("--c-every", type=int, default=1,
                   help="run the c backend on every K-th program only (it compiles C)")
    q.add_argument("--out", help="write each failing program there as a standalone script")
    q.add_argument("--minimize", action="store_true", help="minimize one program per class")
    q.add_argument("--min-budget", type=float, default=300.0, help="seconds per minimization")
    q.add_argument("--progress", type=int, default=0, help="print a line every N programs")
    q.add_argument("-v", "--verbose", action="store_true")
    q.set_defaults(func=cmd_run)
    for name, f in (("show", cmd_show), ("check", cmd_check), ("minimize", cmd_minimize)):
        q = sub.add_parser(name)
        feat_opts(q)
        q.add_argument("what", help="a seed, or a file (a program or a repro script)")
        if name == "minimize":
            q.add_argument("-o", help="write the standalone script there")
            q.add_argument("--class", dest="klass", help="the failure class to keep (substring)")
            q.add_argument("--min-budget", type=float, default=600.0)
        q.set_defaults(func=f)
    q = sub.add_parser("features")
    q.set_defaults(func=lambda a: print("\n".join(f"{k:20s} {v}" for k, v in gen.FEATURES.items())))
    args = p.parse_args(argv)
    return args.func(args) or 0


if __name__ == "__main__":
    sys.exit(main())
