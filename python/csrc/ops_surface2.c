/* Bindings of the surface2 ops: min (all / over a dim, with a (values,
 * indices) named tuple like max; min(other) is minimum), amax and amin. */
#include "jgpy.h"

#include <string.h>
#include <structseq.h>

#define KW (METH_VARARGS | METH_KEYWORDS)
#define CF(f) ((PyCFunction)(void (*)(void))(f))

static PyStructSequence_Field min_fields[] = {{"values", NULL}, {"indices", NULL}, {NULL, NULL}};
static PyStructSequence_Desc min_desc = {"jitgrad.return_types.min", NULL, min_fields, 2};
static PyTypeObject *min_type;

static PyObject *m_min(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dim", "keepdim", NULL};
    PyObject *dim = Py_None;
    int keepdim = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Op:min", kwlist, &dim, &keepdim))
        return NULL;
    jg_tensor *t = jgp_t(self), *v, *i;
    if (jgp_is_tensor(dim)) /* min(other): PyTorch's elementwise minimum */
        return jgp_wrap_new(jg_minimum(t, jgp_t(dim)));
    if (dim == Py_None) {
        if (keepdim) {
            PyErr_SetString(PyExc_TypeError, "min(): keepdim needs a dim");
            return NULL;
        }
        return jgp_wrap_new(jg_min(t));
    }
    int d = _PyLong_AsInt(dim);
    if (d == -1 && PyErr_Occurred())
        return NULL;
    if (jg_min_dim(t, d, keepdim, &v, &i) < 0)
        return jgp_raise();
    if (!min_type && !(min_type = PyStructSequence_NewType(&min_desc))) {
        jg_release(v);
        jg_release(i);
        return NULL;
    }
    PyObject *vo = jgp_wrap_new(v), *io = jgp_wrap_new(i);
    PyObject *r = vo && io ? PyStructSequence_New(min_type) : NULL;
    if (!r) {
        Py_XDECREF(vo);
        Py_XDECREF(io);
        return NULL;
    }
    PyStructSequence_SET_ITEM(r, 0, vo);
    PyStructSequence_SET_ITEM(r, 1, io);
    return r;
}

/* dim: an int or a sequence of ints; () or None reduces every dim */
static int dim_list(PyObject *dim, const char *fn, int *n, int *dims) {
    *n = 0;
    if (dim == Py_None)
        return 0;
    if (PyLong_Check(dim)) {
        dims[0] = _PyLong_AsInt(dim);
        *n = 1;
        return dims[0] == -1 && PyErr_Occurred() ? -1 : 0;
    }
    PyObject *seq = PySequence_Fast(dim, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'dim' must be tuple of ints, not %s", fn,
                     Py_TYPE(dim)->tp_name);
        return -1;
    }
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    if (k > JG_MAX_DIMS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_RuntimeError, "%s(): too many dims", fn);
        return -1;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, j);
        if (!PyLong_Check(o)) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument 'dim' must be tuple of ints, but found "
                         "element of type %s at pos %zd",
                         fn, Py_TYPE(o)->tp_name, j);
            return -1;
        }
        dims[j] = _PyLong_AsInt(o);
    }
    Py_DECREF(seq);
    *n = (int)k;
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *amax_impl(PyObject *self, PyObject *args, PyObject *kw, bool is_max) {
    static char *kwlist[] = {"dim", "keepdim", NULL};
    const char *fn = is_max ? "amax" : "amin";
    PyObject *dim = Py_None;
    int keepdim = 0, n, dims[JG_MAX_DIMS];
    if (!PyArg_ParseTupleAndKeywords(args, kw, is_max ? "|Op:amax" : "|Op:amin", kwlist, &dim,
                                     &keepdim))
        return NULL;
    if (dim_list(dim, fn, &n, dims) < 0)
        return NULL;
    jg_tensor *t = jgp_t(self);
    return jgp_wrap_new(is_max ? jg_amax(t, n, dims, keepdim) : jg_amin(t, n, dims, keepdim));
}

static PyObject *m_amax(PyObject *self, PyObject *args, PyObject *kw) {
    return amax_impl(self, args, kw, true);
}

static PyObject *m_amin(PyObject *self, PyObject *args, PyObject *kw) {
    return amax_impl(self, args, kw, false);
}

/* ---- clamp_ / clamp_min_ / clamp_max_ (number bounds) ---- */

static const char *ctype_name(jg_dtype d) { /* PyTorch's names in cast errors */
    return d == JG_I64 ? "long int" : d == JG_I32 ? "int" : d == JG_BOOL ? "bool" : "float";
}

static int number_bound(PyObject *o, const char *fn, bool *has, double *v, bool *is_float,
                        bool *is_int) {
    *has = o && o != Py_None;
    if (!*has)
        return 0;
    if (!PyFloat_Check(o) && !PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError,
                     "%s() received an invalid combination of arguments - got (%s), but expected "
                     "one of:\n * (Number ...)",
                     fn, Py_TYPE(o)->tp_name);
        return -1;
    }
    *is_float |= PyFloat_Check(o);
    *is_int |= PyLong_Check(o) && !PyBool_Check(o);
    *v = PyFloat_AsDouble(o);
    return *v == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* Tensor bounds: clamp a clone of self and copy the result in, so the
 * gradient reaches self's old history through the clamp (one version bump;
 * a leaf that requires grad is refused by copy_) */
static PyObject *clamp_inplace_tensors(PyObject *self, PyObject *lo, PyObject *hi, const char *fn) {
    for (int k = 0; k < 2; k++) {
        PyObject *b = k ? hi : lo;
        if (b && b != Py_None && !jgp_is_tensor(b))
            return PyErr_Format(PyExc_TypeError,
                                "%s(): min and max must both be tensors or both numbers, got %s",
                                fn, Py_TYPE(b)->tp_name);
    }
    jg_tensor *t = jgp_t(self);
    jg_tensor *l = lo && lo != Py_None ? jgp_t(lo) : NULL;
    jg_tensor *h = hi && hi != Py_None ? jgp_t(hi) : NULL;
    jg_tensor *c = jg_keep(jg_clone(t));
    jg_tensor *r = c ? jg_keep(jg_clamp_tensor(c, l, h)) : NULL;
    int rc = r ? 0 : -1;
    if (r && jgp_dtype_is_float(jg_dtype_of(r)) && !jgp_dtype_is_float(jg_dtype_of(t))) {
        PyErr_Format(PyExc_RuntimeError,
                     "result type Float can't be cast to the desired output type %s",
                     jg_dtype_of(t) == JG_I64   ? "Long"
                     : jg_dtype_of(t) == JG_I32 ? "Int"
                                                : "Bool");
        rc = -2;
    } else if (r && (jg_ndim(r) != jg_ndim(t) ||
                     memcmp(jg_shape(r), jg_shape(t), sizeof(int64_t) * (size_t)jg_ndim(t)))) {
        PyErr_Format(PyExc_RuntimeError, "%s(): the bounds must broadcast to self's shape", fn);
        rc = -2;
    }
    if (rc == 0)
        rc = jg_copy_(t, r);
    jg_release(r);
    jg_release(c);
    if (rc == -2)
        return NULL;
    if (rc < 0)
        return jgp_raise();
    Py_INCREF(self);
    return self;
}

static PyObject *clamp_inplace(PyObject *self, PyObject *lo, PyObject *hi, const char *fn,
                               int which) {
    if ((lo && jgp_is_tensor(lo)) || (hi && jgp_is_tensor(hi)))
        return clamp_inplace_tensors(self, lo, hi, fn);
    bool has_lo = false, has_hi = false, fl = false, in = false;
    double vlo = 0, vhi = 0;
    if (number_bound(lo, fn, &has_lo, &vlo, &fl, &in) < 0 ||
        number_bound(hi, fn, &has_hi, &vhi, &fl, &in) < 0)
        return NULL;
    jg_tensor *t = jgp_t(self);
    jg_dtype d = jg_dtype_of(t);
    /* the result type (a float bound makes an integer tensor's float) must
     * cast back to self's dtype */
    if ((fl && !jgp_dtype_is_float(d)) || (in && d == JG_BOOL)) {
        PyErr_Format(PyExc_RuntimeError,
                     "result type %s can't be cast to the desired output type %s",
                     fl ? "Float" : "Long", ctype_name(d));
        return NULL;
    }
    int rc = which == 1   ? jg_clamp_min_(t, vlo)
             : which == 2 ? jg_clamp_max_(t, vhi)
                          : jg_clamp_(t, has_lo, vlo, has_hi, vhi);
    if (rc < 0)
        return jgp_raise();
    Py_INCREF(self);
    return self;
}

static PyObject *m_clamp_(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"min", "max", NULL};
    PyObject *lo = Py_None, *hi = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:clamp_", kwlist, &lo, &hi))
        return NULL;
    return clamp_inplace(self, lo, hi, "clamp_", 0);
}

static PyObject *m_clamp_min_(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"min", NULL};
    PyObject *lo;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:clamp_min_", kwlist, &lo))
        return NULL;
    if (lo == Py_None)
        return PyErr_Format(PyExc_TypeError, "clamp_min_(): argument 'min' must be Number, not "
                                             "NoneType");
    return clamp_inplace(self, lo, NULL, "clamp_min_", 1);
}

static PyObject *m_clamp_max_(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"max", NULL};
    PyObject *hi;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:clamp_max_", kwlist, &hi))
        return NULL;
    if (hi == Py_None)
        return PyErr_Format(PyExc_TypeError, "clamp_max_(): argument 'max' must be Number, not "
                                             "NoneType");
    return clamp_inplace(self, NULL, hi, "clamp_max_", 2);
}

/* _cross_entropy_probs(input, target, weight, reduction, ignore_index,
 * label_smoothing): jg_cross_entropy_probs */
static PyObject *f_cross_entropy_probs(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x, *t, *w;
    const char *red;
    long long ignore_index;
    double smoothing;
    if (!PyArg_ParseTuple(args, "OOOsLd:_cross_entropy_probs", &x, &t, &w, &red, &ignore_index,
                          &smoothing))
        return NULL;
    if (!jgp_is_tensor(x) || !jgp_is_tensor(t) || (w != Py_None && !jgp_is_tensor(w))) {
        PyErr_SetString(PyExc_TypeError, "cross_entropy(): input, target and weight must be "
                                         "Tensors");
        return NULL;
    }
    jg_loss_options o = {JG_REDUCTION_MEAN, (int64_t)ignore_index, w == Py_None ? NULL : jgp_t(w),
                         smoothing};
    if (strcmp(red, "sum") == 0)
        o.reduction = JG_REDUCTION_SUM;
    else if (strcmp(red, "none") == 0)
        o.reduction = JG_REDUCTION_NONE;
    else if (strcmp(red, "mean") != 0)
        return PyErr_Format(PyExc_ValueError, "%s is not a valid value for reduction", red);
    return jgp_wrap_new(jg_cross_entropy_probs(jgp_t(x), jgp_t(t), &o));
}

/* ---- generators: a capsule around a jg_generator (jitgrad.Generator holds
 * it as _cap) ---- */

#define GEN_CAPSULE "jitgrad.jg_generator"

static void gen_free(PyObject *cap) {
    jg_generator_free(PyCapsule_GetPointer(cap, GEN_CAPSULE));
}

static jg_generator *gen_of_capsule(PyObject *cap) {
    return PyCapsule_GetPointer(cap, GEN_CAPSULE); /* NULL with TypeError/ValueError */
}

int jgp_generator_arg(PyObject *o, const char *fn, jg_generator **g) {
    *g = NULL;
    if (!o || o == Py_None)
        return 0;
    PyObject *cap = PyObject_GetAttrString(o, "_cap");
    if (cap == Py_None) { /* jitgrad.default_generator: the global one */
        Py_DECREF(cap);
        return 0;
    }
    if (!cap || !PyCapsule_IsValid(cap, GEN_CAPSULE)) {
        Py_XDECREF(cap);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'generator' must be jitgrad.Generator, not %s", fn,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *g = gen_of_capsule(cap);
    Py_DECREF(cap); /* the Generator object owns the capsule */
    return 0;
}

static PyObject *f_generator_new(PyObject *mod, PyObject *arg) {
    (void)mod;
    unsigned long long seed = PyLong_AsUnsignedLongLongMask(arg);
    if (PyErr_Occurred())
        return NULL;
    jg_generator *g = jg_generator_new(seed);
    if (!g)
        return jgp_raise();
    PyObject *cap = PyCapsule_New(g, GEN_CAPSULE, gen_free);
    if (!cap)
        jg_generator_free(g);
    return cap;
}

static PyObject *f_generator_manual_seed(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *cap, *seed;
    if (!PyArg_ParseTuple(args, "OO", &cap, &seed))
        return NULL;
    jg_generator *g = gen_of_capsule(cap);
    unsigned long long s = g ? PyLong_AsUnsignedLongLongMask(seed) : 0;
    if (!g || PyErr_Occurred())
        return NULL;
    jg_generator_manual_seed(g, s);
    Py_RETURN_NONE;
}

/* (initial seed, state) as unsigned ints */
static PyObject *f_generator_get(PyObject *mod, PyObject *cap) {
    (void)mod;
    jg_generator *g = gen_of_capsule(cap);
    if (!g)
        return NULL;
    return Py_BuildValue("(KK)", (unsigned long long)jg_generator_initial_seed(g),
                         (unsigned long long)jg_generator_get_state(g));
}

static PyObject *f_generator_set(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *cap;
    unsigned long long initial, state;
    if (!PyArg_ParseTuple(args, "OKK", &cap, &initial, &state))
        return NULL;
    jg_generator *g = gen_of_capsule(cap);
    if (!g)
        return NULL;
    jg_generator_manual_seed(g, initial);
    jg_generator_set_state(g, state);
    Py_RETURN_NONE;
}

/* _generator_use(capsule or None) -> handle of the previous one (an int;
 * 0: the global generator); _generator_restore(handle) reinstalls it */
static PyObject *f_generator_use(PyObject *mod, PyObject *cap) {
    (void)mod;
    jg_generator *g = NULL;
    if (cap != Py_None && !(g = gen_of_capsule(cap)))
        return NULL;
    return PyLong_FromVoidPtr(jg_generator_use(g));
}

static PyObject *f_generator_restore(PyObject *mod, PyObject *h) {
    (void)mod;
    void *p = PyLong_AsVoidPtr(h);
    if (!p && PyErr_Occurred())
        return NULL;
    jg_generator_use(p);
    Py_RETURN_NONE;
}

/* _rng_get() -> (initial seed, state) of the global generator as unsigned
 * ints; _rng_set(initial, state) */
static PyObject *f_rng_get(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    uint64_t initial, state;
    jg_global_rng_get(&initial, &state);
    return Py_BuildValue("(KK)", (unsigned long long)initial, (unsigned long long)state);
}

static PyObject *f_rng_set(PyObject *mod, PyObject *args) {
    (void)mod;
    unsigned long long initial, state;
    if (!PyArg_ParseTuple(args, "KK", &initial, &state))
        return NULL;
    jg_global_rng_set(initial, state);
    Py_RETURN_NONE;
}

/* _rebind_view(t, v): t becomes v, a view of t's storage with history
 * (squeeze_, unsqueeze_, t_, transpose_ of a tensor with history: PyTorch
 * moves such a tensor onto the view's node).  Traced tensors are refused. */
static PyObject *f_rebind_view(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *self, *v;
    if (!PyArg_ParseTuple(args, "OO", &self, &v))
        return NULL;
    if (!jgp_is_tensor(self) || !jgp_is_tensor(v)) {
        PyErr_SetString(PyExc_TypeError, "_rebind_view: expected two tensors");
        return NULL;
    }
    jg_tensor *old = jgp_t(self), *src = jgp_t(v);
    if (old == src)
        Py_RETURN_NONE;
    if (jg_is_traced(old) || jg_is_traced(src)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "jitgrad: an in-place view op (squeeze_, unsqueeze_, t_, transpose_) "
                        "on a tensor with history is not supported inside a compiled function");
        return NULL;
    }
    if (!jg_same_storage(old, src) || jg_dtype_of(old) != jg_dtype_of(src)) {
        PyErr_SetString(PyExc_RuntimeError, "_rebind_view: v must be a view of t");
        return NULL;
    }
    ((JGTensor *)self)->t = jg_retain(src);
    jg_release(old);
    Py_RETURN_NONE;
}

/* ---- _split(t, dim, size), _split_with_sizes(t, dim, sizes), _unbind(t,
 * dim): tuples of views ---- */

static PyObject *pieces_tuple(int n, jg_tensor **out) {
    if (n < 0)
        return jgp_raise();
    PyObject *r = PyTuple_New(n);
    for (int k = 0; k < n; k++) {
        PyObject *o = r ? jgp_wrap_new(out[k]) : NULL;
        if (!o) {
            Py_XDECREF(r);
            for (int j = k + 1; j < n; j++)
                jg_release(jg_keep(out[j]));
            return NULL;
        }
        PyTuple_SET_ITEM(r, k, o);
    }
    return r;
}

static PyObject *f_split(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *t;
    int dim;
    long long size;
    if (!PyArg_ParseTuple(args, "O!iL:_split", JGTensor_Type, &t, &dim, &size))
        return NULL;
    jg_tensor *x = jgp_t(t);
    int64_t len = jg_ndim(x) ? jg_shape(x)[dim < 0 ? dim + jg_ndim(x) : dim] : 1;
    int64_t cap = size > 0 ? (len + size - 1) / size : 1;
    jg_tensor **out = PyMem_Malloc(sizeof(jg_tensor *) * (size_t)(cap > 0 ? cap : 1));
    if (!out)
        return PyErr_NoMemory();
    PyObject *r = pieces_tuple(jg_split(x, dim, size, (int)(cap > 0 ? cap : 1), out), out);
    PyMem_Free(out);
    return r;
}

static PyObject *f_split_with_sizes(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *t, *sizes;
    int dim;
    if (!PyArg_ParseTuple(args, "O!iO:_split_with_sizes", JGTensor_Type, &t, &dim, &sizes))
        return NULL;
    PyObject *seq = PySequence_Fast(sizes, "split_with_sizes: sizes must be a sequence");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int64_t *sz = PyMem_Malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    jg_tensor **out = PyMem_Malloc(sizeof(jg_tensor *) * (size_t)(n ? n : 1));
    PyObject *r = NULL;
    if (!sz || !out) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        sz[k] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, k));
        if (sz[k] == -1 && PyErr_Occurred())
            goto done;
    }
    r = pieces_tuple(jg_split_with_sizes(jgp_t(t), dim, (int)n, sz, out), out);
done:
    PyMem_Free(sz);
    PyMem_Free(out);
    Py_DECREF(seq);
    return r;
}

static PyObject *f_unbind(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *t;
    int dim;
    if (!PyArg_ParseTuple(args, "O!i:_unbind", JGTensor_Type, &t, &dim))
        return NULL;
    jg_tensor *x = jgp_t(t);
    int64_t n = jg_ndim(x) ? jg_shape(x)[dim < 0 ? dim + jg_ndim(x) : dim] : 0;
    jg_tensor **out = PyMem_Malloc(sizeof(jg_tensor *) * (size_t)(n > 0 ? n : 1));
    if (!out)
        return PyErr_NoMemory();
    PyObject *r = pieces_tuple(jg_unbind(x, dim, (int)n, out), out);
    PyMem_Free(out);
    return r;
}

PyMethodDef jgp_tensor_surface2_methods[] = {
    {"min", CF(m_min), KW,
     "min(dim=None, keepdim=False) -> Tensor or (values, indices)\n\nThe smallest element (a NaN "
     "if any), or the smallest along dim with its index; min(other) is minimum(other)."},
    {"clamp_", CF(m_clamp_), KW, "clamp_(min=None, max=None) -> self: clamp in place"},
    {"clip_", CF(m_clamp_), KW, "clip_(min=None, max=None) -> self: alias of clamp_"},
    {"clamp_min_", CF(m_clamp_min_), KW, "clamp_min_(min) -> self: clamp_min in place"},
    {"clamp_max_", CF(m_clamp_max_), KW, "clamp_max_(max) -> self: clamp_max in place"},
    {"amax", CF(m_amax), KW, "amax(dim=(), keepdim=False) -> Tensor: the largest over dims"},
    {"amin", CF(m_amin), KW, "amin(dim=(), keepdim=False) -> Tensor: the smallest over dims"},
    {NULL, NULL, 0, NULL},
};

PyMethodDef jgp_module_surface2_functions[] = {
    {"_cross_entropy_probs", f_cross_entropy_probs, METH_VARARGS, NULL},
    {"_generator_new", f_generator_new, METH_O, NULL},
    {"_split", f_split, METH_VARARGS, NULL},
    {"_split_with_sizes", f_split_with_sizes, METH_VARARGS, NULL},
    {"_unbind", f_unbind, METH_VARARGS, NULL},
    {"_generator_manual_seed", f_generator_manual_seed, METH_VARARGS, NULL},
    {"_generator_get", f_generator_get, METH_O, NULL},
    {"_generator_set", f_generator_set, METH_VARARGS, NULL},
    {"_generator_use", f_generator_use, METH_O, NULL},
    {"_generator_restore", f_generator_restore, METH_O, NULL},
    {"_rng_get", f_rng_get, METH_NOARGS, NULL},
    {"_rng_set", f_rng_set, METH_VARARGS, NULL},
    {"_rebind_view", f_rebind_view, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};
