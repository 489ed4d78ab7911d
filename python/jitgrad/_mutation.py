"""Python-side effects of a traced program (docs/compiler.md, "Mutated
containers and objects").

A compiled graph replays tensor work only: a list append, a dict or set
update or an attribute set the function does while it is traced would
happen once, at trace time, and be skipped by every later call.  So while
tracing, compile.c takes a shallow snapshot of every list, dict, set and
object (its __dict__) reachable from the arguments, the bound method's self
and the globals and closure variables the function's code names; when one
changed, it puts the snapshot back (the eager run that follows does the
mutation once, on the caller's objects) and the call is a graph break."""
import types

from . import _C

# Bounds the walk (it runs at trace time only).
_DEPTH = 12
_BUDGET = 20000

_OPAQUE = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
           types.CodeType, type, str, bytes, int, float, complex, bool, type(None), range,
           frozenset, tuple)


def _library_state():
    """Objects whose Python state the compiler itself keeps right: an
    optimizer's state is created by an eager run of the step's first call
    (not cached), then updated in place (docs/compiler.md, "Backward and
    optimizer steps inside a compiled program")."""
    from .optim.optimizer import Optimizer
    return Optimizer


def _roots(fn, args, kwargs):
    """(name, object) for each place the function's objects are reached from."""
    roots = []
    self = getattr(fn, "__self__", None)
    func = getattr(fn, "__func__", fn)
    code = getattr(func, "__code__", None)
    names = ()
    if code is not None:
        names = code.co_varnames[:code.co_argcount]
        if self is not None:
            names = names[1:]
    for i, a in enumerate(args):
        roots.append((names[i] if i < len(names) else f"args[{i}]", a))
    for k, v in (kwargs or {}).items():
        roots.append((str(k), v))
    if self is not None and not isinstance(self, types.ModuleType):
        roots.append(("self", self))
    if code is not None:
        g = getattr(func, "__globals__", {})
        for n in code.co_names:
            if n in g:
                roots.append((f"global '{n}'", g[n]))
        for n, cell in zip(code.co_freevars, getattr(func, "__closure__", None) or ()):
            try:
                roots.append((f"closure variable '{n}'", cell.cell_contents))
            except ValueError:  # an empty cell
                pass
    return roots


def _key(k):
    # (the repr of a tensor key, an optimizer's state, would read its values)
    return repr(k) if isinstance(k, (str, int, float, bool, type(None))) else type(k).__name__


def snapshot(fn, args, kwargs):
    """[(path, object, kind, shallow copy)] of what the function can mutate."""
    snap, seen, budget = [], set(), [_BUDGET]

    def walk(o, path, depth):
        if depth > _DEPTH or budget[0] <= 0 or id(o) in seen or isinstance(o, _C.Tensor):
            return
        if isinstance(o, tuple):  # immutable, but what it holds is reached
            seen.add(id(o))
            for i, v in enumerate(o):
                walk(v, f"{path}[{i}]", depth + 1)
            return
        if isinstance(o, _OPAQUE) or isinstance(o, _library_state()):
            return
        seen.add(id(o))
        budget[0] -= 1
        if isinstance(o, list):
            snap.append((path, o, "list", list(o)))
            for i, v in enumerate(o):
                walk(v, f"{path}[{i}]", depth + 1)
        elif isinstance(o, dict):
            snap.append((path, o, "dict", list(o.items())))
            for k, v in list(o.items()):
                walk(v, f"{path}[{_key(k)}]", depth + 1)
        elif isinstance(o, set):
            snap.append((path, o, "set", set(o)))
        else:
            d = getattr(o, "__dict__", None)
            if type(d) is dict:
                snap.append((path, d, "attrs", list(d.items())))
                for k, v in list(d.items()):
                    walk(v, f"{path}.{k}", depth + 1)

    for name, o in _roots(fn, args, kwargs):
        walk(o, name, 0)
    return snap


def _same(kind, o, before):
    # by identity only: == on tensors (keys of an optimizer's state, set
    # members) would read their values, a graph break of its own
    if kind == "list":
        return len(o) == len(before) and all(a is b for a, b in zip(o, before))
    if kind == "set":
        return len(o) == len(before) and {id(v) for v in o} == {id(v) for v in before}
    items = list(o.items())
    return len(items) == len(before) and all(
        k1 is k2 and v1 is v2 for (k1, v1), (k2, v2) in zip(items, before))


def changed(snap):
    """Why the trace cannot be one graph (the first mutated object), or None."""
    for path, o, kind, before in snap:
        if not _same(kind, o, before):
            what = "attributes of" if kind == "attrs" else f"{type(o).__name__}"
            return (f"the program mutated the {what} {path} while traced (a compiled graph "
                    "would skip that on later calls)")
    return None


def restore(snap):
    """Puts every snapshotted object back as it was (same identities)."""
    for _path, o, kind, before in snap:
        if _same(kind, o, before):
            continue
        if kind == "list":
            o[:] = before
        elif kind == "set":
            o.clear()
            o.update(before)
        else:
            o.clear()
            o.update(before)
