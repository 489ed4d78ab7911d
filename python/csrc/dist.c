/* Gradient hooks for Python (Tensor.register_hook, retain_grad,
 * register_post_accumulate_grad_hook) and
 * the bindings of jitgrad.distributed (libjitgrad_dist, linked in when
 * setup.py finds it built with MPI: JITGRAD_HAVE_MPI; otherwise the
 * distributed functions raise, saying so). */
#include "jgpy.h"

#include <string.h>

#ifdef JITGRAD_HAVE_MPI
#include <dlfcn.h>
#include <jitgrad_dist.h>
#include <mpi.h>
#endif

/* ---- post-accumulate hooks: hook(tensor) after .grad was written ---- */

typedef struct {
    PyObject *hook;
    PyObject *weak; /* the Python tensor the hook was registered on */
} py_hook;

static void py_hook_free(void *user) {
    py_hook *h = user;
    PyGILState_STATE st = PyGILState_Ensure();
    Py_XDECREF(h->hook);
    Py_XDECREF(h->weak);
    PyGILState_Release(st);
    PyMem_RawFree(h);
}

static int py_post_hook(void *user, jg_tensor *leaf) {
    py_hook *h = user;
    PyObject *t = h->weak ? PyWeakref_GetObject(h->weak) : Py_None;
    if (t == Py_None)
        t = jgp_wrap_borrowed(leaf); /* the Python object is gone; the tensor is not */
    else
        Py_INCREF(t);
    if (!t)
        return jgp_callback_fail();
    PyObject *r = PyObject_CallOneArg(h->hook, t);
    Py_DECREF(t);
    if (!r)
        return jgp_callback_fail();
    bool none = r == Py_None;
    Py_DECREF(r);
    if (!none) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Tensor post accumulate grad hooks should return None.");
        return jgp_callback_fail();
    }
    return 0;
}

static PyObject *f_register_post_accumulate_grad_hook(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *t, *hook;
    if (!PyArg_ParseTuple(args, "O!O", JGTensor_Type, &t, &hook))
        return NULL;
    if (!PyCallable_Check(hook)) {
        PyErr_Format(PyExc_TypeError, "hook must be callable, not %s", Py_TYPE(hook)->tp_name);
        return NULL;
    }
    if (!jg_requires_grad(jgp_t(t))) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cannot register a hook on a tensor that doesn't require gradient");
        return NULL;
    }
    if (!jg_is_leaf(jgp_t(t))) {
        PyErr_SetString(PyExc_RuntimeError,
                        "post accumulate grad hooks cannot be registered on non-leaf tensors");
        return NULL;
    }
    py_hook *h = PyMem_RawMalloc(sizeof *h);
    if (!h)
        return PyErr_NoMemory();
    h->weak = PyWeakref_NewRef(t, NULL);
    if (!h->weak) {
        PyErr_Clear(); /* (no weak references: the hook gets a fresh wrapper) */
    }
    Py_INCREF(hook);
    h->hook = hook;
    int id = jg_register_post_accumulate_grad_hook(jgp_t(t), py_post_hook, h, py_hook_free);
    if (id < 0) {
        py_hook_free(h);
        return jgp_raise();
    }
    return PyLong_FromLong(id);
}

static PyObject *f_remove_grad_hook(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *t;
    int id;
    if (!PyArg_ParseTuple(args, "O!i", JGTensor_Type, &t, &id))
        return NULL;
    if (jg_remove_grad_hook(jgp_t(t), id) < 0)
        jg_clear_error(); /* removing twice is harmless, as PyTorch's handle.remove() */
    Py_RETURN_NONE;
}

/* ---- tensor hooks: hook(grad) -> None or a replacement (Tensor.register_hook) ---- */

typedef struct {
    PyObject *hook;
} py_thook;

static void py_tensor_hook_free(void *user) {
    py_thook *h = user;
    PyGILState_STATE st = PyGILState_Ensure();
    Py_XDECREF(h->hook);
    PyGILState_Release(st);
    PyMem_RawFree(h);
}

/* PyTorch's legacy type names, for its "changed the type" message. */
static const char *legacy_type(jg_dtype d) {
    const char *n = jg_dtype_name(d);
    static const char *map[][2] = {
        {"float32", "torch.FloatTensor"},    {"float64", "torch.DoubleTensor"},
        {"int64", "torch.LongTensor"},       {"int32", "torch.IntTensor"},
        {"bool", "torch.BoolTensor"},        {"float16", "torch.HalfTensor"},
        {"bfloat16", "torch.BFloat16Tensor"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(n, map[i][0]))
            return map[i][1];
    return n;
}

/* The hook's name as PyTorch's messages give it. */
static PyObject *hook_name(PyObject *hook) {
    PyObject *n = PyObject_GetAttrString(hook, "__name__");
    if (n && PyUnicode_Check(n))
        return n;
    Py_XDECREF(n);
    PyErr_Clear();
    return PyObject_Repr(hook);
}

static int py_tensor_hook_call(void *user, jg_tensor *grad, jg_tensor **rep) {
    py_thook *h = user;
    PyObject *g = jgp_wrap_borrowed(grad);
    if (!g)
        return jgp_callback_fail();
    PyObject *r = PyObject_CallOneArg(h->hook, g);
    Py_DECREF(g);
    if (!r)
        return jgp_callback_fail();
    if (r == Py_None) {
        Py_DECREF(r);
        return 0;
    }
    if (!PyObject_TypeCheck(r, JGTensor_Type)) {
        PyErr_Format(PyExc_TypeError, "expected Variable, but hook returned '%s'",
                     Py_TYPE(r)->tp_name);
        Py_DECREF(r);
        return jgp_callback_fail();
    }
    jg_tensor *t = jgp_t(r);
    const char *what = NULL;
    if (jg_dtype_of(t) != jg_dtype_of(grad))
        what = "type";
    else if (jg_ndim(t) != jg_ndim(grad) ||
             memcmp(jg_shape(t), jg_shape(grad), sizeof(int64_t) * (size_t)jg_ndim(grad)))
        what = "size";
    if (what) {
        PyObject *name = hook_name(h->hook);
        if (!name) {
            Py_DECREF(r);
            return jgp_callback_fail();
        }
        if (what[0] == 't')
            PyErr_Format(PyExc_RuntimeError,
                         "hook '%U' has changed the type of value (was %s got %s)", name,
                         legacy_type(jg_dtype_of(grad)), legacy_type(jg_dtype_of(t)));
        else
            PyErr_Format(PyExc_RuntimeError, "hook '%U' has changed the size of value", name);
        Py_DECREF(name);
        Py_DECREF(r);
        return jgp_callback_fail();
    }
    *rep = jg_retain(t);
    Py_DECREF(r);
    return 0;
}

static PyObject *f_register_tensor_hook(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *t, *hook;
    if (!PyArg_ParseTuple(args, "O!O", JGTensor_Type, &t, &hook))
        return NULL;
    if (!PyCallable_Check(hook)) {
        PyErr_Format(PyExc_TypeError, "hook must be callable, not %s", Py_TYPE(hook)->tp_name);
        return NULL;
    }
    py_thook *h = PyMem_RawMalloc(sizeof *h);
    if (!h)
        return PyErr_NoMemory();
    Py_INCREF(hook);
    h->hook = hook;
    int id = jg_register_tensor_hook(jgp_t(t), py_tensor_hook_call, h, py_tensor_hook_free);
    if (id < 0) {
        py_tensor_hook_free(h);
        return jgp_raise();
    }
    return PyLong_FromLong(id);
}

static PyObject *f_retain_grad(PyObject *mod, PyObject *t) {
    (void)mod;
    if (!PyObject_TypeCheck(t, JGTensor_Type)) {
        PyErr_SetString(PyExc_TypeError, "retain_grad: expected a Tensor");
        return NULL;
    }
    if (jg_retain_grad(jgp_t(t)) < 0)
        return jgp_raise();
    Py_RETURN_NONE;
}

static PyObject *f_retains_grad(PyObject *mod, PyObject *t) {
    (void)mod;
    if (!PyObject_TypeCheck(t, JGTensor_Type)) {
        PyErr_SetString(PyExc_TypeError, "retains_grad: expected a Tensor");
        return NULL;
    }
    return PyBool_FromLong(jg_retains_grad(jgp_t(t)));
}

/* _graph_break(why): inside a traced program, raise (the call runs eagerly);
 * elsewhere nothing. */
static PyObject *f_graph_break(PyObject *mod, PyObject *why) {
    (void)mod;
    const char *w = PyUnicode_AsUTF8(why);
    if (!w)
        return NULL;
    if (jg_graph_break(w) < 0)
        return jgp_raise();
    Py_RETURN_NONE;
}

/* ---- jitgrad.distributed ---- */

#ifdef JITGRAD_HAVE_MPI
static PyObject *dist_fail(void) {
    return jgp_raise();
}

static PyObject *f_dist_available(PyObject *mod, PyObject *noargs) {
    (void)mod, (void)noargs;
    Py_RETURN_TRUE;
}

static PyObject *f_dist_init(PyObject *mod, PyObject *noargs) {
    (void)mod, (void)noargs;
    /* Python loaded this extension, and so libmpi, with RTLD_LOCAL: Open MPI's
     * plugins, which it dlopens, need libmpi's symbols global */
    Dl_info info;
    if (dladdr((void *)&MPI_Init_thread, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    if (jg_dist_init(NULL, NULL) < 0)
        return dist_fail();
    Py_RETURN_NONE;
}

static PyObject *f_dist_finalize(PyObject *mod, PyObject *noargs) {
    (void)mod, (void)noargs;
    if (jg_dist_finalize() < 0)
        return dist_fail();
    Py_RETURN_NONE;
}

static PyObject *f_dist_is_initialized(PyObject *mod, PyObject *noargs) {
    (void)mod, (void)noargs;
    return PyBool_FromLong(jg_dist_is_initialized());
}

static PyObject *f_dist_rank(PyObject *mod, PyObject *noargs) {
    (void)mod, (void)noargs;
    int r = jg_dist_rank();
    return r < 0 ? dist_fail() : PyLong_FromLong(r);
}

static PyObject *f_dist_world_size(PyObject *mod, PyObject *noargs) {
    (void)mod, (void)noargs;
    int r = jg_dist_world_size();
    return r < 0 ? dist_fail() : PyLong_FromLong(r);
}

static PyObject *f_dist_barrier(PyObject *mod, PyObject *noargs) {
    (void)mod, (void)noargs;
    if (jg_dist_barrier() < 0)
        return dist_fail();
    Py_RETURN_NONE;
}

static PyObject *f_dist_set_timeout(PyObject *mod, PyObject *args) {
    (void)mod;
    double s;
    if (!PyArg_ParseTuple(args, "d", &s))
        return NULL;
    jg_dist_set_timeout(s);
    Py_RETURN_NONE;
}

static PyObject *f_dist_all_reduce(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *t;
    int avg, deterministic;
    if (!PyArg_ParseTuple(args, "O!pp", JGTensor_Type, &t, &avg, &deterministic))
        return NULL;
    jg_dist_op op = avg ? JG_DIST_AVG : JG_DIST_SUM;
    int rc =
        deterministic ? jg_dist_all_reduce(jgp_t(t), op) : jg_dist_all_reduce_mpi(jgp_t(t), op);
    if (rc < 0)
        return dist_fail();
    Py_RETURN_NONE;
}

static PyObject *f_dist_broadcast(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *t;
    int src;
    if (!PyArg_ParseTuple(args, "O!i", JGTensor_Type, &t, &src))
        return NULL;
    if (jg_dist_broadcast(jgp_t(t), src) < 0)
        return dist_fail();
    Py_RETURN_NONE;
}

static void ddp_capsule_free(PyObject *cap) {
    jg_dist_ddp_free(PyCapsule_GetPointer(cap, "jitgrad.ddp"));
}

static PyObject *f_dist_ddp_new(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *list;
    Py_ssize_t bucket_bytes;
    int deterministic, find_unused, sum;
    if (!PyArg_ParseTuple(args, "O!nppp", &PyList_Type, &list, &bucket_bytes, &deterministic,
                          &find_unused, &sum))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (bucket_bytes <= 0) {
        PyErr_SetString(PyExc_ValueError, "bucket_cap_mb must be positive");
        return NULL;
    }
    jg_tensor **ps = PyMem_RawMalloc(sizeof *ps * (size_t)(n + 1));
    if (!ps)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyList_GET_ITEM(list, i);
        if (!jgp_is_tensor(o)) {
            PyMem_RawFree(ps);
            PyErr_Format(PyExc_TypeError, "parameter %zd is not a Tensor", i);
            return NULL;
        }
        ps[i] = jgp_t(o);
    }
    jg_dist_ddp_options o = {(size_t)bucket_bytes, !deterministic, find_unused, sum};
    jg_dist_ddp *d = jg_dist_ddp_new((int)n, ps, &o);
    PyMem_RawFree(ps);
    if (!d)
        return dist_fail();
    PyObject *cap = PyCapsule_New(d, "jitgrad.ddp", ddp_capsule_free);
    if (!cap)
        jg_dist_ddp_free(d);
    return cap;
}

static PyObject *f_dist_ddp_stats(PyObject *mod, PyObject *cap) {
    (void)mod;
    jg_dist_ddp *d = PyCapsule_GetPointer(cap, "jitgrad.ddp");
    jg_dist_ddp_stats s;
    if (!d || jg_dist_ddp_stats_get(d, &s) < 0)
        return d ? dist_fail() : NULL;
    return Py_BuildValue("{s:i,s:i,s:d,s:d,s:d,s:d,s:d,s:d,s:d}", "n_buckets", s.n_buckets,
                         "launched_during_backward", s.launched_during_backward, "first_ready",
                         s.first_ready, "first_launch", s.first_launch, "last_ready", s.last_ready,
                         "compute_end", s.compute_end, "reduce_end", s.reduce_end, "wait_seconds",
                         s.wait_seconds, "reduce_seconds", s.reduce_seconds);
}

#define DIST_FUNCTIONS                                                                             \
    {"_dist_available", f_dist_available, METH_NOARGS, NULL},                                      \
        {"_dist_init", f_dist_init, METH_NOARGS, NULL},                                            \
        {"_dist_finalize", f_dist_finalize, METH_NOARGS, NULL},                                    \
        {"_dist_is_initialized", f_dist_is_initialized, METH_NOARGS, NULL},                        \
        {"_dist_rank", f_dist_rank, METH_NOARGS, NULL},                                            \
        {"_dist_world_size", f_dist_world_size, METH_NOARGS, NULL},                                \
        {"_dist_barrier", f_dist_barrier, METH_NOARGS, NULL},                                      \
        {"_dist_set_timeout", f_dist_set_timeout, METH_VARARGS, NULL},                             \
        {"_dist_all_reduce", f_dist_all_reduce, METH_VARARGS, NULL},                               \
        {"_dist_broadcast", f_dist_broadcast, METH_VARARGS, NULL},                                 \
        {"_dist_ddp_new", f_dist_ddp_new, METH_VARARGS, NULL},                                     \
        {"_dist_ddp_stats", f_dist_ddp_stats, METH_O, NULL},
#else
static PyObject *f_dist_available(PyObject *mod, PyObject *noargs) {
    (void)mod, (void)noargs;
    Py_RETURN_FALSE;
}
#define DIST_FUNCTIONS {"_dist_available", f_dist_available, METH_NOARGS, NULL},
#endif

PyMethodDef jgp_module_dist_functions[] = {
    {"_register_post_accumulate_grad_hook", f_register_post_accumulate_grad_hook, METH_VARARGS,
     NULL},
    {"_remove_grad_hook", f_remove_grad_hook, METH_VARARGS, NULL},
    {"_register_tensor_hook", f_register_tensor_hook, METH_VARARGS, NULL},
    {"_retain_grad", f_retain_grad, METH_O, NULL},
    {"_retains_grad", f_retains_grad, METH_O, NULL},
    {"_graph_break", f_graph_break, METH_O, NULL},
    DIST_FUNCTIONS{NULL, NULL, 0, NULL},
};
