/* jitgrad.compile: a Python function run through jg_compile.  Tensor
 * arguments (top level, or inside tuples, lists and dicts) become the
 * program's inputs; everything else is serialised into the call's args
 * bytes, which the compiled cache guards on.  While the library traces, the
 * program callback calls the Python function with symbolic tensors, so every
 * op it performs (custom Functions included) lands in the graph. */
#include "args.h"

#include <stdlib.h>
#include <string.h>

/* Weak references: against a libjitgrad without the compiler they are NULL.
 * Compiled() checks jg_compile and jg_compiled_call (and raises
 * RuntimeError), the other uses check theirs, and HAS_COMPILER reports it. */
#pragma weak jg_compile
#pragma weak jg_compiled_call
#pragma weak jg_compiled_free
#pragma weak jg_compiled_graph
#pragma weak jg_compiled_entries
#pragma weak jg_compiled_fallbacks

typedef struct {
    PyObject_HEAD jg_compiled *c;
    PyObject *fn;
    PyObject *classes;   /* autograd.Function classes its graphs call */
    PyObject *templates; /* (args bytes, n outputs) -> (template, is_tuple) */
    char backend[16];
    int fullgraph;
} JGCompiled;

typedef struct compiled_call {
    JGCompiled *self;
    PyObject *args, *kwargs;
    PyObject *key_bytes;
    struct compiled_call *prev;
} compiled_call;

static compiled_call *current;

#define TENSOR_MARK Py_Ellipsis

/* A copy of o with each tensor replaced by the next input (the original
 * object when the library passes the very same tensor). */
static PyObject *rebuild(PyObject *o, jg_tensor *const *inputs, int n, int *k) {
    if (jgp_is_tensor(o)) {
        if (*k >= n) {
            PyErr_SetString(PyExc_RuntimeError, "jitgrad.compile: input count mismatch");
            return NULL;
        }
        jg_tensor *t = inputs[(*k)++];
        return t == jgp_t(o) ? Py_NewRef(o) : jgp_wrap_borrowed(t);
    }
    if (PyTuple_Check(o) || PyList_Check(o)) {
        Py_ssize_t m = PySequence_Fast_GET_SIZE(o);
        PyObject *r = PyList_New(m);
        for (Py_ssize_t i = 0; r && i < m; i++) {
            PyObject *v = rebuild(PySequence_Fast_GET_ITEM(o, i), inputs, n, k);
            if (!v)
                Py_CLEAR(r);
            else
                PyList_SET_ITEM(r, i, v);
        }
        if (r && PyTuple_Check(o)) {
            PyObject *t = PyList_AsTuple(r);
            Py_DECREF(r);
            r = t;
        }
        return r;
    }
    if (PyDict_Check(o)) {
        PyObject *r = PyDict_New(), *key, *v;
        Py_ssize_t pos = 0;
        while (r && PyDict_Next(o, &pos, &key, &v)) {
            PyObject *nv = rebuild(v, inputs, n, k);
            if (!nv || PyDict_SetItem(r, key, nv) < 0)
                Py_CLEAR(r);
            Py_XDECREF(nv);
        }
        return r;
    }
    return Py_NewRef(o);
}

static int program_cb(void *user, const void *argbytes, int n_inputs, jg_tensor *const *inputs,
                      jg_tensor **outputs) {
    JGCompiled *self = user;
    compiled_call *call = current;
    PyObject *args = NULL, *kwargs = NULL, *res = NULL, *items = NULL, *tmpl = NULL;
    (void)argbytes;
    if (!call || call->self != self) {
        PyErr_SetString(PyExc_RuntimeError,
                        "jitgrad.compile: the program was called outside its Python call");
        goto fail;
    }
    int k = 0;
    args = rebuild(call->args, inputs, n_inputs, &k);
    kwargs = args && call->kwargs ? rebuild(call->kwargs, inputs, n_inputs, &k) : NULL;
    if (!args || (call->kwargs && !kwargs))
        goto fail;
    res = PyObject_Call(self->fn, args, kwargs);
    if (!res)
        goto fail;
    bool is_tuple = PyTuple_Check(res) || PyList_Check(res);
    items = is_tuple ? PySequence_Tuple(res) : PyTuple_Pack(1, res);
    if (!items)
        goto fail;
    Py_ssize_t m = PyTuple_GET_SIZE(items);
    tmpl = PyTuple_New(m);
    if (!tmpl)
        goto fail;
    int n = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *o = PyTuple_GET_ITEM(items, i);
        if (jgp_is_tensor(o)) {
            if (n == JG_MAX_OUTPUTS) {
                PyErr_Format(PyExc_RuntimeError,
                             "jitgrad.compile: a compiled function returns at most %d tensors",
                             JG_MAX_OUTPUTS);
                goto fail;
            }
            outputs[n++] = jgp_t(o);
            jgp_defer_release(jg_retain(jgp_t(o)));
            PyTuple_SET_ITEM(tmpl, i, Py_NewRef(TENSOR_MARK));
        } else {
            PyTuple_SET_ITEM(tmpl, i, Py_NewRef(o));
        }
    }
    PyObject *key = Py_BuildValue("(Oi)", call->key_bytes, n);
    PyObject *val = key ? Py_BuildValue("(OO)", tmpl, is_tuple ? Py_True : Py_False) : NULL;
    int rc = val ? PyDict_SetItem(self->templates, key, val) : -1;
    Py_XDECREF(key);
    Py_XDECREF(val);
    if (rc < 0)
        goto fail;
    Py_DECREF(args);
    Py_XDECREF(kwargs);
    Py_DECREF(res);
    Py_DECREF(items);
    Py_DECREF(tmpl);
    return n;
fail:
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    Py_XDECREF(res);
    Py_XDECREF(items);
    Py_XDECREF(tmpl);
    return jgp_callback_fail();
}

static int compiled_traverse(PyObject *o, visitproc visit, void *arg) {
    JGCompiled *self = (JGCompiled *)o;
    Py_VISIT(self->fn);
    Py_VISIT(self->classes);
    Py_VISIT(self->templates);
    return 0;
}

static int compiled_clear(PyObject *o) {
    JGCompiled *self = (JGCompiled *)o;
    if (self->c && jg_compiled_free) {
        jg_compiled_free(self->c); /* before the classes its graphs name */
        self->c = NULL;
    }
    Py_CLEAR(self->fn);
    Py_CLEAR(self->classes);
    Py_CLEAR(self->templates);
    return 0;
}

static void compiled_dealloc(PyObject *o) {
    PyObject_GC_UnTrack(o);
    compiled_clear(o);
    Py_TYPE(o)->tp_free(o);
}

static PyObject *compiled_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"fn", "backend", "fullgraph", "verify", NULL};
    PyObject *fn;
    const char *backend = "interp";
    int fullgraph = 0, verify = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|spp:Compiled", kwlist, &fn, &backend, &fullgraph,
                                     &verify))
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "compile(): fn must be callable");
        return NULL;
    }
    bool auto_backend = strcmp(backend, "auto") == 0;
    if (!auto_backend && strcmp(backend, "interp") != 0 && strcmp(backend, "c") != 0) {
        PyErr_Format(PyExc_ValueError, "jitgrad.compile: unknown backend '%s'", backend);
        return NULL;
    }
    if (!jg_compile || !jg_compiled_call) {
        PyErr_SetString(PyExc_RuntimeError,
                        "jitgrad.compile: this build of libjitgrad has no compiler (jg_compile)");
        return NULL;
    }
    JGCompiled *self = (JGCompiled *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->fn = Py_NewRef(fn);
    self->classes = PySet_New(NULL);
    self->templates = PyDict_New();
    self->fullgraph = fullgraph;
    if (!self->classes || !self->templates) {
        Py_DECREF(self);
        return NULL;
    }
    jg_compile_options opts = {auto_backend ? "c" : backend, fullgraph, verify};
    self->c = jg_compile(program_cb, self, &opts);
    if (!self->c && auto_backend) { /* "inductor": the fastest that works */
        opts.backend = "interp";
        self->c = jg_compile(program_cb, self, &opts);
    }
    if (!self->c) {
        Py_DECREF(self);
        return jgp_raise();
    }
    snprintf(self->backend, sizeof self->backend, "%s", opts.backend);
    return (PyObject *)self;
}

static PyObject *compiled_call_py(PyObject *o, PyObject *args, PyObject *kwargs) {
    JGCompiled *self = (JGCompiled *)o;
    if (!self->c) {
        PyErr_SetString(PyExc_RuntimeError, "jitgrad.compile: compiled function was cleared");
        return NULL;
    }
    if (kwargs && PyDict_Size(kwargs) == 0)
        kwargs = NULL;
    PyObject *tensors = PyList_New(0), *result = NULL, *key = NULL;
    jgp_buf bytes = {0};
    jg_tensor **inputs = NULL;
    if (!tensors || jgp_serialize(args, &bytes, tensors) < 0 ||
        (kwargs && jgp_serialize(kwargs, &bytes, tensors) < 0))
        goto done;
    Py_ssize_t n_in = PyList_GET_SIZE(tensors);
    inputs = PyMem_Calloc((size_t)(n_in ? n_in : 1), sizeof *inputs);
    if (!inputs) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_in; i++)
        inputs[i] = jgp_t(PyList_GET_ITEM(tensors, i));
    key = PyBytes_FromStringAndSize(bytes.data, (Py_ssize_t)bytes.len);
    if (!key)
        goto done;
    compiled_call call = {self, args, kwargs, key, current};
    current = &call;
    PyObject *prev_classes = jgp_trace_classes;
    jgp_trace_classes = self->classes;
    jg_tensor *outs[JG_MAX_OUTPUTS];
    jgp_enter();
    int n = jg_compiled_call(self->c, bytes.data, bytes.len, (int)n_in, inputs, outs);
    jgp_leave(n >= 0);
    jgp_trace_classes = prev_classes;
    current = call.prev;
    if (n < 0) {
        jgp_raise();
        goto done;
    }
    PyObject *wrapped[JG_MAX_OUTPUTS];
    bool ok = true;
    for (int i = 0; i < n; i++) {
        /* an input returned (e.g. one written in place) is that same object */
        Py_ssize_t k = 0;
        while (k < n_in && inputs[k] != outs[i])
            k++;
        if (k < n_in)
            jg_release(jg_keep(outs[i]));
        ok &= (wrapped[i] = k < n_in ? Py_NewRef(PyList_GET_ITEM(tensors, k))
                                     : jgp_wrap(jg_keep(outs[i]))) != NULL;
    }
    PyObject *tkey = Py_BuildValue("(Oi)", key, n);
    PyObject *entry = tkey ? PyDict_GetItemWithError(self->templates, tkey) : NULL;
    Py_XDECREF(tkey);
    if (ok && entry) {
        PyObject *tmpl = PyTuple_GET_ITEM(entry, 0);
        Py_ssize_t m = PyTuple_GET_SIZE(tmpl);
        result = PyTuple_New(m);
        for (Py_ssize_t i = 0, k = 0; result && i < m; i++) {
            PyObject *v = PyTuple_GET_ITEM(tmpl, i);
            PyTuple_SET_ITEM(result, i, Py_NewRef(v == TENSOR_MARK && k < n ? wrapped[k++] : v));
        }
        if (result && PyTuple_GET_ITEM(entry, 1) == Py_False) {
            PyObject *single = Py_NewRef(PyTuple_GET_ITEM(result, 0));
            Py_DECREF(result);
            result = single;
        }
    } else if (ok && !PyErr_Occurred()) {
        if (n == 1) {
            result = Py_NewRef(wrapped[0]);
        } else {
            result = PyTuple_New(n);
            for (int i = 0; result && i < n; i++)
                PyTuple_SET_ITEM(result, i, Py_NewRef(wrapped[i]));
        }
    }
    for (int i = 0; i < n; i++)
        Py_XDECREF(wrapped[i]);
done:
    jgp_buf_free(&bytes);
    PyMem_Free(inputs);
    Py_XDECREF(tensors);
    Py_XDECREF(key);
    return result;
}

static PyObject *m_graph(PyObject *o, PyObject *args) {
    JGCompiled *self = (JGCompiled *)o;
    int entry = 0;
    if (!PyArg_ParseTuple(args, "|i:graph", &entry))
        return NULL;
    if (!self->c || !jg_compiled_graph) {
        PyErr_SetString(PyExc_RuntimeError, "jitgrad.compile: no graph available");
        return NULL;
    }
    char *s = jg_compiled_graph(self->c, entry);
    if (!s)
        return jgp_raise();
    PyObject *r = PyUnicode_FromString(s);
    free(s);
    return r;
}

static PyObject *m_entries(PyObject *o, PyObject *unused) {
    (void)unused;
    JGCompiled *self = (JGCompiled *)o;
    return PyLong_FromLong(self->c && jg_compiled_entries ? jg_compiled_entries(self->c) : 0);
}

static PyObject *m_fallbacks(PyObject *o, PyObject *unused) {
    (void)unused;
    JGCompiled *self = (JGCompiled *)o;
    return PyLong_FromLong(self->c && jg_compiled_fallbacks ? jg_compiled_fallbacks(self->c) : 0);
}

static PyObject *get_backend(PyObject *o, void *c) {
    (void)c;
    return PyUnicode_FromString(((JGCompiled *)o)->backend);
}

static PyMethodDef compiled_methods[] = {
    {"graph", m_graph, METH_VARARGS, NULL},
    {"entries", m_entries, METH_NOARGS, NULL},
    {"fallbacks", m_fallbacks, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef compiled_getset[] = {
    {"backend", get_backend, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject JGCompiled_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "jitgrad.Compiled",
    .tp_basicsize = sizeof(JGCompiled),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = compiled_new,
    .tp_dealloc = compiled_dealloc,
    .tp_traverse = compiled_traverse,
    .tp_clear = compiled_clear,
    .tp_call = compiled_call_py,
    .tp_methods = compiled_methods,
    .tp_getset = compiled_getset,
};

int jgp_compile_init(PyObject *module) {
    if (PyType_Ready(&JGCompiled_Type) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "Compiled", (PyObject *)&JGCompiled_Type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "HAS_COMPILER",
                                 jg_compile && jg_compiled_call ? Py_True : Py_False);
}
