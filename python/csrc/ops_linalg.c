/* jitgrad.linalg's bindings to the LAPACK-backed ops (src/ops/lapack.c);
 * the Python side (jitgrad/linalg.py) checks arguments and names errors. */
#include "jgpy.h"

static jg_tensor *tensor_arg(PyObject *o, const char *fn) {
    if (!jgp_is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'A' (position 1) must be Tensor, not %s", fn,
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    return jgp_t(o);
}

static PyObject *linalg_inv(PyObject *mod, PyObject *x) {
    (void)mod;
    jg_tensor *t = tensor_arg(x, "linalg_inv");
    return t ? jgp_wrap_new(jg_linalg_inv(t)) : NULL;
}

static PyObject *linalg_cholesky(PyObject *mod, PyObject *x) {
    (void)mod;
    jg_tensor *t = tensor_arg(x, "linalg_cholesky");
    return t ? jgp_wrap_new(jg_linalg_cholesky(t)) : NULL;
}

static PyObject *linalg_slogdet(PyObject *mod, PyObject *x) {
    (void)mod;
    jg_tensor *t = tensor_arg(x, "linalg_slogdet");
    if (!t)
        return NULL;
    jg_tensor *sign, *logabsdet;
    if (jg_linalg_slogdet(t, &sign, &logabsdet) < 0)
        return jgp_raise();
    PyObject *s = jgp_wrap_new(sign);
    PyObject *l = s ? jgp_wrap_new(logabsdet) : NULL;
    if (!l) {
        Py_XDECREF(s);
        return NULL;
    }
    return Py_BuildValue("(NN)", s, l);
}

static PyObject *linalg_eigh(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x;
    int upper = 0;
    if (!PyArg_ParseTuple(args, "Op:_linalg_eigh", &x, &upper))
        return NULL;
    jg_tensor *t = tensor_arg(x, "linalg_eigh");
    if (!t)
        return NULL;
    jg_tensor *l, *v;
    if (jg_linalg_eigh(t, upper, &l, &v) < 0)
        return jgp_raise();
    PyObject *lo = jgp_wrap_new(l);
    PyObject *vo = lo ? jgp_wrap_new(v) : NULL;
    if (!vo) {
        Py_XDECREF(lo);
        return NULL;
    }
    return Py_BuildValue("(NN)", lo, vo);
}

PyMethodDef jgp_module_linalg_functions[] = {
    {"_linalg_inv", linalg_inv, METH_O, "_linalg_inv(A): the inverse of each matrix"},
    {"_linalg_slogdet", linalg_slogdet, METH_O,
     "_linalg_slogdet(A): (sign, log|det|) of each matrix"},
    {"_linalg_cholesky", linalg_cholesky, METH_O,
     "_linalg_cholesky(A): the lower Cholesky factor of each matrix"},
    {"_linalg_eigh", linalg_eigh, METH_VARARGS,
     "_linalg_eigh(A, upper): eigenvalues and eigenvectors of each symmetric matrix"},
    {NULL, NULL, 0, NULL},
};
