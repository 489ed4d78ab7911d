/* Storage access for serialization (jitgrad/serialization.py): the bytes of
 * the memory a tensor views, an identity for that memory (to save a storage
 * shared by several tensors once), and tensors rebuilt over it. */
#include "jgpy.h"

static PyObject *m_data_ptr(PyObject *self, PyObject *unused) {
    (void)unused;
    void *p = jg_data(jgp_t(self));
    if (!p)
        return jgp_raise();
    return PyLong_FromVoidPtr(p);
}

/* Address of the storage's first byte: equal for tensors sharing memory. */
static char *storage_base(jg_tensor *t) {
    char *p = jg_data(t);
    if (!p)
        return NULL;
    return p - jg_storage_offset(t) * (int64_t)jgp_dtype_size(jg_dtype_of(t));
}

static PyObject *m_storage_key(PyObject *self, PyObject *unused) {
    (void)unused;
    char *p = storage_base(jgp_t(self));
    if (!p)
        return jgp_raise();
    return PyLong_FromVoidPtr(p);
}

static PyObject *m_storage_nbytes(PyObject *self, PyObject *unused) {
    (void)unused;
    int64_t n = jg_storage_nbytes(jgp_t(self));
    if (n < 0)
        return jgp_raise();
    return PyLong_FromLongLong(n);
}

static PyObject *m_storage_bytes(PyObject *self, PyObject *unused) {
    (void)unused;
    jg_tensor *t = jgp_t(self);
    char *p = storage_base(t);
    int64_t n = p ? jg_storage_nbytes(t) : -1;
    if (n < 0)
        return jgp_raise();
    return PyBytes_FromStringAndSize(p, (Py_ssize_t)n);
}

static int int_seq(PyObject *o, const char *what, int *n, int64_t *out) {
    PyObject *seq = PySequence_Fast(o, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "_storage_view: %s must be a sequence of ints", what);
        return -1;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (len > JG_MAX_DIMS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_RuntimeError,
                     "_storage_view: %s has %zd dimensions, at most %d are "
                     "supported",
                     what, len, JG_MAX_DIMS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        out[i] = v;
    }
    *n = (int)len;
    Py_DECREF(seq);
    return 0;
}

/* t._storage_view(size, stride, offset): a tensor over t's storage. */
static PyObject *m_storage_view(PyObject *self, PyObject *args) {
    PyObject *size, *stride;
    long long offset;
    if (!PyArg_ParseTuple(args, "OOL:_storage_view", &size, &stride, &offset))
        return NULL;
    int n1, n2;
    int64_t sh[JG_MAX_DIMS], st[JG_MAX_DIMS];
    if (int_seq(size, "size", &n1, sh) < 0 || int_seq(stride, "stride", &n2, st) < 0)
        return NULL;
    if (n1 != n2) {
        PyErr_Format(PyExc_RuntimeError,
                     "mismatch in length of strides and shape (%d strides, %d sizes)", n2, n1);
        return NULL;
    }
    return jgp_wrap_new(jg_storage_view(jgp_t(self), n1, sh, st, (int64_t)offset));
}

/* _storage_from_bytes(buffer, dtype): a 1-D tensor holding a copy of the
 * bytes (a whole number of elements). */
static PyObject *f_storage_from_bytes(PyObject *mod, PyObject *args) {
    (void)mod;
    Py_buffer view;
    PyObject *dt;
    if (!PyArg_ParseTuple(args, "y*O:_storage_from_bytes", &view, &dt))
        return NULL;
    jg_dtype d;
    bool given;
    if (jgp_parse_dtype(dt, &d, &given) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    size_t item = jgp_dtype_size(d);
    if (!given || (size_t)view.len % item != 0) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_RuntimeError,
                     "_storage_from_bytes: %zd bytes are not a whole number "
                     "of %zu-byte elements",
                     view.len, item);
        return NULL;
    }
    int64_t n = (int64_t)((size_t)view.len / item);
    jg_tensor *t = jg_tensor_new(d, 1, &n, view.buf);
    PyBuffer_Release(&view);
    return jgp_wrap_new(t);
}

PyMethodDef jgp_io_methods[] = {
    {"data_ptr", m_data_ptr, METH_NOARGS,
     "data_ptr() -> int\n\nAddress of the tensor's first element."},
    {"_storage_key", m_storage_key, METH_NOARGS, NULL},
    {"_storage_nbytes", m_storage_nbytes, METH_NOARGS, NULL},
    {"_storage_bytes", m_storage_bytes, METH_NOARGS, NULL},
    {"_storage_view", m_storage_view, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyMethodDef jgp_module_io_functions[] = {
    {"_storage_from_bytes", f_storage_from_bytes, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};
