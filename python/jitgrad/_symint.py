"""Sizes of traced tensors: while jitgrad.compile traces a program, x.shape,
x.size() and x.numel() give SymInts.  A SymInt is an int; integer
arithmetic on it gives SymInts again, and every comparison (==, <, ...,
bool(), min(), max()) is reported to the library with both values before
its result is returned, so that a dim only stays dynamic where every
comparison the program made has the same result for every size (see
docs/compiler.md, "Dynamic shapes").  Uses the library cannot follow
(float(), /, len(x)) are reported as such: a dim whose size the program
used that way is traced per size."""
import operator

from . import _C

_EQ, _NE, _LT, _LE, _GT, _GE, _OPAQUE = range(7)


def _v(x):
    return int.__int__(x)


class SymInt(int):
    __slots__ = ()

    def _cmp(self, other, op, fn):
        if isinstance(other, int):
            a, b = _v(self), _v(other)
            _C._sizes_note(op, a, b)
            return fn(a, b)
        if isinstance(other, float):
            _C._sizes_note(_OPAQUE, _v(self), 0)
            return fn(_v(self), other)
        return NotImplemented

    def __eq__(self, o):
        return self._cmp(o, _EQ, operator.eq)

    def __ne__(self, o):
        return self._cmp(o, _NE, operator.ne)

    def __lt__(self, o):
        return self._cmp(o, _LT, operator.lt)

    def __le__(self, o):
        return self._cmp(o, _LE, operator.le)

    def __gt__(self, o):
        return self._cmp(o, _GT, operator.gt)

    def __ge__(self, o):
        return self._cmp(o, _GE, operator.ge)

    __hash__ = int.__hash__

    def __bool__(self):
        _C._sizes_note(_NE, _v(self), 0)
        return _v(self) != 0

    def __float__(self):
        _C._sizes_note(_OPAQUE, _v(self), 0)
        return float(_v(self))

    def __truediv__(self, o):
        _C._sizes_note(_OPAQUE, _v(self), 0)
        return _v(self) / (_v(o) if isinstance(o, int) else o)

    def __rtruediv__(self, o):
        _C._sizes_note(_OPAQUE, _v(self), 0)
        return (_v(o) if isinstance(o, int) else o) / _v(self)

    def __repr__(self):
        return repr(_v(self))

    __str__ = __repr__


def _arith(name):
    fn = getattr(int, name)

    def op(self, *args):
        r = fn(self, *args)
        if type(r) is float:  # (2 ** -s)
            _C._sizes_note(_OPAQUE, _v(self), 0)
        return SymInt(r) if type(r) is int else r

    op.__name__ = name
    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
              "__neg__", "__pos__", "__abs__"):
    setattr(SymInt, _name, _arith(_name))

_C._set_size_class(SymInt)
