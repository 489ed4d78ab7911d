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
#pragma weak jg_compiled_set_dynamic
#pragma weak jg_compiled_set_mode
#pragma weak jg_sizes_note
#pragma weak jg_compiled_set_input_namer
#pragma weak jg_compiled_breaks
#pragma weak jg_compiled_graphs_run
#pragma weak jg_compiled_set_break_site

typedef struct JGCompiled {
    PyObject_HEAD jg_compiled *c;
    PyObject *fn;
    PyObject *classes;   /* autograd.Function classes its graphs call */
    PyObject *templates; /* (args bytes, n outputs) -> (template, is_tuple) */
    PyObject *objects;   /* see jgp_call_objects */
    /* the object arguments of the call in progress whose program runs on its
     * real tensors (a call run in pieces, traced at every call): dropped when
     * it returns; a custom call's ctx keeps what a rerun needs (function.c) */
    PyObject *run_objects;
    char backend[16];
    int fullgraph;
    bool log_recompiles;
    bool warned_budget;   /* the scope walk ran out of objects once (warned) */
    PyObject *scopes;     /* JITGRAD_LOG=recompiles: scope fingerprints seen (a set) */
    PyObject *last_scope; /* and the last call's (bytes) */
    PyObject *last_vals;  /* JITGRAD_LOG=recompiles: the last call's scalar attributes, */
    PyObject *last_attrs; /* serialised (bytes) and by path (dict path -> repr) */
    struct JGCompiled *live_prev, *live_next; /* see jgp_find_object */
} JGCompiled;

/* Every compiled function alive: a custom call replayed by a double
 * backward runs after its compiled call returned and still needs the
 * object arguments that call's trace kept. */
static JGCompiled *live_first;

PyObject *jgp_find_object(PyObject *key) {
    PyObject *o = jgp_call_objects ? PyDict_GetItemWithError(jgp_call_objects, key) : NULL;
    for (JGCompiled *c = live_first; !o && !PyErr_Occurred() && c; c = c->live_next) {
        if (c->objects)
            o = PyDict_GetItemWithError(c->objects, key);
        if (!o && !PyErr_Occurred() && c->run_objects)
            o = PyDict_GetItemWithError(c->run_objects, key);
    }
    /* after its call: what the custom call's ctx keeps (function.c) */
    return o || PyErr_Occurred() ? o : jgp_held_object(key);
}

typedef struct compiled_call {
    JGCompiled *self;
    PyObject *args, *kwargs;
    PyObject *key_bytes;
    struct compiled_call *prev;
    int room; /* the outputs array's length (jg_program_fn's contract: the caller sizes it) */
    bool run_objects;   /* self->run_objects is this call's */
    PyObject *returned; /* the tensors the last run of the function returned */
} compiled_call;

/* How many tensors a compiled Python function may return: the library's
 * program writes its outputs into an array its caller sizes before the
 * function has run, so each call makes room for this many (32 KiB of
 * pointers); past it, a clear error rather than an overflow. */
enum { RETURNED_ROOM = 4096 };

static compiled_call *current;

/* The output template: what the traced call returned, with each tensor
 * replaced by tensor_mark and each tuple, list or dict (their subclasses
 * too: named tuples, return types, OrderedDict) by (seq_mark | dict_mark,
 * type, children); private objects, so no value a program returns can be
 * taken for one. */
static PyObject *tensor_mark, *seq_mark, *dict_mark, *same_mark;

/* A tensor returned in several places is one output, and each place gets
 * that one object back (same_mark, index), as the eager call returns it. */
static PyObject *out_template(PyObject *o, jg_tensor **outputs, int *n, int room, PyObject *objs) {
    if (jgp_is_tensor(o)) {
        for (int j = 0; j < *n; j++)
            if (outputs[j] == jgp_t(o))
                return Py_BuildValue("(Oi)", same_mark, j);
        if (*n == room) {
            PyErr_Format(PyExc_RuntimeError,
                         "jitgrad.compile: a compiled function returns at most %d tensors", room);
            return NULL;
        }
        if (objs && PyList_Append(objs, o) < 0)
            return NULL;
        outputs[(*n)++] = jgp_t(o);
        jgp_defer_release(jg_retain(jgp_t(o)));
        return Py_NewRef(tensor_mark);
    }
    if (PyTuple_Check(o) || PyList_Check(o)) {
        PyObject *items = PySequence_Tuple(o);
        if (!items)
            return NULL;
        Py_ssize_t m = PyTuple_GET_SIZE(items);
        PyObject *kids = PyTuple_New(m);
        for (Py_ssize_t i = 0; kids && i < m; i++) {
            PyObject *c = out_template(PyTuple_GET_ITEM(items, i), outputs, n, room, objs);
            if (!c)
                Py_CLEAR(kids);
            else
                PyTuple_SET_ITEM(kids, i, c);
        }
        Py_DECREF(items);
        PyObject *r = kids ? PyTuple_Pack(3, seq_mark, (PyObject *)Py_TYPE(o), kids) : NULL;
        Py_XDECREF(kids);
        return r;
    }
    if (PyDict_Check(o)) {
        PyObject *kids = PyList_New(0), *key, *val;
        Py_ssize_t pos = 0;
        while (kids && PyDict_Next(o, &pos, &key, &val)) {
            PyObject *c = out_template(val, outputs, n, room, objs);
            PyObject *kv = c ? PyTuple_Pack(2, key, c) : NULL;
            Py_XDECREF(c);
            if (!kv || PyList_Append(kids, kv) < 0)
                Py_CLEAR(kids);
            Py_XDECREF(kv);
        }
        PyObject *r = kids ? PyTuple_Pack(3, dict_mark, (PyObject *)Py_TYPE(o), kids) : NULL;
        Py_XDECREF(kids);
        return r;
    }
    return Py_NewRef(o);
}

/* The call's result from the template, the next of `wrapped` per tensor. */
static PyObject *out_fill(PyObject *t, PyObject *const *wrapped, int n, int *k) {
    if (t == tensor_mark) {
        if (*k >= n) {
            PyErr_SetString(PyExc_RuntimeError, "jitgrad.compile: output count mismatch");
            return NULL;
        }
        return Py_NewRef(wrapped[(*k)++]);
    }
    if (PyTuple_CheckExact(t) && PyTuple_GET_SIZE(t) == 2 && PyTuple_GET_ITEM(t, 0) == same_mark) {
        long j = PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
        if (j < 0 || j >= *k) {
            PyErr_SetString(PyExc_RuntimeError, "jitgrad.compile: output count mismatch");
            return NULL;
        }
        return Py_NewRef(wrapped[j]);
    }
    if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 3 ||
        (PyTuple_GET_ITEM(t, 0) != seq_mark && PyTuple_GET_ITEM(t, 0) != dict_mark))
        return Py_NewRef(t);
    PyTypeObject *type = (PyTypeObject *)PyTuple_GET_ITEM(t, 1);
    PyObject *kids = PyTuple_GET_ITEM(t, 2), *r = NULL;
    if (PyTuple_GET_ITEM(t, 0) == dict_mark) {
        PyObject *d = PyDict_New();
        for (Py_ssize_t i = 0; d && i < PyList_GET_SIZE(kids); i++) {
            PyObject *kv = PyList_GET_ITEM(kids, i);
            PyObject *v = out_fill(PyTuple_GET_ITEM(kv, 1), wrapped, n, k);
            if (!v || PyDict_SetItem(d, PyTuple_GET_ITEM(kv, 0), v) < 0)
                Py_CLEAR(d);
            Py_XDECREF(v);
        }
        if (d && type != &PyDict_Type) /* OrderedDict, defaultdict... */
            r = PyObject_CallOneArg((PyObject *)type, d);
        else
            r = Py_XNewRef(d);
        Py_XDECREF(d);
        return r;
    }
    Py_ssize_t m = PyTuple_GET_SIZE(kids);
    PyObject *items = PyTuple_New(m);
    for (Py_ssize_t i = 0; items && i < m; i++) {
        PyObject *v = out_fill(PyTuple_GET_ITEM(kids, i), wrapped, n, k);
        if (!v)
            Py_CLEAR(items);
        else
            PyTuple_SET_ITEM(items, i, v);
    }
    if (!items || type == &PyTuple_Type)
        return items;
    if (type == &PyList_Type)
        r = PySequence_List(items);
    else if (PyObject_HasAttrString((PyObject *)type, "_fields")) /* namedtuple */
        r = PyObject_Call((PyObject *)type, items, NULL);
    else /* structseq (return types), other tuple and list subclasses */
        r = PyObject_CallOneArg((PyObject *)type, items);
    Py_DECREF(items);
    return r;
}

/* tensors rebuild() replaced by the library's (symbolic stand-ins: a trace) */
static int rebuilt_stand_ins;

/* A copy of o with each tensor replaced by the next input (the original
 * object when the library passes the very same tensor). */
static PyObject *rebuild(PyObject *o, jg_tensor *const *inputs, int n, int *k) {
    if (jgp_is_tensor(o)) {
        if (*k >= n) {
            PyErr_SetString(PyExc_RuntimeError, "jitgrad.compile: input count mismatch");
            return NULL;
        }
        jg_tensor *t = inputs[(*k)++];
        if (t == jgp_t(o))
            return Py_NewRef(o);
        rebuilt_stand_ins++;
        return jgp_wrap_borrowed(t);
    }
    if (PyTuple_Check(o) || PyList_Check(o)) {
        Py_ssize_t m = PySequence_Fast_GET_SIZE(o);
        PyObject *r = PyList_New(m);
        bool same = true;
        for (Py_ssize_t i = 0; r && i < m; i++) {
            PyObject *v = rebuild(PySequence_Fast_GET_ITEM(o, i), inputs, n, k);
            if (!v)
                Py_CLEAR(r);
            else
                PyList_SET_ITEM(r, i, v);
            same &= v == PySequence_Fast_GET_ITEM(o, i);
        }
        if (r && same) /* the caller's own container: the function may mutate it */
            Py_SETREF(r, Py_NewRef(o));
        else if (r && PyTuple_Check(o)) {
            PyObject *t = PyList_AsTuple(r);
            Py_DECREF(r);
            r = t;
        }
        return r;
    }
    if (PyDict_Check(o)) {
        PyObject *r = PyDict_New(), *key, *v;
        Py_ssize_t pos = 0;
        bool same = true;
        while (r && PyDict_Next(o, &pos, &key, &v)) {
            PyObject *nv = rebuild(v, inputs, n, k);
            if (!nv || PyDict_SetItem(r, key, nv) < 0)
                Py_CLEAR(r);
            same &= nv == v;
            Py_XDECREF(nv);
        }
        if (r && same)
            Py_SETREF(r, Py_NewRef(o));
        return r;
    }
    return Py_NewRef(o);
}

/* ---- the tensors a function reaches through its scope ----
 *
 * The library makes every tensor the program captures a graph input that it
 * reads at every call and guards (dtype, shape, strides, requires_grad,
 * aliasing), so in-place updates are seen.  Which tensor a global, a closure
 * variable, an attribute or a container element names is Python's part: the
 * identity of every tensor the function can reach that way is appended to
 * the call's key, so rebinding one (K = new tensor, model.w = ..., xs[0] =
 * ...) traces again instead of running with the old tensor.  Reached:
 * closure cells and the globals the code names (nested code included), the
 * attributes of objects (the function's self, object arguments, objects
 * found), the attributes of modules the code names, elements of lists,
 * tuples and dicts, and functions found there, to SCOPE_DEPTH levels and at
 * most SCOPE_BUDGET objects per call.  Each step counts as a level (an
 * attribute, a dict's value), so an nn.Module's parameter sits two levels
 * below its module (the module's _parameters, then the entry) and a
 * parameter of a layer in a ModuleList of a submodule about 12 below the
 * model: the depth is generous and the budget bounds the work.  Functions
 * are followed SCOPE_CODE_HOPS deep (the program's function, the helpers it
 * names, theirs...): a deeper chain mostly reaches library code, whose
 * globals would eat the budget.  A walk that runs out of budget warns once:
 * a tensor past it that gets rebound is not noticed. */
enum { SCOPE_DEPTH = 16, SCOPE_CODE_HOPS = 4, SCOPE_BUDGET = 65536, SCOPE_PATH = 20 };

typedef struct {
    jgp_buf *b;     /* fingerprint: each tensor's jg_tensor* (NULL: describe mode) */
    jgp_buf *v;     /* the scalars met and the attribute names, serialised (or NULL) */
    int budget;     /* objects left to visit */
    int code_hops;  /* functions being walked, nested */
    long n_tensors; /* tensors met so far */
    long target;    /* describe mode: the tensor whose path to record */
    int n_path;     /* steps to the object being visited */
    char path[SCOPE_PATH][96];
    char found[768]; /* the path, as note_scope prints it (its buffer: 800) */
    PyObject *attrs; /* describe mode, or NULL: path -> repr of each scalar attribute */
} scope_walk;

static int walk_value(scope_walk *w, PyObject *o, int depth, PyObject *names);

/* Visits o as one step named by a printf format (describe mode only keeps
 * the names). */
static int walk_step(scope_walk *w, PyObject *o, int depth, PyObject *names, const char *fmt,
                     PyObject *arg) {
    if (w->n_path < SCOPE_PATH && !w->b) {
        const char *a = "";
        char desc[80];
        PyObject *r = NULL;
        if (arg && jgp_is_tensor(arg)) { /* a dict keyed by tensors (an optimizer's state) */
            jg_describe(jgp_t(arg), desc, sizeof desc);
            r = PyUnicode_FromFormat("<tensor %s>", desc);
        } else if (arg) {
            r = PyUnicode_Check(arg) ? Py_NewRef(arg) : PyObject_Repr(arg);
        }
        if (r)
            a = PyUnicode_AsUTF8(r);
        if (!a) {
            PyErr_Clear();
            a = "?";
        }
        snprintf(w->path[w->n_path], sizeof w->path[0], fmt, a);
        Py_XDECREF(r);
    }
    w->n_path++;
    int rc = walk_value(w, o, depth, names);
    w->n_path--;
    return rc;
}

/* The path of the object being visited, as the program names it:
 * m.blocks[1].fc.weight, not m._modules[blocks]._modules[1]... */
static void format_path(const scope_walk *w, char *path, size_t n) {
    size_t len = 0;
    path[0] = 0;
    for (int i = 0; i < w->n_path && i < SCOPE_PATH && len < n; i++) {
        const char *seg = w->path[i];
        if (i + 1 < w->n_path && i + 1 < SCOPE_PATH && w->path[i + 1][0] == '[' &&
            (!strcmp(seg, "._modules") || !strcmp(seg, "._parameters") ||
             !strcmp(seg, "._buffers"))) {
            const char *sub = w->path[++i] + 1;
            int k = (int)(strlen(sub) ? strlen(sub) - 1 : 0); /* without the ']' */
            bool digits = k > 0 && strspn(sub, "0123456789") == (size_t)k;
            len += (size_t)snprintf(path + len, n - len, digits ? "[%.*s]" : ".%.*s", k, sub);
            continue;
        }
        len += (size_t)snprintf(path + len, n - len, "%s", seg);
    }
}

static bool is_scalar(PyObject *v) {
    return v == Py_None || PyBool_Check(v) || PyLong_Check(v) || PyFloat_Check(v) ||
           PyUnicode_Check(v);
}

/* Describe mode: records the scalar v found at the path being visited plus
 * a suffix (an attribute's ".name", a dict's "['key']", a list's "[i]"),
 * with its repr. */
static int note_scalar(scope_walk *w, PyObject *suffix, PyObject *v) {
    char path[SCOPE_PATH * 96 + 1];
    format_path(w, path, sizeof path);
    PyObject *name = PyUnicode_FromFormat("%s%U", path, suffix), *r = PyObject_Repr(v);
    int rc = name && r ? PyDict_SetItem(w->attrs, name, r) : -1;
    Py_XDECREF(name);
    Py_XDECREF(r);
    return rc;
}

/* A scalar element (list index, dict key or attribute name k, value v):
 * its value is baked into a trace, so it joins the key (with k, which
 * places it), and describe mode records it. */
static int note_element(scope_walk *w, PyObject *k, PyObject *v, const char *fmt) {
    int rc = 0;
    if (w->budget-- <= 0)
        return 0;
    if (w->v &&
        ((rc = jgp_serialize(k, w->v, NULL)) < 0 || (rc = jgp_serialize(v, w->v, NULL)) < 0))
        return -1;
    if (w->attrs) {
        PyObject *r = PyUnicode_Check(k) && fmt[0] == '.' ? Py_NewRef(k) : PyObject_Repr(k);
        PyObject *suffix = r ? PyUnicode_FromFormat(fmt, PyUnicode_AsUTF8(r)) : NULL;
        rc = suffix ? note_scalar(w, suffix, v) : -1;
        Py_XDECREF(suffix);
        Py_XDECREF(r);
    }
    return rc;
}

static int walk_dict_values(scope_walk *w, PyObject *d, int depth, const char *fmt, bool attrs) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
        Py_INCREF(k); /* a key's repr (describe mode) is Python code */
        Py_INCREF(v);
        /* an object's attributes: their names are part of the key (an
         * attribute added or removed); scalars (attributes, dict entries)
         * are baked into a trace, so their values are too (an attribute
         * changed, an optimizer's group['lr'] set by a schedule) */
        int rc = 0;
        if (attrs && w->v && PyUnicode_Check(k) && !is_scalar(v))
            rc = jgp_serialize(k, w->v, NULL);
        else if (is_scalar(v) && (attrs ? PyUnicode_Check(k) : is_scalar(k)))
            rc = note_element(w, k, v, fmt);
        if (rc == 0)
            rc = walk_step(w, v, depth, NULL, fmt, k);
        Py_DECREF(k);
        Py_DECREF(v);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* The globals a code object (and the code nested in it) names. */
static int walk_code_globals(scope_walk *w, PyCodeObject *code, PyObject *globals, int depth) {
    PyObject *names = code->co_names;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        PyObject *v = PyDict_GetItemWithError(globals, PyTuple_GET_ITEM(names, i));
        if (!v && PyErr_Occurred())
            return -1;
        Py_XINCREF(v);
        int rc = v ? walk_step(w, v, depth, names, "global '%s'", PyTuple_GET_ITEM(names, i)) : 0;
        Py_XDECREF(v);
        if (rc < 0)
            return -1;
    }
    PyObject *consts = code->co_consts;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(consts); i++) {
        PyObject *c = PyTuple_GET_ITEM(consts, i);
        if (PyCode_Check(c) && walk_code_globals(w, (PyCodeObject *)c, globals, depth) < 0)
            return -1;
    }
    return 0;
}

static int walk_function_scope(scope_walk *w, PyObject *f, int depth);

static int walk_function(scope_walk *w, PyObject *f, int depth) {
    if (w->code_hops >= SCOPE_CODE_HOPS)
        return 0;
    w->code_hops++;
    int rc = walk_function_scope(w, f, depth);
    w->code_hops--;
    return rc;
}

/* A function's closure cells and the globals its code names. */
static int walk_function_scope(scope_walk *w, PyObject *f, int depth) {
    PyCodeObject *code = (PyCodeObject *)PyFunction_GET_CODE(f);
    PyObject *cells = PyFunction_GET_CLOSURE(f);
    PyObject *free_names = cells ? PyCode_GetFreevars(code) : NULL;
    if (cells && !free_names)
        return -1;
    for (Py_ssize_t i = 0; cells && i < PyTuple_GET_SIZE(cells); i++) {
        PyObject *v = PyCell_GET(PyTuple_GET_ITEM(cells, i));
        PyObject *name = i < PyTuple_GET_SIZE(free_names) ? PyTuple_GET_ITEM(free_names, i) : NULL;
        Py_XINCREF(v);
        int rc = v ? walk_step(w, v, depth, code->co_names, "closure variable '%s'", name) : 0;
        Py_XDECREF(v);
        if (rc < 0) {
            Py_DECREF(free_names);
            return -1;
        }
    }
    Py_XDECREF(free_names);
    return walk_code_globals(w, code, PyFunction_GET_GLOBALS(f), depth);
}

static int walk_value(scope_walk *w, PyObject *o, int depth, PyObject *names) {
    if (w->budget-- <= 0)
        return 0;
    if (jgp_is_tensor(o)) {
        if (w->b) {
            jg_tensor *t = jgp_t(o);
            return jgp_buf_put(w->b, &t, sizeof t);
        }
        if (w->n_tensors++ == w->target && !w->found[0])
            format_path(w, w->found, sizeof w->found);
        return 0;
    }
    if (depth <= 0 || PyUnicode_Check(o) || PyLong_Check(o) || PyFloat_Check(o) || PyBytes_Check(o))
        return 0;
    depth--;
    if (PyType_Check(o)) {
        /* a class of the program's (an autograd.Function): the code of its
         * own methods */
        if (!PyType_HasFeature((PyTypeObject *)o, Py_TPFLAGS_HEAPTYPE))
            return 0;
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        PyObject *d = ((PyTypeObject *)o)->tp_dict;
        while (d && PyDict_Next(d, &pos, &k, &v)) {
            PyObject *f = PyFunction_Check(v) ? Py_NewRef(v) : NULL;
            if (!f && (Py_IS_TYPE(v, &PyStaticMethod_Type) || Py_IS_TYPE(v, &PyClassMethod_Type)) &&
                !(f = PyObject_GetAttrString(v, "__func__")))
                PyErr_Clear();
            int rc = f && PyFunction_Check(f) ? walk_function(w, f, depth) : 0;
            Py_XDECREF(f);
            if (rc < 0)
                return -1;
        }
        return 0;
    }
    if (PyList_Check(o) || PyTuple_Check(o)) {
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); i++) {
            PyObject *idx = PyLong_FromSsize_t(i), *v = PySequence_Fast_GET_ITEM(o, i);
            Py_INCREF(v);
            int rc = !idx           ? -1
                     : is_scalar(v) ? note_element(w, idx, v, "[%s]")
                                    : walk_step(w, v, depth, NULL, "[%s]", idx);
            Py_DECREF(v);
            Py_XDECREF(idx);
            if (rc < 0)
                return -1;
        }
        return 0;
    }
    if (PyDict_Check(o))
        return walk_dict_values(w, o, depth, "[%s]", false);
    if (PyFunction_Check(o))
        return walk_function(w, o, depth);
    if (PyMethod_Check(o))
        return walk_step(w, PyMethod_GET_SELF(o), depth + 1, NULL, "self", NULL) < 0
                   ? -1
                   : walk_value(w, PyMethod_GET_FUNCTION(o), depth + 1, NULL);
    if (PyModule_Check(o)) {
        /* only the attributes the code names: a module holds much else */
        PyObject *d = PyModule_GetDict(o);
        for (Py_ssize_t i = 0; d && names && i < PyTuple_GET_SIZE(names); i++) {
            PyObject *v = PyDict_GetItemWithError(d, PyTuple_GET_ITEM(names, i));
            if (!v && PyErr_Occurred())
                return -1;
            if (v && !PyModule_Check(v) &&
                walk_step(w, v, depth, NULL, ".%s", PyTuple_GET_ITEM(names, i)) < 0)
                return -1;
        }
        return 0;
    }
    if (Py_TYPE(o)->tp_dictoffset != 0 && !PyCallable_Check(o)) {
        PyObject *d = PyObject_GenericGetDict(o, NULL);
        if (!d) {
            PyErr_Clear(); /* no instance dict after all */
            return 0;
        }
        int rc = walk_dict_values(w, d, depth, ".%s", true);
        Py_DECREF(d);
        return rc;
    }
    if (Py_TYPE(o)->tp_dictoffset != 0) { /* a callable object (a model): its attributes and
                                             the code of its __call__/forward */
        PyObject *d = PyObject_GenericGetDict(o, NULL);
        int rc = d ? walk_dict_values(w, d, depth, ".%s", true) : 0;
        Py_XDECREF(d);
        if (!d)
            PyErr_Clear();
        static const char *const methods[] = {"forward", "__call__"};
        for (int i = 0; i < 2 && rc == 0; i++) {
            PyObject *m = PyObject_GetAttrString((PyObject *)Py_TYPE(o), methods[i]);
            if (!m)
                PyErr_Clear();
            else if (PyFunction_Check(m))
                rc = walk_function(w, m, depth);
            Py_XDECREF(m);
        }
        return rc;
    }
    return 0;
}

/* The arguments: their tensors are the call's inputs; objects among them
 * are walked (a model passed as an argument). */
static int walk_args(scope_walk *w, PyObject *o) {
    if (!o || jgp_is_tensor(o))
        return 0;
    if (PyList_Check(o) || PyTuple_Check(o)) {
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); i++)
            if (walk_args(w, PySequence_Fast_GET_ITEM(o, i)) < 0)
                return -1;
        return 0;
    }
    if (PyDict_Check(o)) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(o, &pos, &k, &v))
            if (walk_args(w, v) < 0)
                return -1;
        return 0;
    }
    if (PyUnicode_Check(o) || PyLong_Check(o) || PyFloat_Check(o) || o == Py_None)
        return 0;
    PyObject *type = PyUnicode_FromString(Py_TYPE(o)->tp_name);
    int rc = type ? walk_step(w, o, SCOPE_DEPTH, NULL, "the %s argument", type) : -1;
    Py_XDECREF(type);
    return rc;
}

static int walk_scope(scope_walk *w, PyObject *fn, PyObject *args, PyObject *kwargs) {
    w->budget = SCOPE_BUDGET;
    if (walk_value(w, fn, SCOPE_DEPTH + 1, NULL) < 0 || walk_args(w, args) < 0 ||
        walk_args(w, kwargs) < 0)
        return -1;
    return 0;
}

/* Where the first tensor that differs from the last call's is reached from
 * now ("global 'K'", "closure variable 'm'.w[0]"). */
static void describe_change(JGCompiled *self, const char *now, size_t len, PyObject *args,
                            PyObject *kwargs, char *out, size_t n) {
    const char *was = PyBytes_AS_STRING(self->last_scope);
    size_t was_len = (size_t)PyBytes_GET_SIZE(self->last_scope), i = 0;
    size_t m = len < was_len ? len : was_len;
    while (i + sizeof(jg_tensor *) <= m && !memcmp(now + i, was + i, sizeof(jg_tensor *)))
        i += sizeof(jg_tensor *);
    scope_walk *w = PyMem_Calloc(1, sizeof *w);
    if (!w)
        return;
    w->target = (long)(i / sizeof(jg_tensor *));
    if (walk_scope(w, self->fn, args, kwargs) < 0)
        PyErr_Clear();
    if (w->found[0])
        snprintf(out, n, "%s is a different tensor", w->found);
    else
        snprintf(out, n, "a tensor it reached is gone");
    PyMem_Free(w);
}

/* JITGRAD_LOG=recompiles: the scalar attributes of the objects the program
 * reaches (a module's flags and sizes) are part of the key; say which
 * changed since the last call (the library's line names only the key
 * byte). */
static int note_attrs(JGCompiled *self, PyObject *args, PyObject *kwargs) {
    scope_walk *w = PyMem_Calloc(1, sizeof *w);
    if (!w) {
        PyErr_NoMemory();
        return -1;
    }
    w->target = -1;
    w->attrs = PyDict_New();
    int rc = w->attrs ? walk_scope(w, self->fn, args, kwargs) : -1;
    if (rc == 0 && self->last_attrs) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        int shown = 0;
        while (rc == 0 && PyDict_Next(w->attrs, &pos, &k, &v)) {
            PyObject *was = PyDict_GetItemWithError(self->last_attrs, k);
            if (!was && PyErr_Occurred()) {
                rc = -1;
            } else if (!was || PyUnicode_Compare(was, v) != 0) {
                if (shown++ < 4)
                    fprintf(stderr, "jitgrad: attribute %s changed: %s -> %s\n",
                            PyUnicode_AsUTF8(k), was ? PyUnicode_AsUTF8(was) : "(none)",
                            PyUnicode_AsUTF8(v));
            }
        }
        if (shown > 4)
            fprintf(stderr, "jitgrad: ... and %d more attributes changed\n", shown - 4);
    }
    if (rc == 0)
        Py_XSETREF(self->last_attrs, Py_NewRef(w->attrs));
    Py_XDECREF(w->attrs);
    PyMem_Free(w);
    return rc;
}

/* JITGRAD_LOG=recompiles: a scope never seen before means a new trace; say
 * which captured tensor changed (the library's line names only the key
 * byte). */
static int note_scope(JGCompiled *self, const char *fp, size_t len, PyObject *args,
                      PyObject *kwargs) {
    PyObject *b = PyBytes_FromStringAndSize(fp, (Py_ssize_t)len);
    if (!b)
        return -1;
    int seen = PySet_Contains(self->scopes, b);
    if (seen == 0 && self->last_scope) {
        char why[800];
        describe_change(self, fp, len, args, kwargs, why, sizeof why);
        fprintf(stderr, "jitgrad: captured tensors changed: %s\n", why);
    }
    if (seen < 0 || (seen == 0 && PySet_Add(self->scopes, b) < 0)) {
        Py_DECREF(b);
        return -1;
    }
    Py_XSETREF(self->last_scope, b);
    return 0;
}

/* _mutation.NAME(a, b, c), or with a alone when b is NULL */
static PyObject *mutation_call(const char *name, PyObject *a, PyObject *b, PyObject *c) {
    PyObject *mod = PyImport_ImportModule("jitgrad._mutation");
    PyObject *f = mod ? PyObject_GetAttrString(mod, name) : NULL;
    PyObject *r = !f  ? NULL
                  : b ? PyObject_CallFunctionObjArgs(f, a, b, c, NULL)
                      : PyObject_CallOneArg(f, a);
    Py_XDECREF(f);
    Py_XDECREF(mod);
    return r;
}

/* A trace that failed (a value read, a graph break): the objects it
 * mutated are put back, so the run that follows (eagerly, in pieces)
 * mutates them once.  Keeps the pending error; -1 when the restore failed
 * (its error replaces it). */
static int mutation_restore(PyObject *snap) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *r = mutation_call("restore", snap, NULL, NULL);
    int rc = r ? 0 : -1;
    if (r) {
        PyErr_Restore(type, value, tb);
    } else {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    }
    Py_XDECREF(r);
    return rc;
}

/* After the traced function returned: when it mutated a container or an
 * object it reaches, a graph break (jg_graph_break; -1 with the error set,
 * the objects put back as they were so the eager run mutates them once);
 * 0 when nothing changed or this is no trace (the mutation stands). */
static int mutation_check(PyObject *snap) {
    PyObject *why = mutation_call("changed", snap, NULL, NULL);
    const char *w = why && why != Py_None ? PyUnicode_AsUTF8(why) : NULL;
    int rc = why && (why == Py_None || w) ? 0 : -1;
    if (w && jg_graph_break(w) < 0) {
        jgp_raise();
        mutation_restore(snap);
        rc = -1;
    }
    Py_XDECREF(why);
    return rc;
}

static int program_cb(void *user, const void *argbytes, int n_inputs, jg_tensor *const *inputs,
                      jg_tensor **outputs) {
    JGCompiled *self = user;
    compiled_call *call = current;
    PyObject *args = NULL, *kwargs = NULL, *res = NULL, *tmpl = NULL;
    (void)argbytes;
    /* a program run starting: an earlier run of this call that failed (a
     * trace that broke the graph) was recovered from */
    jgp_callback_retry();
    if (!call || call->self != self) {
        PyErr_SetString(PyExc_RuntimeError,
                        "jitgrad.compile: the program was called outside its Python call");
        goto fail;
    }
    int k = 0;
    rebuilt_stand_ins = 0;
    args = rebuild(call->args, inputs, n_inputs, &k);
    kwargs = args && call->kwargs ? rebuild(call->kwargs, inputs, n_inputs, &k) : NULL;
    if (!args || (call->kwargs && !kwargs))
        goto fail;
    /* objects a trace on stand-ins serializes are kept with the compiled
     * function; those of a run on the real tensors (eager, or in pieces:
     * new ones each call) until the next call */
    PyObject *prev_objects = jgp_trace_objects;
    jgp_trace_objects = n_inputs == 0 || rebuilt_stand_ins ? self->objects : NULL;
    if (!jgp_trace_objects) { /* real tensors: eager, or traced in pieces (compiler.md) */
        if (!call->run_objects) {
            Py_XSETREF(self->run_objects, PyDict_New());
            call->run_objects = true;
        }
        if (!(jgp_trace_objects = self->run_objects)) {
            jgp_trace_objects = prev_objects;
            goto fail;
        }
    }
    /* a trace: what the function mutates in Python would be skipped by the
     * graph's later calls (_mutation.py) */
    PyObject *snap = NULL;
    if (jgp_trace_objects == self->objects &&
        !(snap = mutation_call("snapshot", self->fn, args, kwargs ? kwargs : Py_None))) {
        jgp_trace_objects = prev_objects;
        goto fail;
    }
    res = PyObject_Call(self->fn, args, kwargs);
    jgp_trace_objects = prev_objects;
    if (snap && res && mutation_check(snap) < 0)
        Py_CLEAR(res);
    else if (snap && !res)
        (void)mutation_restore(snap); /* an error either way */
    Py_XDECREF(snap);
    if (!res)
        goto fail;
    int n = 0;
    /* the tensors it returned, for the call to return these very objects
     * when this run's are its outputs (an eager run: a tensor it also
     * appended to a list is the one returned, as in eager mode) */
    Py_XSETREF(call->returned, PyList_New(0));
    if (!call->returned)
        goto fail;
    tmpl = out_template(res, outputs, &n, call->room, call->returned);
    if (!tmpl)
        goto fail;
    PyObject *key = Py_BuildValue("(Oi)", call->key_bytes, n);
    PyObject *val = key ? PyTuple_Pack(1, tmpl) : NULL;
    int rc = val ? PyDict_SetItem(self->templates, key, val) : -1;
    Py_XDECREF(key);
    Py_XDECREF(val);
    if (rc < 0)
        goto fail;
    Py_DECREF(args);
    Py_XDECREF(kwargs);
    Py_DECREF(res);
    Py_DECREF(tmpl);
    return n;
fail:
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    Py_XDECREF(res);
    Py_XDECREF(tmpl);
    return jgp_callback_fail();
}

/* The path of tensor number *want in o, walked in rebuild's order, after
 * prefix p: "x", "xs[1]", "batch['ids']".  1 when found (*want reached
 * -1), else 0 (*want counts down). */
static int tensor_path(PyObject *o, int *want, char *buf, size_t n) {
    if (jgp_is_tensor(o))
        return (*want)-- == 0;
    size_t len = strlen(buf);
    if (PyTuple_Check(o) || PyList_Check(o)) {
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); i++) {
            snprintf(buf + len, n - len, "[%zd]", i);
            if (tensor_path(PySequence_Fast_GET_ITEM(o, i), want, buf, n))
                return 1;
        }
    } else if (PyDict_Check(o)) {
        PyObject *key, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(o, &pos, &key, &v)) {
            PyObject *r = PyObject_Repr(key);
            const char *ks = r ? PyUnicode_AsUTF8(r) : NULL;
            snprintf(buf + len, n - len, "[%s]", ks ? ks : "?");
            Py_XDECREF(r);
            if (!ks)
                PyErr_Clear();
            if (tensor_path(v, want, buf, n))
                return 1;
        }
    }
    buf[len] = 0;
    return 0;
}

/* jg_input_name_fn: input i of the current call by the program's parameter
 * names ("x", "args[2]", "batch['ids']") */
static int input_name(void *user, int input, char *buf, size_t n) {
    compiled_call *call = current;
    if (!call || call->self != user || !PyTuple_Check(call->args))
        return -1;
    PyObject *code = PyObject_GetAttrString(call->self->fn, "__code__");
    if (!code)
        PyErr_Clear();
    int argc = code && PyCode_Check(code) ? ((PyCodeObject *)code)->co_argcount : 0;
    PyObject *names = code && PyCode_Check(code) ? PyCode_GetVarnames((PyCodeObject *)code) : NULL;
    if (code && !names)
        PyErr_Clear();
    int want = input, found = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(call->args) && !found; i++) {
        const char *nm = names && i < argc && i < PyTuple_GET_SIZE(names)
                             ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(names, i))
                             : NULL;
        if (nm)
            snprintf(buf, n, "%s", nm);
        else
            snprintf(buf, n, "args[%zd]", i);
        found = tensor_path(PyTuple_GET_ITEM(call->args, i), &want, buf, n);
    }
    PyObject *key, *v;
    Py_ssize_t pos = 0;
    while (!found && call->kwargs && PyDict_Next(call->kwargs, &pos, &key, &v)) {
        const char *nm = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        snprintf(buf, n, "%s", nm ? nm : "kwargs[?]");
        found = tensor_path(v, &want, buf, n);
    }
    Py_XDECREF(names);
    Py_XDECREF(code);
    PyErr_Clear();
    return found ? 0 : -1;
}

/* jg_break_site_fn: the Python line running now ("train.py:12"), the
 * innermost Python frame's (a read called from C sees its caller's). */
static int break_site(void *user, char *buf, size_t n) {
    (void)user;
    PyFrameObject *f = PyEval_GetFrame();
    PyCodeObject *code = f ? PyFrame_GetCode(f) : NULL;
    const char *file = code ? PyUnicode_AsUTF8(code->co_filename) : NULL;
    if (!file) {
        PyErr_Clear();
        Py_XDECREF(code);
        return -1;
    }
    snprintf(buf, n, "%s:%d", file, PyFrame_GetLineNumber(f));
    Py_DECREF(code);
    return 0;
}

static int compiled_traverse(PyObject *o, visitproc visit, void *arg) {
    JGCompiled *self = (JGCompiled *)o;
    Py_VISIT(self->fn);
    Py_VISIT(self->classes);
    Py_VISIT(self->templates);
    Py_VISIT(self->objects);
    Py_VISIT(self->run_objects);
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
    Py_CLEAR(self->objects);
    Py_CLEAR(self->run_objects);
    Py_CLEAR(self->scopes);
    Py_CLEAR(self->last_scope);
    Py_CLEAR(self->last_vals);
    Py_CLEAR(self->last_attrs);
    return 0;
}

static void compiled_dealloc(PyObject *o) {
    JGCompiled *self = (JGCompiled *)o;
    PyObject_GC_UnTrack(o);
    if (self->live_prev)
        self->live_prev->live_next = self->live_next;
    else if (live_first == self)
        live_first = self->live_next;
    if (self->live_next)
        self->live_next->live_prev = self->live_prev;
    compiled_clear(o);
    Py_TYPE(o)->tp_free(o);
}

static PyObject *compiled_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"fn", "backend", "fullgraph", "verify", "dynamic", "mode", NULL};
    PyObject *fn, *dynamic = Py_None;
    const char *backend = "interp", *mode = NULL;
    int fullgraph = 0, verify = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|sppOz:Compiled", kwlist, &fn, &backend,
                                     &fullgraph, &verify, &dynamic, &mode))
        return NULL;
    /* PyTorch's dynamic=: None automatic, True from the first call, False never */
    if (dynamic != Py_None && !PyBool_Check(dynamic)) {
        PyErr_Format(PyExc_TypeError,
                     "jitgrad.compile: dynamic must be None, True or False, not %s",
                     Py_TYPE(dynamic)->tp_name);
        return NULL;
    }
    int dyn_mode = dynamic == Py_None   ? JG_DYNAMIC_AUTO
                   : dynamic == Py_True ? JG_DYNAMIC_ON
                                        : JG_DYNAMIC_OFF;
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
    self->live_next = live_first;
    if (live_first)
        live_first->live_prev = self;
    live_first = self;
    self->classes = PySet_New(NULL);
    self->templates = PyDict_New();
    self->objects = PyDict_New();
    self->fullgraph = fullgraph;
    const char *log = getenv("JITGRAD_LOG"); /* as jg_compile reads it */
    self->log_recompiles = log && (strstr(log, "recompiles") || strstr(log, "all"));
    self->scopes = PySet_New(NULL);
    if (!self->scopes || !self->classes || !self->templates || !self->objects) {
        Py_DECREF(self);
        return NULL;
    }
    jg_compile_options opts = {auto_backend ? "c" : backend, fullgraph, verify};
    self->c = jg_compile(program_cb, self, &opts);
    if (!self->c && auto_backend) { /* "inductor": the fastest that works */
        opts.backend = "interp";
        self->c = jg_compile(program_cb, self, &opts);
    }
    if (self->c && jg_compiled_set_input_namer)
        jg_compiled_set_input_namer(self->c, input_name, self);
    if (self->c && jg_compiled_set_break_site)
        jg_compiled_set_break_site(self->c, break_site, self);
    if (self->c && dyn_mode && jg_compiled_set_dynamic &&
        jg_compiled_set_dynamic(self->c, dyn_mode) < 0) {
        jg_compiled_free(self->c);
        self->c = NULL;
    }
    if (self->c && mode && strcmp(mode, "default")) {
        if (!jg_compiled_set_mode) {
            jg_compiled_free(self->c);
            self->c = NULL;
            Py_DECREF(self);
            PyErr_SetString(PyExc_RuntimeError,
                            "jitgrad.compile: this build of libjitgrad has no compile modes");
            return NULL;
        }
        if (jg_compiled_set_mode(self->c, mode) < 0) {
            jg_compiled_free(self->c);
            self->c = NULL;
        }
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
    PyObject *tensors = PyList_New(0), *result = NULL, *key = NULL, *returned = NULL;
    jgp_buf bytes = {0};
    jg_tensor **inputs = NULL, **outs = NULL;
    PyObject **wrapped = NULL;
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
    /* the identities of the tensors it reaches through its scope */
    size_t args_len = bytes.len;
    char tag = 'S';
    jgp_buf vals = {0};
    scope_walk w = {.b = &bytes, .v = &vals};
    int walked =
        jgp_buf_put(&bytes, &tag, 1) < 0 || walk_scope(&w, self->fn, args, kwargs) < 0 ? -1 : 0;
    if (walked == 0 && w.budget < 0 && !self->warned_budget) {
        self->warned_budget = true;
        if (PyErr_WarnFormat(PyExc_UserWarning, 1,
                             "jitgrad.compile: the function reaches more than %d objects; "
                             "rebinding a tensor reached past them (an attribute set to "
                             "another tensor) is not noticed: update tensors in place or "
                             "pass them as arguments",
                             SCOPE_BUDGET) < 0)
            walked = -1;
    }
    if (walked == 0 && self->log_recompiles &&
        note_scope(self, bytes.data + args_len + 1, bytes.len - args_len - 1, args, kwargs) < 0)
        walked = -1;
    if (walked == 0 && self->log_recompiles) {
        /* describe only when the attributes changed (the walk again costs) */
        PyObject *vb = PyBytes_FromStringAndSize(vals.data ? vals.data : "", (Py_ssize_t)vals.len);
        int same = vb && self->last_vals ? PyObject_RichCompareBool(vb, self->last_vals, Py_EQ) : 0;
        if (!vb || same < 0 || (!same && note_attrs(self, args, kwargs) < 0))
            walked = -1;
        if (vb)
            Py_XSETREF(self->last_vals, vb);
    }
    tag = 'V';
    if (walked == 0 && (jgp_buf_put(&bytes, &tag, 1) < 0 ||
                        (vals.len && jgp_buf_put(&bytes, vals.data, vals.len) < 0)))
        walked = -1;
    jgp_buf_free(&vals);
    if (walked < 0)
        goto done;
    key = PyBytes_FromStringAndSize(bytes.data, (Py_ssize_t)bytes.len);
    if (!key)
        goto done;
    int room = RETURNED_ROOM;
    if (!(outs = PyMem_Malloc(sizeof *outs * (size_t)room))) {
        PyErr_NoMemory();
        goto done;
    }
    compiled_call call = {self, args, kwargs, key, current, room, false, NULL};
    current = &call;
    PyObject *prev_classes = jgp_trace_classes, *prev_objects = jgp_call_objects;
    jgp_trace_classes = self->classes;
    jgp_call_objects = self->objects;
    jgp_enter();
    int n = jg_compiled_call(self->c, bytes.data, bytes.len, (int)n_in, inputs, outs);
    jgp_leave(n >= 0);
    jgp_trace_classes = prev_classes;
    jgp_call_objects = prev_objects;
    current = call.prev;
    if (call.run_objects)
        Py_CLEAR(self->run_objects);
    returned = call.returned;
    if (n < 0) {
        jgp_raise();
        goto done;
    }
    bool ok = (wrapped = PyMem_Calloc((size_t)n + 1, sizeof *wrapped)) != NULL;
    if (!ok) {
        for (int i = 0; i < n; i++) /* out of the scope, then freed */
            jg_release(jg_keep(outs[i]));
        PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < n; i++) {
        /* an input returned (e.g. one written in place) is that same object */
        Py_ssize_t k = 0;
        while (k < n_in && inputs[k] != outs[i])
            k++;
        Py_ssize_t r = 0, n_ret = returned ? PyList_GET_SIZE(returned) : 0;
        while (k == n_in && r < n_ret && jgp_t(PyList_GET_ITEM(returned, r)) != outs[i])
            r++;
        if (k < n_in || r < n_ret)
            jg_release(jg_keep(outs[i]));
        ok &= (wrapped[i] = k < n_in    ? Py_NewRef(PyList_GET_ITEM(tensors, k))
                            : r < n_ret ? Py_NewRef(PyList_GET_ITEM(returned, r))
                                        : jgp_wrap(jg_keep(outs[i]))) != NULL;
    }
    PyObject *tkey = Py_BuildValue("(Oi)", key, n);
    PyObject *entry = tkey ? PyDict_GetItemWithError(self->templates, tkey) : NULL;
    Py_XDECREF(tkey);
    if (ok && entry) {
        int k = 0;
        result = out_fill(PyTuple_GET_ITEM(entry, 0), wrapped, n, &k);
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
    PyMem_Free(wrapped);
    PyMem_Free(outs);
    jgp_buf_free(&bytes);
    PyMem_Free(inputs);
    Py_XDECREF(tensors);
    Py_XDECREF(key);
    Py_XDECREF(returned);
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

/* The graph breaks of the last call that ran in pieces, with reasons. */
static PyObject *m_breaks(PyObject *o, PyObject *unused) {
    (void)unused;
    JGCompiled *self = (JGCompiled *)o;
    const char *const *why = NULL;
    int n = self->c && jg_compiled_breaks ? jg_compiled_breaks(self->c, &why) : 0;
    if (n < 0)
        return jgp_raise();
    PyObject *r = PyList_New(n);
    for (int i = 0; r && i < n; i++) {
        PyObject *s = PyUnicode_FromString(why[i]);
        if (!s)
            Py_CLEAR(r);
        else
            PyList_SET_ITEM(r, i, s);
    }
    return r;
}

/* Graphs run so far (a call in pieces runs one per piece). */
static PyObject *m_graphs_run(PyObject *o, PyObject *unused) {
    (void)unused;
    JGCompiled *self = (JGCompiled *)o;
    return PyLong_FromLong(self->c && jg_compiled_graphs_run ? jg_compiled_graphs_run(self->c) : 0);
}

static PyObject *get_backend(PyObject *o, void *c) {
    (void)c;
    return PyUnicode_FromString(((JGCompiled *)o)->backend);
}

static PyMethodDef compiled_methods[] = {
    {"graph", m_graph, METH_VARARGS, NULL},          {"entries", m_entries, METH_NOARGS, NULL},
    {"fallbacks", m_fallbacks, METH_NOARGS, NULL},   {"breaks", m_breaks, METH_NOARGS, NULL},
    {"graphs_run", m_graphs_run, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL},
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

/* ---- sizes of traced tensors (jitgrad/_symint.py) ---- */

static PyObject *size_class; /* jitgrad.SymInt once registered */

PyObject *jgp_size(const jg_tensor *t, int64_t v) {
    PyObject *i = PyLong_FromLongLong(v);
    if (!i || !size_class || !jg_is_traced(t))
        return i;
    PyObject *r = PyObject_CallOneArg(size_class, i);
    Py_DECREF(i);
    return r;
}

void jgp_size_opaque(const jg_tensor *t, int64_t v) {
    if (jg_sizes_note && jg_is_traced(t))
        jg_sizes_note(JG_SIZES_OPAQUE, v, 0);
}

static PyObject *m_set_size_class(PyObject *mod, PyObject *cls) {
    (void)mod;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyLong_Type)) {
        PyErr_SetString(PyExc_TypeError, "_set_size_class: expected a subclass of int");
        return NULL;
    }
    Py_XSETREF(size_class, Py_NewRef(cls));
    Py_RETURN_NONE;
}

static PyObject *m_sizes_note(PyObject *mod, PyObject *args) {
    (void)mod;
    int op;
    long long a, b;
    if (!PyArg_ParseTuple(args, "iLL:_sizes_note", &op, &a, &b))
        return NULL;
    if (jg_sizes_note)
        jg_sizes_note(op, a, b);
    Py_RETURN_NONE;
}

static PyMethodDef size_functions[] = {
    {"_set_size_class", m_set_size_class, METH_O, NULL},
    {"_sizes_note", m_sizes_note, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int jgp_compile_init(PyObject *module) {
    if (PyModule_AddFunctions(module, size_functions) < 0)
        return -1;
    if (PyType_Ready(&JGCompiled_Type) < 0)
        return -1;
    tensor_mark = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    seq_mark = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    same_mark = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    dict_mark = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (!tensor_mark || !seq_mark || !dict_mark || !same_mark)
        return -1;
    if (PyModule_AddObjectRef(module, "Compiled", (PyObject *)&JGCompiled_Type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "HAS_COMPILER",
                                 jg_compile && jg_compiled_call ? Py_True : Py_False);
}
