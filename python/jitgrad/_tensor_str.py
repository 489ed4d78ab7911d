"""Tensor printing, laid out as PyTorch 1.13 lays it out: lines wrapped at
80 columns, tensors of more than 1000 elements summarized to their first
and last 3 items per dimension, one number format (fixed, integer-valued or
scientific) chosen from the printed values.  set_printoptions changes the
same settings PyTorch's does."""
import math

__all__ = ["set_printoptions", "tensor_repr"]


class _PrintOptions:
    precision = 4
    threshold = 1000
    edgeitems = 3
    linewidth = 80
    sci_mode = None


PRINT_OPTS = _PrintOptions()


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """Print settings as PyTorch's: precision (digits, default 4), threshold
    (elements before summarizing, 1000), edgeitems (items kept at each end
    when summarizing, 3), linewidth (80), profile ('default', 'short',
    'full') and sci_mode (None: chosen from the values)."""
    if profile is not None:
        if profile == "default":
            PRINT_OPTS.precision, PRINT_OPTS.threshold = 4, 1000
            PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 3, 80
        elif profile == "short":
            PRINT_OPTS.precision, PRINT_OPTS.threshold = 2, 1000
            PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 2, 80
        elif profile == "full":
            PRINT_OPTS.precision, PRINT_OPTS.threshold = 4, math.inf
            PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 3, 80
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


_SKIP = object()  # where summarizing left items out


def _summarized(t, summarize):
    """t's values as nested lists, with _SKIP where items are left out."""
    e = PRINT_OPTS.edgeitems
    if t.dim() == 0:
        return t.item()
    n = t.size(0)
    cut = summarize and n > 2 * e
    if t.dim() == 1:
        if cut:
            return t[:e].tolist() + [_SKIP] + t[n - e:].tolist()
        return t.tolist()
    idx = list(range(e)) + [None] + list(range(n - e, n)) if cut else range(n)
    return [_SKIP if i is None else _summarized(t[i], summarize) for i in idx]


def _leaves(data):
    if isinstance(data, list):
        for v in data:
            yield from _leaves(v)
    elif data is not _SKIP:
        yield data


class _Formatter:
    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        p = PRINT_OPTS.precision
        if not floating:
            for v in values:
                self.max_width = max(self.max_width, len(str(v)))
        else:
            nz = [v for v in values if v != 0 and math.isfinite(v)]
            if nz:
                absv = [abs(v) for v in nz]
                lo, hi = min(absv), max(absv)
                self.int_mode = all(v == math.ceil(v) for v in nz)
                if self.int_mode:
                    if hi / lo > 1000.0 or hi > 1.0e8:
                        self.sci_mode = True
                        width = max(len(f"{v:.{p}e}") for v in nz)
                    else:
                        width = max(len(f"{v:.0f}") + 1 for v in nz)
                elif hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4:
                    self.sci_mode = True
                    width = max(len(f"{v:.{p}e}") for v in nz)
                else:
                    width = max(len(f"{v:.{p}f}") for v in nz)
                self.max_width = max(self.max_width, width)
            if PRINT_OPTS.sci_mode is not None:
                self.sci_mode = PRINT_OPTS.sci_mode

    def format(self, v):
        p = PRINT_OPTS.precision
        if self.floating:
            if self.sci_mode:
                s = f"{v:{self.max_width}.{p}e}"
            elif self.int_mode:
                s = f"{v:.0f}"
                if not (math.isinf(v) or math.isnan(v)):
                    s += "."
            else:
                s = f"{v:.{p}f}"
        else:
            s = str(v)
        return (self.max_width - len(s)) * " " + s


def _vector_str(data, indent, fmt):
    element_length = fmt.max_width + 2
    per_line = max(1, int(math.floor((PRINT_OPTS.linewidth - indent) / element_length)))
    items = [" ..." if v is _SKIP else fmt.format(v) for v in data]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _str_with_formatter(data, dim, indent, fmt):
    if dim == 0:
        return fmt.format(data)
    if dim == 1:
        return _vector_str(data, indent, fmt)
    slices = ["..." if d is _SKIP else _str_with_formatter(d, dim - 1, indent + 1, fmt)
              for d in data]
    return "[" + ("," + "\n" * (dim - 1) + " " * (indent + 1)).join(slices) + "]"


def _tensor_str(t, indent):
    if t.numel() == 0:
        return "[]"
    summarize = t.numel() > PRINT_OPTS.threshold
    data = _summarized(t, summarize)
    fmt = _Formatter(list(_leaves(data)), t.is_floating_point())
    return _str_with_formatter(data, t.dim(), indent, fmt)


def _add_suffixes(tensor_str, suffixes, indent):
    out = [tensor_str]
    last_line_len = len(tensor_str) - tensor_str.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > PRINT_OPTS.linewidth:
            out.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            out.append(", " + suffix)
            last_line_len += len(suffix) + 2
    out.append(")")
    return "".join(out)


def tensor_repr(self):
    import jitgrad

    name = type(self).__name__
    prefix = "tensor(" if name in ("Tensor", "Parameter") else f"{name}("
    indent = len(prefix)
    try:
        with jitgrad.no_grad():
            body = _tensor_str(self, indent)
    except Exception:  # a symbolic tensor while tracing: no values yet
        return f"{prefix}<traced {self.dtype} {list(self.shape)}>)"
    suffixes = []
    default = jitgrad.get_default_dtype()
    if self.numel() == 0:
        if self.dim() != 1:
            suffixes.append(f"size={tuple(self.shape)}")
        if self.dtype != default:
            suffixes.append(f"dtype={self.dtype}")
    elif self.dtype not in (default, jitgrad.int64, jitgrad.bool):
        suffixes.append(f"dtype={self.dtype}")
    grad_fn = self.grad_fn
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{type(grad_fn).__name__}>")
    elif self.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)


def tensor_format(self, format_spec):
    """Formats a 0-d tensor as its number ('{:.2f}'.format(t)); other
    tensors print as str() with an empty spec, as PyTorch's."""
    if self.dim() == 0:
        return self.item().__format__(format_spec)
    return object.__format__(self, format_spec)
