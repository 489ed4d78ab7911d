"""Shape, indexing and creation functions with PyTorch's signatures: cat,
stack, split, chunk, narrow, tril, triu, index_select, eye, linspace,
randint, randperm, multinomial, Tensor.new_* and Tensor.type, and advanced
indexing (x[idx], x[mask], x[:, [0, 2]], and writes into them).

Every computation is a library call (jitgrad._C); this module only maps
arguments.  Advanced indexing is built from two of them: ``x._index(dim,
idx)`` (x along one dim at an int64 tensor of any shape) and
``x._index_put_(dim, idx, values)``; several index tensors are combined into
one over the flattened dims they index.
"""
import builtins as _b

from . import _C

_Tensor = _C.Tensor


def _check_device(device):
    if device is not None:
        from . import device as _device

        _device(device)


def _created(t, requires_grad):
    if requires_grad:
        t.requires_grad_(True)
    return t


def _no_out(fn, out):
    if out is not None:
        raise TypeError(f"{fn}(): jitgrad does not support out=")


def _size_arg(size, fn):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    return tuple(_b.int(s) for s in size)


# ---- joining and splitting ----


def cat(tensors, dim=0, *, out=None):
    """Joins tensors (same number of dims, equal sizes but in dim) along
    dim; dtypes promote. Differentiable in each."""
    _no_out("cat", out)
    return _C._cat(tensors, dim)


concat = cat
concatenate = cat


def stack(tensors, dim=0, *, out=None):
    """Joins equal-shaped tensors along a new dim."""
    _no_out("stack", out)
    return _C._stack(tensors, dim)


def hstack(tensors):
    """cat along dim 1 (dim 0 for 1-D tensors)."""
    return cat(tensors, 0 if tensors and tensors[0].dim() == 1 else 1)


def vstack(tensors):
    """cat along dim 0, 1-D tensors seen as rows."""
    return cat([t.reshape(1, -1) if t.dim() < 2 else t for t in tensors], 0)


def split(tensor, split_size_or_sections, dim=0):
    """Views of consecutive pieces along dim: of split_size each (the last
    may be smaller), or of the listed sizes."""
    d = dim + tensor.dim() if dim < 0 else dim
    if tensor.dim() == 0 or not 0 <= d < tensor.dim():
        n = _b.max(tensor.dim(), 1)
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    size = tensor.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [_b.int(s) for s in split_size_or_sections]
        if _b.sum(sizes) != size or _b.any(s < 0 for s in sizes):
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's "
                f"size at dimension {d}), but got split_sizes={sizes}")
    else:
        step = _b.int(split_size_or_sections)
        if step < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got split_size="
                               f"{step}")
        if step == 0:
            if size != 0:
                raise RuntimeError("split_size can only be 0 if dimension size is 0, but got "
                                   f"dimension size of {size}")
            return _C._split(tensor, d, 0)
        return _C._split(tensor, d, step)  # views named SplitBackward0, as in PyTorch
    return _C._split_with_sizes(tensor, d, sizes)


def chunk(input, chunks, dim=0):
    """split into `chunks` pieces of ceil(size / chunks) (fewer when the
    size runs out first)."""
    chunks = _b.int(chunks)
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = dim + input.dim() if dim < 0 else dim
    if input.dim() == 0 or not 0 <= d < input.dim():
        n = _b.max(input.dim(), 1)
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    size = input.shape[d]
    step = (size + chunks - 1) // chunks
    if step == 0:  # an empty dim: `chunks` empty pieces, as PyTorch
        return tuple(input.narrow(d, 0, 0) for _ in range(chunks))
    return split(input, step, d)


def unbind(input, dim=0):
    """The views input.select(dim, i) for every i, as a tuple."""
    d = dim + input.dim() if dim < 0 else dim
    if input.dim() == 0 or not 0 <= d < input.dim():
        n = _b.max(input.dim(), 1)
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return _C._unbind(input, d)


def narrow(input, dim, start, length):
    """The view input[start:start+length] along dim."""
    return input.narrow(dim, start, length)


def tril(input, diagonal=0, *, out=None):
    """The lower triangle of the last two dims (below and on `diagonal`),
    the rest zero."""
    _no_out("tril", out)
    return input.tril(diagonal)


def triu(input, diagonal=0, *, out=None):
    """The upper triangle of the last two dims (on and above `diagonal`),
    the rest zero."""
    _no_out("triu", out)
    return input.triu(diagonal)


def index_select(input, dim, index, *, out=None):
    """input along dim at the entries of a 1-D int64 index."""
    _no_out("index_select", out)
    return input.index_select(dim, index)


# ---- creation ----


def eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, requires_grad=False,
        pin_memory=False):
    """An n x m (m defaults to n) tensor with ones on the diagonal."""
    _no_out("eye", out)
    _check_device(device)
    return _created(_C._eye(_b.int(n), _b.int(n if m is None else m), dtype), requires_grad)


def linspace(start, end, steps, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False):
    """`steps` evenly spaced values from start to end inclusive (the values
    PyTorch 1.13 computes)."""
    _no_out("linspace", out)
    _check_device(device)
    if isinstance(start, _Tensor):
        start = start.item()
    if isinstance(end, _Tensor):
        end = end.item()
    if not isinstance(steps, _b.int) or isinstance(steps, _b.bool):
        raise TypeError(f"linspace(): argument 'steps' (position 3) must be int, not "
                        f"{type(steps).__name__}")
    return _created(_C._linspace(_b.float(start), _b.float(end), steps, dtype), requires_grad)


def randint(*args, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
            requires_grad=False, pin_memory=False):
    """randint(high, size) or randint(low, high, size): integers uniform in
    [low, high) from jitgrad's generator (manual_seed), not PyTorch's."""
    _no_out("randint", out)
    _check_device(device)
    args = list(args)
    if size is None and args and isinstance(args[-1], (tuple, list)):
        size = args.pop()
    if size is None or len(args) not in (1, 2):
        raise TypeError("randint() expects (high, size) or (low, high, size)")
    low, high = (0, args[0]) if len(args) == 1 else args
    from ._generator import _drawing

    with _drawing(generator, "randint"):
        t = _C._randint(_b.int(low), _b.int(high), tuple(size), dtype)
    return _created(t, requires_grad)


def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None,
             requires_grad=False, pin_memory=False):
    """A random permutation of 0..n-1 from jitgrad's generator."""
    _no_out("randperm", out)
    _check_device(device)
    from ._generator import _drawing

    with _drawing(generator, "randperm"):
        t = _C._randperm(_b.int(n), dtype)
    return _created(t, requires_grad)


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """num_samples category indices per row of the weights `input`, drawn
    from jitgrad's generator."""
    _no_out("multinomial", out)
    return input.multinomial(num_samples, replacement, generator=generator)


# ---- Tensor methods ----


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
              layout=None, pin_memory=False):
    from . import full

    _check_device(device)
    size = _size_arg((size,), "new_full")
    return full(size, fill_value, dtype=self.dtype if dtype is None else dtype,
                requires_grad=requires_grad)


def _new_zeros(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
               pin_memory=False):
    return _new_full(self, _size_arg(size, "new_zeros"), 0, dtype=dtype, device=device,
                     requires_grad=requires_grad)


def _new_ones(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
              pin_memory=False):
    return _new_full(self, _size_arg(size, "new_ones"), 1, dtype=dtype, device=device,
                     requires_grad=requires_grad)


def _new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    from . import tensor

    _check_device(device)
    return tensor(data, dtype=self.dtype if dtype is None else dtype,
                  requires_grad=requires_grad)


_TYPE_NAMES = {
    "torch.FloatTensor": "float32",
    "torch.DoubleTensor": "float64",
    "torch.LongTensor": "int64",
    "torch.IntTensor": "int32",
    "torch.BoolTensor": "bool",
}
_NAME_OF = {v: k for k, v in _TYPE_NAMES.items()}


def _type(self, dtype=None, non_blocking=False, **kwargs):
    """type(): PyTorch's name of the tensor's type ('torch.FloatTensor');
    type(dtype or that name): the tensor converted (itself when it already
    has that dtype)."""
    import jitgrad

    if dtype is None:
        return _NAME_OF[str(self.dtype).split(".")[-1]]
    if isinstance(dtype, str):
        name = dtype if dtype.startswith("torch.") else "torch." + dtype
        if name not in _TYPE_NAMES:
            raise ValueError(f"invalid type: '{dtype}'")
        dtype = getattr(jitgrad, _TYPE_NAMES[name])
    if dtype == self.dtype:
        return self
    return self.to(dtype)


def nonzero(input, *, as_tuple=False, out=None):
    """The indices of input's nonzero elements: int64 [count, ndim], or with
    as_tuple one 1-D tensor per dim."""
    _no_out("nonzero", out)
    nz = input._nonzero()
    if not as_tuple:
        return nz
    if input.dim() == 0:
        return (nz.reshape(-1),)
    return tuple(nz[:, j] for j in range(input.dim()))


def _split(self, split_size, dim=0):
    return split(self, split_size, dim)


def _chunk(self, chunks, dim=0):
    return chunk(self, chunks, dim)


_Tensor.nonzero = lambda self, *, as_tuple=False: nonzero(self, as_tuple=as_tuple)
_Tensor.split = _split
_Tensor.unbind = unbind
_Tensor.chunk = _chunk
_Tensor.new_full = _new_full
_Tensor.new_zeros = _new_zeros
_Tensor.new_ones = _new_ones
_Tensor.new_empty = _new_zeros
_Tensor.new_tensor = _new_tensor
_Tensor.type = _type


# ---- advanced indexing ----


def _is_array(item):
    return hasattr(item, "__array_interface__") and getattr(item, "ndim", 0) > 0


def _is_adv(item):
    return isinstance(item, (_Tensor, list, tuple)) or _is_array(item)


def _as_index(item):
    """A list / tuple / NumPy array / tensor index as an int64 or bool tensor."""
    if _is_array(item):
        item = _C.tensor(item)
        if item.dtype == _C.int32:
            item = item.long()
    if isinstance(item, _Tensor):
        if item.dtype not in (_C.int64, _C.bool):
            raise IndexError("tensors used as indices must be long, byte or bool tensors")
        return item
    if isinstance(item, (list, tuple)):
        if len(item) == 0:
            return _C.tensor([], dtype=_C.int64)
        t = _C.tensor(item)
        if t.dtype not in (_C.int64, _C.bool):
            raise IndexError("tensors used as indices must be long, byte or bool tensors")
        return t
    raise IndexError(f"jitgrad: unsupported index of type {type(item).__name__}")


def _mask_indices(mask, shape, at):
    """A bool mask over dims at.. of a tensor of `shape`: one int64 tensor
    per dim it covers (the mask's true positions, row-major)."""
    k = mask.dim()
    for j in range(k):
        if at + j >= len(shape) or mask.shape[j] != shape[at + j]:
            raise IndexError(
                f"The shape of the mask {list(mask.shape)} at index {j} does not match the "
                f"shape of the indexed tensor {list(shape)} at index {at + j}")
    nz = mask._nonzero()
    return [nz[:, j] for j in range(k)]


def _as_tuple(key):
    """PyTorch's (and old NumPy's) reading of a key: a short list holding
    sequences, tensors, slices, None or ... is a tuple of indices."""
    if isinstance(key, tuple):
        return key
    if isinstance(key, list) and len(key) < 32 and _b.any(
            _is_adv(k) or isinstance(k, slice) or k is None or k is Ellipsis
            for k in key):
        return tuple(key)
    return (key,)


def _plan(x, key):
    """Splits key into the basic part (applied as a view) and the index
    tensors: returns (basic_key, [(dim in the view, int64 tensor), ...])."""
    items = _as_tuple(key)
    adv = [_is_adv(it) for it in items]
    if not _b.any(adv):
        return items, []
    items = [_as_index(it) if a else it for it, a in zip(items, adv)]
    # (integers select first, as in PyTorch; unlike NumPy they do not take
    # part in placing the index tensors' dims)
    consumed = _b.sum(it.dim() if isinstance(it, _Tensor) and it.dtype == _C.bool
                      else 0 if it is None or it is Ellipsis else 1 for it in items)
    if consumed > x.dim():
        raise IndexError(f"too many indices for tensor of dimension {x.dim()}")
    basic, tensors, vd = [], [], 0
    for it in items:
        if it is Ellipsis:
            basic.append(it)
            vd += x.dim() - consumed
        elif it is None or isinstance(it, slice):
            basic.append(it)
            vd += 1
        elif not isinstance(it, _Tensor):  # an integer: selects, the dim goes
            basic.append(it)
        elif it.dtype == _C.bool:
            basic.extend([slice(None)] * it.dim())
            tensors.append((vd, it, None))
            vd += it.dim()
        else:
            basic.append(slice(None))
            tensors.append((vd, it, None))
            vd += 1
    return tuple(basic), tensors


def _checked(t, size, j):
    """t's entries in [-size, size) made non-negative (an IndexError naming
    dimension j otherwise): a lookup in arange(size) seen as dim j."""
    table = _C.arange(size).reshape(*([1] * j + [size]))
    return table._index(j, t).reshape(*t.shape)


def _prepare(x, key):
    """The view to index, the dim its (single, combined) index applies at,
    the int64 index tensor and whether the view is x itself."""
    basic, tensors = _plan(x, key)
    whole = _b.all(isinstance(b, slice) and b == slice(None) or b is Ellipsis for b in basic)
    v = x if whole else x[basic]
    shape = tuple(v.shape)
    pairs = []
    for d, t, _ in tensors:
        if t.dtype == _C.bool:
            for j, ix in enumerate(_mask_indices(t, shape, d)):
                pairs.append((d + j, ix))
        else:
            pairs.append((d, t))
    # each index checked and made non-negative against its own dim (an
    # error names the index's position, as PyTorch's does)
    pairs = [(d, _checked(t, shape[d], j)) for j, (d, t) in enumerate(pairs)]
    if len(pairs) == 1:
        return v, pairs[0][0], pairs[0][1], whole
    dims = [d for d, _ in pairs]
    if dims != list(range(dims[0], dims[0] + len(dims))):
        # separated index tensors: their dims go first (NumPy's rule)
        rest = [d for d in range(v.dim()) if d not in dims]
        v = v.permute(*(dims + rest))
        whole = False
        shape = tuple(v.shape)
        dims = list(range(len(dims)))
    d0, m = dims[0], len(dims)
    _check_broadcast([t for _, t in pairs])
    # combined into one index over the flattened dims
    lin, n = None, 1
    for j, (_, t) in enumerate(pairs):
        lin = t if lin is None else lin * shape[d0 + j] + t
        n *= shape[d0 + j]
    flat = shape[:d0] + (n,) + shape[d0 + m:]
    return v, d0, lin, whole, flat


def _check_broadcast(ts):
    nd = _b.max(t.dim() for t in ts)
    for k in range(1, nd + 1):
        sizes = {t.shape[-k] for t in ts if t.dim() >= k} - {1}
        if len(sizes) > 1:
            shapes = ", ".join(str(list(t.shape)) for t in ts)
            raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                             f"with shapes {shapes}")


def _getitem(x, key):
    key = _as_tuple(key)
    if not _b.any(_is_adv(k) for k in key):
        return x[key]
    p = _prepare(x, key)
    if len(p) == 4:
        v, d, idx, _ = p
        return v._index(d, idx)
    v, d, idx, _, flat = p
    return v.reshape(*flat)._index(d, idx)


def _setitem(x, key, value):
    key = _as_tuple(key)
    if not _b.any(_is_adv(k) for k in key):
        x[key] = value
        return
    p = _prepare(x, key)
    if not isinstance(value, _Tensor):
        value = _C.tensor(value, dtype=x.dtype)
    if len(p) == 4:
        v, d, idx, _ = p
        v._index_put_(d, idx, value)
        return
    v, d, idx, _, flat = p
    v.view(*flat)._index_put_(d, idx, value)
