"""jitgrad.linalg: PyTorch 1.13's torch.linalg for real float32/float64
tensors, batched over leading dims.

The norms, cross, vecdot, multi_dot, matrix_power and diagonal are composed
of jitgrad ops, so autograd and the compiler need nothing of their own.
inv, slogdet (by LU), cholesky and eigh are LAPACK-backed op-table rows
(src/ops/lapack.c) with PyTorch's gradients; det, logdet, solve and negative
matrix powers are composed of them.  The argument checks come first, here,
so that errors name the function called with PyTorch's text.

Not provided (no LAPACK row yet): qr, svd/svdvals,
pinv, lstsq, and the matrix norms that need singular values ('nuc', 2,
-2)."""
import builtins as _b
import math as _math
import numbers as _numbers
import sys as _sys

from . import _C

__all__ = ["vector_norm", "matrix_norm", "norm", "cross", "vecdot", "multi_dot",
           "matrix_power", "diagonal", "inv", "det", "slogdet", "solve", "cholesky", "eigh",
           "eigvalsh",
           "LinAlgError"]


class LinAlgError(RuntimeError):
    """A linear algebra computation failed (a singular matrix), as
    torch.linalg.LinAlgError (a RuntimeError)."""


_NAMES = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int",
          "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
          "float16": "Half", "bfloat16": "BFloat16"}


def _type_name(dtype):
    name = str(dtype).split(".")[-1]
    return _NAMES.get(name, name)


def _is_float(dtype):
    return dtype in (_C.float32, _C.float64)


def _tensor(x, fn, arg="A", pos=1):
    if not isinstance(x, _C.Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def _wrap_dim(d, ndim):
    n = _b.max(ndim, 1)
    if d < -n or d >= n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {d})")
    return d + n if d < 0 else d


def _dims(dim, ndim):
    """dim (None, an int or a sequence) as a sorted list of wrapped dims;
    None: all of them."""
    if dim is None:
        return list(range(ndim))
    ds = [dim] if isinstance(dim, _numbers.Integral) else list(dim)
    out = [_wrap_dim(int(d), ndim) for d in ds]
    seen = set()
    for d in out:
        if d in seen:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        seen.add(d)
    return out


def _float_input(A, fn, dtype):
    """A cast to dtype (when given), refusing what PyTorch refuses."""
    if dtype is not None:
        if not _is_float(dtype):
            raise RuntimeError(f"{fn}: dtype should be floating point or complex, but got "
                               f"{_type_name(dtype)}")
        if not _is_float(A.dtype):
            raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. "
                               f"Got {_type_name(A.dtype)}")
        return A.to(dtype) if A.dtype != dtype else A
    if not _is_float(A.dtype):
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got "
                           f"{_type_name(A.dtype)}")
    return A


def _safe_root(s, p):
    """s ** (1 / p) (s >= 0) whose gradient is zero, not NaN, where s == 0
    (PyTorch's norm backward gives a zero vector's norm a zero gradient)."""
    zero = s == 0
    safe = _C.where(zero, s.detach() + 1, s)
    r = safe.sqrt() if p == 2 else safe.pow(1.0 / p)
    return _C.where(zero, s.detach(), r)


def _reduce(x, fn, dims, keepdim):
    return getattr(x, fn)(dim=tuple(dims), keepdim=keepdim)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The ord-norm of x over dim (all dims when None) as a vector: ord inf /
    -inf the largest / smallest |x|, 0 the count of non-zeros, otherwise
    (sum |x|^ord)^(1/ord)."""
    _tensor(x, "linalg_vector_norm", "input")
    if isinstance(ord, str) or not isinstance(ord, _numbers.Number):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' must be Number, not "
                        f"{type(ord).__name__}")
    if out is not None:
        raise TypeError("linalg.vector_norm: out= is not supported by jitgrad")
    x = _float_input(x, "linalg.vector_norm", dtype)
    ord = float(ord)
    all_dims = dim is None
    dims = _dims(dim, x.ndim)
    if x.ndim == 0:
        dims = []
        all_dims = True
    if x.numel() == 0 and (ord < 0 or ord == _math.inf):
        empty = all_dims or any(x.shape[d] == 0 for d in dims)
        if empty:
            shown = "inf" if ord == _math.inf else ("-inf" if ord == -_math.inf else f"{ord:g}")
            raise RuntimeError(f"linalg.vector_norm cannot compute the {shown} norm on an empty "
                               "tensor because the operation does not have an identity")
    if x.ndim == 0:
        a = x.abs()
        return a if ord != 0 else (x != 0).to(x.dtype)
    rdims = list(range(x.ndim)) if all_dims else dims
    if ord == _math.inf:
        return _reduce(x.abs(), "amax", rdims, keepdim)
    if ord == -_math.inf:
        return _reduce(x.abs(), "amin", rdims, keepdim)
    if ord == 0:
        return _reduce((x != 0).to(x.dtype), "sum", rdims, keepdim)
    if ord == 1:
        return _reduce(x.abs(), "sum", rdims, keepdim)
    if ord == 2:
        return _safe_root(_reduce(x * x, "sum", rdims, keepdim), 2)
    return _safe_root(_reduce(x.abs().pow(ord), "sum", rdims, keepdim), ord)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """The ord-norm of the matrices of A over the two dims dim: 'fro' the
    Frobenius norm, 1 / -1 the largest / smallest column sum of |A|, inf /
    -inf the largest / smallest row sum."""
    fn = "linalg.matrix_norm"
    _tensor(A, "linalg_matrix_norm")
    if out is not None:
        raise TypeError("linalg.matrix_norm: out= is not supported by jitgrad")
    if A.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor A must have at least 2 dimensions.")
    ds = [dim] if isinstance(dim, _numbers.Integral) else list(dim)
    if len(ds) != 2:
        raise RuntimeError(f"{fn}: dim must be a 2-tuple. Got {' '.join(str(d) for d in ds)}")
    d0, d1 = _wrap_dim(int(ds[0]), A.ndim), _wrap_dim(int(ds[1]), A.ndim)
    if d0 == d1:
        raise RuntimeError(f"{fn}: dims must be different. Got ({d0}, {d1})")
    A = _float_input(A, fn, dtype)
    if isinstance(ord, str):
        if ord == "fro":
            return vector_norm(A, 2, (d0, d1), keepdim)
        if ord == "nuc":
            raise NotImplementedError("linalg.matrix_norm: ord='nuc' needs singular values, "
                                      "which jitgrad.linalg does not compute yet")
        raise RuntimeError(f"{fn}: Order {ord} not supported.")
    if ord in (2, -2):
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord} needs singular values, which "
                                  "jitgrad.linalg does not compute yet")
    if ord not in (1, -1, _math.inf, -_math.inf):
        raise RuntimeError(f"{fn}: Order {ord:g} not supported.")
    # PyTorch's order: a vector 1-norm over one dim, then amax / amin over
    # the other (inf: rows summed first, so the dims swap)
    if abs(ord) == _math.inf:
        d0, d1 = d1, d0
    if not keepdim and d0 < d1:
        d1 -= 1
    s = A.abs().sum(dim=d0, keepdim=keepdim)
    return s.amax(dim=d1, keepdim=keepdim) if ord > 0 else s.amin(dim=d1, keepdim=keepdim)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    """A vector or a matrix norm, as torch.linalg.norm chooses: a matrix
    norm when ord is given and dim has two dims (or A is 2-D and dim is
    None), else a vector norm (ord None: 2, over all of A when dim is
    None)."""
    _tensor(A, "linalg_norm", "input")
    if dim is not None and isinstance(dim, _numbers.Integral):
        dim = (dim,)
    if isinstance(ord, str):
        if dim is not None:
            if len(dim) not in (1, 2):
                raise RuntimeError("linalg.norm: If dim is specified, it mut be of length 1 or "
                                   f"2. Got {list(dim)}")
        elif A.ndim not in (1, 2):
            raise RuntimeError("linalg.norm: If dim is not specified but ord is, the input must "
                               f"be 1D or 2D. Got {A.ndim}D.")
        return matrix_norm(A, ord, tuple(dim) if dim is not None else (0, 1), keepdim,
                           dtype=dtype, out=out)
    if dim is not None:
        if len(dim) not in (1, 2):
            raise RuntimeError("linalg.norm: If dim is specified, it must be of length 1 or 2. "
                               f"Got {list(dim)}")
    elif ord is not None and A.ndim not in (1, 2):
        raise RuntimeError("linalg.norm: If dim is not specified but ord is, the input must be "
                           f"1D or 2D. Got {A.ndim}D.")
    if ord is not None and ((dim is not None and len(dim) == 2) or (dim is None and A.ndim == 2)):
        return matrix_norm(A, ord, tuple(dim) if dim is not None else (0, 1), keepdim,
                           dtype=dtype, out=out)
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype, out=out)


def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along dim (input and other of one
    number of dims, broadcast)."""
    _tensor(input, "linalg_cross", "input")
    _tensor(other, "linalg_cross", "other", 2)
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = _wrap_dim(dim, input.ndim)
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.shape[d]} and {other.shape[d]}")
    if input.dtype != other.dtype:
        raise RuntimeError(f"expected scalar type {_type_name(input.dtype)} but found "
                           f"{_type_name(other.dtype)}")
    a = [input.narrow(d, i, 1) for i in range(3)]
    b = [other.narrow(d, i, 1) for i in range(3)]
    parts = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    return _sys.modules[__package__].cat(parts, d)


def vecdot(x, y, *, dim=-1):
    """The dot product of x and y (broadcast) along dim."""
    _tensor(x, "linalg_vecdot", "x")
    _tensor(y, "linalg_vecdot", "y", 2)
    return (x * y).sum(dim=dim)


def _chain_order(shapes):
    """The cheapest parenthesisation of a matrix chain (the textbook dynamic
    program, as PyTorch's multi_dot): split[i][j] for chain[i..j]."""
    n = len(shapes)
    p = [shapes[0][0]] + [s[1] for s in shapes]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j] = c
                    split[i][j] = k
    return split


def multi_dot(tensors, *, out=None):
    """The product of a chain of matrices in the cheapest order; the first
    may be a row vector and the last a column vector (1-D)."""
    if out is not None:
        raise TypeError("linalg.multi_dot: out= is not supported by jitgrad")
    ts = list(tensors)
    n = len(ts)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    for t in ts:
        _tensor(t, "linalg_multi_dot", "tensors")
    if ts[0].ndim not in (1, 2):
        raise RuntimeError(f"multi_dot(): the first tensor must be 1D or 2D but got "
                           f"{ts[0].ndim}D")
    if ts[-1].ndim not in (1, 2):
        raise RuntimeError(f"multi_dot(): the last tensor must be 1D or 2D but got "
                           f"{ts[-1].ndim}D")
    for i in range(1, n - 1):
        if ts[i].ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {ts[i].ndim}D")
    for i in range(1, n):
        if ts[i].dtype != ts[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor "
                               f"0 is {_dtype_word(ts[0].dtype)} and tensor {i} "
                               f"{_dtype_word(ts[i].dtype)}")
    first_1d, last_1d = ts[0].ndim == 1, ts[-1].ndim == 1
    mats = list(ts)
    if first_1d:
        mats[0] = ts[0].unsqueeze(0)
    if last_1d:
        mats[-1] = ts[-1].unsqueeze(1)
    for i in range(n - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes "
                               f"{list(ts[i].shape)} and {list(ts[i + 1].shape)} cannot be "
                               "multiplied")
    if n == 2:
        r = mats[0] @ mats[1]
    else:
        split = _chain_order([tuple(m.shape) for m in mats])

        def prod(i, j):
            if i == j:
                return mats[i]
            k = split[i][j]
            return prod(i, k) @ prod(k + 1, j)

        r = prod(0, n - 1)
    if first_1d and last_1d:
        return r.reshape(())
    if first_1d:
        return r.squeeze(0)
    if last_1d:
        return r.squeeze(-1)
    return r


def _dtype_word(dtype):
    return {"float32": "float", "float64": "double", "int64": "long int", "int32": "int",
            "bool": "bool"}.get(str(dtype).split(".")[-1], str(dtype).split(".")[-1])


def _square(A, fn):
    if A.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{fn}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def _float_square(A, fn):
    _square(A, fn)
    if not _is_float(A.dtype):
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got "
                           f"{_type_name(A.dtype)}")


def _eye_like(A):
    n = A.shape[-1]
    return _sys.modules[__package__].eye(n, dtype=A.dtype).expand(*A.shape)


def matrix_power(A, n, *, out=None):
    """A^n for an integer n, by repeated squaring (as PyTorch); n == 0 gives
    identities, n < 0 powers of the inverse."""
    _tensor(A, "linalg_matrix_power", "input")
    if isinstance(n, bool) or not isinstance(n, _numbers.Integral):
        raise TypeError(f"linalg_matrix_power(): argument 'n' (position 2) must be int, not "
                        f"{type(n).__name__}")
    if out is not None:
        raise TypeError("linalg.matrix_power: out= is not supported by jitgrad")
    _square(A, "linalg.matrix_power")
    n = int(n)
    if n == 0:
        return _eye_like(A).clone()
    if n < 0:
        A = inv(A)
        n = -n
    if n == 1:
        return A.clone()
    if n == 2:
        return A @ A
    if n == 3:
        return (A @ A) @ A
    # PyTorch's square-and-multiply: z holds A^(2^k); the set bits multiply
    # into the result, lowest first
    z = result = None
    while n > 0:
        z = A if z is None else z @ z
        if n % 2 == 1:
            result = z if result is None else result @ z
        n //= 2
    return result


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonal of A's matrices over (dim1, dim2) (offset above / below
    the main one), as a last dim; gradients flow back to it."""
    _tensor(A, "linalg_diagonal")
    return _diagonal(A, offset, dim1, dim2)


def _diagonal(A, offset, dim1, dim2):
    nd = A.ndim
    d1, d2 = _wrap_dim(dim1, nd), _wrap_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    rest = [d for d in range(nd) if d not in (d1, d2)]
    M = A.permute(*rest, d1, d2)
    r, c = M.shape[-2], M.shape[-1]
    if offset >= 0:
        length = _b.max(0, _b.min(r, c - offset))
        start = offset
    else:
        length = _b.max(0, _b.min(r + offset, c))
        start = -offset * c
    batch = list(M.shape[:-2])
    if length == 0:
        return M.reshape(*batch, r * c).narrow(-1, 0, 0)
    flat = M.reshape(*batch, r * c)
    end = start + (length - 1) * (c + 1) + 1
    return flat[..., start:end:c + 1]


def _singular(err, fn):
    """Re-raises a LAPACK singular-matrix failure as LinAlgError."""
    msg = str(err)
    if "singular" in msg or "positive-definite" in msg:
        if fn is not None:
            raise LinAlgError(fn) from None
        raise LinAlgError(msg) from None
    raise err


def inv(A, *, out=None):
    """The inverse of each square matrix of A (LinAlgError when one is
    singular)."""
    _tensor(A, "linalg_inv")
    if out is not None:
        raise TypeError("linalg.inv: out= is not supported by jitgrad")
    _float_square(A, "linalg.inv")
    try:
        return _C._linalg_inv(A)
    except RuntimeError as e:
        _singular(e, None)


def slogdet(A, *, out=None):
    """(sign, log|det|) of each square matrix of A (a singular one: 0 and
    -inf); only log|det| has a gradient."""
    _tensor(A, "linalg_slogdet")
    if out is not None:
        raise TypeError("linalg.slogdet: out= is not supported by jitgrad")
    _float_square(A, "linalg.slogdet")
    return _SlogdetResult(_C._linalg_slogdet(A))


class _SlogdetResult(tuple):
    """torch.return_types.linalg_slogdet: (sign, logabsdet)."""

    @property
    def sign(self):
        return self[0]

    @property
    def logabsdet(self):
        return self[1]

    def __repr__(self):
        return f"torch.return_types.linalg_slogdet(\nsign={self[0]!r},\nlogabsdet={self[1]!r})"


def det(A, *, out=None):
    """The determinant of each square matrix of A: sign * exp(log|det|),
    whose gradient is det * A^-T."""
    _tensor(A, "linalg_det")
    if out is not None:
        raise TypeError("linalg.det: out= is not supported by jitgrad")
    _float_square(A, "linalg.det")
    sign, logabs = _C._linalg_slogdet(A)
    return sign * logabs.exp()


def _logdet(A):
    """torch.logdet: log det A, NaN where det < 0 (-inf where 0)."""
    _tensor(A, "logdet", "input")
    _float_square(A, "logdet")
    sign, logabs = _C._linalg_slogdet(A)
    return _C.where(sign < 0, float("nan"), logabs)


def solve(A, B, *, left=True, out=None):
    """X with A X = B (left=False: X A = B), B a matrix or (when its shape
    is A's but the last dim) a vector, batches broadcast."""
    _tensor(A, "linalg_solve")
    _tensor(B, "linalg_solve", "B", 2)
    if out is not None:
        raise TypeError("linalg.solve: out= is not supported by jitgrad")
    _float_square(A, "linalg.solve")
    if A.dtype != B.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found "
                           f"A of type {_type_name(A.dtype)} and B of type "
                           f"{_type_name(B.dtype)} instead")
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    n = A.shape[-1]
    eq = "AX = B" if left else "XA = B"
    if vector:
        k = B.shape[-1]
        if (k if left else 1) != n:
            raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                               f"{eq} ({n}x{n} and {k}x1)")
    else:
        r, c = B.shape[-2], B.shape[-1]
        if (r if left else c) != n:
            raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                               f"{eq} ({n}x{n} and {r}x{c})")
        _check_batches(B.shape[:-2], A.shape[:-2])
    if vector and B.ndim > 1:
        _check_batches(B.shape[:-1], A.shape[:-2])
    try:
        Ai = _C._linalg_inv(A)
    except RuntimeError as e:
        _singular(e, "torch.linalg.solve: The solver failed because the input matrix is "
                     "singular.")
    if vector:
        return (Ai @ B.unsqueeze(-1)).squeeze(-1)
    return Ai @ B if left else B @ Ai


def cholesky(A, *, upper=False, out=None):
    """The Cholesky factor of each symmetric positive-definite matrix of A,
    read from its lower triangle: L with A = L L^T (upper: U = L^T with A =
    U^T U); LinAlgError when one is not positive-definite."""
    _tensor(A, "linalg_cholesky")
    if out is not None:
        raise TypeError("linalg.cholesky: out= is not supported by jitgrad")
    _float_square(A, "linalg.cholesky")
    try:
        L = _C._linalg_cholesky(A)
    except RuntimeError as e:
        _singular(e, None)
    return L.transpose(-2, -1) if upper else L


def _cholesky(input, upper=False, *, out=None):
    """torch.cholesky (deprecated in PyTorch for linalg.cholesky): its
    errors say "cholesky:"."""
    _tensor(input, "cholesky", "input")
    try:
        return cholesky(input, upper=upper, out=out)
    except RuntimeError as e:
        msg = str(e)
        if msg.startswith("linalg.cholesky: "):
            raise type(e)(msg[len("linalg."):]) from None
        raise


class _EighResult(tuple):
    """torch.return_types.linalg_eigh: (eigenvalues, eigenvectors)."""

    @property
    def eigenvalues(self):
        return self[0]

    @property
    def eigenvectors(self):
        return self[1]

    def __repr__(self):
        return (f"torch.return_types.linalg_eigh(\neigenvalues={self[0]!r},\n"
                f"eigenvectors={self[1]!r})")


def _eigh(A, UPLO, fn):
    _tensor(A, fn)
    _square(A, "linalg.eigh")
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return _C._linalg_eigh(A, UPLO == "U")


def eigh(A, UPLO="L", *, out=None):
    """The eigenvalues (ascending) and eigenvectors (columns, each up to
    sign) of each symmetric matrix of A, read from its lower (UPLO='L') or
    upper ('U') triangle."""
    if out is not None:
        raise TypeError("linalg.eigh: out= is not supported by jitgrad")
    return _EighResult(_eigh(A, UPLO, "linalg_eigh"))


def eigvalsh(A, UPLO="L", *, out=None):
    """The eigenvalues (ascending) of each symmetric matrix of A."""
    if out is not None:
        raise TypeError("linalg.eigvalsh: out= is not supported by jitgrad")
    return _eigh(A, UPLO, "linalg_eigvalsh")[0]


def _check_batches(a, b):
    """PyTorch's error when batch shapes a and b do not broadcast."""
    a, b = list(a), list(b)
    nd = _b.max(len(a), len(b))
    a, b = [1] * (nd - len(a)) + a, [1] * (nd - len(b)) + b
    for i in range(nd):
        if a[i] != b[i] and a[i] != 1 and b[i] != 1:
            raise RuntimeError(f"The size of tensor a ({a[i]}) must match the size of tensor b "
                               f"({b[i]}) at non-singleton dimension {i}")


def _install(torch):
    """torch.det / inverse / logdet / slogdet and the Tensor methods."""
    torch.det = det
    torch.inverse = inv
    torch.logdet = _logdet
    torch.slogdet = slogdet
    torch.cholesky = _cholesky
    T = torch.Tensor
    T.det = lambda self: det(self)
    T.inverse = lambda self: inv(self)
    T.logdet = lambda self: _logdet(self)
    T.slogdet = lambda self: slogdet(self)
    T.cholesky = lambda self, upper=False: _cholesky(self, upper)


_install(_sys.modules[__package__])
