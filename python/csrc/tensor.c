/* The Tensor type: lifetime, dtypes, properties, conversions to Python and
 * NumPy (buffer protocol), indexing. */
#include "jgpy.h"

#include <math.h>
#include <structmember.h>
#include <stdlib.h>
#include <string.h>

PyTypeObject *JGTensor_Type;

/* ------------------------------------------------------------ dtypes */

#define N_DTYPES 5 /* JG_F32 .. JG_I32 */
static JGDtype dtype_objs[N_DTYPES];
static const char *const dtype_names[N_DTYPES] = {"float32", "float64", "int64", "bool", "int32"};

bool jgp_dtype_is_float(jg_dtype d) {
    return d == JG_F32 || d == JG_F64;
}

size_t jgp_dtype_size(jg_dtype d) {
    return d == JG_BOOL ? 1 : d == JG_F32 || d == JG_I32 ? 4 : 8;
}

static PyObject *dtype_repr(PyObject *self) {
    return PyUnicode_FromFormat("jitgrad.%s", dtype_names[((JGDtype *)self)->d]);
}

static PyObject *dtype_is_floating_point(PyObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(jgp_dtype_is_float(((JGDtype *)self)->d));
}

static PyObject *dtype_itemsize(PyObject *self, void *closure) {
    (void)closure;
    return PyLong_FromSize_t(jgp_dtype_size(((JGDtype *)self)->d));
}

static PyGetSetDef dtype_getset[] = {
    {"is_floating_point", dtype_is_floating_point, NULL, NULL, NULL},
    {"itemsize", dtype_itemsize, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject JGDtype_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "jitgrad.dtype",
    .tp_basicsize = sizeof(JGDtype),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A tensor element type: jitgrad.float32, float64, int64, int32, bool.",
    .tp_repr = dtype_repr,
    .tp_getset = dtype_getset,
};

PyObject *jgp_dtype_obj(jg_dtype d) {
    return (PyObject *)&dtype_objs[d];
}

int jgp_parse_dtype(PyObject *o, jg_dtype *d, bool *given) {
    *given = false;
    if (!o || o == Py_None)
        return 0;
    if (PyObject_TypeCheck(o, &JGDtype_Type)) {
        *d = ((JGDtype *)o)->d;
    } else if (o == (PyObject *)&PyFloat_Type) {
        *d = JG_F32;
    } else if (o == (PyObject *)&PyLong_Type) {
        *d = JG_I64;
    } else if (o == (PyObject *)&PyBool_Type) {
        *d = JG_BOOL;
    } else {
        /* jitgrad.float16 and friends name dtypes jitgrad has no kernels for */
        PyObject *un = PyObject_GetAttrString(o, "_unsupported_dtype");
        if (!un)
            PyErr_Clear();
        if (un && PyUnicode_Check(un))
            PyErr_Format(PyExc_TypeError,
                         "jitgrad does not support dtype %U (supported: float32, float64, int64, "
                         "int32, bool)",
                         un);
        else
            PyErr_Format(PyExc_TypeError,
                         "expected a jitgrad dtype (float32, float64, int64, int32, bool), got %R",
                         o);
        Py_XDECREF(un);
        return -1;
    }
    *given = true;
    return 0;
}

int jgp_check_device(PyObject *device) {
    if (!device || device == Py_None)
        return 0;
    PyObject *s = PyObject_Str(device);
    if (!s)
        return -1;
    const char *c = PyUnicode_AsUTF8(s);
    int ok = c && (strcmp(c, "cpu") == 0 || strncmp(c, "cpu:", 4) == 0);
    if (c && !ok)
        PyErr_Format(PyExc_RuntimeError,
                     "jitgrad runs on the CPU only: device '%s' is not available", c);
    Py_DECREF(s);
    return ok ? 0 : -1;
}

/* ------------------------------------------------------------ wrapping */

PyObject *jgp_wrap(jg_tensor *t) {
    JGTensor *o = PyObject_New(JGTensor, JGTensor_Type);
    if (!o) {
        jg_release(t);
        return NULL;
    }
    o->t = t;
    o->weakrefs = NULL;
    return (PyObject *)o;
}

PyObject *jgp_wrap_new(jg_tensor *t) {
    if (!t)
        return jgp_raise();
    return jgp_wrap(jg_keep(t));
}

PyObject *jgp_wrap_borrowed(jg_tensor *t) {
    if (!t)
        Py_RETURN_NONE;
    return jgp_wrap(jg_retain(t));
}

static void tensor_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    JGTensor *o = (JGTensor *)self;
    if (o->weakrefs)
        PyObject_ClearWeakRefs(self);
    jg_release(o->t);
    o->t = NULL;
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* ------------------------------------------------------------ shapes */

static int shape_item(PyObject *o, int64_t *v) {
    if (jgp_is_tensor(o) || !PyIndex_Check(o)) {
        PyErr_Format(PyExc_TypeError, "expected a sequence of integers, got %s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    long long x = PyLong_AsLongLong(o);
    if (x == -1 && PyErr_Occurred())
        return -1;
    *v = x;
    return 0;
}

int jgp_parse_shape(PyObject *args, int *ndim, int64_t *shape) {
    PyObject *seq = args;
    if (PyTuple_GET_SIZE(args) == 1 &&
        (PyTuple_Check(PyTuple_GET_ITEM(args, 0)) || PyList_Check(PyTuple_GET_ITEM(args, 0))))
        seq = PyTuple_GET_ITEM(args, 0);
    Py_ssize_t n = PySequence_Size(seq);
    if (n < 0)
        return -1;
    if (n > JG_MAX_DIMS) {
        PyErr_Format(PyExc_RuntimeError, "jitgrad supports at most %d dims, got %zd", JG_MAX_DIMS,
                     n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_GetItem(seq, i);
        if (!it)
            return -1;
        int rc = shape_item(it, &shape[i]);
        Py_DECREF(it);
        if (rc < 0)
            return -1;
    }
    *ndim = (int)n;
    return 0;
}

static PyObject *shape_tuple(const jg_tensor *t) {
    int nd = jg_ndim(t);
    const int64_t *s = jg_shape(t);
    PyObject *tup = PyTuple_New(nd);
    if (!tup)
        return NULL;
    for (int i = 0; i < nd; i++) {
        PyObject *v = jgp_size(t, s[i]);
        if (!v) {
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, i, v);
    }
    return tup;
}

static int wrap_dim(int dim, int ndim) {
    int n = ndim > 0 ? ndim : 1;
    if (dim < -n || dim >= n) {
        PyErr_Format(PyExc_IndexError,
                     "Dimension out of range (expected to be in range of [%d, %d], but got %d)", -n,
                     n - 1, dim);
        return -1;
    }
    return dim < 0 ? dim + n : dim;
}

/* ------------------------------------------------------------ properties */

static PyObject *get_shape(PyObject *self, void *c) {
    (void)c;
    return shape_tuple(jgp_t(self));
}

static PyObject *get_dtype(PyObject *self, void *c) {
    (void)c;
    PyObject *d = jgp_dtype_obj(jg_dtype_of(jgp_t(self)));
    Py_INCREF(d);
    return d;
}

static PyObject *get_requires_grad(PyObject *self, void *c) {
    (void)c;
    return PyBool_FromLong(jg_requires_grad(jgp_t(self)));
}

static int set_requires_grad_impl(jg_tensor *t, bool on) {
    if (!jg_is_leaf(t)) {
        if (on == jg_requires_grad(t))
            return 0;
        PyErr_SetString(PyExc_RuntimeError,
                        "you can only change requires_grad flags of leaf variables. If you want to "
                        "use a computed variable in a subgraph that doesn't require "
                        "differentiation use var_no_grad = var.detach().");
        return -1;
    }
    if (on && !jgp_dtype_is_float(jg_dtype_of(t))) {
        PyErr_SetString(PyExc_RuntimeError,
                        "only Tensors of floating point dtype can require gradients");
        return -1;
    }
    jg_set_requires_grad(t, on);
    return 0;
}

static int set_requires_grad(PyObject *self, PyObject *v, void *c) {
    (void)c;
    if (!v || !PyBool_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "requires_grad must be a bool");
        return -1;
    }
    return set_requires_grad_impl(jgp_t(self), v == Py_True);
}

static PyObject *get_grad(PyObject *self, void *c) {
    (void)c;
    return jgp_wrap_borrowed(jg_grad(jgp_t(self)));
}

static int set_grad(PyObject *self, PyObject *v, void *c) {
    (void)c;
    if (!v || v == Py_None) {
        /* (jg_set_grad refuses it while a program is traced) */
        return jg_set_grad(jgp_t(self), NULL) < 0 ? jgp_raise_int() : 0;
    }
    if (!jgp_is_tensor(v)) {
        PyErr_SetString(PyExc_TypeError, "assigned grad expected to be a Tensor or None");
        return -1;
    }
    if (jg_set_grad(jgp_t(self), jgp_t(v)) < 0)
        return jgp_raise_int();
    return 0;
}

static PyObject *get_is_leaf(PyObject *self, void *c) {
    (void)c;
    return PyBool_FromLong(jg_is_leaf(jgp_t(self)));
}

static PyObject *get_ndim(PyObject *self, void *c) {
    (void)c;
    return PyLong_FromLong(jg_ndim(jgp_t(self)));
}

static PyObject *get_grad_fn_name(PyObject *self, void *c) {
    (void)c;
    const char *n = jg_grad_fn_name(jgp_t(self));
    if (!n)
        Py_RETURN_NONE;
    return PyUnicode_FromString(n);
}

static PyObject *get_version(PyObject *self, void *c) {
    (void)c;
    return PyLong_FromUnsignedLongLong(jg_version(jgp_t(self)));
}

static PyObject *get_data(PyObject *self, void *c) {
    (void)c;
    return jgp_wrap_new(jg_detach(jgp_t(self)));
}

/* x.data = v: x keeps its Python identity (a Parameter stays the object
 * modules and optimizers hold) and takes v's storage, shape and dtype, as
 * PyTorch's set_data.  A leaf stays a leaf with its requires_grad; its .grad
 * is kept when it still fits (dtype and shape), else cleared. */
static int set_data(PyObject *self, PyObject *v, void *c) {
    (void)c;
    if (!v) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Deleting tensor data is not allowed. Delete tensor instead!");
        return -1;
    }
    if (!jgp_is_tensor(v)) {
        PyErr_Format(PyExc_TypeError, "Variable data has to be a tensor, but got %s",
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    jg_tensor *old = jgp_t(self), *src = jgp_t(v);
    /* v is x's own data with x's geometry (`x.data -= g` wrote it in place
     * already): nothing changes, and x stays the same tensor for the guards
     * of compiled functions that capture it */
    int nd = jg_ndim(old);
    if (old == src || (!jg_is_traced(old) && !jg_is_traced(src) && jg_same_storage(old, src) &&
                       jg_dtype_of(old) == jg_dtype_of(src) && jg_ndim(src) == nd &&
                       !memcmp(jg_shape(old), jg_shape(src), sizeof(int64_t) * (size_t)nd) &&
                       jg_storage_offset(old) == jg_storage_offset(src) &&
                       !memcmp(jg_strides(old), jg_strides(src), sizeof(int64_t) * (size_t)nd)))
        return 0;
    if (!jg_is_leaf(old)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "jitgrad: assigning .data of a tensor with history is not supported");
        return -1;
    }
    jg_tensor *d = jg_detach(jgp_t(v));
    if (!d)
        return jgp_raise_int();
    d = jg_keep(d);
    if (jg_requires_grad(old)) {
        jg_set_requires_grad(d, true);
        if (!jg_requires_grad(d)) {
            jg_release(d);
            return jgp_raise_int();
        }
    }
    jg_tensor *g = jg_grad(old);
    if (g && jg_dtype_of(g) == jg_dtype_of(d) && jg_ndim(g) == jg_ndim(d) &&
        !memcmp(jg_shape(g), jg_shape(d), sizeof(int64_t) * (size_t)jg_ndim(d)) &&
        jg_set_grad(d, g) < 0) {
        jg_release(d);
        return jgp_raise_int();
    }
    ((JGTensor *)self)->t = d;
    jg_release(old);
    return 0;
}

static PyObject *get_false(PyObject *self, void *c) {
    (void)self;
    (void)c;
    Py_RETURN_FALSE;
}

static PyGetSetDef tensor_getset[] = {
    {"shape", get_shape, NULL, NULL, NULL},
    {"dtype", get_dtype, NULL, NULL, NULL},
    {"requires_grad", get_requires_grad, set_requires_grad, NULL, NULL},
    {"grad", get_grad, set_grad, NULL, NULL},
    {"is_leaf", get_is_leaf, NULL, NULL, NULL},
    {"ndim", get_ndim, NULL, NULL, NULL},
    {"data", get_data, set_data, NULL, NULL},
    {"is_cuda", get_false, NULL, NULL, NULL},
    {"_grad_fn_name", get_grad_fn_name, NULL, NULL, NULL},
    {"_version", get_version, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* ------------------------------------------------------------ basic methods */

static PyObject *m_dim(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLong(jg_ndim(jgp_t(self)));
}

static PyObject *m_numel(PyObject *self, PyObject *unused) {
    (void)unused;
    return jgp_size(jgp_t(self), jg_numel(jgp_t(self)));
}

static PyObject *m_size(PyObject *self, PyObject *args) {
    PyObject *dim = Py_None;
    if (!PyArg_ParseTuple(args, "|O:size", &dim))
        return NULL;
    jg_tensor *t = jgp_t(self);
    if (dim == Py_None)
        return shape_tuple(t);
    int d = _PyLong_AsInt(dim);
    if (d == -1 && PyErr_Occurred())
        return NULL;
    if ((d = wrap_dim(d, jg_ndim(t))) < 0)
        return NULL;
    if (jg_ndim(t) == 0) {
        PyErr_SetString(PyExc_IndexError, "dimension specified as 0 but tensor has no dimensions");
        return NULL;
    }
    return jgp_size(t, jg_shape(t)[d]);
}

static PyObject *m_stride(PyObject *self, PyObject *args) {
    PyObject *dim = Py_None;
    if (!PyArg_ParseTuple(args, "|O:stride", &dim))
        return NULL;
    jg_tensor *t = jgp_t(self);
    const int64_t *st = jg_strides(t);
    if (dim != Py_None) {
        int d = _PyLong_AsInt(dim);
        if ((d == -1 && PyErr_Occurred()) || (d = wrap_dim(d, jg_ndim(t))) < 0)
            return NULL;
        return PyLong_FromLongLong(st[d]);
    }
    PyObject *tup = PyTuple_New(jg_ndim(t));
    for (int i = 0; tup && i < jg_ndim(t); i++)
        PyTuple_SET_ITEM(tup, i, PyLong_FromLongLong(st[i]));
    return tup;
}

static PyObject *m_storage_offset(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLongLong(jg_storage_offset(jgp_t(self)));
}

static PyObject *m_is_contiguous(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyBool_FromLong(jg_is_contiguous(jgp_t(self)));
}

static PyObject *m_element_size(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromSize_t(jgp_dtype_size(jg_dtype_of(jgp_t(self))));
}

static PyObject *m_is_floating_point(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyBool_FromLong(jgp_dtype_is_float(jg_dtype_of(jgp_t(self))));
}

static PyObject *m_same_storage(PyObject *self, PyObject *other) {
    if (!jgp_is_tensor(other)) {
        PyErr_SetString(PyExc_TypeError, "expected a Tensor");
        return NULL;
    }
    return PyBool_FromLong(jg_same_storage(jgp_t(self), jgp_t(other)));
}

static PyObject *m_requires_grad_(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"requires_grad", NULL};
    int on = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:requires_grad_", kwlist, &on))
        return NULL;
    if (set_requires_grad_impl(jgp_t(self), on) < 0)
        return NULL;
    Py_INCREF(self);
    return self;
}

static PyObject *m_detach_(PyObject *self, PyObject *unused) {
    (void)unused;
    if (jg_detach_(jgp_t(self)) < 0)
        return jgp_raise();
    Py_INCREF(self);
    return self;
}

/* Copies the elements out, row-major, as doubles or int64s. */
static void *copy_out(jg_tensor *t, size_t *nbytes) {
    int64_t n = jg_numel(t);
    size_t bytes = (size_t)n * jgp_dtype_size(jg_dtype_of(t));
    void *buf = PyMem_Malloc(bytes ? bytes : 1);
    if (!buf) {
        PyErr_NoMemory();
        return NULL;
    }
    if (jg_copy_to(t, buf, bytes) < 0) {
        PyMem_Free(buf);
        jgp_raise();
        return NULL;
    }
    *nbytes = bytes;
    return buf;
}

static PyObject *scalar_at(jg_dtype d, const void *buf, int64_t i) {
    switch (d) {
    case JG_F32:
        return PyFloat_FromDouble(((const float *)buf)[i]);
    case JG_F64:
        return PyFloat_FromDouble(((const double *)buf)[i]);
    case JG_BOOL:
        return PyBool_FromLong(((const bool *)buf)[i]);
    case JG_I32:
        return PyLong_FromLong(((const int32_t *)buf)[i]);
    default:
        return PyLong_FromLongLong(((const int64_t *)buf)[i]);
    }
}

static PyObject *m_item(PyObject *self, PyObject *unused) {
    (void)unused;
    jg_tensor *t = jgp_t(self);
    if (jg_numel(t) != 1) {
        PyErr_SetString(PyExc_ValueError,
                        "only one element tensors can be converted to Python scalars");
        return NULL;
    }
    size_t nb;
    void *buf = copy_out(t, &nb);
    if (!buf)
        return NULL;
    PyObject *r = scalar_at(jg_dtype_of(t), buf, 0);
    PyMem_Free(buf);
    return r;
}

static PyObject *build_list(jg_dtype d, const void *buf, int nd, const int64_t *shape, int dim,
                            int64_t *pos) {
    if (dim == nd)
        return scalar_at(d, buf, (*pos)++);
    PyObject *l = PyList_New(shape[dim]);
    for (int64_t i = 0; l && i < shape[dim]; i++) {
        PyObject *v = build_list(d, buf, nd, shape, dim + 1, pos);
        if (!v) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, v);
    }
    return l;
}

static PyObject *m_tolist(PyObject *self, PyObject *unused) {
    (void)unused;
    jg_tensor *t = jgp_t(self);
    size_t nb;
    void *buf = copy_out(t, &nb);
    if (!buf)
        return NULL;
    int64_t pos = 0;
    PyObject *r = build_list(jg_dtype_of(t), buf, jg_ndim(t), jg_shape(t), 0, &pos);
    PyMem_Free(buf);
    return r;
}

static PyObject *m_numpy(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"force", NULL};
    int force = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$p:numpy", kwlist, &force))
        return NULL;
    if (jg_requires_grad(jgp_t(self)) && !force) {
        PyErr_SetString(PyExc_RuntimeError, "Can't call numpy() on Tensor that requires grad. "
                                            "Use tensor.detach().numpy() instead.");
        return NULL;
    }
    PyObject *np = jgp_import_numpy();
    if (!np)
        return NULL;
    if (!jg_requires_grad(jgp_t(self)))
        return PyObject_CallMethod(np, "asarray", "O", self);
    PyObject *alias = jgp_wrap_new(jg_detach(jgp_t(self))); /* force=True: shares memory */
    if (!alias)
        return NULL;
    PyObject *r = PyObject_CallMethod(np, "asarray", "O", alias);
    Py_DECREF(alias);
    return r;
}

static PyObject *m_float_(PyObject *self) {
    PyObject *v = m_item(self, NULL);
    if (!v)
        return NULL;
    PyObject *r = PyNumber_Float(v);
    Py_DECREF(v);
    return r;
}

static PyObject *m_int_(PyObject *self) {
    PyObject *v = m_item(self, NULL);
    if (!v)
        return NULL;
    PyObject *r = PyNumber_Long(v);
    Py_DECREF(v);
    return r;
}

static PyObject *m_index_(PyObject *self) {
    jg_tensor *t = jgp_t(self);
    if ((jg_dtype_of(t) != JG_I64 && jg_dtype_of(t) != JG_I32) || jg_numel(t) != 1) {
        PyErr_SetString(PyExc_TypeError, "only integer tensors of a single element can be "
                                         "converted to an index");
        return NULL;
    }
    return m_item(self, NULL);
}

static int m_bool_(PyObject *self) {
    jg_tensor *t = jgp_t(self);
    if (jg_numel(t) != 1) {
        PyErr_Format(PyExc_RuntimeError, "Boolean value of Tensor with %s values is ambiguous",
                     jg_numel(t) == 0 ? "no" : "more than one");
        return -1;
    }
    PyObject *v = m_item(self, NULL);
    if (!v)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

static Py_ssize_t m_len(PyObject *self) {
    jg_tensor *t = jgp_t(self);
    if (jg_ndim(t) == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
        return -1;
    }
    jgp_size_opaque(t, jg_shape(t)[0]); /* (an int the library cannot follow) */
    return (Py_ssize_t)jg_shape(t)[0];
}

/* ------------------------------------------------------------ buffer protocol */

static int tensor_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    jg_tensor *t = jgp_t(self);
    /* as PyTorch: no array of a tensor that requires grad (numpy refuses it
     * through Tensor.__array__, which it asks once the buffer is refused;
     * numpy(force=True) takes the buffer of a detached alias) */
    if (jg_requires_grad(t)) {
        PyErr_SetString(PyExc_BufferError, "Can't call numpy() on Tensor that requires grad. "
                                           "Use tensor.detach().numpy() instead.");
        return -1;
    }
    void *data = jg_data(t);
    if (!data) {
        PyErr_SetString(PyExc_BufferError, jg_last_error());
        jg_clear_error();
        return -1;
    }
    int nd = jg_ndim(t);
    Py_ssize_t item = (Py_ssize_t)jgp_dtype_size(jg_dtype_of(t));
    Py_ssize_t *dims = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(2 * nd + 1));
    if (!dims) {
        PyErr_NoMemory();
        return -1;
    }
    const int64_t *sh = jg_shape(t), *st = jg_strides(t);
    for (int i = 0; i < nd; i++) {
        dims[i] = (Py_ssize_t)sh[i];
        dims[nd + i] = (Py_ssize_t)(st[i] * item);
    }
    bool contig = jg_is_contiguous(t);
    if ((flags & PyBUF_ND) == PyBUF_ND && (flags & PyBUF_STRIDES) != PyBUF_STRIDES && !contig) {
        PyMem_Free(dims);
        PyErr_SetString(PyExc_BufferError, "tensor is not contiguous");
        return -1;
    }
    view->buf = data;
    view->obj = self;
    Py_INCREF(self);
    view->len = (Py_ssize_t)jg_numel(t) * item;
    view->readonly = 0;
    view->itemsize = item;
    static const char *const formats[N_DTYPES] = {
        [JG_F32] = "f", [JG_F64] = "d", [JG_I64] = "q", [JG_BOOL] = "?", [JG_I32] = "i"};
    view->format = (flags & PyBUF_FORMAT) ? (char *)formats[jg_dtype_of(t)] : NULL;
    view->ndim = nd;
    view->shape = (flags & PyBUF_ND) ? dims : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? dims + nd : NULL;
    view->suboffsets = NULL;
    view->internal = dims;
    return 0;
}

static void tensor_releasebuffer(PyObject *self, Py_buffer *view) {
    (void)self;
    PyMem_Free(view->internal);
    view->internal = NULL;
}

/* ------------------------------------------------------------ indexing */

/* Replaces *cur with a new tensor, releasing the old one (no scope is open
 * or the old one is ours). */
static int step(jg_tensor **cur, jg_tensor *next) {
    if (!next) {
        jgp_raise();
        return -1;
    }
    next = jg_keep(next);
    jg_release(*cur);
    *cur = next;
    return 0;
}

static int reshape_drop_insert(jg_tensor **cur, int d, bool insert) {
    jg_tensor *t = *cur;
    int nd = jg_ndim(t), k = 0;
    int64_t shape[JG_MAX_DIMS];
    const int64_t *s = jg_shape(t);
    if (insert && nd >= JG_MAX_DIMS) {
        PyErr_SetString(PyExc_RuntimeError, "too many dims");
        return -1;
    }
    for (int i = 0; i <= nd; i++) {
        if (insert && i == d)
            shape[k++] = 1;
        if (i < nd && !(!insert && i == d))
            shape[k++] = s[i];
    }
    return step(cur, jg_reshape(t, k, shape));
}

/* The view x[key] as a new reference we own. */
static jg_tensor *index_view(jg_tensor *x, PyObject *key) {
    PyObject *items = PyTuple_Check(key) ? (Py_INCREF(key), key) : PyTuple_Pack(1, key);
    if (!items)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    int consumed = 0;
    bool ellipsis = false;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PyTuple_GET_ITEM(items, i);
        if (it == Py_Ellipsis) {
            if (ellipsis) {
                PyErr_SetString(PyExc_IndexError, "an index can only have a single ellipsis");
                Py_DECREF(items);
                return NULL;
            }
            ellipsis = true;
        } else if (it != Py_None) {
            consumed++;
        }
    }
    if (consumed > jg_ndim(x)) {
        PyErr_Format(PyExc_IndexError, "too many indices for tensor of dimension %d", jg_ndim(x));
        Py_DECREF(items);
        return NULL;
    }
    jg_tensor *cur = jg_retain(x);
    int d = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PyTuple_GET_ITEM(items, i);
        int rc = 0;
        if (it == Py_Ellipsis) {
            d += jg_ndim(x) - consumed;
        } else if (it == Py_None) {
            rc = reshape_drop_insert(&cur, d, true);
            d++;
        } else if (PySlice_Check(it)) {
            Py_ssize_t start, stop, stp;
            if (PySlice_Unpack(it, &start, &stop, &stp) < 0) {
                rc = -1;
            } else if (stp <= 0) {
                PyErr_SetString(PyExc_ValueError, "step must be greater than zero");
                rc = -1;
            } else {
                int64_t size = jg_shape(cur)[d];
                /* as PyTorch: in an index of several parts, a slice that
                 * names the whole dim (0:size, :size) is no op; a bare ':'
                 * (stop unbounded) and a slice alone are slice ops */
                bool whole = PyTuple_Check(key) && start == 0 && stop == size && stp == 1;
                PySlice_AdjustIndices((Py_ssize_t)size, &start, &stop, stp);
                if (stop < start)
                    stop = start;
                if (!whole)
                    rc = step(&cur, jg_slice_step(cur, d, start, stop, stp));
            }
            d++;
        } else if (!jgp_is_tensor(it) && PyIndex_Check(it)) {
            Py_ssize_t idx = PyNumber_AsSsize_t(it, PyExc_IndexError);
            int64_t size = jg_shape(cur)[d];
            if (idx == -1 && PyErr_Occurred()) {
                rc = -1;
            } else if (idx < -size || idx >= size) {
                PyErr_Format(PyExc_IndexError,
                             "index %zd is out of bounds for dimension %d with size %lld", idx, d,
                             (long long)size);
                rc = -1;
            } else {
                if (idx < 0)
                    idx += size;
                rc = step(&cur, jg_slice(cur, d, idx, idx + 1));
                if (rc == 0)
                    rc = reshape_drop_insert(&cur, d, false);
            }
        } else {
            PyErr_Format(PyExc_IndexError,
                         "jitgrad supports indexing with integers, slices, None and Ellipsis "
                         "only (got %s)",
                         Py_TYPE(it)->tp_name);
            rc = -1;
        }
        if (rc < 0) {
            jg_release(cur);
            Py_DECREF(items);
            return NULL;
        }
    }
    Py_DECREF(items);
    if (cur == x && step(&cur, jg_reshape(x, jg_ndim(x), jg_shape(x))) < 0) {
        jg_release(cur); /* x[:], x[...]: a view all the same, never x itself */
        return NULL;
    }
    return cur;
}

/* x[mask] (or x[(mask,)]) for a bool tensor mask. */
static PyObject *bool_mask_key(PyObject *key) {
    if (PyTuple_Check(key) && PyTuple_GET_SIZE(key) == 1)
        key = PyTuple_GET_ITEM(key, 0);
    return jgp_is_tensor(key) && jg_dtype_of(jgp_t(key)) == JG_BOOL ? key : NULL;
}

/* Indexing with tensors or lists (advanced indexing) is arranged in
 * jitgrad/_opsshape.py out of the library's index and index_put_ calls. */
static bool is_advanced_item(PyObject *it) {
    if (jgp_is_tensor(it) || PyList_Check(it) || PyTuple_Check(it))
        return true;
    if (PyLong_Check(it) || PyBytes_Check(it) || !PyObject_CheckBuffer(it))
        return false;
    /* a NumPy array with dims (NumPy integer scalars are plain indices) */
    PyObject *nd = PyObject_GetAttrString(it, "ndim");
    long n = nd && PyLong_Check(nd) ? PyLong_AsLong(nd) : 0;
    Py_XDECREF(nd);
    PyErr_Clear();
    return n > 0;
}

static bool is_advanced_key(PyObject *key) {
    if (!PyTuple_Check(key))
        return is_advanced_item(key);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key); i++)
        if (is_advanced_item(PyTuple_GET_ITEM(key, i)))
            return true;
    return false;
}

static PyObject *advanced_call(const char *fn, PyObject *self, PyObject *key, PyObject *value) {
    PyObject *mod = PyImport_ImportModule("jitgrad._opsshape");
    if (!mod)
        return NULL;
    PyObject *r = value ? PyObject_CallMethod(mod, fn, "OOO", self, key, value)
                        : PyObject_CallMethod(mod, fn, "OO", self, key);
    Py_DECREF(mod);
    return r;
}

static PyObject *m_getitem(PyObject *self, PyObject *key) {
    PyObject *mask = bool_mask_key(key);
    if (!mask && is_advanced_key(key))
        return advanced_call("_getitem", self, key, NULL);
    if (mask) {
        jg_tensor *r = jg_mask_select_rows(jgp_t(self), jgp_t(mask));
        if (!r && strstr(jg_last_error(), "does not match the shape")) {
            PyErr_SetString(PyExc_IndexError, jg_last_error());
            jg_clear_error();
            return NULL;
        }
        return jgp_wrap_new(r);
    }
    jg_tensor *v = index_view(jgp_t(self), key);
    return v ? jgp_wrap(v) : NULL;
}

/* x[mask] = number: masked_fill over mask's leading dims, copied into x
 * (so autograd sees a copy_ of the filled tensor). */
static int masked_assign(jg_tensor *x, jg_tensor *mask, PyObject *value) {
    double v;
    if (jgp_is_tensor(value)) {
        if (jg_numel(jgp_t(value)) != 1) {
            PyErr_SetString(PyExc_NotImplementedError,
                            "jitgrad: x[mask] = tensor supports one-element values only");
            return -1;
        }
        v = jg_item(jgp_t(value));
    } else {
        v = PyFloat_AsDouble(value);
    }
    if (v == -1.0 && PyErr_Occurred())
        return -1;
    if (isnan(v) && jgp_is_tensor(value) && jg_last_error()[0])
        return jgp_raise_int();
    int nd = jg_ndim(x), md = jg_ndim(mask);
    if (md > nd || memcmp(jg_shape(mask), jg_shape(x), sizeof(int64_t) * (size_t)md) != 0) {
        /* the message jg_mask_select_rows gives */
        jg_tensor *r = jg_mask_select_rows(x, mask);
        jg_release(r);
        PyErr_SetString(PyExc_IndexError, jg_last_error());
        jg_clear_error();
        return -1;
    }
    int64_t shape[JG_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        shape[d] = d < md ? jg_shape(mask)[d] : 1;
    jg_tensor *m = jg_keep(jg_reshape(mask, nd, shape));
    int rc = m ? jg_index_put_mask_(x, m, v) : -1;
    jg_release(m);
    return rc < 0 ? jgp_raise_int() : 0;
}

static int m_setitem(PyObject *self, PyObject *key, PyObject *value) {
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "cannot delete tensor elements");
        return -1;
    }
    PyObject *mask = bool_mask_key(key);
    if (mask && !(jgp_is_tensor(value) && jg_numel(jgp_t(value)) != 1))
        return masked_assign(jgp_t(self), jgp_t(mask), value);
    if (mask || is_advanced_key(key)) {
        PyObject *r = advanced_call("_setitem", self, key, value);
        Py_XDECREF(r);
        return r ? 0 : -1;
    }
    jg_tensor *v = index_view(jgp_t(self), key);
    if (!v)
        return -1;
    jg_tensor *src = NULL;
    if (jgp_is_tensor(value)) {
        src = jg_retain(jgp_t(value));
    } else {
        double x = PyFloat_AsDouble(value);
        if (x == -1.0 && PyErr_Occurred()) {
            jg_release(v);
            return -1;
        }
        src = jg_keep(jg_scalar(jg_dtype_of(v), x));
    }
    int rc = src ? jg_copy_(v, src) : -1;
    if (rc < 0)
        jgp_raise();
    jg_release(src);
    jg_release(v);
    return rc < 0 ? -1 : 0;
}

/* ------------------------------------------------------------ the type */

static PyMethodDef tensor_methods[] = {
    {"dim", m_dim, METH_NOARGS, NULL},
    {"ndimension", m_dim, METH_NOARGS, NULL},
    {"numel", m_numel, METH_NOARGS, NULL},
    {"nelement", m_numel, METH_NOARGS, NULL},
    {"size", m_size, METH_VARARGS, NULL},
    {"stride", m_stride, METH_VARARGS, NULL},
    {"storage_offset", m_storage_offset, METH_NOARGS, NULL},
    {"is_contiguous", m_is_contiguous, METH_NOARGS, NULL},
    {"element_size", m_element_size, METH_NOARGS, NULL},
    {"is_floating_point", m_is_floating_point, METH_NOARGS, NULL},
    {"_same_storage", m_same_storage, METH_O, NULL},
    {"requires_grad_", (PyCFunction)(void (*)(void))m_requires_grad_, METH_VARARGS | METH_KEYWORDS,
     NULL},
    {"detach_", m_detach_, METH_NOARGS, NULL},
    {"item", m_item, METH_NOARGS, NULL},
    {"tolist", m_tolist, METH_NOARGS, NULL},
    {"numpy", (PyCFunction)(void (*)(void))m_numpy, METH_VARARGS | METH_KEYWORDS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef tensor_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(JGTensor, weakrefs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

#define MAX_SLOTS 96

static Py_hash_t tensor_hash(PyObject *self) {
    return PyBaseObject_Type.tp_hash(self);
}

int jgp_tensor_init_type(PyObject *module) {
    for (int d = 0; d < N_DTYPES; d++) {
        if (PyType_Ready(&JGDtype_Type) < 0)
            return -1;
        PyObject_Init((PyObject *)&dtype_objs[d], &JGDtype_Type);
        dtype_objs[d].d = (jg_dtype)d;
        Py_INCREF(&dtype_objs[d]); /* static objects: never freed */
    }
    static PyType_Slot slots[MAX_SLOTS];
    int k = 0;
    slots[k++] = (PyType_Slot){Py_tp_dealloc, tensor_dealloc};
    slots[k++] = (PyType_Slot){Py_tp_getset, tensor_getset};
    slots[k++] = (PyType_Slot){Py_tp_members, tensor_members};
    slots[k++] = (PyType_Slot){Py_mp_subscript, m_getitem};
    slots[k++] = (PyType_Slot){Py_mp_ass_subscript, m_setitem};
    slots[k++] = (PyType_Slot){Py_mp_length, m_len};
    slots[k++] = (PyType_Slot){Py_nb_bool, m_bool_};
    slots[k++] = (PyType_Slot){Py_nb_float, m_float_};
    slots[k++] = (PyType_Slot){Py_nb_int, m_int_};
    slots[k++] = (PyType_Slot){Py_nb_index, m_index_};
    slots[k++] = (PyType_Slot){Py_bf_getbuffer, tensor_getbuffer};
    slots[k++] = (PyType_Slot){Py_bf_releasebuffer, tensor_releasebuffer};
    /* == is elementwise; hashing stays by identity (PyTorch's too) */
    slots[k++] = (PyType_Slot){Py_tp_richcompare, jgp_tensor_richcompare};
    slots[k++] = (PyType_Slot){Py_tp_hash, tensor_hash};
    /* methods: this file's, the ops' and autograd's, merged */
    static PyMethodDef all[512];
    int m = 0;
    PyMethodDef *lists[] = {tensor_methods,
                            jgp_tensor_op_methods,
                            jgp_autograd_methods,
                            jgp_io_methods,
                            jgp_tensor_opsshape_methods,
                            jgp_tensor_opsmath_methods,
                            jgp_tensor_surface2_methods,
                            jgp_tensor_math2_methods,
                            jgp_tensor_index_methods,
                            jgp_tensor_bitwise_methods};
    for (size_t l = 0; l < sizeof lists / sizeof *lists; l++)
        for (PyMethodDef *p = lists[l]; p->ml_name; p++) {
            if (m + 1 >= (int)(sizeof all / sizeof *all)) {
                PyErr_SetString(PyExc_SystemError, "jitgrad: too many Tensor methods");
                return -1;
            }
            all[m++] = *p;
        }
    all[m] = (PyMethodDef){NULL, NULL, 0, NULL};
    jgp_docs_apply(all);
    slots[k++] = (PyType_Slot){Py_tp_methods, all};
    int nb[] = {Py_nb_add,
                Py_nb_subtract,
                Py_nb_multiply,
                Py_nb_true_divide,
                Py_nb_negative,
                Py_nb_positive,
                Py_nb_absolute,
                Py_nb_power,
                Py_nb_matrix_multiply,
                Py_nb_inplace_add,
                Py_nb_inplace_subtract,
                Py_nb_inplace_multiply,
                Py_nb_inplace_true_divide,
                Py_nb_invert,
                Py_nb_and,
                Py_nb_or,
                Py_nb_xor};
    void *nbf[] = {jgp_tensor_as_number.nb_add,
                   jgp_tensor_as_number.nb_subtract,
                   jgp_tensor_as_number.nb_multiply,
                   jgp_tensor_as_number.nb_true_divide,
                   jgp_tensor_as_number.nb_negative,
                   jgp_tensor_as_number.nb_positive,
                   jgp_tensor_as_number.nb_absolute,
                   jgp_tensor_as_number.nb_power,
                   jgp_tensor_as_number.nb_matrix_multiply,
                   jgp_tensor_as_number.nb_inplace_add,
                   jgp_tensor_as_number.nb_inplace_subtract,
                   jgp_tensor_as_number.nb_inplace_multiply,
                   jgp_tensor_as_number.nb_inplace_true_divide,
                   jgp_tensor_as_number.nb_invert,
                   jgp_tensor_as_number.nb_and,
                   jgp_tensor_as_number.nb_or,
                   jgp_tensor_as_number.nb_xor};
    for (size_t i = 0; i < sizeof nb / sizeof *nb; i++)
        if (nbf[i])
            slots[k++] = (PyType_Slot){nb[i], nbf[i]};
    slots[k] = (PyType_Slot){0, NULL};
    static PyType_Spec spec = {
        "jitgrad.Tensor", sizeof(JGTensor), 0,
        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION, NULL};
    spec.slots = slots;
    JGTensor_Type = (PyTypeObject *)PyType_FromSpec(&spec);
    if (!JGTensor_Type)
        return -1;
    if (PyModule_AddObjectRef(module, "Tensor", (PyObject *)JGTensor_Type) < 0 ||
        PyModule_AddObjectRef(module, "dtype", (PyObject *)&JGDtype_Type) < 0)
        return -1;
    for (int d = 0; d < N_DTYPES; d++)
        if (PyModule_AddObjectRef(module, dtype_names[d], (PyObject *)&dtype_objs[d]) < 0)
            return -1;
    return 0;
}
