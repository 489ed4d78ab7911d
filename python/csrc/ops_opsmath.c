/* Bindings of the opsmath ops (sin, cos, erf, clamp, maximum/minimum, pow
 * with a tensor exponent, prod, var/std/var_mean, norm, cumsum,
 * argmax/argmin, topk, sort) with PyTorch's signatures and defaults.  Each
 * one is a library call; only argument handling lives here. */
#include "jgpy.h"

#include <structseq.h>

#include <math.h>
#include <string.h>

#define KW (METH_VARARGS | METH_KEYWORDS)
#define CF(f) ((PyCFunction)(void (*)(void))(f))

static bool is_number(PyObject *o) {
    return !jgp_is_tensor(o) && (PyFloat_Check(o) || PyLong_Check(o));
}

/* A pair (values, indices) as the named tuple type made from desc (once). */
static PyObject *pair(PyTypeObject **type, PyStructSequence_Desc *desc, jg_tensor *v,
                      jg_tensor *i) {
    if (!*type && !(*type = PyStructSequence_NewType(desc))) {
        jg_release(v);
        jg_release(i);
        return NULL;
    }
    PyObject *vo = jgp_wrap_new(v), *io = vo ? jgp_wrap_new(i) : NULL;
    PyObject *r = vo && io ? PyStructSequence_New(*type) : NULL;
    if (!r) {
        Py_XDECREF(vo);
        Py_XDECREF(io);
        return NULL;
    }
    PyStructSequence_SET_ITEM(r, 0, vo);
    PyStructSequence_SET_ITEM(r, 1, io);
    return r;
}

static PyStructSequence_Field vi_fields[] = {{"values", NULL}, {"indices", NULL}, {NULL, NULL}};
static PyStructSequence_Desc topk_desc = {"jitgrad.return_types.topk", NULL, vi_fields, 2};
static PyStructSequence_Desc sort_desc = {"jitgrad.return_types.sort", NULL, vi_fields, 2};
static PyTypeObject *topk_type, *sort_type;

/* dim: None, an int, or a sequence of ints */
static int parse_dims(PyObject *o, int *n, int *dims) {
    *n = 0;
    if (!o || o == Py_None)
        return 0;
    if (PyLong_Check(o)) {
        dims[0] = _PyLong_AsInt(o);
        *n = 1;
        return dims[0] == -1 && PyErr_Occurred() ? -1 : 0;
    }
    if (!PyTuple_Check(o) && !PyList_Check(o)) {
        PyErr_Format(PyExc_TypeError, "dim must be an int or a tuple of ints, not %s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t k = PySequence_Size(o);
    if (k > JG_MAX_DIMS) {
        PyErr_SetString(PyExc_RuntimeError, "too many dims");
        return -1;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *it = PySequence_GetItem(o, i);
        dims[i] = it ? _PyLong_AsInt(it) : -1;
        Py_XDECREF(it);
        if (dims[i] == -1 && PyErr_Occurred())
            return -1;
    }
    *n = (int)k;
    return 0;
}

/* An int argument that must not be None. */
static int int_arg(PyObject *o, const char *fn, const char *name, int *v) {
    if (!o || o == Py_None || !PyLong_Check(o) || PyBool_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be int, not %s", fn, name,
                     o ? Py_TYPE(o)->tp_name : "None");
        return -1;
    }
    *v = _PyLong_AsInt(o);
    return *v == -1 && PyErr_Occurred() ? -1 : 0;
}

/* self cast to dtype when given (a new reference we own), else self. */
static jg_tensor *with_dtype(PyObject *self, PyObject *dtype) {
    jg_tensor *t = jgp_t(self);
    jg_dtype d;
    bool given;
    if (jgp_parse_dtype(dtype, &d, &given) < 0)
        return NULL;
    if (given && d != jg_dtype_of(t)) {
        jg_tensor *c = jg_keep(jg_to_dtype(t, d));
        if (!c)
            jgp_raise();
        return c;
    }
    return jg_retain(t);
}

/* ------------------------------------------------------------ elementwise */

#define UNARY(name, fn)                                                                            \
    static PyObject *m_##name(PyObject *self, PyObject *unused) {                                  \
        (void)unused;                                                                              \
        return jgp_wrap_new(fn(jgp_t(self)));                                                      \
    }
UNARY(sin, jg_sin)
UNARY(cos, jg_cos)
UNARY(erf, jg_erf)

/* The tensor clamp computes in: PyTorch's promotion with Python numbers
 * (an integer tensor with a float bound computes in float32, a bool tensor
 * with an int bound in int64).  A new reference we own. */
static jg_tensor *clamp_input(jg_tensor *t, PyObject *lo, PyObject *hi) {
    jg_dtype d = jg_dtype_of(t);
    bool any_float = (lo && PyFloat_Check(lo)) || (hi && PyFloat_Check(hi));
    bool any_int = (lo && PyLong_Check(lo) && !PyBool_Check(lo)) ||
                   (hi && PyLong_Check(hi) && !PyBool_Check(hi));
    if (!jgp_dtype_is_float(d) && any_float)
        return jg_keep(jg_to_dtype(t, JG_F32));
    if (d == JG_BOOL && any_int)
        return jg_keep(jg_to_dtype(t, JG_I64));
    return jg_retain(t);
}

static int bound(PyObject *o, const char *fn, const char *name, bool *has, double *v) {
    *has = o && o != Py_None;
    if (!*has)
        return 0;
    if (!is_number(o)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be Number, not %s", fn, name,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *v = PyFloat_AsDouble(o);
    return *v == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* clamp with at least one tensor bound */
static PyObject *clamp_tensors(PyObject *self, PyObject *lo, PyObject *hi, const char *fn) {
    for (int k = 0; k < 2; k++) {
        PyObject *o = k ? hi : lo;
        if (o && o != Py_None && !jgp_is_tensor(o)) { /* PyTorch takes no mix either */
            PyErr_Format(PyExc_TypeError,
                         "%s() received an invalid combination of arguments: min and max must "
                         "be both Tensors or both Numbers, got '%s' %s",
                         fn, k ? "max" : "min", Py_TYPE(o)->tp_name);
            return NULL;
        }
    }
    jg_tensor *x = jgp_t(self);
    jg_tensor *l = lo && lo != Py_None ? jgp_t(lo) : NULL;
    jg_tensor *h = hi && hi != Py_None ? jgp_t(hi) : NULL;
    return jgp_wrap_new(jg_clamp_tensor(x, l, h));
}

static PyObject *clamp_impl(PyObject *self, PyObject *lo, PyObject *hi, const char *fn) {
    if ((lo && jgp_is_tensor(lo)) || (hi && jgp_is_tensor(hi)))
        return clamp_tensors(self, lo, hi, fn);
    bool has_lo, has_hi;
    double vlo = 0, vhi = 0;
    if (bound(lo, fn, "min", &has_lo, &vlo) < 0 || bound(hi, fn, "max", &has_hi, &vhi) < 0)
        return NULL;
    if (!has_lo && !has_hi) {
        PyErr_SetString(PyExc_RuntimeError,
                        "torch.clamp: At least one of 'min' or 'max' must not be None");
        return NULL;
    }
    jg_tensor *t = clamp_input(jgp_t(self), has_lo ? lo : NULL, has_hi ? hi : NULL);
    if (!t)
        return jgp_raise();
    /* clamp_min / clamp_max are their own nodes (ClampMinBackward0 / ...);
     * clamp one node with either bound (ClampBackward1), as in PyTorch */
    PyObject *r =
        jgp_wrap_new(strcmp(fn, "clamp_min") == 0   ? jg_clamp_min(t, vlo)
                     : strcmp(fn, "clamp_max") == 0 ? jg_clamp_max(t, vhi)
                                                    : jg_clamp(t, has_lo, vlo, has_hi, vhi));
    jg_release(t);
    return r;
}

static PyObject *m_clamp(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"min", "max", NULL};
    PyObject *lo = Py_None, *hi = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:clamp", kwlist, &lo, &hi))
        return NULL;
    return clamp_impl(self, lo, hi, "clamp");
}

static PyObject *m_clamp_min(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"min", NULL};
    PyObject *lo;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:clamp_min", kwlist, &lo))
        return NULL;
    if (lo == Py_None) {
        PyErr_SetString(PyExc_TypeError, "clamp_min(): argument 'min' must be Number, not None");
        return NULL;
    }
    return clamp_impl(self, lo, NULL, "clamp_min");
}

static PyObject *m_clamp_max(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"max", NULL};
    PyObject *hi;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:clamp_max", kwlist, &hi))
        return NULL;
    if (hi == Py_None) {
        PyErr_SetString(PyExc_TypeError, "clamp_max(): argument 'max' must be Number, not None");
        return NULL;
    }
    return clamp_impl(self, NULL, hi, "clamp_max");
}

static PyObject *binary_tensor(PyObject *self, PyObject *other, const char *fn,
                               jg_tensor *(*op)(jg_tensor *, jg_tensor *)) {
    if (!jgp_is_tensor(other)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'other' (position 1) must be Tensor, not %s",
                     fn, Py_TYPE(other)->tp_name);
        return NULL;
    }
    return jgp_wrap_new(op(jgp_t(self), jgp_t(other)));
}

static PyObject *m_maximum(PyObject *self, PyObject *other) {
    return binary_tensor(self, other, "maximum", jg_maximum);
}

static PyObject *m_minimum(PyObject *self, PyObject *other) {
    return binary_tensor(self, other, "minimum", jg_minimum);
}

/* base ** exponent where at least one is a tensor and the exponent is not
 * a plain number (tensor ** number stays jg_pow_scalar, in ops.c).  A
 * number base becomes a 0-d tensor of the dtype PyTorch computes in. */
PyObject *jgp_pow_tensor(PyObject *base, PyObject *exp) {
    if (jgp_is_tensor(base) && jgp_is_tensor(exp))
        return jgp_wrap_new(jg_pow(jgp_t(base), jgp_t(exp)));
    if (!jgp_is_tensor(exp) || !is_number(base))
        Py_RETURN_NOTIMPLEMENTED;
    double b = PyFloat_AsDouble(base);
    if (b == -1.0 && PyErr_Occurred())
        return NULL;
    jg_dtype d = jg_dtype_of(jgp_t(exp));
    if (!jgp_dtype_is_float(d))
        d = PyFloat_Check(base) ? JG_F32 : JG_I64;
    jg_tensor *bt = jg_keep(jg_scalar(d, b));
    PyObject *r = bt ? jgp_wrap_new(jg_pow(bt, jgp_t(exp))) : jgp_raise();
    jg_release(bt);
    return r;
}

/* ------------------------------------------------------------ reductions */

static PyObject *m_prod(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dim", "keepdim", "dtype", NULL};
    PyObject *dim = Py_None, *dtype = Py_None;
    int keepdim = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OpO:prod", kwlist, &dim, &keepdim, &dtype))
        return NULL;
    int d = 0;
    if (dim != Py_None && int_arg(dim, "prod", "dim", &d) < 0)
        return NULL;
    jg_tensor *t = with_dtype(self, dtype);
    if (!t)
        return NULL;
    PyObject *r = jgp_wrap_new(dim == Py_None ? jg_prod(t) : jg_prod_dim(t, d, keepdim));
    jg_release(t);
    return r;
}

/* var/std/var_mean(dim=None, unbiased=True, keepdim=False, *, correction=None);
 * a bool first argument is `unbiased` (PyTorch's var(unbiased) overload). */
static int var_args(PyObject *args, PyObject *kw, const char *fn, int *n, int *dims,
                    double *correction, int *keepdim) {
    static char *kwlist[] = {"dim", "unbiased", "keepdim", "correction", NULL};
    PyObject *dim = Py_None, *unbiased = Py_None, *corr = Py_None;
    *keepdim = 0;
    char fmt[64];
    snprintf(fmt, sizeof fmt, "|OOp$O:%s", fn);
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &dim, &unbiased, keepdim, &corr))
        return -1;
    if (PyBool_Check(dim)) { /* var(unbiased) */
        if (unbiased != Py_None) {
            PyErr_Format(PyExc_TypeError, "%s(): unbiased given twice", fn);
            return -1;
        }
        unbiased = dim;
        dim = Py_None;
    }
    if (unbiased != Py_None && corr != Py_None) {
        PyErr_Format(PyExc_RuntimeError, "%s(): Cannot pass both unbiased and correction arguments",
                     fn);
        return -1;
    }
    *correction = 1.0;
    if (unbiased != Py_None) {
        int u = PyObject_IsTrue(unbiased);
        if (u < 0)
            return -1;
        *correction = u ? 1.0 : 0.0;
    } else if (corr != Py_None) {
        *correction = PyFloat_AsDouble(corr);
        if (*correction == -1.0 && PyErr_Occurred())
            return -1;
    }
    return parse_dims(dim, n, dims);
}

static PyObject *var_std(PyObject *self, PyObject *args, PyObject *kw, bool sd) {
    int n, dims[JG_MAX_DIMS], keepdim;
    double c;
    if (var_args(args, kw, sd ? "std" : "var", &n, dims, &c, &keepdim) < 0)
        return NULL;
    jg_tensor *t = jgp_t(self);
    return jgp_wrap_new(sd ? jg_std(t, n, dims, c, keepdim) : jg_var(t, n, dims, c, keepdim));
}

static PyObject *m_var(PyObject *self, PyObject *args, PyObject *kw) {
    return var_std(self, args, kw, false);
}

static PyObject *m_std(PyObject *self, PyObject *args, PyObject *kw) {
    return var_std(self, args, kw, true);
}

/* var_mean / std_mean(input, ...): a plain tuple (var or std, mean), as
 * PyTorch returns */
static PyObject *moments(PyObject *args, PyObject *kw, const char *fn,
                         int (*f)(jg_tensor *, int, const int *, double, bool, jg_tensor **,
                                  jg_tensor **)) {
    Py_ssize_t na = PyTuple_GET_SIZE(args);
    if (na < 1 || !jgp_is_tensor(PyTuple_GET_ITEM(args, 0))) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'input' (position 1) must be Tensor, not %s",
                     fn, na ? Py_TYPE(PyTuple_GET_ITEM(args, 0))->tp_name : "nothing");
        return NULL;
    }
    PyObject *rest = PyTuple_GetSlice(args, 1, na);
    int n, dims[JG_MAX_DIMS], keepdim;
    double c;
    int rc = rest ? var_args(rest, kw, fn, &n, dims, &c, &keepdim) : -1;
    Py_XDECREF(rest);
    if (rc < 0)
        return NULL;
    jg_tensor *v, *m;
    if (f(jgp_t(PyTuple_GET_ITEM(args, 0)), n, dims, c, keepdim, &v, &m) < 0)
        return jgp_raise();
    PyObject *vo = jgp_wrap_new(v), *mo = vo ? jgp_wrap_new(m) : NULL;
    if (!mo) {
        Py_XDECREF(vo);
        return NULL;
    }
    PyObject *r = PyTuple_Pack(2, vo, mo);
    Py_DECREF(vo);
    Py_DECREF(mo);
    return r;
}

static PyObject *f_var_mean(PyObject *mod, PyObject *args, PyObject *kw) {
    (void)mod;
    return moments(args, kw, "var_mean", jg_var_mean);
}

static PyObject *f_std_mean(PyObject *mod, PyObject *args, PyObject *kw) {
    (void)mod;
    return moments(args, kw, "std_mean", jg_std_mean);
}

/* norm(p='fro', dim=None, keepdim=False, dtype=None): p a number, 'fro'
 * (2) or inf / -inf */
static PyObject *m_norm(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"p", "dim", "keepdim", "dtype", NULL};
    PyObject *po = NULL, *dim = Py_None, *dtype = Py_None;
    int keepdim = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOpO:norm", kwlist, &po, &dim, &keepdim, &dtype))
        return NULL;
    double p = 2.0;
    if (po && po != Py_None) {
        if (PyUnicode_Check(po)) {
            const char *s = PyUnicode_AsUTF8(po);
            if (!s)
                return NULL;
            if (strcmp(s, "fro") != 0) {
                PyErr_Format(PyExc_RuntimeError,
                             "jitgrad: norm(p='%s') is not supported (numbers and 'fro' are)", s);
                return NULL;
            }
        } else if (is_number(po)) {
            p = PyFloat_AsDouble(po);
            if (p == -1.0 && PyErr_Occurred())
                return NULL;
        } else {
            PyErr_Format(PyExc_TypeError, "norm(): argument 'p' must be Number, not %s",
                         Py_TYPE(po)->tp_name);
            return NULL;
        }
    }
    int n, dims[JG_MAX_DIMS];
    if (parse_dims(dim, &n, dims) < 0)
        return NULL;
    jg_tensor *t = with_dtype(self, dtype);
    if (!t)
        return NULL;
    PyObject *r = jgp_wrap_new(jg_norm(t, p, n, dims, keepdim));
    jg_release(t);
    return r;
}

static PyObject *m_cumsum(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dim", "dtype", NULL};
    PyObject *dim = NULL, *dtype = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$O:cumsum", kwlist, &dim, &dtype))
        return NULL;
    int d;
    if (!dim) {
        PyErr_SetString(PyExc_TypeError, "cumsum() missing 1 required positional argument: 'dim'");
        return NULL;
    }
    if (int_arg(dim, "cumsum", "dim", &d) < 0)
        return NULL;
    jg_tensor *t = with_dtype(self, dtype);
    if (!t)
        return NULL;
    PyObject *r = jgp_wrap_new(jg_cumsum(t, d));
    jg_release(t);
    return r;
}

/* r, or PyTorch's IndexError for a reduction over nothing */
static PyObject *index_error_if_empty(jg_tensor *r) {
    const char *msg = r ? NULL : jg_last_error();
    if (msg && strstr(msg, "Expected reduction dim")) {
        PyErr_SetString(PyExc_IndexError, msg);
        jg_clear_error();
        return NULL;
    }
    return jgp_wrap_new(r);
}

static PyObject *argext(PyObject *self, PyObject *args, PyObject *kw, bool is_max) {
    static char *kwlist[] = {"dim", "keepdim", NULL};
    PyObject *dim = Py_None;
    int keepdim = 0, d = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, is_max ? "|Op:argmax" : "|Op:argmin", kwlist, &dim,
                                     &keepdim))
        return NULL;
    const char *fn = is_max ? "argmax" : "argmin";
    jg_tensor *t = jgp_t(self);
    if (dim == Py_None) {
        if (!keepdim)
            return index_error_if_empty(is_max ? jg_argmax(t) : jg_argmin(t));
        /* all dims, kept: the flat index in a tensor of ones' shape */
        jg_tensor *r = is_max ? jg_argmax(t) : jg_argmin(t);
        if (!r)
            return index_error_if_empty(r);
        int64_t ones[JG_MAX_DIMS];
        for (int k = 0; k < jg_ndim(t); k++)
            ones[k] = 1;
        return jgp_wrap_new(jg_reshape(r, jg_ndim(t), ones));
    }
    if (int_arg(dim, fn, "dim", &d) < 0)
        return NULL;
    return index_error_if_empty(is_max ? jg_argmax_dim(t, d, keepdim)
                                       : jg_argmin_dim(t, d, keepdim));
}

static PyObject *m_argmax(PyObject *self, PyObject *args, PyObject *kw) {
    return argext(self, args, kw, true);
}

static PyObject *m_argmin(PyObject *self, PyObject *args, PyObject *kw) {
    return argext(self, args, kw, false);
}

static PyObject *m_topk(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"k", "dim", "largest", "sorted", NULL};
    long long k;
    int dim = -1, largest = 1, sorted = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "L|ipp:topk", kwlist, &k, &dim, &largest, &sorted))
        return NULL;
    jg_tensor *v, *i;
    if (jg_topk(jgp_t(self), (int64_t)k, dim, largest, &v, &i) < 0)
        return jgp_raise();
    return pair(&topk_type, &topk_desc, v, i);
}

static PyObject *m_sort(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dim", "descending", "stable", NULL};
    int dim = -1, desc = 0, stable = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|ip$p:sort", kwlist, &dim, &desc, &stable))
        return NULL;
    jg_tensor *v, *i;
    if (jg_sort(jgp_t(self), dim, desc, &v, &i) < 0)
        return jgp_raise();
    return pair(&sort_type, &sort_desc, v, i);
}

/* pow(input, exponent): either may be a number (not both) */
static PyObject *f_pow(PyObject *mod, PyObject *args, PyObject *kw) {
    (void)mod;
    static char *kwlist[] = {"input", "exponent", NULL};
    PyObject *b, *e;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:pow", kwlist, &b, &e))
        return NULL;
    if (jgp_is_tensor(b))
        return PyNumber_Power(b, e, Py_None);
    PyObject *r = jgp_pow_tensor(b, e);
    if (r == Py_NotImplemented) {
        Py_DECREF(r);
        PyErr_Format(PyExc_TypeError, "pow(): expected a Tensor, got %s and %s",
                     Py_TYPE(b)->tp_name, Py_TYPE(e)->tp_name);
        return NULL;
    }
    return r;
}

static PyObject *f_rpow(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *t, *b;
    if (!PyArg_ParseTuple(args, "OO:_rpow", &t, &b))
        return NULL;
    return jgp_pow_tensor(b, t);
}

PyMethodDef jgp_tensor_opsmath_methods[] = {
    {"sin", m_sin, METH_NOARGS, "sin() -> Tensor: elementwise sine"},
    {"cos", m_cos, METH_NOARGS, "cos() -> Tensor: elementwise cosine"},
    {"erf", m_erf, METH_NOARGS, "erf() -> Tensor: elementwise error function"},
    {"clamp", CF(m_clamp), KW, "clamp(min=None, max=None) -> Tensor"},
    {"clip", CF(m_clamp), KW, "clip(min=None, max=None) -> Tensor: alias of clamp"},
    {"clamp_min", CF(m_clamp_min), KW, "clamp_min(min) -> Tensor"},
    {"clamp_max", CF(m_clamp_max), KW, "clamp_max(max) -> Tensor"},
    {"maximum", m_maximum, METH_O, "maximum(other) -> Tensor: elementwise max, NaN wins"},
    {"minimum", m_minimum, METH_O, "minimum(other) -> Tensor: elementwise min, NaN wins"},
    {"prod", CF(m_prod), KW, "prod(dim=None, keepdim=False, dtype=None) -> Tensor"},
    {"var", CF(m_var), KW, "var(dim=None, unbiased=True, keepdim=False, *, correction=None)"},
    {"std", CF(m_std), KW, "std(dim=None, unbiased=True, keepdim=False, *, correction=None)"},
    {"norm", CF(m_norm), KW, "norm(p='fro', dim=None, keepdim=False, dtype=None) -> Tensor"},
    {"cumsum", CF(m_cumsum), KW, "cumsum(dim, *, dtype=None) -> Tensor"},
    {"argmax", CF(m_argmax), KW, "argmax(dim=None, keepdim=False) -> Tensor"},
    {"argmin", CF(m_argmin), KW, "argmin(dim=None, keepdim=False) -> Tensor"},
    {"topk", CF(m_topk), KW, "topk(k, dim=-1, largest=True, sorted=True) -> (values, indices)"},
    {"sort", CF(m_sort), KW,
     "sort(dim=-1, descending=False, *, stable=False) -> (values, "
     "indices)"},
    {NULL, NULL, 0, NULL},
};

PyMethodDef jgp_module_opsmath_functions[] = {
    {"var_mean", CF(f_var_mean), KW,
     "var_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None) -> (var, mean)"},
    {"std_mean", CF(f_std_mean), KW,
     "std_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None) -> (std, mean)"},
    {"pow", CF(f_pow), KW, "pow(input, exponent) -> Tensor: input ** exponent"},
    {"_rpow", f_rpow, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};
