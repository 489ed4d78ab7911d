/* Tensor.backward, autograd.grad and the grad mode. */
#include "jgpy.h"

/* A tensor, or a list/tuple of tensors (None allowed where none_ok), into
 * a new array of borrowed pointers; *n gets the count. */
static jg_tensor **tensor_list(PyObject *o, const char *what, bool none_ok, Py_ssize_t *n) {
    PyObject *seq;
    if (jgp_is_tensor(o) || o == Py_None)
        seq = PyTuple_Pack(1, o);
    else
        seq = PySequence_Tuple(o);
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a Tensor or a sequence of Tensors", what);
        return NULL;
    }
    *n = PyTuple_GET_SIZE(seq);
    jg_tensor **arr = PyMem_Calloc((size_t)(*n ? *n : 1), sizeof *arr);
    if (!arr) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *it = PyTuple_GET_ITEM(seq, i);
        if (jgp_is_tensor(it)) {
            arr[i] = jgp_t(it); /* the caller's objects keep these alive */
        } else if (!(it == Py_None && none_ok)) {
            PyErr_Format(PyExc_TypeError, "%s[%zd] must be a Tensor, not %s", what, i,
                         Py_TYPE(it)->tp_name);
            PyMem_Free(arr);
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    return arr;
}

static int parse_flags(PyObject *retain_graph, int create_graph, unsigned *flags) {
    int retain = create_graph;
    if (retain_graph && retain_graph != Py_None) {
        retain = PyObject_IsTrue(retain_graph);
        if (retain < 0)
            return -1;
    }
    *flags = (retain ? JG_RETAIN_GRAPH : 0) | (create_graph ? JG_CREATE_GRAPH : 0);
    return 0;
}

static PyObject *m_backward(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"gradient", "retain_graph", "create_graph", "inputs", NULL};
    PyObject *gradient = Py_None, *retain_graph = Py_None, *inputs = Py_None;
    int create_graph = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOpO:backward", kwlist, &gradient, &retain_graph,
                                     &create_graph, &inputs))
        return NULL;
    if (inputs != Py_None) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "jitgrad: backward(inputs=...) is not supported");
        return NULL;
    }
    if (gradient != Py_None && !jgp_is_tensor(gradient)) {
        PyErr_Format(PyExc_TypeError, "backward(): gradient must be a Tensor or None, not %s",
                     Py_TYPE(gradient)->tp_name);
        return NULL;
    }
    unsigned flags;
    if (parse_flags(retain_graph, create_graph, &flags) < 0)
        return NULL;
    jg_tensor *t = jgp_t(self);
    if (!jg_requires_grad(t)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "element 0 of tensors does not require grad and does not have a grad_fn");
        return NULL;
    }
    jgp_enter();
    int rc = jg_backward(t, gradient == Py_None ? NULL : jgp_t(gradient), flags);
    jgp_leave(rc >= 0);
    if (rc < 0)
        return jgp_raise();
    Py_RETURN_NONE;
}

PyMethodDef jgp_autograd_methods[] = {
    {"backward", (PyCFunction)(void (*)(void))m_backward, METH_VARARGS | METH_KEYWORDS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyObject *f_grad(PyObject *mod, PyObject *args, PyObject *kw) {
    (void)mod;
    static char *kwlist[] = {"outputs",      "inputs",           "grad_outputs",
                             "retain_graph", "create_graph",     "only_inputs",
                             "allow_unused", "is_grads_batched", NULL};
    PyObject *outputs, *inputs, *grad_outputs = Py_None, *retain_graph = Py_None;
    PyObject *only_inputs = Py_True;
    int create_graph = 0, allow_unused = 0, batched = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OOpOpp:grad", kwlist, &outputs, &inputs,
                                     &grad_outputs, &retain_graph, &create_graph, &only_inputs,
                                     &allow_unused, &batched))
        return NULL;
    if (batched) {
        PyErr_SetString(PyExc_NotImplementedError, "jitgrad: is_grads_batched is not supported");
        return NULL;
    }
    unsigned flags;
    if (parse_flags(retain_graph, create_graph, &flags) < 0)
        return NULL;
    if (allow_unused)
        flags |= JG_ALLOW_UNUSED;
    Py_ssize_t n_out, n_in, n_go = 0;
    jg_tensor **outs = tensor_list(outputs, "outputs", false, &n_out);
    jg_tensor **ins = outs ? tensor_list(inputs, "inputs", false, &n_in) : NULL;
    jg_tensor **gos = NULL;
    PyObject *result = NULL;
    if (!ins)
        goto done;
    if (grad_outputs != Py_None) {
        if (!(gos = tensor_list(grad_outputs, "grad_outputs", true, &n_go)))
            goto done;
        if (n_go != n_out) {
            PyErr_Format(PyExc_RuntimeError, "got %zd tensors and %zd gradients", n_out, n_go);
            goto done;
        }
    }
    jg_tensor **res = PyMem_Calloc((size_t)(n_in ? n_in : 1), sizeof *res);
    if (!res) {
        PyErr_NoMemory();
        goto done;
    }
    jgp_enter();
    int rc = jg_autograd_grad((int)n_out, outs, gos, (int)n_in, ins, flags, res);
    jgp_leave(rc >= 0);
    if (rc < 0) {
        jgp_raise();
    } else {
        result = PyTuple_New(n_in);
        for (Py_ssize_t i = 0; i < n_in; i++) {
            PyObject *g;
            if (!res[i]) {
                g = Py_NewRef(Py_None);
            } else {
                g = jgp_wrap(jg_keep(res[i]));
            }
            if (!result || !g) {
                /* release what is left */
                Py_XDECREF(g);
                for (Py_ssize_t k = i + 1; k < n_in; k++)
                    if (res[k])
                        jg_release(jg_keep(res[k]));
                Py_CLEAR(result);
                break;
            }
            PyTuple_SET_ITEM(result, i, g);
        }
    }
    PyMem_Free(res);
done:
    PyMem_Free(outs);
    PyMem_Free(ins);
    PyMem_Free(gos);
    return result;
}

static PyObject *f_set_grad_enabled(PyObject *mod, PyObject *on) {
    (void)mod;
    int v = PyObject_IsTrue(on);
    if (v < 0)
        return NULL;
    return PyBool_FromLong(jg_set_grad_enabled(v));
}

static PyObject *f_is_grad_enabled(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyBool_FromLong(jg_is_grad_enabled());
}

PyMethodDef jgp_module_autograd_functions[] = {
    {"_grad", (PyCFunction)(void (*)(void))f_grad, METH_VARARGS | METH_KEYWORDS, NULL},
    {"_set_grad_enabled", f_set_grad_enabled, METH_O, NULL},
    {"is_grad_enabled", f_is_grad_enabled, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};
