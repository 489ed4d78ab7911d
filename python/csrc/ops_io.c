/* Storage access for serialization (jitgrad/serialization.py): the bytes of
 * the memory a tensor views, an identity for that memory (to save a storage
 * shared by several tensors once), and tensors rebuilt over it. */
#include "jgpy.h"

#include <string.h>

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

/* ------------------------------------------------------------ DLPack */

/* DLPack 0.x structures (what NumPy 1.22+ and PyTorch 1.10+ exchange). */
typedef struct {
    int32_t device_type; /* 1: kDLCPU */
    int32_t device_id;
} dl_device;
typedef struct {
    uint8_t code; /* 0 int, 1 uint, 2 float, 6 bool */
    uint8_t bits;
    uint16_t lanes;
} dl_dtype;
typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL: row-major */
    uint64_t byte_offset;
} dl_tensor;
typedef struct dl_managed {
    dl_tensor dl;
    void *manager_ctx;
    void (*deleter)(struct dl_managed *self);
} dl_managed;

enum { DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2, DL_BOOL = 6, DL_CPU = 1 };

/* The export's block: the managed tensor, then shape and strides. */
typedef struct {
    dl_managed m;
    int64_t dims[2 * JG_MAX_DIMS];
} dl_export;

static void export_deleter(dl_managed *self) {
    jg_release((jg_tensor *)self->manager_ctx);
    PyMem_RawFree(self);
}

/* An unconsumed capsule still owns its tensor. */
static void capsule_destructor(PyObject *cap) {
    if (!PyCapsule_IsValid(cap, "dltensor"))
        return; /* consumed ("used_dltensor"): the consumer calls the deleter */
    dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m && m->deleter)
        m->deleter(m);
}

static PyObject *m_dlpack(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"stream", NULL};
    PyObject *stream = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$O:__dlpack__", kwlist, &stream))
        return NULL;
    if (stream != Py_None) {
        PyErr_SetString(PyExc_BufferError, "__dlpack__: stream must be None for CPU tensors");
        return NULL;
    }
    jg_tensor *t = jgp_t(self);
    if (jg_requires_grad(t)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Can't export tensors that require gradient, use tensor.detach()");
        return NULL;
    }
    if (jg_dtype_of(t) == JG_BOOL) { /* DLPack 0.x consumers (NumPy, PyTorch 1.13) lack it */
        PyErr_SetString(PyExc_RuntimeError, "Bool type is not supported by dlpack");
        return NULL;
    }
    void *data = jg_data(t);
    if (!data)
        return jgp_raise();
    dl_export *e = PyMem_RawCalloc(1, sizeof *e);
    if (!e)
        return PyErr_NoMemory();
    int nd = jg_ndim(t);
    static const dl_dtype codes[] = {[JG_F32] = {DL_FLOAT, 32, 1},
                                     [JG_F64] = {DL_FLOAT, 64, 1},
                                     [JG_I64] = {DL_INT, 64, 1},
                                     [JG_BOOL] = {DL_BOOL, 8, 1},
                                     [JG_I32] = {DL_INT, 32, 1}};
    e->m.dl = (dl_tensor){data,    {DL_CPU, 0},           nd, codes[jg_dtype_of(t)],
                          e->dims, e->dims + JG_MAX_DIMS, 0};
    memcpy(e->dims, jg_shape(t), sizeof(int64_t) * (size_t)nd);
    memcpy(e->dims + JG_MAX_DIMS, jg_strides(t), sizeof(int64_t) * (size_t)nd);
    e->m.manager_ctx = jg_retain(t);
    e->m.deleter = export_deleter;
    PyObject *cap = PyCapsule_New(&e->m, "dltensor", capsule_destructor);
    if (!cap)
        export_deleter(&e->m);
    return cap;
}

static PyObject *m_dlpack_device(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return Py_BuildValue("(ii)", DL_CPU, 0);
}

/* from_blob's release: the producer's deleter (it may drop Python objects). */
static void import_release(void *p) {
    dl_managed *m = p;
    if (!m->deleter)
        return;
    if (Py_IsInitialized()) {
        PyGILState_STATE g = PyGILState_Ensure();
        m->deleter(m);
        PyGILState_Release(g);
    }
}

static PyObject *f_from_dlpack(PyObject *mod, PyObject *obj) {
    (void)mod;
    PyObject *cap;
    if (PyCapsule_CheckExact(obj)) {
        cap = Py_NewRef(obj);
    } else {
        PyObject *dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
        if (!dev) {
            if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError,
                             "from_dlpack: expected an object with __dlpack__ or a DLPack "
                             "capsule (got %s)",
                             Py_TYPE(obj)->tp_name);
            }
            return NULL;
        }
        int dtype_code = -1, dev_id = 0;
        int ok = PyArg_ParseTuple(dev, "ii", &dtype_code, &dev_id);
        Py_DECREF(dev);
        if (!ok)
            return NULL;
        if (dtype_code != DL_CPU) {
            PyErr_Format(PyExc_RuntimeError,
                         "from_dlpack: the tensor is on DLPack device type %d; jitgrad runs on "
                         "the CPU only",
                         dtype_code);
            return NULL;
        }
        cap = PyObject_CallMethod(obj, "__dlpack__", NULL);
        if (!cap)
            return NULL;
    }
    dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
    if (!m) {
        Py_DECREF(cap);
        PyErr_SetString(PyExc_RuntimeError, "from_dlpack: the capsule was already consumed or is "
                                            "not a DLPack tensor ('dltensor')");
        return NULL;
    }
    const dl_tensor *d = &m->dl;
    const char *why = NULL;
    jg_dtype dt = JG_F32;
    if (d->device.device_type != DL_CPU)
        why = "it is not on the CPU";
    else if (d->dtype.lanes != 1)
        why = "vector dtypes (lanes > 1) are not supported";
    else if (d->dtype.code == DL_FLOAT && (d->dtype.bits == 32 || d->dtype.bits == 64))
        dt = d->dtype.bits == 32 ? JG_F32 : JG_F64;
    else if (d->dtype.code == DL_INT && (d->dtype.bits == 32 || d->dtype.bits == 64))
        dt = d->dtype.bits == 32 ? JG_I32 : JG_I64;
    else if (d->dtype.code == DL_BOOL && d->dtype.bits == 8)
        dt = JG_BOOL;
    else
        why = "its dtype has no jitgrad counterpart (supported: float32, float64, int32, int64, "
              "bool)";
    if (!why && (d->ndim < 0 || d->ndim > JG_MAX_DIMS))
        why = "it has too many dimensions";
    if (why) {
        Py_DECREF(cap);
        PyErr_Format(PyExc_RuntimeError,
                     "from_dlpack: cannot import the tensor: %s (DLPack dtype "
                     "code %d, %d bits)",
                     why, d->dtype.code, d->dtype.bits);
        return NULL;
    }
    char *data = (char *)d->data + d->byte_offset;
    jg_tensor *t = jg_tensor_from_blob(dt, d->ndim, d->shape, d->strides, data, import_release, m);
    if (!t) {
        Py_DECREF(cap); /* still named "dltensor": its destructor frees it */
        return jgp_raise();
    }
    /* consumed: from now on the tensor's storage owns the producer's memory */
    PyCapsule_SetName(cap, "used_dltensor");
    Py_DECREF(cap);
    return jgp_wrap_new(t);
}

PyMethodDef jgp_io_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))m_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None) -> capsule\n\nThe tensor as a DLPack capsule (no copy), for "
     "numpy.from_dlpack, torch.from_dlpack, ..."},
    {"__dlpack_device__", m_dlpack_device, METH_NOARGS,
     "__dlpack_device__() -> (1, 0)\n\nThe DLPack device: the CPU."},
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
    {"from_dlpack", f_from_dlpack, METH_O,
     "from_dlpack(ext_tensor) -> Tensor\n\nA tensor sharing the memory of ext_tensor (an object "
     "with __dlpack__, such as a NumPy array or a PyTorch tensor, or a DLPack capsule)."},
    {NULL, NULL, 0, NULL},
};
