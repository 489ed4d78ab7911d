/* Tensor arithmetic (number protocol, Python scalars on either side),
 * elementwise and reduction methods, views, dtype casts, and the functional
 * ops the module exposes.  Every op is one library call. */
#include "jgpy.h"

#include <structseq.h>

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ helpers */

static bool is_scalar(PyObject *o) {
    return !jgp_is_tensor(o) && (PyFloat_Check(o) || PyLong_Check(o));
}

/* For tensor-with-scalar arithmetic and comparisons: t as the dtype the
 * result has (PyTorch's promotion with a Python number: an int or bool
 * tensor with a float computes in float32, a bool tensor with an int in
 * int64); a new reference we own. */
static jg_tensor *promote_for_scalar(jg_tensor *t, PyObject *s) {
    jg_dtype d = jg_dtype_of(t);
    if (!jgp_dtype_is_float(d) && PyFloat_Check(s))
        return jg_keep(jg_to_dtype(t, JG_F32));
    if (d == JG_BOOL && !PyBool_Check(s))
        return jg_keep(jg_to_dtype(t, JG_I64));
    return jg_retain(t);
}

static jg_tensor *scalar_tensor(jg_dtype d, double v) {
    return jg_keep(jg_scalar(d, v));
}

/* Calls op on (x, y), releases both, wraps the result. */
static PyObject *finish2(jg_tensor *(*op)(jg_tensor *, jg_tensor *), jg_tensor *x, jg_tensor *y) {
    jg_tensor *r = x && y ? op(x, y) : NULL;
    PyObject *o = x && y ? jgp_wrap_new(r) : jgp_raise();
    jg_release(x);
    jg_release(y);
    return o;
}

PyObject *jgp_binary(PyObject *a, PyObject *b, int op) {
    static jg_tensor *(*const ops[])(jg_tensor *, jg_tensor *) = {jg_add, jg_sub, jg_mul, jg_div};
    if (jgp_is_tensor(a) && jgp_is_tensor(b)) {
        jg_tensor *x = jgp_t(a), *y = jgp_t(b);
        if (op == JGP_DIV && !jgp_dtype_is_float(jg_dtype_of(x)) &&
            !jgp_dtype_is_float(jg_dtype_of(y)))
            return finish2(jg_div, jg_keep(jg_to_dtype(x, JG_F32)),
                           jg_keep(jg_to_dtype(y, JG_F32)));
        return jgp_wrap_new(ops[op](x, y));
    }
    bool left = jgp_is_tensor(a);
    PyObject *to = left ? a : b, *so = left ? b : a;
    if (!jgp_is_tensor(to) || !is_scalar(so))
        Py_RETURN_NOTIMPLEMENTED;
    double s = PyFloat_AsDouble(so);
    if (s == -1.0 && PyErr_Occurred())
        return NULL;
    jg_tensor *t = promote_for_scalar(jgp_t(to), so);
    if (!t)
        return jgp_raise();
    if (op == JGP_DIV && !jgp_dtype_is_float(jg_dtype_of(t))) {
        jg_tensor *f = jg_keep(jg_to_dtype(t, JG_F32));
        jg_release(t);
        if (!(t = f))
            return jgp_raise();
    }
    PyObject *r;
    switch (op) {
    case JGP_ADD:
        r = jgp_wrap_new(jg_add_scalar(t, s));
        break;
    case JGP_SUB:
        if (left) {
            r = jgp_wrap_new(jg_add_scalar(t, -s));
        } else {
            jg_tensor *c = scalar_tensor(jg_dtype_of(t), s);
            r = c ? jgp_wrap_new(jg_sub(c, t)) : jgp_raise();
            jg_release(c);
        }
        break;
    case JGP_MUL:
        r = jgp_wrap_new(jg_mul_scalar(t, s));
        break;
    default: {
        jg_tensor *c = scalar_tensor(jg_dtype_of(t), s);
        r = c ? jgp_wrap_new(left ? jg_div(t, c) : jg_div(c, t)) : jgp_raise();
        jg_release(c);
    }
    }
    jg_release(t);
    return r;
}

static PyObject *nb_add(PyObject *a, PyObject *b) {
    return jgp_binary(a, b, JGP_ADD);
}
static PyObject *nb_sub(PyObject *a, PyObject *b) {
    return jgp_binary(a, b, JGP_SUB);
}
static PyObject *nb_mul(PyObject *a, PyObject *b) {
    return jgp_binary(a, b, JGP_MUL);
}
static PyObject *nb_div(PyObject *a, PyObject *b) {
    return jgp_binary(a, b, JGP_DIV);
}

static PyObject *nb_neg(PyObject *a) {
    return jgp_wrap_new(jg_neg(jgp_t(a)));
}

static PyObject *nb_pos(PyObject *a) {
    Py_INCREF(a);
    return a;
}

static PyObject *nb_pow(PyObject *a, PyObject *b, PyObject *mod) {
    if (mod != Py_None)
        Py_RETURN_NOTIMPLEMENTED;
    if (!jgp_is_tensor(a) || jgp_is_tensor(b))
        return jgp_pow_tensor(a, b);
    if (!is_scalar(b))
        Py_RETURN_NOTIMPLEMENTED;
    double s = PyFloat_AsDouble(b);
    if (s == -1.0 && PyErr_Occurred())
        return NULL;
    jg_tensor *t = promote_for_scalar(jgp_t(a), b);
    PyObject *r = t ? jgp_wrap_new(jg_pow_scalar(t, s)) : jgp_raise();
    jg_release(t);
    return r;
}

static PyObject *nb_matmul(PyObject *a, PyObject *b) {
    if (!jgp_is_tensor(a) || !jgp_is_tensor(b))
        Py_RETURN_NOTIMPLEMENTED;
    return jgp_wrap_new(jg_matmul(jgp_t(a), jgp_t(b)));
}

/* In place: the result is self. */
static PyObject *inplace(PyObject *a, PyObject *b, int op, double alpha) {
    if (!jgp_is_tensor(a) || (!jgp_is_tensor(b) && !is_scalar(b)))
        Py_RETURN_NOTIMPLEMENTED;
    jg_tensor *x = jgp_t(a);
    int rc;
    if (op == JGP_DIV && !jgp_dtype_is_float(jg_dtype_of(x))) {
        /* true division gives float, which self cannot hold */
        PyErr_Format(PyExc_RuntimeError,
                     "result type Float can't be cast to the desired output type %s",
                     jg_dtype_of(x) == JG_BOOL  ? "Bool"
                     : jg_dtype_of(x) == JG_I32 ? "Int"
                                                : "Long");
        return NULL;
    }
    if (is_scalar(b)) {
        double s = PyFloat_AsDouble(b);
        if (s == -1.0 && PyErr_Occurred())
            return NULL;
        /* the number's dtype as PyTorch promotes it against x: the in-place
         * op refuses a result x cannot hold (int64 += 1.5) */
        jg_dtype d = jg_dtype_of(x);
        if (!jgp_dtype_is_float(d) && PyFloat_Check(b))
            d = JG_F32;
        else if (d == JG_BOOL && !PyBool_Check(b))
            d = JG_I64;
        if (op == JGP_MUL && d == jg_dtype_of(x)) {
            rc = jg_mul_scalar_(x, s);
        } else {
            jg_tensor *c = scalar_tensor(d, op == JGP_DIV || op == JGP_MUL ? s : s * alpha);
            if (!c)
                return jgp_raise();
            if (op == JGP_ADD) {
                rc = jg_add_(x, c);
            } else if (op == JGP_SUB) {
                rc = jg_sub_(x, c);
            } else if (op == JGP_MUL) {
                rc = jg_mul_(x, c);
            } else {
                rc = jg_div_(x, c);
            }
            jg_release(c);
        }
    } else {
        jg_tensor *y = jgp_t(b), *scaled = NULL;
        if (alpha != 1.0 && (op == JGP_ADD || op == JGP_SUB)) {
            if (!(scaled = jg_keep(jg_mul_scalar(y, alpha))))
                return jgp_raise();
            y = scaled;
        }
        if (op == JGP_ADD) {
            rc = jg_add_(x, y);
        } else if (op == JGP_SUB) {
            rc = jg_sub_(x, y);
        } else if (op == JGP_MUL) {
            rc = jg_mul_(x, y);
        } else {
            rc = jg_div_(x, y);
        }
        jg_release(scaled);
    }
    if (rc < 0)
        return jgp_raise();
    Py_INCREF(a);
    return a;
}

static PyObject *nb_iadd(PyObject *a, PyObject *b) {
    return inplace(a, b, JGP_ADD, 1.0);
}
static PyObject *nb_isub(PyObject *a, PyObject *b) {
    return inplace(a, b, JGP_SUB, 1.0);
}
static PyObject *nb_imul(PyObject *a, PyObject *b) {
    return inplace(a, b, JGP_MUL, 1.0);
}
static PyObject *nb_idiv(PyObject *a, PyObject *b) {
    return inplace(a, b, JGP_DIV, 1.0);
}

static PyObject *nb_abs(PyObject *a) {
    return jgp_wrap_new(jg_abs(jgp_t(a)));
}

/* comparisons and bool ops (below) */
static PyObject *nb_invert(PyObject *a);
static PyObject *nb_and(PyObject *a, PyObject *b);
static PyObject *nb_or(PyObject *a, PyObject *b);
static PyObject *nb_xor(PyObject *a, PyObject *b);

PyNumberMethods jgp_tensor_as_number = {
    .nb_add = nb_add,
    .nb_subtract = nb_sub,
    .nb_multiply = nb_mul,
    .nb_true_divide = nb_div,
    .nb_negative = nb_neg,
    .nb_absolute = nb_abs,
    .nb_positive = nb_pos,
    .nb_power = nb_pow,
    .nb_matrix_multiply = nb_matmul,
    .nb_inplace_add = nb_iadd,
    .nb_inplace_subtract = nb_isub,
    .nb_inplace_multiply = nb_imul,
    .nb_inplace_true_divide = nb_idiv,
    .nb_invert = nb_invert,
    .nb_and = nb_and,
    .nb_or = nb_or,
    .nb_xor = nb_xor,
};

/* ------------------------------------------------------------ arithmetic methods */

static int parse_other_alpha(PyObject *args, PyObject *kw, const char *fn, PyObject **other,
                             double *alpha) {
    static char *kwlist[] = {"other", "alpha", NULL};
    char fmt[64];
    snprintf(fmt, sizeof fmt, "O|$d:%s", fn);
    *alpha = 1.0;
    return PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, other, alpha) ? 0 : -1;
}

static PyObject *with_alpha(PyObject *self, PyObject *other, double alpha, int op) {
    if (alpha == 1.0)
        return jgp_binary(self, other, op);
    PyObject *a = PyFloat_FromDouble(alpha);
    PyObject *scaled = a ? PyNumber_Multiply(other, a) : NULL;
    Py_XDECREF(a);
    if (!scaled)
        return NULL;
    PyObject *r = jgp_binary(self, scaled, op);
    Py_DECREF(scaled);
    return r;
}

#define BIN_METHOD(name, OP, ALPHA)                                                                \
    static PyObject *m_##name(PyObject *self, PyObject *args, PyObject *kw) {                      \
        PyObject *other;                                                                           \
        double alpha;                                                                              \
        if (parse_other_alpha(args, kw, #name, &other, &alpha) < 0)                                \
            return NULL;                                                                           \
        if (!ALPHA && alpha != 1.0) {                                                              \
            PyErr_SetString(PyExc_TypeError, #name "() got an unexpected keyword 'alpha'");        \
            return NULL;                                                                           \
        }                                                                                          \
        PyObject *r = with_alpha(self, other, alpha, OP);                                          \
        if (r == Py_NotImplemented) {                                                              \
            Py_DECREF(r);                                                                          \
            PyErr_Format(PyExc_TypeError,                                                          \
                         #name "(): argument 'other' must be Tensor or Number, "                   \
                               "not %s",                                                           \
                         Py_TYPE(other)->tp_name);                                                 \
            return NULL;                                                                           \
        }                                                                                          \
        return r;                                                                                  \
    }                                                                                              \
    static PyObject *m_##name##_(PyObject *self, PyObject *args, PyObject *kw) {                   \
        PyObject *other;                                                                           \
        double alpha;                                                                              \
        if (parse_other_alpha(args, kw, #name "_", &other, &alpha) < 0)                            \
            return NULL;                                                                           \
        PyObject *r = inplace(self, other, OP, alpha);                                             \
        if (r == Py_NotImplemented) {                                                              \
            Py_DECREF(r);                                                                          \
            PyErr_Format(PyExc_TypeError,                                                          \
                         #name "_(): argument 'other' must be Tensor or Number, "                  \
                               "not %s",                                                           \
                         Py_TYPE(other)->tp_name);                                                 \
            return NULL;                                                                           \
        }                                                                                          \
        return r;                                                                                  \
    }

BIN_METHOD(add, JGP_ADD, 1)
BIN_METHOD(sub, JGP_SUB, 1)
BIN_METHOD(mul, JGP_MUL, 0)
BIN_METHOD(div, JGP_DIV, 0)

static PyObject *m_zero_(PyObject *self, PyObject *unused) {
    (void)unused;
    if (jg_zero_(jgp_t(self)) < 0)
        return jgp_raise();
    return Py_NewRef(self);
}

static PyObject *m_copy_(PyObject *self, PyObject *src) {
    if (!jgp_is_tensor(src)) {
        PyErr_SetString(PyExc_TypeError, "copy_(): argument 'src' must be Tensor");
        return NULL;
    }
    if (jg_copy_(jgp_t(self), jgp_t(src)) < 0)
        return jgp_raise();
    return Py_NewRef(self);
}

static PyObject *m_pow(PyObject *self, PyObject *e) {
    PyObject *r = nb_pow(self, e, Py_None);
    if (r == Py_NotImplemented) {
        Py_DECREF(r);
        PyErr_Format(PyExc_TypeError, "pow(): exponent must be a number, not %s",
                     Py_TYPE(e)->tp_name);
        return NULL;
    }
    return r;
}

static PyObject *m_matmul(PyObject *self, PyObject *other) {
    if (!jgp_is_tensor(other)) {
        PyErr_Format(PyExc_TypeError, "matmul(): argument 'other' must be Tensor, not %s",
                     Py_TYPE(other)->tp_name);
        return NULL;
    }
    return jgp_wrap_new(jg_matmul(jgp_t(self), jgp_t(other)));
}

#define UNARY_METHOD(name, fn)                                                                     \
    static PyObject *m_##name(PyObject *self, PyObject *unused) {                                  \
        (void)unused;                                                                              \
        return jgp_wrap_new(fn(jgp_t(self)));                                                      \
    }
UNARY_METHOD(neg, jg_neg)
UNARY_METHOD(exp, jg_exp)
UNARY_METHOD(log, jg_log)
UNARY_METHOD(tanh, jg_tanh)
UNARY_METHOD(sigmoid, jg_sigmoid)
UNARY_METHOD(relu, jg_relu)
UNARY_METHOD(abs, jg_abs)
UNARY_METHOD(sqrt, jg_sqrt)
UNARY_METHOD(clone, jg_clone)
UNARY_METHOD(detach, jg_detach)
UNARY_METHOD(contiguous, jg_contiguous)

static PyObject *m_square(PyObject *self, PyObject *unused) {
    (void)unused;
    return jgp_wrap_new(jg_mul(jgp_t(self), jgp_t(self)));
}

/* ------------------------------------------------------------ reductions */

/* dim: None, an int, or a sequence of ints. */
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

static PyObject *reduce(PyObject *self, PyObject *args, PyObject *kw, bool mean) {
    static char *kwlist[] = {"dim", "keepdim", "dtype", NULL};
    PyObject *dim = Py_None, *dtype = Py_None;
    int keepdim = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, mean ? "|OpO:mean" : "|OpO:sum", kwlist, &dim,
                                     &keepdim, &dtype))
        return NULL;
    jg_tensor *t = jgp_t(self), *cast = NULL;
    jg_dtype d;
    bool given;
    if (jgp_parse_dtype(dtype, &d, &given) < 0)
        return NULL;
    if (given && d != jg_dtype_of(t)) {
        if (!(cast = jg_keep(jg_to_dtype(t, d))))
            return jgp_raise();
        t = cast;
    }
    if (mean && jg_dtype_of(t) == JG_I64) {
        jg_release(cast);
        PyErr_SetString(PyExc_RuntimeError,
                        "mean(): could not infer output dtype. Input dtype must be either a "
                        "floating point or complex dtype. Got: Long");
        return NULL;
    }
    int n, dims[JG_MAX_DIMS];
    PyObject *r;
    if (parse_dims(dim, &n, dims) < 0)
        r = NULL;
    else if (dim == Py_None && !keepdim)
        r = jgp_wrap_new(mean ? jg_mean(t) : jg_sum(t));
    else if (dim == Py_None) { /* all dims, kept */
        int all[JG_MAX_DIMS];
        for (int i = 0; i < jg_ndim(t); i++)
            all[i] = i;
        r = jgp_wrap_new(mean ? jg_mean_dims(t, jg_ndim(t), all, true)
                              : jg_sum_dims(t, jg_ndim(t), all, true));
    } else
        r = jgp_wrap_new(mean ? jg_mean_dims(t, n, dims, keepdim)
                              : jg_sum_dims(t, n, dims, keepdim));
    jg_release(cast);
    return r;
}

static PyObject *m_sum(PyObject *self, PyObject *args, PyObject *kw) {
    return reduce(self, args, kw, false);
}
static PyObject *m_mean(PyObject *self, PyObject *args, PyObject *kw) {
    return reduce(self, args, kw, true);
}

static PyStructSequence_Field max_fields[] = {{"values", NULL}, {"indices", NULL}, {NULL, NULL}};
static PyStructSequence_Desc max_desc = {"jitgrad.return_types.max", NULL, max_fields, 2};
static PyTypeObject *max_type;

static PyObject *m_max(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dim", "keepdim", NULL};
    PyObject *dim = Py_None;
    int keepdim = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Op:max", kwlist, &dim, &keepdim))
        return NULL;
    jg_tensor *t = jgp_t(self), *v, *i;
    if (jgp_is_tensor(dim)) /* max(other): PyTorch's elementwise maximum */
        return jgp_wrap_new(jg_maximum(t, jgp_t(dim)));
    if (dim == Py_None) {
        if (keepdim) {
            PyErr_SetString(PyExc_TypeError, "max(): keepdim needs a dim");
            return NULL;
        }
        if (jg_numel(t) == 0) {
            PyErr_SetString(PyExc_RuntimeError,
                            "max(): Expected reduction dim to be specified for input.numel() == 0. "
                            "Specify the reduction dim with the 'dim' argument.");
            return NULL;
        }
        return jgp_wrap_new(jg_max(t));
    }
    int d = _PyLong_AsInt(dim);
    if (d == -1 && PyErr_Occurred())
        return NULL;
    if (jg_max_dim(t, d, keepdim, &v, &i) < 0)
        return jgp_raise();
    PyObject *vo = jgp_wrap_new(v), *io = jgp_wrap_new(i);
    PyObject *r = vo && io ? PyStructSequence_New(max_type) : NULL;
    if (!r) {
        Py_XDECREF(vo);
        Py_XDECREF(io);
        return NULL;
    }
    PyStructSequence_SET_ITEM(r, 0, vo);
    PyStructSequence_SET_ITEM(r, 1, io);
    return r;
}

static int dim_arg(PyObject *args, PyObject *kw, const char *fn, int *dim) {
    static char *kwlist[] = {"dim", "dtype", NULL};
    PyObject *d = Py_None, *dtype = Py_None;
    char fmt[64];
    snprintf(fmt, sizeof fmt, "|OO:%s", fn);
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &d, &dtype))
        return -1;
    if (d == Py_None) {
        PyErr_Format(PyExc_TypeError, "%s() missing 1 required positional argument: 'dim'", fn);
        return -1;
    }
    *dim = _PyLong_AsInt(d);
    return *dim == -1 && PyErr_Occurred() ? -1 : 0;
}

static PyObject *m_softmax(PyObject *self, PyObject *args, PyObject *kw) {
    int dim;
    if (dim_arg(args, kw, "softmax", &dim) < 0)
        return NULL;
    return jgp_wrap_new(jg_softmax(jgp_t(self), dim));
}

static PyObject *m_log_softmax(PyObject *self, PyObject *args, PyObject *kw) {
    int dim;
    if (dim_arg(args, kw, "log_softmax", &dim) < 0)
        return NULL;
    return jgp_wrap_new(jg_log_softmax(jgp_t(self), dim));
}

/* ------------------------------------------------------------ views */

static PyObject *m_reshape(PyObject *self, PyObject *args) {
    int nd;
    int64_t shape[JG_MAX_DIMS];
    if (jgp_parse_shape(args, &nd, shape) < 0)
        return NULL;
    return jgp_wrap_new(jg_reshape(jgp_t(self), nd, shape));
}

static PyObject *m_view(PyObject *self, PyObject *args) {
    if (PyTuple_GET_SIZE(args) == 1 &&
        PyObject_TypeCheck(PyTuple_GET_ITEM(args, 0), &JGDtype_Type)) {
        PyErr_SetString(PyExc_RuntimeError, "jitgrad: view(dtype) is not supported");
        return NULL;
    }
    int nd;
    int64_t shape[JG_MAX_DIMS];
    if (jgp_parse_shape(args, &nd, shape) < 0)
        return NULL;
    return jgp_wrap_new(jg_view(jgp_t(self), nd, shape));
}

static PyObject *shaped_like(PyObject *self, PyObject *other, bool view) {
    if (!jgp_is_tensor(other)) {
        PyErr_SetString(PyExc_TypeError, "expected a Tensor");
        return NULL;
    }
    PyObject *shape = PyObject_GetAttrString(other, "shape");
    if (!shape)
        return NULL;
    PyObject *args = PyTuple_Pack(1, shape);
    Py_DECREF(shape);
    if (!args)
        return NULL;
    PyObject *r = view ? m_view(self, args) : m_reshape(self, args);
    Py_DECREF(args);
    return r;
}

static PyObject *m_view_as(PyObject *self, PyObject *other) {
    return shaped_like(self, other, true);
}
static PyObject *m_reshape_as(PyObject *self, PyObject *other) {
    return shaped_like(self, other, false);
}

static PyObject *m_expand(PyObject *self, PyObject *args) {
    int nd;
    int64_t shape[JG_MAX_DIMS];
    if (jgp_parse_shape(args, &nd, shape) < 0)
        return NULL;
    return jgp_wrap_new(jg_expand(jgp_t(self), nd, shape));
}

static PyObject *m_expand_as(PyObject *self, PyObject *other) {
    if (!jgp_is_tensor(other)) {
        PyErr_SetString(PyExc_TypeError, "expected a Tensor");
        return NULL;
    }
    jg_tensor *o = jgp_t(other);
    return jgp_wrap_new(jg_expand(jgp_t(self), jg_ndim(o), jg_shape(o)));
}

static PyObject *m_transpose(PyObject *self, PyObject *args) {
    int d0, d1;
    if (!PyArg_ParseTuple(args, "ii:transpose", &d0, &d1))
        return NULL;
    return jgp_wrap_new(jg_transpose(jgp_t(self), d0, d1));
}

static PyObject *m_t(PyObject *self, PyObject *unused) {
    (void)unused;
    jg_tensor *t = jgp_t(self);
    if (jg_ndim(t) > 2) {
        PyErr_Format(PyExc_RuntimeError,
                     "t() expects a tensor with <= 2 dimensions, but self is %dD", jg_ndim(t));
        return NULL;
    }
    if (jg_ndim(t) < 2) {
        int64_t shape[1] = {jg_ndim(t) ? jg_shape(t)[0] : 0};
        return jgp_wrap_new(jg_reshape(t, jg_ndim(t), shape));
    }
    return jgp_wrap_new(jg_transpose(t, 0, 1));
}

static PyObject *m_permute(PyObject *self, PyObject *args) {
    int nd;
    int64_t p[JG_MAX_DIMS];
    if (jgp_parse_shape(args, &nd, p) < 0)
        return NULL;
    jg_tensor *t = jgp_t(self);
    if (nd != jg_ndim(t)) {
        PyErr_Format(PyExc_RuntimeError,
                     "permute(sparse_coo): number of dimensions in the tensor input does not match "
                     "the length of the desired ordering of dimensions i.e. input.dim() = %d is "
                     "not equal to len(dims) = %d",
                     jg_ndim(t), nd);
        return NULL;
    }
    int perm[JG_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        perm[i] = (int)p[i];
    return jgp_wrap_new(jg_permute(t, perm));
}

static int wrap_dim_ins(int dim, int ndim, bool insert) {
    int n = ndim + (insert ? 1 : 0);
    if (n == 0)
        n = 1;
    if (dim < -n || dim >= n) {
        PyErr_Format(PyExc_IndexError,
                     "Dimension out of range (expected to be in range of [%d, %d], but got %d)", -n,
                     n - 1, dim);
        return -1;
    }
    return dim < 0 ? dim + n : dim;
}

static PyObject *m_unsqueeze(PyObject *self, PyObject *args) {
    int dim;
    if (!PyArg_ParseTuple(args, "i:unsqueeze", &dim))
        return NULL;
    jg_tensor *t = jgp_t(self);
    int nd = jg_ndim(t);
    if ((dim = wrap_dim_ins(dim, nd, true)) < 0)
        return NULL;
    int64_t shape[JG_MAX_DIMS];
    for (int i = 0, k = 0; i <= nd; i++) {
        if (i == dim)
            shape[k++] = 1;
        if (i < nd)
            shape[k++] = jg_shape(t)[i];
    }
    return jgp_wrap_new(jg_reshape(t, nd + 1, shape));
}

static PyObject *m_squeeze(PyObject *self, PyObject *args) {
    PyObject *dim = Py_None;
    if (!PyArg_ParseTuple(args, "|O:squeeze", &dim))
        return NULL;
    jg_tensor *t = jgp_t(self);
    int nd = jg_ndim(t), only = -1;
    if (dim != Py_None) {
        only = _PyLong_AsInt(dim);
        if ((only == -1 && PyErr_Occurred()) || (only = wrap_dim_ins(only, nd, false)) < 0)
            return NULL;
    }
    int64_t shape[JG_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < nd; i++)
        if (!(jg_shape(t)[i] == 1 && (only < 0 || only == i)))
            shape[k++] = jg_shape(t)[i];
    return jgp_wrap_new(jg_reshape(t, k, shape));
}

static PyObject *m_flatten(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"start_dim", "end_dim", NULL};
    int s = 0, e = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|ii:flatten", kwlist, &s, &e))
        return NULL;
    jg_tensor *t = jgp_t(self);
    int nd = jg_ndim(t);
    if (nd == 0) {
        int64_t one = 1;
        return jgp_wrap_new(jg_reshape(t, 1, &one));
    }
    if ((s = wrap_dim_ins(s, nd, false)) < 0 || (e = wrap_dim_ins(e, nd, false)) < 0)
        return NULL;
    if (s > e) {
        PyErr_SetString(PyExc_RuntimeError, "flatten() has invalid args: start_dim cannot come "
                                            "after end_dim");
        return NULL;
    }
    int64_t shape[JG_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < nd; i++) {
        if (i <= s || i > e)
            shape[k++] = jg_shape(t)[i];
        else
            shape[k - 1] *= jg_shape(t)[i];
    }
    return jgp_wrap_new(jg_reshape(t, k, shape));
}

/* ------------------------------------------------------------ dtype casts */

static PyObject *cast(PyObject *self, jg_dtype d) {
    if (jg_dtype_of(jgp_t(self)) == d)
        return Py_NewRef(self);
    return jgp_wrap_new(jg_to_dtype(jgp_t(self), d));
}

static PyObject *m_float(PyObject *self, PyObject *unused) {
    (void)unused;
    return cast(self, JG_F32);
}
static PyObject *m_double(PyObject *self, PyObject *unused) {
    (void)unused;
    return cast(self, JG_F64);
}
static PyObject *m_long(PyObject *self, PyObject *unused) {
    (void)unused;
    return cast(self, JG_I64);
}
static PyObject *m_int(PyObject *self, PyObject *unused) {
    (void)unused;
    return cast(self, JG_I32);
}
static PyObject *m_bool(PyObject *self, PyObject *unused) {
    (void)unused;
    return cast(self, JG_BOOL);
}

/* ------------------------------------------------------------ comparisons and logical ops */

enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE };

/* self <op> other for a tensor or a Python number; NotImplemented for
 * anything else (so == None is False and < "a" a TypeError, as in
 * PyTorch). */
static PyObject *compare(PyObject *self, PyObject *other, int op);

/* A NumPy scalar (or 0-d array: ndim 0 and item()) compares as the Python
 * number item() gives; anything else is NotImplemented. */
static PyObject *compare_numpy_scalar(PyObject *self, PyObject *other, int op) {
    if (PyUnicode_Check(other) || PyBytes_Check(other) || !PyObject_HasAttrString(other, "ndim") ||
        !PyObject_HasAttrString(other, "item"))
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *nd = PyObject_GetAttrString(other, "ndim");
    long ndim = nd && PyLong_Check(nd) ? PyLong_AsLong(nd) : -1;
    Py_XDECREF(nd);
    PyErr_Clear();
    if (ndim != 0)
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *v = PyObject_CallMethod(other, "item", NULL);
    if (!v)
        return NULL;
    PyObject *r = is_scalar(v) ? compare(self, v, op) : Py_NewRef(Py_NotImplemented);
    Py_DECREF(v);
    return r;
}

static PyObject *compare(PyObject *self, PyObject *other, int op) {
    typedef jg_tensor *(*tt_fn)(jg_tensor *, jg_tensor *);
    typedef jg_tensor *(*ts_fn)(jg_tensor *, double);
    static const tt_fn tt[] = {jg_eq, jg_ne, jg_lt, jg_le, jg_gt, jg_ge};
    static const ts_fn ts[] = {jg_eq_scalar, jg_ne_scalar, jg_lt_scalar,
                               jg_le_scalar, jg_gt_scalar, jg_ge_scalar};
    if (jgp_is_tensor(other))
        return jgp_wrap_new(tt[op](jgp_t(self), jgp_t(other)));
    if (!is_scalar(other))
        return compare_numpy_scalar(self, other, op);
    double s = PyFloat_AsDouble(other);
    if (s == -1.0 && PyErr_Occurred())
        return NULL;
    jg_tensor *t = promote_for_scalar(jgp_t(self), other);
    PyObject *r = t ? jgp_wrap_new(ts[op](t, s)) : jgp_raise();
    jg_release(t);
    return r;
}

static PyObject *tensor_richcompare(PyObject *self, PyObject *other, int pyop) {
    static const int map[] = {[Py_EQ] = CMP_EQ, [Py_NE] = CMP_NE, [Py_LT] = CMP_LT,
                              [Py_LE] = CMP_LE, [Py_GT] = CMP_GT, [Py_GE] = CMP_GE};
    if (!jgp_is_tensor(self)) /* reflected: Python swapped the operands and the op */
        Py_RETURN_NOTIMPLEMENTED;
    return compare(self, other, map[pyop]);
}
richcmpfunc jgp_tensor_richcompare = tensor_richcompare;

#define CMP_METHOD(name, OP)                                                                       \
    static PyObject *m_##name(PyObject *self, PyObject *other) {                                   \
        PyObject *r = compare(self, other, OP);                                                    \
        if (r == Py_NotImplemented) {                                                              \
            Py_DECREF(r);                                                                          \
            PyErr_Format(PyExc_TypeError,                                                          \
                         #name "(): argument 'other' must be Tensor or Number, not %s",            \
                         Py_TYPE(other)->tp_name);                                                 \
            return NULL;                                                                           \
        }                                                                                          \
        return r;                                                                                  \
    }
CMP_METHOD(eq, CMP_EQ)
CMP_METHOD(ne, CMP_NE)
CMP_METHOD(lt, CMP_LT)
CMP_METHOD(le, CMP_LE)
CMP_METHOD(gt, CMP_GT)
CMP_METHOD(ge, CMP_GE)

/* A Python number or one-element tensor as a 0-d tensor we own: in like's
 * dtype when like is floating or the number is integral, else float32
 * (PyTorch's promotion of a Python scalar against a tensor). */
static jg_tensor *as_tensor_like(PyObject *o, jg_tensor *like) {
    if (jgp_is_tensor(o))
        return jg_retain(jgp_t(o));
    if (!is_scalar(o)) {
        PyErr_Format(PyExc_TypeError, "expected a Tensor or a number, got %s", Py_TYPE(o)->tp_name);
        return NULL;
    }
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred())
        return NULL;
    jg_dtype d = like ? jg_dtype_of(like) : JG_I64;
    if (PyFloat_Check(o) && !jgp_dtype_is_float(d))
        d = JG_F32;
    else if (PyBool_Check(o) && !like)
        d = JG_BOOL;
    else if (!PyBool_Check(o) && d == JG_BOOL)
        d = JG_I64;
    jg_tensor *t = jg_keep(jg_scalar(d, v));
    if (!t)
        jgp_raise();
    return t;
}

/* logical_and/or/xor with a tensor or a number */
#define LOGICAL_METHOD(name)                                                                       \
    static PyObject *m_##name(PyObject *self, PyObject *other) {                                   \
        jg_tensor *o = as_tensor_like(other, jgp_t(self));                                         \
        if (!o)                                                                                    \
            return NULL;                                                                           \
        PyObject *r = jgp_wrap_new(jg_##name(jgp_t(self), o));                                     \
        jg_release(o);                                                                             \
        return r;                                                                                  \
    }
LOGICAL_METHOD(logical_and)
LOGICAL_METHOD(logical_or)
LOGICAL_METHOD(logical_xor)

static PyObject *m_logical_not(PyObject *self, PyObject *unused) {
    (void)unused;
    return jgp_wrap_new(jg_logical_not(jgp_t(self)));
}

/* ~, &, |, ^: PyTorch's bitwise ops, which jitgrad has for bool tensors
 * only (where they are the logical ones). */
static int need_bool(PyObject *a, const char *op) {
    if (jgp_is_tensor(a) && jg_dtype_of(jgp_t(a)) == JG_BOOL)
        return 0;
    PyErr_Format(PyExc_TypeError,
                 "jitgrad: the %s operator is supported on bool tensors only (got %s); use "
                 "logical_and/or/xor/not for other dtypes",
                 op, jgp_is_tensor(a) ? jg_dtype_name(jg_dtype_of(jgp_t(a))) : Py_TYPE(a)->tp_name);
    return -1;
}

static PyObject *nb_invert(PyObject *a) {
    if (need_bool(a, "~") < 0)
        return NULL;
    return jgp_wrap_new(jg_logical_not(jgp_t(a)));
}

static PyObject *bitwise(PyObject *a, PyObject *b, jg_tensor *(*fn)(jg_tensor *, jg_tensor *),
                         const char *op) {
    if (!jgp_is_tensor(a)) { /* reflected */
        PyObject *t = a;
        a = b;
        b = t;
    }
    if (!jgp_is_tensor(b) && !PyBool_Check(b))
        Py_RETURN_NOTIMPLEMENTED;
    if (need_bool(a, op) < 0 || (jgp_is_tensor(b) && need_bool(b, op) < 0))
        return NULL;
    jg_tensor *o = as_tensor_like(b, jgp_t(a));
    if (!o)
        return NULL;
    PyObject *r = jgp_wrap_new(fn(jgp_t(a), o));
    jg_release(o);
    return r;
}
static PyObject *nb_and(PyObject *a, PyObject *b) {
    return bitwise(a, b, jg_logical_and, "&");
}
static PyObject *nb_or(PyObject *a, PyObject *b) {
    return bitwise(a, b, jg_logical_or, "|");
}
static PyObject *nb_xor(PyObject *a, PyObject *b) {
    return bitwise(a, b, jg_logical_xor, "^");
}

/* any() / any(dim, keepdim=False), and all */
static PyObject *any_all(PyObject *self, PyObject *args, PyObject *kw, bool all) {
    static char *kwlist[] = {"dim", "keepdim", NULL};
    PyObject *dim = Py_None;
    int keepdim = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, all ? "|Op:all" : "|Op:any", kwlist, &dim, &keepdim))
        return NULL;
    jg_tensor *t = jgp_t(self);
    if (dim == Py_None)
        return jgp_wrap_new(all ? jg_all(t) : jg_any(t));
    long d = PyLong_AsLong(dim);
    if (d == -1 && PyErr_Occurred())
        return NULL;
    return jgp_wrap_new(all ? jg_all_dim(t, (int)d, keepdim) : jg_any_dim(t, (int)d, keepdim));
}
static PyObject *m_any(PyObject *self, PyObject *args, PyObject *kw) {
    return any_all(self, args, kw, false);
}
static PyObject *m_all(PyObject *self, PyObject *args, PyObject *kw) {
    return any_all(self, args, kw, true);
}

/* masked_fill(mask, value): value a number or a one-element tensor */
static PyObject *masked_fill(PyObject *self, PyObject *args, bool inplace) {
    PyObject *mask, *value;
    if (!PyArg_ParseTuple(args, inplace ? "OO:masked_fill_" : "OO:masked_fill", &mask, &value))
        return NULL;
    if (!jgp_is_tensor(mask)) {
        PyErr_Format(PyExc_TypeError, "masked_fill(): argument 'mask' must be Tensor, not %s",
                     Py_TYPE(mask)->tp_name);
        return NULL;
    }
    double v;
    if (jgp_is_tensor(value)) {
        jg_tensor *vt = jgp_t(value);
        if (jg_ndim(vt) != 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "masked_fill_ only supports a 0-dimensional value tensor, but got tensor "
                         "with %d dimension(s).",
                         jg_ndim(vt));
            return NULL;
        }
        v = jg_item(vt);
        if (isnan(v) && jg_last_error()[0])
            return jgp_raise();
    } else {
        v = PyFloat_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred())
            return NULL;
    }
    jg_tensor *x = jgp_t(self);
    if (!inplace)
        return jgp_wrap_new(jg_masked_fill(x, jgp_t(mask), v));
    /* in place: one masked_fill node (the in-place machinery keeps the old
     * values for its backward) */
    if (jg_masked_fill_(x, jgp_t(mask), v) < 0)
        return jgp_raise();
    return Py_NewRef(self);
}
static PyObject *m_masked_fill(PyObject *self, PyObject *args) {
    return masked_fill(self, args, false);
}
static PyObject *m_masked_fill_(PyObject *self, PyObject *args) {
    return masked_fill(self, args, true);
}

/* where(cond, x, y) with x and y tensors or numbers */
static PyObject *where3(PyObject *cond, PyObject *x, PyObject *y) {
    if (!jgp_is_tensor(cond)) {
        PyErr_Format(PyExc_TypeError, "where(): argument 'condition' must be Tensor, not %s",
                     Py_TYPE(cond)->tp_name);
        return NULL;
    }
    jg_tensor *like = jgp_is_tensor(x) ? jgp_t(x) : jgp_is_tensor(y) ? jgp_t(y) : NULL;
    jg_tensor *a = as_tensor_like(x, like), *b = a ? as_tensor_like(y, like) : NULL;
    PyObject *r = a && b ? jgp_wrap_new(jg_where(jgp_t(cond), a, b)) : NULL;
    jg_release(a);
    jg_release(b);
    return r;
}

static PyObject *m_where(PyObject *self, PyObject *args) {
    PyObject *cond, *other;
    if (!PyArg_ParseTuple(args, "OO:where", &cond, &other))
        return NULL;
    return where3(cond, self, other);
}

static PyObject *f_where(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *cond, *x = NULL, *y = NULL;
    if (!PyArg_ParseTuple(args, "O|OO:where", &cond, &x, &y))
        return NULL;
    if (!x || !y) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "jitgrad: where(condition) with one argument (nonzero) is not supported");
        return NULL;
    }
    return where3(cond, x, y);
}

/* to(dtype) / to(device) / to(device, dtype) / to(tensor) / to(dtype=...) */
static PyObject *m_to(PyObject *self, PyObject *args, PyObject *kw) {
    jg_dtype d = jg_dtype_of(jgp_t(self));
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        bool given;
        if (jgp_is_tensor(a)) {
            d = jg_dtype_of(jgp_t(a));
        } else if (PyObject_TypeCheck(a, &JGDtype_Type) ||
                   PyObject_HasAttrString(a, "_unsupported_dtype")) {
            if (jgp_parse_dtype(a, &d, &given) < 0)
                return NULL;
        } else if (jgp_check_device(a) < 0) {
            return NULL;
        }
    }
    if (kw) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(kw, &pos, &k, &v)) {
            const char *name = PyUnicode_AsUTF8(k);
            bool given;
            if (name && strcmp(name, "dtype") == 0) {
                if (jgp_parse_dtype(v, &d, &given) < 0)
                    return NULL;
            } else if (name && strcmp(name, "device") == 0) {
                if (jgp_check_device(v) < 0)
                    return NULL;
            } else if (name && (strcmp(name, "non_blocking") == 0 || strcmp(name, "copy") == 0)) {
                continue;
            } else {
                PyErr_Format(PyExc_TypeError, "to() got an unexpected keyword argument '%U'", k);
                return NULL;
            }
        }
    }
    return cast(self, d);
}

static PyObject *m_type_as(PyObject *self, PyObject *other) {
    if (!jgp_is_tensor(other)) {
        PyErr_SetString(PyExc_TypeError, "type_as(): expected a Tensor");
        return NULL;
    }
    return cast(self, jg_dtype_of(jgp_t(other)));
}

#define KW (METH_VARARGS | METH_KEYWORDS)
#define CF(f) ((PyCFunction)(void (*)(void))(f))

PyMethodDef jgp_tensor_op_methods[] = {
    {"add", CF(m_add), KW, NULL},
    {"sub", CF(m_sub), KW, NULL},
    {"mul", CF(m_mul), KW, NULL},
    {"div", CF(m_div), KW, NULL},
    {"add_", CF(m_add_), KW, NULL},
    {"sub_", CF(m_sub_), KW, NULL},
    {"mul_", CF(m_mul_), KW, NULL},
    {"div_", CF(m_div_), KW, NULL},
    {"zero_", m_zero_, METH_NOARGS, NULL},
    {"copy_", m_copy_, METH_O, NULL},
    {"pow", m_pow, METH_O, NULL},
    {"matmul", m_matmul, METH_O, NULL},
    {"mm", m_matmul, METH_O, NULL},
    {"neg", m_neg, METH_NOARGS, NULL},
    {"exp", m_exp, METH_NOARGS, NULL},
    {"log", m_log, METH_NOARGS, NULL},
    {"tanh", m_tanh, METH_NOARGS, NULL},
    {"sigmoid", m_sigmoid, METH_NOARGS, NULL},
    {"relu", m_relu, METH_NOARGS, NULL},
    {"sqrt", m_sqrt, METH_NOARGS, NULL},
    {"square", m_square, METH_NOARGS, NULL},
    {"abs", m_abs, METH_NOARGS, NULL},
    {"clone", m_clone, METH_NOARGS, NULL},
    {"detach", m_detach, METH_NOARGS, NULL},
    {"contiguous", m_contiguous, METH_NOARGS, NULL},
    {"sum", CF(m_sum), KW, NULL},
    {"mean", CF(m_mean), KW, NULL},
    {"max", CF(m_max), KW, NULL},
    {"softmax", CF(m_softmax), KW, NULL},
    {"log_softmax", CF(m_log_softmax), KW, NULL},
    {"view", m_view, METH_VARARGS, NULL},
    {"reshape", m_reshape, METH_VARARGS, NULL},
    {"view_as", m_view_as, METH_O, NULL},
    {"reshape_as", m_reshape_as, METH_O, NULL},
    {"expand", m_expand, METH_VARARGS, NULL},
    {"expand_as", m_expand_as, METH_O, NULL},
    {"transpose", m_transpose, METH_VARARGS, NULL},
    {"t", m_t, METH_NOARGS, NULL},
    {"permute", m_permute, METH_VARARGS, NULL},
    {"unsqueeze", m_unsqueeze, METH_VARARGS, NULL},
    {"squeeze", m_squeeze, METH_VARARGS, NULL},
    {"flatten", CF(m_flatten), KW, NULL},
    {"float", m_float, METH_NOARGS, NULL},
    {"double", m_double, METH_NOARGS, NULL},
    {"long", m_long, METH_NOARGS, NULL},
    {"to", CF(m_to), KW, NULL},
    {"int", m_int, METH_NOARGS, NULL},
    {"bool", m_bool, METH_NOARGS, NULL},
    {"eq", m_eq, METH_O, NULL},
    {"ne", m_ne, METH_O, NULL},
    {"lt", m_lt, METH_O, NULL},
    {"le", m_le, METH_O, NULL},
    {"gt", m_gt, METH_O, NULL},
    {"ge", m_ge, METH_O, NULL},
    {"logical_and", m_logical_and, METH_O, NULL},
    {"logical_or", m_logical_or, METH_O, NULL},
    {"logical_xor", m_logical_xor, METH_O, NULL},
    {"logical_not", m_logical_not, METH_NOARGS, NULL},
    {"any", CF(m_any), KW, NULL},
    {"all", CF(m_all), KW, NULL},
    {"masked_fill", m_masked_fill, METH_VARARGS, NULL},
    {"masked_fill_", m_masked_fill_, METH_VARARGS, NULL},
    {"where", m_where, METH_VARARGS, NULL},
    {"type_as", m_type_as, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------ module functions */

/* _cross_entropy(input, target, reduction: "mean"|"sum"|"none", ignore_index) */
static PyObject *f_cross_entropy(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x, *y;
    const char *red = "mean";
    long long ignore = -100;
    if (!PyArg_ParseTuple(args, "OO|sL:cross_entropy", &x, &y, &red, &ignore))
        return NULL;
    if (!jgp_is_tensor(x) || !jgp_is_tensor(y)) {
        PyErr_SetString(PyExc_TypeError, "cross_entropy(): input and target must be Tensors");
        return NULL;
    }
    jg_reduction r;
    if (!strcmp(red, "mean"))
        r = JG_REDUCTION_MEAN;
    else if (!strcmp(red, "sum"))
        r = JG_REDUCTION_SUM;
    else if (!strcmp(red, "none"))
        r = JG_REDUCTION_NONE;
    else {
        PyErr_Format(PyExc_ValueError, "%s is not a valid value for reduction", red);
        return NULL;
    }
    return jgp_wrap_new(jg_cross_entropy_ex(jgp_t(x), jgp_t(y), r, (int64_t)ignore));
}

PyMethodDef jgp_module_op_functions[] = {
    {"_cross_entropy", f_cross_entropy, METH_VARARGS, NULL},
    {"where", f_where, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int jgp_ops_init(PyObject *module);
int jgp_ops_init(PyObject *module) {
    (void)module;
    max_type = PyStructSequence_NewType(&max_desc);
    return max_type ? 0 : -1;
}
