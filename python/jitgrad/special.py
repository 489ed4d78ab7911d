"""jitgrad.special: PyTorch 1.13's torch.special names that jitgrad's ops
compose: expit, logit, erf, erfc, expm1, exp2, log1p, round, xlogy,
xlog1py, entr, sinc, ndtr, softmax, log_softmax, logsumexp; gammaln,
digamma / psi, polygamma (n = 0, 1) and multigammaln over jitgrad's lgamma,
digamma and trigamma rows.

Each is built from existing Tensor methods, so autograd and the compiler see
the ops they are made of.  (erfinv, ndtri, log_ndtr, i0 and the other Bessel and orthogonal-polynomial functions
need elementwise kernels jitgrad does not have yet.)
"""
import math as _math

from ._C import Tensor


def _jg():
    import jitgrad

    return jitgrad


def _tensor_arg(x, fn):
    if not isinstance(x, Tensor):
        raise TypeError(f"special_{fn}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def _no_out(fn, out):
    if out is not None:
        raise TypeError(f"special_{fn}(): jitgrad does not support out=")


def _float_input(x):
    """Integer and bool inputs computed in the default float dtype, as
    PyTorch's unary float ops do."""
    return x if x.dtype in (_jg().float32, _jg().float64) else x.to(_jg().float32)


def expit(input, *, out=None):
    """The logistic sigmoid 1 / (1 + exp(-x))."""
    _no_out("expit", out)
    return _tensor_arg(input, "expit").sigmoid()


def logit(input, eps=None, *, out=None):
    """log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given."""
    _no_out("logit", out)
    return _jg().logit(_tensor_arg(input, "logit"), eps)


def erf(input, *, out=None):
    """The error function."""
    _no_out("erf", out)
    return _tensor_arg(input, "erf").erf()


def erfc(input, *, out=None):
    """The complementary error function 1 - erf(x)."""
    _no_out("erfc", out)
    return _tensor_arg(input, "erfc").erfc()


def expm1(input, *, out=None):
    """exp(x) - 1, accurate near 0."""
    _no_out("expm1", out)
    return _tensor_arg(input, "expm1").expm1()


def log1p(input, *, out=None):
    """log(1 + x), accurate near 0."""
    _no_out("log1p", out)
    return _tensor_arg(input, "log1p").log1p()


def exp2(input, *, out=None):
    """2 ** x."""
    _no_out("exp2", out)
    return 2 ** _float_input(_tensor_arg(input, "exp2"))


def round(input, *, decimals=0, out=None):  # noqa: A001 (PyTorch's name)
    """Rounded half to even (to decimals places)."""
    _no_out("round", out)
    return _tensor_arg(input, "round").round(decimals=decimals)


def xlogy(input, other, *, out=None):
    """input * log(other), 0 where input is 0 (unless other is NaN)."""
    _no_out("xlogy", out)
    return _jg().xlogy(input, other)


def xlog1py(input, other, *, out=None):
    """input * log1p(other), 0 where input is 0 (unless other is NaN)."""
    _no_out("xlog1py", out)
    jg = _jg()
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("special_xlog1py(): argument 'other' (position 2) must be Tensor, not "
                        f"{type(other).__name__}")
    like = input if isinstance(input, Tensor) else other
    dtype = like.dtype if like.dtype in (jg.float32, jg.float64) else jg.float32
    x = input if isinstance(input, Tensor) else jg.tensor(float(input), dtype=dtype)
    y = other if isinstance(other, Tensor) else jg.tensor(float(other), dtype=dtype)
    if isinstance(input, Tensor) and isinstance(other, Tensor) and x.dtype != y.dtype:
        d = jg.float64 if jg.float64 in (x.dtype, y.dtype) else jg.float32
        x, y = x.to(d), y.to(d)
    x, y = _float_input(x), _float_input(y)
    # PyTorch's gradients: log1p(other) for input (0 where input is 0 and
    # other <= -1), input / (1 + other) for other
    zero = (x == 0) & ~y.isnan()
    finite = jg.where((y <= -1) | y.isinf(), y * 0, y).log1p()
    return jg.where(zero, x * finite, x * y.log1p())


def entr(input, *, out=None):
    """-x * log(x) for x > 0, 0 at 0, -inf below 0 (NaN stays NaN).
    The gradient is -(1 + log x) for x > 0 and 0 elsewhere."""
    _no_out("entr", out)
    jg = _jg()
    x = _float_input(_tensor_arg(input, "entr"))
    pos = x > 0
    safe = jg.where(pos, x, x * 0 + 1)
    body = -safe * safe.log()
    rest = jg.where(x == 0, x.new_zeros(x.shape), x.new_full(x.shape, -_math.inf))
    return jg.where(pos, body, jg.where(x.isnan(), x, rest))


def sinc(input, *, out=None):
    """sin(pi x) / (pi x), 1 at 0."""
    _no_out("sinc", out)
    jg = _jg()
    x = _float_input(_tensor_arg(input, "sinc"))
    zero = x == 0
    p = jg.where(zero, x * 0 + 1, x) * _math.pi
    return jg.where(zero, x * 0 + 1, p.sin() / p)


def ndtr(input, *, out=None):
    """The standard normal cumulative distribution function
    (1 + erf(x / sqrt(2))) / 2."""
    _no_out("ndtr", out)
    x = _float_input(_tensor_arg(input, "ndtr"))
    return (1 + (x * _math.sqrt(0.5)).erf()) * 0.5


def softmax(input, dim, *, dtype=None):
    """softmax along dim (computed in dtype when one is given)."""
    x = _tensor_arg(input, "softmax")
    return _jg().softmax(x if dtype is None else x.to(dtype), dim)


def log_softmax(input, dim, *, dtype=None):
    """log_softmax along dim (computed in dtype when one is given)."""
    x = _tensor_arg(input, "log_softmax")
    return _jg().log_softmax(x if dtype is None else x.to(dtype), dim)


def logsumexp(input, dim, keepdim=False, *, out=None):
    """log(sum(exp(x))) along dim, computed stably."""
    _no_out("logsumexp", out)
    return _jg().logsumexp(_tensor_arg(input, "logsumexp"), dim, keepdim)


def gammaln(input, *, out=None):
    """log |Gamma(x)|."""
    _no_out("gammaln", out)
    return _jg().lgamma(_tensor_arg(input, "gammaln"))


def digamma(input, *, out=None):
    """The logarithmic derivative of Gamma."""
    _no_out("digamma", out)
    return _jg().digamma(_tensor_arg(input, "digamma"))


psi = digamma


def polygamma(n, input, *, out=None):
    """The n-th derivative of digamma (n = 0 and 1 in jitgrad)."""
    _no_out("polygamma", out)
    return _jg().polygamma(n, input)


def multigammaln(input, p, *, out=None):
    """The multivariate log-gamma function of dimension p."""
    _no_out("multigammaln", out)
    return _jg().mvlgamma(_tensor_arg(input, "multigammaln"), p)


__all__ = ["gammaln", "digamma", "psi", "polygamma", "multigammaln",
           "expit", "logit", "erf", "erfc", "expm1", "log1p", "exp2", "round", "xlogy",
           "xlog1py", "entr", "sinc", "ndtr", "softmax", "log_softmax", "logsumexp"]
