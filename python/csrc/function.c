/* autograd.Function: one jg_function per Python class (cached on the
 * class), callbacks that call the class's static forward/backward, and the
 * ctx object handed to them.
 *
 * Slots: every tensor positional argument of apply() is one input slot of
 * jg_apply (the same tensor twice is two slots, as in PyTorch); the other
 * arguments travel as bytes (jg_apply's args, which compiled code guards
 * on) and, during the Python call, as the original objects.  backward
 * returns one value per positional argument; tensor positions map back to
 * their slots and the library sums slots that share a tensor. */
#include "args.h"

#include <stdlib.h>
#include <string.h>
#include <structmember.h>

PyObject *jgp_trace_classes;
PyObject *jgp_call_objects, *jgp_trace_objects;

/* ------------------------------------------------------------ ctx object */

typedef struct {
    PyObject_HEAD jg_ctx *ctx; /* NULL once the call's node is gone */
    PyObject *cls;
    PyObject *dict;
    PyObject *slot_of;       /* tuple: per positional argument, its slot or -1 */
    PyObject *out_is_tensor; /* tuple of bools: forward's outputs, in order */
    PyObject *non_diff;      /* the last mark_non_differentiable call's tensors, or NULL */
    PyObject *dirty;         /* list: the tensors mark_dirty was given, or NULL */
    PyObject *needs_no_grad; /* a call under no_grad: needs_input_grad as PyTorch's (per
                                argument: a tensor that requires grad), or NULL */
    PyObject *held;          /* a compiled call's: its object arguments (see held_args), held
                                while this ctx lives (jgp_objects_hold), or NULL */
} JGCtx;

static PyTypeObject JGCtx_Type;

static int ctx_traverse(PyObject *self, visitproc visit, void *arg) {
    JGCtx *c = (JGCtx *)self;
    Py_VISIT(c->dict);
    Py_VISIT(c->cls);
    Py_VISIT(c->non_diff);
    Py_VISIT(c->dirty);
    Py_VISIT(c->held);
    return 0;
}

static int ctx_clear(PyObject *self) {
    JGCtx *c = (JGCtx *)self;
    Py_CLEAR(c->dict);
    Py_CLEAR(c->cls);
    Py_CLEAR(c->slot_of);
    Py_CLEAR(c->out_is_tensor);
    Py_CLEAR(c->non_diff);
    Py_CLEAR(c->dirty);
    Py_CLEAR(c->needs_no_grad);
    if (c->held) {
        jgp_objects_drop(c->held);
        Py_CLEAR(c->held);
    }
    return 0;
}

static void ctx_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    ctx_clear(self);
    Py_TYPE(self)->tp_free(self);
}

/* free_state of the jg_ctx: the library is done with the call */
static void ctx_state_free(void *state) {
    JGCtx *c = state;
    c->ctx = NULL;
    Py_DECREF(c);
}

static jg_ctx *ctx_get(JGCtx *c) {
    if (!c->ctx)
        PyErr_SetString(PyExc_RuntimeError,
                        "this autograd.Function context is no longer attached to a call (its "
                        "graph was freed)");
    return c->ctx;
}

static PyObject *ctx_save_for_backward(PyObject *self, PyObject *args) {
    jg_ctx *ctx = ctx_get((JGCtx *)self);
    if (!ctx)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    jg_tensor **arr = PyMem_Calloc((size_t)(n ? n : 1), sizeof *arr);
    if (!arr)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(args, i);
        if (jgp_is_tensor(o)) {
            arr[i] = jgp_t(o);
        } else if (o != Py_None) {
            PyMem_Free(arr);
            PyErr_Format(PyExc_TypeError,
                         "save_for_backward can only save variables, but "
                         "argument %zd is not a Variable",
                         i);
            return NULL;
        }
    }
    int rc = jg_ctx_save_for_backward(ctx, (int)n, arr);
    PyMem_Free(arr);
    if (rc < 0)
        return jgp_raise();
    Py_RETURN_NONE;
}

static PyObject *ctx_saved_tensors(PyObject *self, void *c) {
    (void)c;
    jg_ctx *ctx = ctx_get((JGCtx *)self);
    if (!ctx)
        return NULL;
    int n = jg_ctx_n_saved(ctx);
    PyObject *tup = PyTuple_New(n);
    for (int i = 0; tup && i < n; i++) {
        jg_clear_error();
        jg_tensor *t = jg_ctx_saved(ctx, i);
        if (!t && jg_last_error()[0]) {
            Py_DECREF(tup);
            return jgp_raise();
        }
        PyObject *o = jgp_wrap_borrowed(t);
        if (!o)
            Py_CLEAR(tup);
        else
            PyTuple_SET_ITEM(tup, i, o);
    }
    return tup;
}

static PyObject *ctx_needs_input_grad(PyObject *self, void *c) {
    (void)c;
    JGCtx *x = (JGCtx *)self;
    jg_ctx *ctx = ctx_get(x);
    if (!ctx)
        return NULL;
    if (x->needs_no_grad)
        return Py_NewRef(x->needs_no_grad);
    Py_ssize_t n = PyTuple_GET_SIZE(x->slot_of);
    PyObject *tup = PyTuple_New(n);
    for (Py_ssize_t i = 0; tup && i < n; i++) {
        long slot = PyLong_AsLong(PyTuple_GET_ITEM(x->slot_of, i));
        bool v = slot >= 0 && jg_ctx_needs_input_grad(ctx, (int)slot);
        PyTuple_SET_ITEM(tup, i, PyBool_FromLong(v));
    }
    return tup;
}

/* As in PyTorch, each call replaces the set the previous one marked: the
 * tensors are kept here and handed to the library when forward returns. */
static PyObject *ctx_mark_non_differentiable(PyObject *self, PyObject *args) {
    JGCtx *c = (JGCtx *)self;
    if (!ctx_get(c))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++)
        if (!jgp_is_tensor(PyTuple_GET_ITEM(args, i))) {
            PyErr_SetString(PyExc_TypeError, "mark_non_differentiable only accepts Tensors");
            return NULL;
        }
    Py_XSETREF(c->non_diff, Py_NewRef(args));
    Py_RETURN_NONE;
}

static PyObject *ctx_set_materialize_grads(PyObject *self, PyObject *v) {
    jg_ctx *ctx = ctx_get((JGCtx *)self);
    if (!ctx)
        return NULL;
    int on = PyObject_IsTrue(v);
    if (on < 0)
        return NULL;
    jg_ctx_set_materialize_grads(ctx, on);
    Py_RETURN_NONE;
}

static PyObject *ctx_mark_dirty(PyObject *self, PyObject *args) {
    JGCtx *c = (JGCtx *)self;
    jg_ctx *ctx = ctx_get(c);
    if (!ctx)
        return NULL;
    if (!c->dirty && !(c->dirty = PyList_New(0)))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        PyObject *o = PyTuple_GET_ITEM(args, i);
        if (!jgp_is_tensor(o)) {
            PyErr_SetString(PyExc_TypeError, "mark_dirty only accepts Tensors");
            return NULL;
        }
        if (PyList_Append(c->dirty, o) < 0)
            return NULL;
        jg_ctx_mark_dirty(ctx, jgp_t(o));
    }
    Py_RETURN_NONE;
}

static PyMethodDef ctx_methods[] = {
    {"save_for_backward", ctx_save_for_backward, METH_VARARGS, NULL},
    {"mark_non_differentiable", ctx_mark_non_differentiable, METH_VARARGS, NULL},
    {"set_materialize_grads", ctx_set_materialize_grads, METH_O, NULL},
    {"mark_dirty", ctx_mark_dirty, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef ctx_getset[] = {
    {"saved_tensors", ctx_saved_tensors, NULL, NULL, NULL},
    {"needs_input_grad", ctx_needs_input_grad, NULL, NULL, NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject JGCtx_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "jitgrad.autograd.FunctionCtx",
    .tp_doc = "The ctx of a custom Function: save_for_backward, saved_tensors, "
              "needs_input_grad, mark_non_differentiable, mark_dirty, set_materialize_grads.",
    .tp_basicsize = sizeof(JGCtx),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = ctx_dealloc,
    .tp_traverse = ctx_traverse,
    .tp_clear = ctx_clear,
    .tp_methods = ctx_methods,
    .tp_getset = ctx_getset,
    .tp_dictoffset = offsetof(JGCtx, dict),
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
};

/* ------------------------------------------------------------ the Python call in progress */

typedef struct apply_call {
    PyObject *cls;
    PyObject *args;         /* the positional arguments as given */
    PyObject *slot_of;      /* per argument: slot or -1 */
    PyObject *out_template; /* set by forward: tuple with None for tensors, or NULL */
    bool returned_tuple;
    bool forward_ran;
    bool grad_mode; /* at the call (forward itself runs without it) */
    struct apply_call *prev;
    /* per tensor output: the last output that is the same tensor (PyTorch
     * returns that one object in each place, its output_nr the last) */
    int same_as[JG_MAX_OUTPUTS];
} apply_call;

static apply_call *current_call;
/* stands for a tensor in an output template */
#define TENSOR_MARK ((PyObject *)&JGCtx_Type)

static PyObject *slot_map(PyObject *args, int *n_slots) {
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *m = PyTuple_New(n);
    int s = 0;
    for (Py_ssize_t i = 0; m && i < n; i++)
        PyTuple_SET_ITEM(m, i,
                         PyLong_FromLong(jgp_is_tensor(PyTuple_GET_ITEM(args, i)) ? s++ : -1));
    *n_slots = s;
    return m;
}

/* ------------------------------------------------------------ tensors inside object arguments */

/* A traced tensor that a forward reaches through an object argument is
 * lifted by the library into one more slot of the traced call (after the
 * call's own tensors).  When the library later runs the forward by itself
 * (an opaque call at run time, a replay for double backward), those slots
 * carry the real tensors: the object is rebuilt around them.  Both sides
 * walk an object the same way: its attributes, and the items of tuples,
 * lists and dicts among them, to OBJ_DEPTH levels, each traced tensor
 * counted once, in order of first appearance. */
enum { OBJ_DEPTH = 4, OBJ_MAX = 64 };

typedef struct {
    bool touch;              /* trace time: make the trace lift them in walk order */
    bool mark;               /* copies with lifted_mark(j) for the j-th lifted tensor */
    jg_tensor *const *subst; /* run time: the lifted slots' tensors */
    int n_subst;
    int n_seen;
    jg_tensor *seen[OBJ_MAX];
} obj_walk;

/* Stands for the j-th lifted tensor in an object kept for a rerun (a
 * capsule: no program value is one). */
static const char LIFTED_MARK[] = "jitgrad.lifted_slot";

static PyObject *lifted_mark(int j) {
    return PyCapsule_New((void *)(intptr_t)(j + 1), LIFTED_MARK, NULL);
}

/* o rebuilt (a new reference: o itself when nothing in it changed), or
 * NULL with an error. */
static PyObject *obj_rebuild(obj_walk *w, PyObject *o, int depth) {
    if (PyCapsule_IsValid(o, LIFTED_MARK)) {
        if (w->touch || w->mark)
            return Py_NewRef(o);
        intptr_t j = (intptr_t)PyCapsule_GetPointer(o, LIFTED_MARK) - 1;
        if (j < 0 || j >= w->n_subst) {
            PyErr_SetString(PyExc_RuntimeError, "jitgrad: a custom function's object argument "
                                                "holds a tensor its call did not lift");
            return NULL;
        }
        return jgp_wrap_borrowed(w->subst[j]);
    }
    if (jgp_is_tensor(o)) {
        jg_tensor *t = jgp_t(o);
        if (!jg_is_traced(t))
            return Py_NewRef(o);
        int j = 0;
        while (j < w->n_seen && w->seen[j] != t)
            j++;
        if (j == w->n_seen && w->n_seen < OBJ_MAX) {
            w->seen[w->n_seen++] = t;
            if (w->touch) { /* any traced use lifts it: a dead detach will do */
                jg_tensor *d = jg_detach(t);
                if (!d)
                    return jgp_raise();
                jg_release(jg_keep(d));
            }
        }
        if (w->mark)
            return j < w->n_seen ? lifted_mark(j) : Py_NewRef(o);
        if (w->touch || j >= w->n_seen || j >= w->n_subst) /* past OBJ_MAX: not lifted first */
            return Py_NewRef(o);
        return jgp_wrap_borrowed(w->subst[j]);
    }
    if (depth <= 0 || o == Py_None || PyType_Check(o) || PyModule_Check(o) || PyCallable_Check(o) ||
        PyUnicode_Check(o) || PyLong_Check(o) || PyFloat_Check(o))
        return Py_NewRef(o);
    if (PyTuple_CheckExact(o) || PyList_CheckExact(o)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        PyObject *items = PyList_New(n);
        bool changed = false;
        for (Py_ssize_t i = 0; items && i < n; i++) {
            PyObject *v = obj_rebuild(w, PySequence_Fast_GET_ITEM(o, i), depth - 1);
            if (!v) {
                Py_CLEAR(items);
                break;
            }
            changed |= v != PySequence_Fast_GET_ITEM(o, i);
            PyList_SET_ITEM(items, i, v);
        }
        if (!items || !changed) {
            Py_XDECREF(items);
            return items ? Py_NewRef(o) : NULL;
        }
        if (PyList_CheckExact(o))
            return items;
        PyObject *t = PyList_AsTuple(items);
        Py_DECREF(items);
        return t;
    }
    PyObject *d = NULL, *copy = NULL;
    bool is_dict = PyDict_CheckExact(o);
    if (is_dict)
        d = Py_NewRef(o);
    else if (Py_TYPE(o)->tp_dictoffset != 0 && !(d = PyObject_GenericGetDict(o, NULL)))
        return NULL;
    if (!d)
        return Py_NewRef(o);
    PyObject *k, *v, *changes = PyList_New(0);
    Py_ssize_t pos = 0;
    while (changes && PyDict_Next(d, &pos, &k, &v)) {
        PyObject *nv = obj_rebuild(w, v, depth - 1);
        PyObject *kv = nv && nv != v ? PyTuple_Pack(2, k, nv) : NULL;
        if (!nv || (nv != v && (!kv || PyList_Append(changes, kv) < 0)))
            Py_CLEAR(changes);
        Py_XDECREF(nv);
        Py_XDECREF(kv);
    }
    if (changes && PyList_GET_SIZE(changes)) {
        /* a shallow copy holding the substituted values */
        PyObject *cd = NULL;
        if (is_dict) {
            copy = cd = PyDict_Copy(o);
            Py_XINCREF(cd);
        } else {
            PyObject *mod = PyImport_ImportModule("copy");
            copy = mod ? PyObject_CallMethod(mod, "copy", "O", o) : NULL;
            Py_XDECREF(mod);
            cd = copy ? PyObject_GenericGetDict(copy, NULL) : NULL;
        }
        for (Py_ssize_t i = 0; cd && i < PyList_GET_SIZE(changes); i++) {
            PyObject *kv = PyList_GET_ITEM(changes, i);
            if (PyDict_SetItem(cd, PyTuple_GET_ITEM(kv, 0), PyTuple_GET_ITEM(kv, 1)) < 0)
                Py_CLEAR(copy);
        }
        if (!cd)
            Py_CLEAR(copy);
        Py_XDECREF(cd);
    } else if (changes) {
        copy = Py_NewRef(o);
    }
    Py_XDECREF(changes);
    Py_DECREF(d);
    return copy;
}

/* The non-tensor arguments walked (touch) or rebuilt in place in args (a
 * tuple this code owns alone). */
static int objects_rebuild(obj_walk *w, PyObject *args) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        if (jgp_is_tensor(a))
            continue;
        PyObject *v = obj_rebuild(w, a, OBJ_DEPTH);
        if (!v)
            return -1;
        if (w->touch || v == a) {
            Py_DECREF(v);
            continue;
        }
        PyTuple_SET_ITEM(args, i, v);
        Py_DECREF(a);
    }
    return 0;
}

/* Pairs each object argument in o (named by its identity key in the call's
 * bytes: jgp_serialize's walk) with its counterpart m in the marked copy. */
static int pair_objects(PyObject *o, PyObject *m, PyObject *out) {
    if (jgp_is_tensor(o) || o == Py_None || PyLong_Check(o) || PyFloat_Check(o) ||
        PyUnicode_Check(o) || PyObject_TypeCheck(o, &JGDtype_Type))
        return 0;
    if (PyTuple_Check(o) || PyList_Check(o)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        bool same = Py_TYPE(m) == Py_TYPE(o) && PySequence_Fast_GET_SIZE(m) == n;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *a = PySequence_Fast_GET_ITEM(o, i);
            if (pair_objects(a, same ? PySequence_Fast_GET_ITEM(m, i) : a, out) < 0)
                return -1;
        }
        return 0;
    }
    if (PyDict_Check(o)) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(o, &pos, &k, &v)) {
            PyObject *mv = PyDict_Check(m) ? PyDict_GetItemWithError(m, k) : NULL;
            if ((!mv && PyErr_Occurred()) || pair_objects(k, k, out) < 0 ||
                pair_objects(v, mv ? mv : v, out) < 0)
                return -1;
        }
        return 0;
    }
    PyObject *key = jgp_object_key(o);
    int rc = key ? PyDict_SetItem(out, key, m) : -1;
    Py_XDECREF(key);
    return rc;
}

/* What a create_graph backward that runs a compiled call's forward again
 * (after its Python call returned, after any number of later calls) needs
 * of its object arguments: per identity key, the object, copied where it
 * holds tensors the trace lifted, with marks in their place that the rerun
 * fills with its slots' tensors.  The copies hold no tensor of the call's
 * own graph, so the ctx that keeps them (as long as its node) is no cycle
 * through that node.  NULL when nothing is kept (no object arguments, or
 * one that cannot be copied: a rerun then fails naming an object). */
static PyObject *held_args(PyObject *args) {
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    bool any = false;
    for (Py_ssize_t i = 0; i < n && !any; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        any = !(jgp_is_tensor(a) || a == Py_None || PyLong_Check(a) || PyFloat_Check(a) ||
                PyUnicode_Check(a));
    }
    if (!any)
        return NULL;
    PyObject *marked = PyTuple_New(n), *held = PyDict_New();
    for (Py_ssize_t i = 0; marked && i < n; i++)
        PyTuple_SET_ITEM(marked, i, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    obj_walk w = {.mark = true};
    int rc = marked && held ? objects_rebuild(&w, marked) : -1;
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++)
        rc = pair_objects(PyTuple_GET_ITEM(args, i), PyTuple_GET_ITEM(marked, i), held);
    Py_XDECREF(marked);
    if (rc < 0 || !PyDict_Size(held)) {
        PyErr_Clear();
        Py_CLEAR(held);
    }
    return held;
}

/* ------------------------------------------------------------ callbacks */

static const char *fn_name(const jg_function *fn) {
    return fn->name ? fn->name : "Function";
}

static int forward_cb(jg_ctx *ctx, int n_inputs, jg_tensor *const *inputs, jg_tensor **outputs) {
    const jg_function *fn = jg_ctx_function(ctx);
    PyObject *cls = fn->user;
    PyObject *args = NULL, *slot_of = NULL, *pyctx = NULL, *res = NULL, *forward = NULL;
    PyObject *held = NULL;
    apply_call *call = current_call;
    int rc = -1;
    bool from_apply = call && call->cls == cls && !call->forward_ran;
    if (from_apply) {
        /* the Python apply() in progress: hand forward the objects it got */
        Py_ssize_t n = PyTuple_GET_SIZE(call->args);
        args = PyTuple_New(n);
        for (Py_ssize_t i = 0; args && i < n; i++) {
            PyObject *a = PyTuple_GET_ITEM(call->args, i);
            long s = PyLong_AsLong(PyTuple_GET_ITEM(call->slot_of, i));
            PyObject *v;
            if (s < 0 || (s < n_inputs && jgp_t(a) == inputs[s]))
                v = Py_NewRef(a);
            else if (s < n_inputs)
                v = jgp_wrap_borrowed(inputs[s]); /* e.g. the symbolic stand-in */
            else
                v = NULL;
            if (!v) {
                Py_CLEAR(args);
                break;
            }
            PyTuple_SET_ITEM(args, i, v);
        }
        slot_of = Py_NewRef(call->slot_of);
        call->forward_ran = true;
        /* traced into a subgraph: the tensors its objects hold are lifted
         * first, in the order the run-time rebuild below expects */
        bool traced = false;
        for (int i = 0; i < n_inputs && !traced; i++)
            traced = jg_is_traced(inputs[i]);
        obj_walk w = {.touch = true};
        if (args && traced && objects_rebuild(&w, args) < 0)
            goto fail;
        /* traced: the compiled graph may run forward again (an eager call's
         * node never does, in a compiled call too) */
        if (args && traced)
            held = held_args(args);
    } else {
        /* called by the library on its own (compiled code running the
         * callback): rebuild the arguments from the bytes */
        const char *p = jg_ctx_args(ctx), *end = p + jg_ctx_args_size(ctx);
        int next = 0;
        PyObject *list = p ? jgp_deserialize(&p, end, inputs, n_inputs, &next) : PyList_New(0);
        args = list ? PySequence_Tuple(list) : NULL;
        Py_XDECREF(list);
        if (args && jgp_call_objects) /* an opaque call run by compiled code */
            held = held_args(args);
        /* the slots after the arguments' own: the tensors lifted out of
         * object arguments when traced */
        obj_walk w = {.subst = inputs + next, .n_subst = n_inputs - next};
        if (args && objects_rebuild(&w, args) < 0) /* (also fills the marks: held_args) */
            Py_CLEAR(args);
        if (args) {
            int ns;
            slot_of = slot_map(args, &ns);
        }
    }
    if (!args || !slot_of)
        goto fail;
    JGCtx *c = PyObject_GC_New(JGCtx, &JGCtx_Type);
    if (!c)
        goto fail;
    c->ctx = ctx;
    c->cls = Py_NewRef(cls);
    c->dict = NULL;
    c->slot_of = Py_NewRef(slot_of);
    c->out_is_tensor = NULL;
    c->non_diff = NULL;
    c->dirty = NULL;
    c->needs_no_grad = NULL;
    c->held = NULL;
    PyObject_GC_Track(c);
    pyctx = (PyObject *)c;
    jg_ctx_set_state(ctx, Py_NewRef(pyctx), ctx_state_free);
    if (held) {
        if (jgp_objects_hold(held) < 0)
            goto fail;
        c->held = held;
        held = NULL;
    }
    if (from_apply && !call->grad_mode) {
        /* PyTorch's needs_input_grad does not depend on grad mode (the
         * library's, which decides the call's edges, does) */
        Py_ssize_t na = PyTuple_GET_SIZE(args);
        if (!(c->needs_no_grad = PyTuple_New(na)))
            goto fail;
        for (Py_ssize_t i = 0; i < na; i++) {
            PyObject *a = PyTuple_GET_ITEM(args, i);
            PyTuple_SET_ITEM(c->needs_no_grad, i,
                             PyBool_FromLong(jgp_is_tensor(a) && jg_requires_grad(jgp_t(a))));
        }
    }

    forward = PyObject_GetAttrString(cls, "forward");
    if (!forward)
        goto fail;
    PyObject *fargs = PyTuple_New(PyTuple_GET_SIZE(args) + 1);
    if (!fargs)
        goto fail;
    PyTuple_SET_ITEM(fargs, 0, Py_NewRef(pyctx));
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++)
        PyTuple_SET_ITEM(fargs, i + 1, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    res = PyObject_Call(forward, fargs, NULL);
    Py_DECREF(fargs);
    if (!res)
        goto fail;
    bool is_tuple = PyTuple_Check(res) || PyList_Check(res);
    PyObject *items = is_tuple ? PySequence_Tuple(res) : PyTuple_Pack(1, res);
    if (!items)
        goto fail;
    int k = 0;
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(items, i);
        if (!jgp_is_tensor(o))
            continue;
        if (k == JG_MAX_OUTPUTS) {
            PyErr_Format(PyExc_RuntimeError, "%s.forward returned more than %d tensors",
                         fn_name(fn), JG_MAX_OUTPUTS);
            break;
        }
        /* the library takes its own reference after we return */
        outputs[k] = jgp_t(o);
        jgp_defer_release(jg_retain(jgp_t(o)));
        k++;
    }
    if (!PyErr_Occurred() && k > 0 && c->non_diff) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c->non_diff); i++)
            jg_ctx_mark_non_differentiable(ctx, jgp_t(PyTuple_GET_ITEM(c->non_diff, i)));
        Py_CLEAR(c->non_diff);
    }
    if (!PyErr_Occurred() && k == 0)
        PyErr_Format(PyExc_RuntimeError,
                     "jitgrad: %s.forward must return at least one Tensor (got %s)", fn_name(fn),
                     Py_TYPE(res)->tp_name);
    if (PyErr_Occurred()) {
        Py_DECREF(items);
        goto fail;
    }
    ((JGCtx *)pyctx)->out_is_tensor = PyTuple_New(n);
    for (Py_ssize_t i = 0; ((JGCtx *)pyctx)->out_is_tensor && i < n; i++)
        PyTuple_SET_ITEM(((JGCtx *)pyctx)->out_is_tensor, i,
                         PyBool_FromLong(jgp_is_tensor(PyTuple_GET_ITEM(items, i))));
    if (call && call->cls == cls && call->forward_ran && !call->out_template) {
        PyObject *tmpl = PyTuple_New(n);
        for (Py_ssize_t i = 0; tmpl && i < n; i++) {
            PyObject *o = PyTuple_GET_ITEM(items, i);
            PyTuple_SET_ITEM(tmpl, i, Py_NewRef(jgp_is_tensor(o) ? TENSOR_MARK : o));
        }
        call->out_template = tmpl;
        call->returned_tuple = is_tuple;
        for (int i = 0; i < k; i++) {
            /* (an input returned unchanged is a new view in each place,
             * PyTorch's view_as(self) per output; a dirty one is itself) */
            bool fresh_view = false;
            for (int s = 0; s < n_inputs; s++)
                fresh_view |= inputs[s] == outputs[i];
            for (Py_ssize_t d = 0; fresh_view && c->dirty && d < PyList_GET_SIZE(c->dirty); d++)
                fresh_view = jgp_t(PyList_GET_ITEM(c->dirty, d)) != outputs[i];
            call->same_as[i] = i;
            for (int j = i + 1; j < k && !fresh_view; j++)
                if (outputs[j] == outputs[i])
                    call->same_as[i] = j;
        }
    }
    Py_DECREF(items);
    rc = k;
    goto done;
fail:
    rc = jgp_callback_fail();
done:
    Py_XDECREF(held);
    Py_XDECREF(args);
    Py_XDECREF(slot_of);
    Py_XDECREF(pyctx);
    Py_XDECREF(res);
    Py_XDECREF(forward);
    return rc;
}

static int backward_cb(jg_ctx *ctx, int n_out, jg_tensor *const *gout, int n_in, jg_tensor **gin) {
    JGCtx *c = jg_ctx_state(ctx);
    const jg_function *fn = jg_ctx_function(ctx);
    PyObject *bargs = NULL, *res = NULL, *items = NULL, *backward = NULL;
    if (!c)
        return jg_set_error("%sBackward: the Python context is missing", fn_name(fn));
    /* one gradient per forward output; None for the non-tensor ones */
    Py_ssize_t n_all = c->out_is_tensor ? PyTuple_GET_SIZE(c->out_is_tensor) : n_out;
    bargs = PyTuple_New(n_all + 1);
    if (!bargs)
        goto fail;
    PyTuple_SET_ITEM(bargs, 0, Py_NewRef((PyObject *)c));
    for (Py_ssize_t i = 0, k = 0; i < n_all; i++) {
        bool is_t = !c->out_is_tensor || PyTuple_GET_ITEM(c->out_is_tensor, i) == Py_True;
        PyObject *g = is_t && k < n_out ? jgp_wrap_borrowed(gout[k++]) : Py_NewRef(Py_None);
        if (!g)
            goto fail;
        PyTuple_SET_ITEM(bargs, i + 1, g);
    }
    /* backward or vjp (Function._backward_fn refuses a class with both) */
    backward = PyObject_HasAttrString(c->cls, "_backward_fn")
                   ? PyObject_CallMethod(c->cls, "_backward_fn", NULL)
                   : PyObject_GetAttrString(c->cls, "backward");
    if (!backward)
        goto fail;
    /* A once_differentiable backward decides on the real gradients whether
     * its result gets history (and runs without grad mode, which a traced
     * backward replayed for create_graph would not keep): traced, it fails
     * here, so the call becomes opaque and runs it eagerly at run time. */
    if (PyObject_HasAttrString(backward, "_jitgrad_once_differentiable"))
        for (int k = 0; k < n_out; k++)
            if (gout[k] && jg_is_traced(gout[k])) {
                PyErr_Format(PyExc_RuntimeError,
                             "%s.backward is once_differentiable: it runs eagerly", fn_name(fn));
                goto fail;
            }
    res = PyObject_Call(backward, bargs, NULL);
    if (!res)
        goto fail;
    items = PyTuple_Check(res) || PyList_Check(res) ? PySequence_Tuple(res) : PyTuple_Pack(1, res);
    if (!items)
        goto fail;
    Py_ssize_t n_args = PyTuple_GET_SIZE(c->slot_of), got = PyTuple_GET_SIZE(items);
    if (got > n_args) { /* PyTorch accepts extra trailing Nones */
        bool all_none = true;
        for (Py_ssize_t i = n_args; i < got; i++)
            all_none &= PyTuple_GET_ITEM(items, i) == Py_None;
        if (all_none)
            got = n_args;
    }
    if (got != n_args) {
        PyErr_Format(PyExc_RuntimeError,
                     "function %sBackward returned an incorrect number of gradients (expected "
                     "%zd, got %zd)",
                     fn_name(fn), n_args, got);
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n_args; i++) {
        PyObject *g = PyTuple_GET_ITEM(items, i);
        long slot = PyLong_AsLong(PyTuple_GET_ITEM(c->slot_of, i));
        if (g == Py_None)
            continue;
        if (slot < 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "function %sBackward returned a gradient different than None at "
                         "position %zd, but the corresponding forward input was not a Variable",
                         fn_name(fn), i + 1);
            goto fail;
        }
        if (!jgp_is_tensor(g)) {
            PyErr_Format(PyExc_RuntimeError, "expected Variable or None (got %s)",
                         Py_TYPE(g)->tp_name);
            goto fail;
        }
        if (slot < n_in) {
            gin[slot] = jgp_t(g); /* borrowed by the library after we return */
            jgp_defer_release(jg_retain(jgp_t(g)));
        }
    }
    Py_DECREF(bargs);
    Py_DECREF(res);
    Py_DECREF(items);
    Py_DECREF(backward);
    return n_in;
fail:
    Py_XDECREF(bargs);
    Py_XDECREF(res);
    Py_XDECREF(items);
    Py_XDECREF(backward);
    for (int i = 0; i < n_in; i++)
        gin[i] = NULL;
    return jgp_callback_fail();
}

/* ------------------------------------------------------------ apply */

static void capsule_free(PyObject *cap) {
    jg_function *fn = PyCapsule_GetPointer(cap, "jitgrad.function");
    if (fn) {
        free((char *)fn->name);
        free(fn);
    }
}

static const jg_function *function_of(PyObject *cls) {
    PyObject *d = ((PyTypeObject *)cls)->tp_dict;
    PyObject *cap = d ? PyDict_GetItemString(d, "_jitgrad_function") : NULL; /* own class only */
    if (cap)
        return PyCapsule_GetPointer(cap, "jitgrad.function");
    jg_function *fn = calloc(1, sizeof *fn);
    const char *name = ((PyTypeObject *)cls)->tp_name;
    const char *dot = strrchr(name, '.');
    if (!fn || !(fn->name = strdup(dot ? dot + 1 : name))) {
        free(fn);
        PyErr_NoMemory();
        return NULL;
    }
    fn->forward = forward_cb;
    fn->backward = backward_cb;
    fn->user = cls; /* every call's ctx holds a reference to the class */
    cap = PyCapsule_New(fn, "jitgrad.function", capsule_free);
    if (!cap) {
        free((char *)fn->name);
        free(fn);
        return NULL;
    }
    int rc = PyObject_SetAttrString(cls, "_jitgrad_function", cap);
    Py_DECREF(cap);
    return rc < 0 ? NULL : fn;
}

static PyObject *f_function_apply(PyObject *mod, PyObject *a) {
    (void)mod;
    PyObject *cls, *args;
    if (!PyArg_ParseTuple(a, "OO!:_function_apply", &cls, &PyTuple_Type, &args))
        return NULL;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "apply must be called on an autograd.Function class");
        return NULL;
    }
    const jg_function *fn = function_of(cls);
    if (!fn)
        return NULL;
    if (jgp_trace_classes && PySet_Add(jgp_trace_classes, cls) < 0)
        return NULL;
    int n_slots;
    PyObject *slot_of = slot_map(args, &n_slots);
    if (!slot_of)
        return NULL;
    jgp_buf bytes = {0};
    jg_tensor *inputs[256];
    PyObject *result = NULL;
    if (n_slots > 256) {
        PyErr_SetString(PyExc_RuntimeError, "jitgrad: too many tensor arguments to apply()");
        goto done;
    }
    for (Py_ssize_t i = 0, s = 0; i < PyTuple_GET_SIZE(args); i++)
        if (jgp_is_tensor(PyTuple_GET_ITEM(args, i)))
            inputs[s++] = jgp_t(PyTuple_GET_ITEM(args, i));
    {
        /* the whole argument list, tensors as markers: what compiled code
         * guards on, and what forward is rebuilt from when the library runs
         * it by itself */
        PyObject *list = PySequence_List(args), *found = PyList_New(0);
        int rc = list && found ? jgp_serialize(list, &bytes, found) : -1;
        if (rc == 0 && PyList_GET_SIZE(found) != n_slots) {
            PyErr_SetString(PyExc_TypeError, "jitgrad: Function.apply does not accept tensors "
                                             "inside containers (pass them as arguments)");
            rc = -1;
        }
        Py_XDECREF(list);
        Py_XDECREF(found);
        if (rc < 0)
            goto done;
    }
    apply_call call = {cls,          args, slot_of, NULL, false, false, jg_is_grad_enabled(),
                       current_call, {0}};
    for (int i = 0; i < JG_MAX_OUTPUTS; i++)
        call.same_as[i] = i;
    current_call = &call;
    jg_tensor *outs[JG_MAX_OUTPUTS];
    jgp_enter();
    int n = jg_apply(fn, n_slots, inputs, bytes.data, bytes.len, outs);
    jgp_leave(n >= 0);
    current_call = call.prev;
    if (n < 0) {
        Py_XDECREF(call.out_template);
        jgp_raise();
        goto done;
    }
    PyObject *wrapped[JG_MAX_OUTPUTS];
    bool ok = true;
    for (int i = 0; i < n; i++) {
        if (call.same_as[i] != i && call.same_as[i] < n)
            continue; /* wrapped below, as the last of its places */
        /* an input returned as itself (ctx.mark_dirty) is that same object */
        PyObject *same = NULL;
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(args) && !same; k++) {
            PyObject *a = PyTuple_GET_ITEM(args, k);
            if (jgp_is_tensor(a) && jgp_t(a) == outs[i])
                same = a;
        }
        if (same)
            jg_release(jg_keep(outs[i]));
        wrapped[i] = same ? Py_NewRef(same) : jgp_wrap(jg_keep(outs[i]));
        ok &= wrapped[i] != NULL;
    }
    for (int i = 0; i < n; i++)
        if (call.same_as[i] != i && call.same_as[i] < n) {
            wrapped[i] = Py_XNewRef(wrapped[call.same_as[i]]);
            jg_release(jg_keep(outs[i])); /* (the library's alias for place i goes unused) */
        }
    PyObject *tmpl = call.out_template;
    if (ok && tmpl) {
        Py_ssize_t m = PyTuple_GET_SIZE(tmpl);
        result = PyTuple_New(m);
        for (Py_ssize_t i = 0, k = 0; result && i < m; i++) {
            PyObject *o = PyTuple_GET_ITEM(tmpl, i);
            PyTuple_SET_ITEM(result, i, Py_NewRef(o == TENSOR_MARK && k < n ? wrapped[k++] : o));
        }
        if (result && !call.returned_tuple) {
            PyObject *single = Py_NewRef(PyTuple_GET_ITEM(result, 0));
            Py_DECREF(result);
            result = single;
        }
    } else if (ok) {
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
    Py_XDECREF(tmpl);
done:
    jgp_buf_free(&bytes);
    Py_DECREF(slot_of);
    return result;
}

PyMethodDef jgp_module_function_functions[] = {
    {"_function_apply", f_function_apply, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int jgp_function_init(PyObject *module) {
    if (PyType_Ready(&JGCtx_Type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "FunctionCtx", (PyObject *)&JGCtx_Type);
}
