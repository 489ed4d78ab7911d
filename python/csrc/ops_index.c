/* Bindings of the gather/scatter family and the other common tensor ops of
 * ops/surface3.c: one primitive each, positional arguments already checked
 * and converted by jitgrad/_indexops.py, which gives them PyTorch's
 * signatures (keywords, defaults, Python scalars, in-place forms). */
#include "jgpy.h"

#define T(o) jgp_t(o)

/* A tuple of ints (at most JG_MAX_DIMS) into v; returns the count or -1. */
static int int_tuple(PyObject *o, int64_t *v) {
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) > JG_MAX_DIMS) {
        PyErr_SetString(PyExc_TypeError, "expected a tuple of at most 8 ints");
        return -1;
    }
    int n = (int)PyTuple_GET_SIZE(o);
    for (int k = 0; k < n; k++) {
        v[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(o, k));
        if (v[k] == -1 && PyErr_Occurred())
            return -1;
    }
    return n;
}

static int dims_tuple(PyObject *o, int *d) {
    int64_t v[JG_MAX_DIMS];
    int n = int_tuple(o, v);
    for (int k = 0; k < n; k++)
        d[k] = (int)v[k];
    return n;
}

static PyObject *m_gather(PyObject *self, PyObject *args) {
    int dim;
    PyObject *idx;
    if (!PyArg_ParseTuple(args, "iO!", &dim, JGTensor_Type, &idx))
        return NULL;
    return jgp_wrap_new(jg_gather(T(self), dim, T(idx)));
}

/* (dim, index, src) for scatter, scatter_add, index_add (with alpha),
 * index_copy */
static PyObject *m_scatter(PyObject *self, PyObject *args) {
    int dim;
    PyObject *idx, *src;
    if (!PyArg_ParseTuple(args, "iO!O!", &dim, JGTensor_Type, &idx, JGTensor_Type, &src))
        return NULL;
    return jgp_wrap_new(jg_scatter(T(self), dim, T(idx), T(src)));
}

static PyObject *m_scatter_add(PyObject *self, PyObject *args) {
    int dim;
    PyObject *idx, *src;
    if (!PyArg_ParseTuple(args, "iO!O!", &dim, JGTensor_Type, &idx, JGTensor_Type, &src))
        return NULL;
    return jgp_wrap_new(jg_scatter_add(T(self), dim, T(idx), T(src)));
}

static PyObject *m_scatter_value(PyObject *self, PyObject *args) {
    int dim;
    PyObject *idx;
    double v;
    if (!PyArg_ParseTuple(args, "iO!d", &dim, JGTensor_Type, &idx, &v))
        return NULL;
    return jgp_wrap_new(jg_scatter_value(T(self), dim, T(idx), v));
}

static PyObject *m_index_add(PyObject *self, PyObject *args) {
    int dim;
    PyObject *idx, *src;
    double alpha;
    if (!PyArg_ParseTuple(args, "iO!O!d", &dim, JGTensor_Type, &idx, JGTensor_Type, &src, &alpha))
        return NULL;
    return jgp_wrap_new(jg_index_add(T(self), dim, T(idx), T(src), alpha));
}

static PyObject *m_index_copy(PyObject *self, PyObject *args) {
    int dim;
    PyObject *idx, *src;
    if (!PyArg_ParseTuple(args, "iO!O!", &dim, JGTensor_Type, &idx, JGTensor_Type, &src))
        return NULL;
    return jgp_wrap_new(jg_index_copy(T(self), dim, T(idx), T(src)));
}

static PyObject *m_index_fill(PyObject *self, PyObject *args) {
    int dim;
    PyObject *idx;
    double v;
    if (!PyArg_ParseTuple(args, "iO!d", &dim, JGTensor_Type, &idx, &v))
        return NULL;
    return jgp_wrap_new(jg_index_fill(T(self), dim, T(idx), v));
}

static PyObject *m_masked_select(PyObject *self, PyObject *args) {
    PyObject *mask;
    if (!PyArg_ParseTuple(args, "O!", JGTensor_Type, &mask))
        return NULL;
    return jgp_wrap_new(jg_masked_select(T(self), T(mask)));
}

static PyObject *m_flip(PyObject *self, PyObject *args) {
    PyObject *dims;
    int d[JG_MAX_DIMS], n;
    if (!PyArg_ParseTuple(args, "O", &dims) || (n = dims_tuple(dims, d)) < 0)
        return NULL;
    return jgp_wrap_new(jg_flip(T(self), n, d));
}

static PyObject *m_roll(PyObject *self, PyObject *args) {
    PyObject *shifts, *dims;
    int64_t s[JG_MAX_DIMS];
    int d[JG_MAX_DIMS], ns, nd;
    if (!PyArg_ParseTuple(args, "OO", &shifts, &dims) || (ns = int_tuple(shifts, s)) < 0 ||
        (nd = dims_tuple(dims, d)) < 0)
        return NULL;
    return jgp_wrap_new(jg_roll(T(self), ns, s, nd, d));
}

static PyObject *m_repeat(PyObject *self, PyObject *args) {
    PyObject *reps;
    int64_t r[JG_MAX_DIMS];
    int n;
    if (!PyArg_ParseTuple(args, "O", &reps) || (n = int_tuple(reps, r)) < 0)
        return NULL;
    return jgp_wrap_new(jg_repeat(T(self), n, r));
}

/* (repeats: int or Tensor, dim: int or None) */
static PyObject *m_repeat_interleave(PyObject *self, PyObject *args) {
    PyObject *reps, *dim;
    if (!PyArg_ParseTuple(args, "OO", &reps, &dim))
        return NULL;
    int d = 0;
    if (dim != Py_None && (d = (int)PyLong_AsLong(dim)) == -1 && PyErr_Occurred())
        return NULL;
    long long r = 0;
    if (!jgp_is_tensor(reps) && (r = PyLong_AsLongLong(reps)) == -1 && PyErr_Occurred())
        return NULL;
    return jgp_wrap_new(
        jg_repeat_interleave(T(self), r, jgp_is_tensor(reps) ? T(reps) : NULL, d, dim != Py_None));
}

static PyObject *m_isnan(PyObject *self, PyObject *noargs) {
    (void)noargs;
    return jgp_wrap_new(jg_isnan(T(self)));
}
static PyObject *m_isinf(PyObject *self, PyObject *noargs) {
    (void)noargs;
    return jgp_wrap_new(jg_isinf(T(self)));
}
static PyObject *m_isfinite(PyObject *self, PyObject *noargs) {
    (void)noargs;
    return jgp_wrap_new(jg_isfinite(T(self)));
}

/* (nan, posinf or None, neginf or None) */
static PyObject *m_nan_to_num(PyObject *self, PyObject *args) {
    double nan, p = 0, m = 0;
    PyObject *po, *mo;
    if (!PyArg_ParseTuple(args, "dOO", &nan, &po, &mo))
        return NULL;
    if (po != Py_None && (p = PyFloat_AsDouble(po)) == -1 && PyErr_Occurred())
        return NULL;
    if (mo != Py_None && (m = PyFloat_AsDouble(mo)) == -1 && PyErr_Occurred())
        return NULL;
    return jgp_wrap_new(
        jg_nan_to_num(T(self), nan, po != Py_None ? &p : NULL, mo != Py_None ? &m : NULL));
}

static PyObject *m_logsumexp(PyObject *self, PyObject *args) {
    PyObject *dims;
    int keepdim, d[JG_MAX_DIMS], n;
    if (!PyArg_ParseTuple(args, "Op", &dims, &keepdim) || (n = dims_tuple(dims, d)) < 0)
        return NULL;
    return jgp_wrap_new(jg_logsumexp(T(self), n, d, keepdim));
}

static PyObject *binary(PyObject *self, PyObject *args, jg_tensor *(*f)(jg_tensor *, jg_tensor *)) {
    PyObject *o;
    if (!PyArg_ParseTuple(args, "O!", JGTensor_Type, &o))
        return NULL;
    return jgp_wrap_new(f(T(self), T(o)));
}
static PyObject *m_remainder(PyObject *self, PyObject *args) {
    return binary(self, args, jg_remainder);
}
static PyObject *m_fmod(PyObject *self, PyObject *args) {
    return binary(self, args, jg_fmod);
}
static PyObject *m_floor_divide(PyObject *self, PyObject *args) {
    return binary(self, args, jg_floor_divide);
}
static PyObject *m_div_floor(PyObject *self, PyObject *args) {
    return binary(self, args, jg_div_floor);
}
static PyObject *m_div_trunc(PyObject *self, PyObject *args) {
    return binary(self, args, jg_div_trunc);
}
static PyObject *m_outer(PyObject *self, PyObject *args) {
    return binary(self, args, jg_outer);
}
static PyObject *m_dot(PyObject *self, PyObject *args) {
    return binary(self, args, jg_dot);
}
static PyObject *m_mv(PyObject *self, PyObject *args) {
    return binary(self, args, jg_mv);
}

static PyObject *m_argsort(PyObject *self, PyObject *args) {
    int dim, desc;
    if (!PyArg_ParseTuple(args, "ip", &dim, &desc))
        return NULL;
    return jgp_wrap_new(jg_argsort(T(self), dim, desc));
}

static PyObject *m_addmm(PyObject *self, PyObject *args) {
    PyObject *m1, *m2;
    double beta, alpha;
    if (!PyArg_ParseTuple(args, "O!O!dd", JGTensor_Type, &m1, JGTensor_Type, &m2, &beta, &alpha))
        return NULL;
    return jgp_wrap_new(jg_addmm(T(self), T(m1), T(m2), beta, alpha));
}

static PyObject *m_trace(PyObject *self, PyObject *noargs) {
    (void)noargs;
    return jgp_wrap_new(jg_trace(T(self)));
}

PyMethodDef jgp_tensor_index_methods[] = {
    {"_gather", m_gather, METH_VARARGS, NULL},
    {"_scatter", m_scatter, METH_VARARGS, NULL},
    {"_scatter_value", m_scatter_value, METH_VARARGS, NULL},
    {"_scatter_add", m_scatter_add, METH_VARARGS, NULL},
    {"_index_add", m_index_add, METH_VARARGS, NULL},
    {"_index_copy", m_index_copy, METH_VARARGS, NULL},
    {"_index_fill", m_index_fill, METH_VARARGS, NULL},
    {"_masked_select", m_masked_select, METH_VARARGS, NULL},
    {"_flip", m_flip, METH_VARARGS, NULL},
    {"_roll", m_roll, METH_VARARGS, NULL},
    {"_repeat", m_repeat, METH_VARARGS, NULL},
    {"_repeat_interleave", m_repeat_interleave, METH_VARARGS, NULL},
    {"_isnan", m_isnan, METH_NOARGS, NULL},
    {"_isinf", m_isinf, METH_NOARGS, NULL},
    {"_isfinite", m_isfinite, METH_NOARGS, NULL},
    {"_nan_to_num", m_nan_to_num, METH_VARARGS, NULL},
    {"_logsumexp", m_logsumexp, METH_VARARGS, NULL},
    {"_remainder", m_remainder, METH_VARARGS, NULL},
    {"_fmod", m_fmod, METH_VARARGS, NULL},
    {"_floor_divide", m_floor_divide, METH_VARARGS, NULL},
    {"_div_floor", m_div_floor, METH_VARARGS, NULL},
    {"_div_trunc", m_div_trunc, METH_VARARGS, NULL},
    {"_argsort", m_argsort, METH_VARARGS, NULL},
    {"_outer", m_outer, METH_VARARGS, NULL},
    {"_dot", m_dot, METH_VARARGS, NULL},
    {"_mv", m_mv, METH_VARARGS, NULL},
    {"_addmm", m_addmm, METH_VARARGS, NULL},
    {"_trace", m_trace, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};
