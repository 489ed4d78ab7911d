/* The module jitgrad._C: tensor creation, seeding, NumPy interop, and the
 * assembly of the other files' types and functions. */
#include "jgpy.h"

#include <limits.h>
#include <math.h>
#include <string.h>

int jgp_ops_init(PyObject *module);

PyObject *jgp_numpy;

PyObject *jgp_import_numpy(void) {
    if (!jgp_numpy)
        jgp_numpy = PyImport_ImportModule("numpy");
    return jgp_numpy;
}

/* ------------------------------------------------------------ common kwargs */

typedef struct {
    jg_dtype dtype;
    bool dtype_given;
    int requires_grad;
    jg_generator *gen; /* generator= (NULL: the global one) */
} create_opts;

/* dtype=, device=, requires_grad=, layout/pin_memory/generator ignored */
static int parse_create_kw(PyObject *kw, create_opts *o, const char *fn) {
    o->dtype_given = false;
    o->requires_grad = 0;
    o->gen = NULL;
    if (!kw)
        return 0;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kw, &pos, &k, &v)) {
        const char *name = PyUnicode_AsUTF8(k);
        if (!name)
            return -1;
        if (strcmp(name, "dtype") == 0) {
            if (jgp_parse_dtype(v, &o->dtype, &o->dtype_given) < 0)
                return -1;
        } else if (strcmp(name, "device") == 0) {
            if (jgp_check_device(v) < 0)
                return -1;
        } else if (strcmp(name, "requires_grad") == 0) {
            if ((o->requires_grad = PyObject_IsTrue(v)) < 0)
                return -1;
        } else if (strcmp(name, "generator") == 0) {
            if (jgp_generator_arg(v, fn, &o->gen) < 0)
                return -1;
        } else if (strcmp(name, "layout") == 0 || strcmp(name, "pin_memory") == 0) {
            if (v != Py_None && strcmp(name, "pin_memory") != 0) {
                PyErr_Format(PyExc_TypeError, "%s(): jitgrad does not support %s=", fn, name);
                return -1;
            }
        } else {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'", fn, name);
            return -1;
        }
    }
    return 0;
}

static PyObject *finish_create(jg_tensor *t, const create_opts *o) {
    PyObject *r = jgp_wrap_new(t);
    if (r && o->requires_grad) {
        if (!jgp_dtype_is_float(jg_dtype_of(jgp_t(r)))) {
            Py_DECREF(r);
            PyErr_SetString(PyExc_RuntimeError, "Only Tensors of floating point and complex dtype "
                                                "can require gradients");
            return NULL;
        }
        jg_set_requires_grad(jgp_t(r), true);
    }
    return r;
}

/* ------------------------------------------------------------ tensor(data) */

typedef struct {
    int ndim;
    int64_t shape[JG_MAX_DIMS];
    bool any_float;
    bool all_bool; /* every element a Python bool (or from a bool tensor) */
    double *f;
    int64_t *i;
    int64_t n, cap;
} nested;

static bool is_seq(PyObject *o) {
    return PyList_Check(o) || PyTuple_Check(o);
}

static int nested_shape(PyObject *o, nested *s) {
    s->ndim = 0;
    while (is_seq(o) || jgp_is_tensor(o)) {
        if (s->ndim == JG_MAX_DIMS) {
            PyErr_SetString(PyExc_ValueError, "too many dimensions");
            return -1;
        }
        if (jgp_is_tensor(o)) { /* a tensor inside a list: its shape continues */
            jg_tensor *t = jgp_t(o);
            for (int d = 0; d < jg_ndim(t); d++)
                s->shape[s->ndim++] = jg_shape(t)[d];
            return 0;
        }
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        s->shape[s->ndim++] = n;
        if (n == 0)
            break;
        o = PySequence_Fast_GET_ITEM(o, 0);
    }
    return 0;
}

static int push(nested *s, PyObject *o) {
    s->all_bool &= PyBool_Check(o);
    if (PyFloat_Check(o) || (!PyLong_Check(o) && PyNumber_Check(o) && !PyIndex_Check(o))) {
        double v = PyFloat_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred())
            return -1;
        s->any_float = true;
        s->f[s->n] = v;
        s->i[s->n] = (int64_t)v;
    } else if (PyIndex_Check(o)) {
        PyObject *l = PyNumber_Index(o);
        long long v = l ? PyLong_AsLongLong(l) : -1;
        Py_XDECREF(l);
        if (v == -1 && PyErr_Occurred())
            return -1;
        s->f[s->n] = (double)v;
        s->i[s->n] = v;
    } else {
        PyErr_Format(PyExc_TypeError, "new(): invalid data type '%s'", Py_TYPE(o)->tp_name);
        return -1;
    }
    s->n++;
    return 0;
}

static int nested_fill(PyObject *o, nested *s, int dim) {
    if (dim == s->ndim) {
        if (is_seq(o)) {
            PyErr_Format(PyExc_ValueError, "expected sequence of length 0 at dim %d (got %zd)",
                         dim - 1, PySequence_Fast_GET_SIZE(o));
            return -1;
        }
        return push(s, o);
    }
    if (jgp_is_tensor(o)) {
        jg_tensor *t = jgp_t(o);
        int64_t n = jg_numel(t);
        for (int d = 0; d < jg_ndim(t); d++)
            if (jg_shape(t)[d] != s->shape[dim + d]) {
                PyErr_SetString(PyExc_ValueError, "tensor inside a list has the wrong shape");
                return -1;
            }
        jg_tensor *f = jg_keep(jg_to_dtype(t, JG_F64));
        if (!f || jg_copy_to(f, s->f + s->n, (size_t)n * 8) < 0) {
            jg_release(f);
            jgp_raise();
            return -1;
        }
        jg_release(f);
        for (int64_t k = 0; k < n; k++)
            s->i[s->n + k] = (int64_t)s->f[s->n + k];
        s->any_float |= jgp_dtype_is_float(jg_dtype_of(t));
        s->all_bool &= jg_dtype_of(t) == JG_BOOL;
        s->n += n;
        return 0;
    }
    if (!is_seq(o)) {
        PyErr_Format(PyExc_ValueError, "expected sequence of length %lld at dim %d (got scalar)",
                     (long long)s->shape[dim], dim);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    if (n != s->shape[dim]) {
        PyErr_Format(PyExc_ValueError, "expected sequence of length %lld at dim %d (got %zd)",
                     (long long)s->shape[dim], dim, n);
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++)
        if (nested_fill(PySequence_Fast_GET_ITEM(o, k), s, dim + 1) < 0)
            return -1;
    return 0;
}

static jg_tensor *from_buffer_obj(PyObject *arr); /* numpy arrays */

static PyObject *f_tensor(PyObject *mod, PyObject *args, PyObject *kw) {
    (void)mod;
    if (PyTuple_GET_SIZE(args) != 1) {
        PyErr_SetString(PyExc_TypeError, "tensor() takes 1 positional argument (data)");
        return NULL;
    }
    PyObject *data = PyTuple_GET_ITEM(args, 0);
    create_opts o;
    if (parse_create_kw(kw, &o, "tensor") < 0)
        return NULL;
    jg_tensor *t = NULL;
    if (jgp_is_tensor(data)) {
        jg_tensor *d = jg_keep(jg_detach(jgp_t(data)));
        t = d ? jg_keep(jg_clone(d)) : NULL;
        jg_release(d);
        if (!t)
            return jgp_raise();
    } else if (PyObject_CheckBuffer(data) && !PyBytes_Check(data)) {
        if (!(t = from_buffer_obj(data)))
            return NULL;
    } else {
        nested s = {.all_bool = true};
        if (nested_shape(data, &s) < 0)
            return NULL;
        int64_t n = 1;
        for (int d = 0; d < s.ndim; d++)
            n *= s.shape[d];
        s.f = PyMem_Malloc(sizeof(double) * (size_t)(n ? n : 1));
        s.i = PyMem_Malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        int rc = s.f && s.i ? nested_fill(data, &s, 0) : (PyErr_NoMemory(), -1);
        if (rc == 0) {
            jg_dtype d = s.any_float || n == 0 ? JG_F32 : s.all_bool ? JG_BOOL : JG_I64;
            if (o.dtype_given)
                d = o.dtype; /* converted once, from the Python values (no float32 detour) */
            if (d == JG_BOOL && !s.any_float) {
                t = jg_keep(jg_tensor_new(JG_I64, s.ndim, s.shape, s.i));
                jg_tensor *c = t ? jg_keep(jg_to_dtype(t, JG_BOOL)) : NULL;
                jg_release(t);
                t = c;
            } else if (d == JG_I64 && !s.any_float)
                t = jg_keep(jg_tensor_new(JG_I64, s.ndim, s.shape, s.i));
            else
                t = jg_keep(jg_tensor_new(JG_F64, s.ndim, s.shape, s.f));
            if (t && d != jg_dtype_of(t)) {
                jg_tensor *c = jg_keep(jg_to_dtype(t, d));
                jg_release(t);
                t = c;
            }
            if (!t)
                jgp_raise();
        }
        PyMem_Free(s.f);
        PyMem_Free(s.i);
        if (!t)
            return NULL;
    }
    if (o.dtype_given && o.dtype != jg_dtype_of(t)) {
        jg_tensor *c = jg_keep(jg_to_dtype(t, o.dtype));
        jg_release(t);
        if (!(t = c))
            return jgp_raise();
    }
    return finish_create(t, &o);
}

/* A NumPy array (or anything with the buffer protocol) copied into a new
 * tensor; float16/int32/bool... are converted by NumPy first. */
static jg_tensor *from_buffer_obj(PyObject *arr) {
    PyObject *np = jgp_import_numpy();
    if (!np)
        return NULL;
    /* asarray keeps 0-d arrays and NumPy scalars 0-d (ascontiguousarray
     * would make them 1-d) */
    PyObject *a = PyObject_CallMethod(np, "asarray", "OOs", arr, Py_None, "C");
    if (!a)
        return NULL;
    PyObject *kind = PyObject_GetAttrString(a, "dtype");
    PyObject *ks = kind ? PyObject_GetAttrString(kind, "kind") : NULL;
    PyObject *isz = kind ? PyObject_GetAttrString(kind, "itemsize") : NULL;
    PyObject *nat = kind ? PyObject_GetAttrString(kind, "isnative") : NULL;
    const char *k = ks ? PyUnicode_AsUTF8(ks) : NULL;
    long itemsize = isz ? PyLong_AsLong(isz) : 0;
    bool native = !nat || PyObject_IsTrue(nat) == 1; /* other byte orders are converted */
    Py_XDECREF(nat);
    const char *target = NULL;
    if (k && k[0] == 'f')
        target = itemsize == 8   ? (native ? NULL : "float64")
                 : itemsize == 4 ? (native ? NULL : "float32")
                                 : "float32";
    else if (k && k[0] == 'b')
        target = NULL; /* bool: one byte each */
    else if (k && (k[0] == 'i' || k[0] == 'u'))
        target = k[0] == 'i' && (itemsize == 8 || itemsize == 4) && native ? NULL : "int64";
    else if (k)
        PyErr_Format(PyExc_TypeError,
                     "can't convert np.ndarray of type %S. The only supported types are: "
                     "float64, float32, int64, int32, bool (and what converts to them).",
                     kind);
    Py_XDECREF(kind);
    Py_XDECREF(ks);
    Py_XDECREF(isz);
    if (PyErr_Occurred()) {
        Py_DECREF(a);
        return NULL;
    }
    if (target) {
        PyObject *b = PyObject_CallMethod(a, "astype", "s", target);
        Py_DECREF(a);
        if (!b)
            return NULL;
        a = b;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(a, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        Py_DECREF(a);
        return NULL;
    }
    jg_tensor *t = NULL;
    if (view.ndim > JG_MAX_DIMS) {
        PyErr_SetString(PyExc_ValueError, "too many dimensions");
    } else {
        int64_t shape[JG_MAX_DIMS];
        for (int d = 0; d < view.ndim; d++)
            shape[d] = view.shape[d];
        char f = view.format[0] == '<' || view.format[0] == '=' ? view.format[1] : view.format[0];
        jg_dtype d = f == 'f'                         ? JG_F32
                     : f == 'd'                       ? JG_F64
                     : f == '?'                       ? JG_BOOL
                     : f == 'i'                       ? JG_I32
                     : f == 'l' && view.itemsize == 4 ? JG_I32
                                                      : JG_I64;
        t = jg_keep(jg_tensor_new(d, view.ndim, shape, view.buf));
        if (!t)
            jgp_raise();
    }
    PyBuffer_Release(&view);
    Py_DECREF(a);
    return t;
}

/* from_numpy's tensor holds the array's buffer (and so the array) until
 * its storage is gone; released with the GIL taken, whichever thread drops
 * the last reference. */
static void buffer_release(void *p) {
    Py_buffer *view = p;
    if (Py_IsInitialized()) {
        PyGILState_STATE g = PyGILState_Ensure();
        PyBuffer_Release(view);
        PyGILState_Release(g);
    }
    PyMem_RawFree(view);
}

/* The array's own memory as a tensor (PyTorch shares it too), or NULL with
 * no error set when its dtype has no jitgrad counterpart (then it is copied
 * and converted). */
static jg_tensor *share_array(PyObject *arr) {
    Py_buffer *view = PyMem_RawMalloc(sizeof *view);
    if (!view) {
        PyErr_NoMemory();
        return NULL;
    }
    int readonly = 0;
    if (PyObject_GetBuffer(arr, view, PyBUF_RECORDS) < 0) {
        PyErr_Clear();
        readonly = 1;
        if (PyObject_GetBuffer(arr, view, PyBUF_RECORDS_RO) < 0) {
            PyMem_RawFree(view);
            return NULL;
        }
    }
    const char *f = view->format ? view->format : "B";
#if PY_LITTLE_ENDIAN
    bool foreign = f[0] == '>' || f[0] == '!';
#else
    bool foreign = f[0] == '<';
#endif
    if (foreign) {
        PyErr_SetString(PyExc_ValueError,
                        "given numpy array has byte order different from the native byte order. "
                        "Conversion between byte orders is currently not supported.");
        PyBuffer_Release(view);
        PyMem_RawFree(view);
        return NULL;
    }
    if (f[0] == '<' || f[0] == '>' || f[0] == '=' || f[0] == '@')
        f++;
    jg_dtype d = JG_F32;
    bool known = f[1] == '\0' && view->itemsize == (f[0] == 'f' ? 4 : 8) &&
                 (f[0] == 'f' || f[0] == 'd' || f[0] == 'q' || f[0] == 'l');
    if (known)
        d = f[0] == 'f' ? JG_F32 : f[0] == 'd' ? JG_F64 : JG_I64;
    if (!known || view->ndim > JG_MAX_DIMS) {
        PyBuffer_Release(view);
        PyMem_RawFree(view);
        return NULL;
    }
    int64_t shape[JG_MAX_DIMS], strides[JG_MAX_DIMS];
    for (int k = 0; k < view->ndim; k++) {
        shape[k] = view->shape[k];
        if (view->strides[k] < 0) {
            PyErr_SetString(PyExc_ValueError,
                            "At least one stride in the given numpy array is negative, and "
                            "tensors with negative strides are not currently supported. (You can "
                            "probably work around this by making a copy of your array  with "
                            "array.copy().) ");
        } else if (view->strides[k] % view->itemsize) {
            PyErr_SetString(PyExc_ValueError,
                            "given numpy array strides not a multiple of the element byte size. "
                            "Copy the numpy array to reallocate the memory.");
        }
        strides[k] = view->strides[k] / view->itemsize;
    }
    if (!PyErr_Occurred() && readonly &&
        PyErr_WarnEx(PyExc_UserWarning,
                     "The given NumPy array is not writable, and jitgrad does not support "
                     "non-writable tensors. This means writing to this tensor will result in "
                     "undefined behavior. You may want to copy the array to protect its data or "
                     "make it writable before converting it to a tensor.",
                     1) < 0) {
        /* the warning became an exception */
    }
    jg_tensor *t = NULL;
    if (!PyErr_Occurred()) {
        t = jg_keep(
            jg_tensor_from_blob(d, view->ndim, shape, strides, view->buf, buffer_release, view));
        if (!t)
            jgp_raise();
    }
    if (!t) {
        PyBuffer_Release(view);
        PyMem_RawFree(view);
    }
    return t;
}

static PyObject *f_from_numpy(PyObject *mod, PyObject *arr) {
    (void)mod;
    PyObject *np = jgp_import_numpy();
    if (!np)
        return NULL;
    PyObject *nd = PyObject_GetAttrString(np, "ndarray");
    int ok = nd ? PyObject_IsInstance(arr, nd) : -1;
    Py_XDECREF(nd);
    if (ok <= 0) {
        if (ok == 0)
            PyErr_Format(PyExc_TypeError, "expected np.ndarray (got %s)", Py_TYPE(arr)->tp_name);
        return NULL;
    }
    jg_tensor *t = share_array(arr);
    if (!t && !PyErr_Occurred())
        t = from_buffer_obj(arr); /* float16, int32, bool...: converted, so copied */
    return t ? jgp_wrap(t) : NULL;
}

/* ------------------------------------------------------------ sized creation */

static PyObject *sized(PyObject *args, PyObject *kw, const char *fn, int kind, double value) {
    int nd;
    int64_t shape[JG_MAX_DIMS];
    create_opts o;
    if (jgp_parse_shape(args, &nd, shape) < 0 || parse_create_kw(kw, &o, fn) < 0)
        return NULL;
    jg_dtype d = o.dtype_given ? o.dtype : JG_F32;
    jg_tensor *t;
    jg_generator *prev = o.gen ? jg_generator_use(o.gen) : NULL;
    switch (kind) {
    case 0:
        t = jg_randn(d, nd, shape);
        break;
    case 1:
        t = jg_rand(d, nd, shape);
        break;
    default:
        t = jg_full(d, nd, shape, value);
    }
    if (o.gen)
        jg_generator_use(prev);
    return finish_create(t, &o);
}

static PyObject *f_randn(PyObject *m, PyObject *a, PyObject *k) {
    (void)m;
    return sized(a, k, "randn", 0, 0);
}
static PyObject *f_rand(PyObject *m, PyObject *a, PyObject *k) {
    (void)m;
    return sized(a, k, "rand", 1, 0);
}
static PyObject *f_zeros(PyObject *m, PyObject *a, PyObject *k) {
    (void)m;
    return sized(a, k, "zeros", 2, 0);
}
static PyObject *f_ones(PyObject *m, PyObject *a, PyObject *k) {
    (void)m;
    return sized(a, k, "ones", 2, 1);
}

static PyObject *f_full(PyObject *m, PyObject *args, PyObject *kw) {
    (void)m;
    PyObject *size, *fill;
    if (!PyArg_ParseTuple(args, "OO:full", &size, &fill))
        return NULL;
    PyObject *sa = PyTuple_Pack(1, size);
    if (!sa)
        return NULL;
    int nd;
    int64_t shape[JG_MAX_DIMS];
    create_opts o;
    int rc = jgp_parse_shape(sa, &nd, shape);
    Py_DECREF(sa);
    if (rc < 0 || parse_create_kw(kw, &o, "full") < 0)
        return NULL;
    double v = PyFloat_AsDouble(fill);
    if (v == -1.0 && PyErr_Occurred())
        return NULL;
    jg_dtype d = o.dtype_given         ? o.dtype
                 : PyFloat_Check(fill) ? JG_F32
                 : PyBool_Check(fill)  ? JG_BOOL
                                       : JG_I64;
    return finish_create(jg_full(d, nd, shape, v), &o);
}

/* zeros_like & co.: kind 0 randn, 1 rand, 2 full(value) */
static PyObject *like(PyObject *args, PyObject *kw, const char *fn, int kind, double value) {
    if (PyTuple_GET_SIZE(args) != 1 || !jgp_is_tensor(PyTuple_GET_ITEM(args, 0))) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'input' must be Tensor", fn);
        return NULL;
    }
    jg_tensor *x = jgp_t(PyTuple_GET_ITEM(args, 0));
    create_opts o;
    if (parse_create_kw(kw, &o, fn) < 0)
        return NULL;
    jg_dtype d = o.dtype_given ? o.dtype : jg_dtype_of(x);
    jg_tensor *t = kind == 0   ? jg_randn(d, jg_ndim(x), jg_shape(x))
                   : kind == 1 ? jg_rand(d, jg_ndim(x), jg_shape(x))
                               : jg_full(d, jg_ndim(x), jg_shape(x), value);
    return finish_create(t, &o);
}

static PyObject *f_zeros_like(PyObject *m, PyObject *a, PyObject *k) {
    (void)m;
    return like(a, k, "zeros_like", 2, 0);
}
static PyObject *f_ones_like(PyObject *m, PyObject *a, PyObject *k) {
    (void)m;
    return like(a, k, "ones_like", 2, 1);
}
static PyObject *f_randn_like(PyObject *m, PyObject *a, PyObject *k) {
    (void)m;
    return like(a, k, "randn_like", 0, 0);
}
static PyObject *f_rand_like(PyObject *m, PyObject *a, PyObject *k) {
    (void)m;
    return like(a, k, "rand_like", 1, 0);
}

static double arange_num(PyObject *o) {
    return PyLong_Check(o) ? PyLong_AsDouble(o) : PyFloat_AsDouble(o);
}

static PyObject *f_arange(PyObject *m, PyObject *args, PyObject *kw) {
    (void)m;
    PyObject *a = NULL, *b = NULL, *s = NULL;
    if (!PyArg_UnpackTuple(args, "arange", 1, 3, &a, &b, &s))
        return NULL;
    create_opts o;
    if (parse_create_kw(kw, &o, "arange") < 0)
        return NULL;
    PyObject *start = b ? a : NULL, *end = b ? b : a;
    bool is_float =
        PyFloat_Check(end) || (start && PyFloat_Check(start)) || (s && PyFloat_Check(s));
    /* ints read as such: a traced size (SymInt) is no float() use, and the
     * constant made from it is followed (arange(T) in a dynamic entry) */
    double x0 = start ? arange_num(start) : 0, x1 = arange_num(end);
    double st = s ? arange_num(s) : 1;
    if (PyErr_Occurred())
        return NULL;
    if (st == 0) {
        PyErr_SetString(PyExc_RuntimeError, "step must be nonzero");
        return NULL;
    }
    int64_t n = (int64_t)ceil((x1 - x0) / st);
    if (n < 0)
        n = 0;
    double *v = PyMem_Malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!v)
        return PyErr_NoMemory();
    for (int64_t i = 0; i < n; i++)
        v[i] = x0 + (double)i * st;
    jg_dtype d = o.dtype_given ? o.dtype : is_float ? JG_F32 : JG_I64;
    jg_tensor *t64 = jg_keep(jg_tensor_new(JG_F64, 1, &n, v));
    PyMem_Free(v);
    if (!t64)
        return jgp_raise();
    jg_tensor *t = jg_to_dtype(t64, d);
    PyObject *r = finish_create(t, &o);
    jg_release(t64);
    return r;
}

static PyObject *f_manual_seed(PyObject *m, PyObject *seed) {
    (void)m;
    unsigned long long s = PyLong_AsUnsignedLongLongMask(seed);
    if (PyErr_Occurred())
        return NULL;
    jg_manual_seed(s);
    Py_RETURN_NONE;
}

/* True for NumPy's integer scalars (np.int64(2) ...), which PyTorch takes
 * where it takes an int. */
static bool is_numpy_int(PyObject *o) {
    PyObject *np = jgp_import_numpy();
    PyObject *integer = np ? PyObject_GetAttrString(np, "integer") : NULL;
    int r = integer ? PyObject_IsInstance(o, integer) : -1;
    Py_XDECREF(integer);
    if (r < 0)
        PyErr_Clear();
    return r > 0;
}

/* torch.set_num_threads's checks and messages (RuntimeError for a non-int,
 * a bool included, and for a count that is not a positive C int). */
static PyObject *f_set_num_threads(PyObject *m, PyObject *arg) {
    (void)m;
    if ((!PyLong_Check(arg) || PyBool_Check(arg)) && !is_numpy_int(arg)) {
        PyErr_Format(PyExc_RuntimeError, "set_num_threads expects an int, but got %s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    PyObject *v = PyNumber_Index(arg);
    if (!v)
        return NULL;
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
    Py_DECREF(v);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (overflow || n <= 0 || n > INT_MAX) {
        PyErr_SetString(PyExc_RuntimeError, "set_num_threads expects a positive integer");
        return NULL;
    }
    if (jg_set_num_threads((int)n) < 0)
        return jgp_raise();
    Py_RETURN_NONE;
}

static PyObject *f_get_num_threads(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyLong_FromLong(jg_get_num_threads());
}

/* The library's internal src/core/blas.h (not in the public header, which
 * this extension builds against): OpenBLAS's kernels ("SkylakeX"), NULL for
 * a BLAS that does not say.  Python: jitgrad.backends.openblas.corename(). */
const char *jg_blas_corename(void);
static PyObject *f_blas_corename(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    const char *name = jg_blas_corename();
    if (!name)
        Py_RETURN_NONE;
    return PyUnicode_FromString(name);
}

static PyObject *f_memory_allocated(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyLong_FromLongLong(jg_memory_allocated());
}

static PyObject *f_max_memory_allocated(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyLong_FromLongLong(jg_max_memory_allocated());
}

static PyObject *f_reset_peak_memory_stats(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    jg_reset_peak_memory_stats();
    Py_RETURN_NONE;
}

#define KW (METH_VARARGS | METH_KEYWORDS)
#define CF(f) ((PyCFunction)(void (*)(void))(f))

static PyMethodDef module_functions[] = {
    {"tensor", CF(f_tensor), KW, NULL},
    {"from_numpy", f_from_numpy, METH_O, NULL},
    {"randn", CF(f_randn), KW, NULL},
    {"rand", CF(f_rand), KW, NULL},
    {"zeros", CF(f_zeros), KW, NULL},
    {"ones", CF(f_ones), KW, NULL},
    {"full", CF(f_full), KW, NULL},
    {"zeros_like", CF(f_zeros_like), KW, NULL},
    {"ones_like", CF(f_ones_like), KW, NULL},
    {"randn_like", CF(f_randn_like), KW, NULL},
    {"rand_like", CF(f_rand_like), KW, NULL},
    {"arange", CF(f_arange), KW, NULL},
    {"manual_seed", f_manual_seed, METH_O, NULL},
    {"set_num_threads", f_set_num_threads, METH_O, NULL},
    {"get_num_threads", f_get_num_threads, METH_NOARGS, NULL},
    {"_blas_corename", f_blas_corename, METH_NOARGS, NULL},
    {"memory_allocated", f_memory_allocated, METH_NOARGS, NULL},
    {"max_memory_allocated", f_max_memory_allocated, METH_NOARGS, NULL},
    {"reset_peak_memory_stats", f_reset_peak_memory_stats, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "jitgrad._C",
                                    "jitgrad's C extension (see jitgrad/__init__.py)", -1};

PyMODINIT_FUNC PyInit__C(void);
PyMODINIT_FUNC PyInit__C(void) {
    PyObject *m = PyModule_Create(&moddef);
    if (!m)
        return NULL;
    PyMethodDef *lists[] = {module_functions,
                            jgp_module_op_functions,
                            jgp_module_autograd_functions,
                            jgp_module_function_functions,
                            jgp_module_optim_functions,
                            jgp_module_io_functions,
                            jgp_module_opsshape_functions,
                            jgp_module_nn_functions,
                            jgp_module_conv_functions,
                            jgp_module_opsmath_functions,
                            jgp_module_surface2_functions,
                            jgp_module_dist_functions,
                            jgp_module_linalg_functions};
    for (size_t l = 0; l < sizeof lists / sizeof *lists; l++) {
        jgp_docs_apply(lists[l]);
        if (PyModule_AddFunctions(m, lists[l]) < 0)
            goto fail;
    }
    if (jgp_ops_init(m) < 0 || jgp_tensor_init_type(m) < 0 || jgp_function_init(m) < 0 ||
        jgp_compile_init(m) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
