/* jitgrad.nn.functional's convolution and pooling bindings: the Python side
 * (nn/functional.py) normalises the arguments to pairs of ints. */
#include "jgpy.h"

static int tensor_args(PyObject *x, PyObject *w, const char *fn) {
    if (!jgp_is_tensor(x)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'input' (position 1) must be Tensor, not %s",
                     fn, Py_TYPE(x)->tp_name);
        return -1;
    }
    if (w && !jgp_is_tensor(w)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'weight' (position 2) must be Tensor, not %s",
                     fn, Py_TYPE(w)->tp_name);
        return -1;
    }
    return 0;
}

/* _conv2d(x, w, bias, (sh, sw), (ph, pw), (dh, dw), groups, same) */
static PyObject *conv2d(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x, *w, *b;
    long long s[2], p[2], d[2], groups;
    int same;
    if (!PyArg_ParseTuple(args, "OOO(LL)(LL)(LL)Lp:_conv2d", &x, &w, &b, &s[0], &s[1], &p[0], &p[1],
                          &d[0], &d[1], &groups, &same))
        return NULL;
    if (tensor_args(x, w, "conv2d") < 0)
        return NULL;
    if (b != Py_None && !jgp_is_tensor(b)) {
        PyErr_Format(PyExc_TypeError, "conv2d(): argument 'bias' must be Tensor, not %s",
                     Py_TYPE(b)->tp_name);
        return NULL;
    }
    jg_tensor *bt = b == Py_None ? NULL : jgp_t(b);
    const int64_t st[2] = {s[0], s[1]}, pa[2] = {p[0], p[1]}, di[2] = {d[0], d[1]};
    if (same)
        return jgp_wrap_new(jg_conv2d_same(jgp_t(x), jgp_t(w), bt, di, (int64_t)groups));
    return jgp_wrap_new(jg_conv2d(jgp_t(x), jgp_t(w), bt, st, pa, di, (int64_t)groups));
}

/* _conv_transpose2d(x, w, bias, (sh, sw), (ph, pw), (oph, opw), (dh, dw),
 * groups) */
static PyObject *conv_transpose2d(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x, *w, *b;
    long long s[2], p[2], o[2], d[2], groups;
    if (!PyArg_ParseTuple(args, "OOO(LL)(LL)(LL)(LL)L:_conv_transpose2d", &x, &w, &b, &s[0], &s[1],
                          &p[0], &p[1], &o[0], &o[1], &d[0], &d[1], &groups))
        return NULL;
    if (tensor_args(x, w, "conv_transpose2d") < 0)
        return NULL;
    if (b != Py_None && !jgp_is_tensor(b)) {
        PyErr_Format(PyExc_TypeError, "conv_transpose2d(): argument 'bias' must be Tensor, not %s",
                     Py_TYPE(b)->tp_name);
        return NULL;
    }
    const int64_t st[2] = {s[0], s[1]}, pa[2] = {p[0], p[1]}, op[2] = {o[0], o[1]},
                  di[2] = {d[0], d[1]};
    return jgp_wrap_new(jg_conv_transpose2d(jgp_t(x), jgp_t(w), b == Py_None ? NULL : jgp_t(b), st,
                                            pa, op, di, (int64_t)groups));
}

/* _max_pool2d(x, (kh, kw), (sh, sw), (ph, pw), (dh, dw), ceil_mode,
 * return_indices): values, or (values, indices) */
static PyObject *max_pool2d(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x;
    long long k[2], s[2], p[2], d[2];
    int ceil_mode, ret_idx;
    if (!PyArg_ParseTuple(args, "O(LL)(LL)(LL)(LL)pp:_max_pool2d", &x, &k[0], &k[1], &s[0], &s[1],
                          &p[0], &p[1], &d[0], &d[1], &ceil_mode, &ret_idx))
        return NULL;
    if (tensor_args(x, NULL, "max_pool2d") < 0)
        return NULL;
    const int64_t ks[2] = {k[0], k[1]}, st[2] = {s[0], s[1]}, pa[2] = {p[0], p[1]},
                  di[2] = {d[0], d[1]};
    jg_tensor *idx = NULL;
    jg_tensor *y = jg_max_pool2d(jgp_t(x), ks, st, pa, di, ceil_mode, ret_idx ? &idx : NULL);
    if (!ret_idx)
        return jgp_wrap_new(y);
    if (!y)
        return jgp_raise();
    PyObject *vy = jgp_wrap_new(y), *vi = jgp_wrap_new(idx);
    if (!vy || !vi) {
        Py_XDECREF(vy);
        Py_XDECREF(vi);
        return NULL;
    }
    PyObject *r = PyTuple_Pack(2, vy, vi);
    Py_DECREF(vy);
    Py_DECREF(vi);
    return r;
}

/* _avg_pool2d(x, (kh, kw), (sh, sw), (ph, pw), ceil_mode, count_include_pad,
 * divisor_override (0: none)) */
static PyObject *avg_pool2d(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x;
    long long k[2], s[2], p[2], div;
    int ceil_mode, incl;
    if (!PyArg_ParseTuple(args, "O(LL)(LL)(LL)ppL:_avg_pool2d", &x, &k[0], &k[1], &s[0], &s[1],
                          &p[0], &p[1], &ceil_mode, &incl, &div))
        return NULL;
    if (tensor_args(x, NULL, "avg_pool2d") < 0)
        return NULL;
    const int64_t ks[2] = {k[0], k[1]}, st[2] = {s[0], s[1]}, pa[2] = {p[0], p[1]};
    return jgp_wrap_new(jg_avg_pool2d(jgp_t(x), ks, st, pa, ceil_mode, incl, (int64_t)div));
}

/* _adaptive_avg_pool2d(x, (oh, ow)) */
static PyObject *adaptive_avg_pool2d(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x;
    long long o[2];
    if (!PyArg_ParseTuple(args, "O(LL):_adaptive_avg_pool2d", &x, &o[0], &o[1]))
        return NULL;
    if (tensor_args(x, NULL, "adaptive_avg_pool2d") < 0)
        return NULL;
    const int64_t os[2] = {o[0], o[1]};
    return jgp_wrap_new(jg_adaptive_avg_pool2d(jgp_t(x), os));
}

PyMethodDef jgp_module_conv_functions[] = {
    {"_adaptive_avg_pool2d", adaptive_avg_pool2d, METH_VARARGS,
     "_adaptive_avg_pool2d(x, output_size): a pair of ints"},
    {"_conv2d", conv2d, METH_VARARGS,
     "_conv2d(x, w, bias, stride, padding, dilation, groups, same): pairs of ints"},
    {"_conv_transpose2d", conv_transpose2d, METH_VARARGS,
     "_conv_transpose2d(x, w, bias, stride, padding, output_padding, dilation, groups): pairs"},
    {"_max_pool2d", max_pool2d, METH_VARARGS,
     "_max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, return_indices)"},
    {"_avg_pool2d", avg_pool2d, METH_VARARGS,
     "_avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor)"},
    {NULL, NULL, 0, NULL},
};
