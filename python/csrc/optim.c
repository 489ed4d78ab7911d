/* jitgrad.optim's core: one parameter's update by the C library
 * (jg_optim_update); the Python classes keep groups and state. */
#include <string.h>

#include "jgpy.h"

static int kind_from_name(const char *s, jg_optim_kind *kind) {
    static const char *const names[] = {"sgd", "adam", "adamw", "adagrad", "rmsprop", "adadelta"};
    for (int i = 0; i < 6; i++) {
        if (!strcmp(s, names[i])) {
            *kind = (jg_optim_kind)i;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError, "unknown optimizer '%s'", s);
    return -1;
}

/* group[key] as a double / bool when present (else *out keeps its value). */
static int get_double(PyObject *group, const char *key, double *out) {
    PyObject *v = PyMapping_GetItemString(group, key);
    if (!v) {
        PyErr_Clear();
        return 0;
    }
    double d = PyFloat_AsDouble(v);
    Py_DECREF(v);
    if (d == -1.0 && PyErr_Occurred())
        return -1;
    *out = d;
    return 0;
}

static int get_bool(PyObject *group, const char *key, bool *out) {
    PyObject *v = PyMapping_GetItemString(group, key);
    if (!v) {
        PyErr_Clear();
        return 0;
    }
    int b = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (b < 0)
        return -1;
    *out = b;
    return 0;
}

static int parse_hparams(PyObject *group, jg_optim_hparams *h) {
    if (!PyMapping_Check(group)) {
        PyErr_SetString(PyExc_TypeError, "_optim_update: group must be a dict");
        return -1;
    }
    PyObject *betas = PyMapping_GetItemString(group, "betas");
    if (betas) {
        PyObject *t = PySequence_Check(betas) ? PySequence_Tuple(betas) : NULL;
        Py_DECREF(betas);
        int ok = t && PyArg_ParseTuple(t, "dd", &h->beta1, &h->beta2);
        Py_XDECREF(t);
        if (!ok) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "optimizer betas must be a pair of floats");
            return -1;
        }
    } else {
        PyErr_Clear();
    }
    if (get_double(group, "lr", &h->lr) < 0 || get_double(group, "momentum", &h->momentum) < 0 ||
        get_double(group, "dampening", &h->dampening) < 0 ||
        get_double(group, "eps", &h->eps) < 0 ||
        get_double(group, "weight_decay", &h->weight_decay) < 0 ||
        get_double(group, "lr_decay", &h->lr_decay) < 0 ||
        get_double(group, "initial_accumulator_value", &h->initial_accumulator_value) < 0 ||
        get_double(group, "alpha", &h->alpha) < 0 || get_double(group, "rho", &h->rho) < 0 ||
        get_bool(group, "nesterov", &h->nesterov) < 0 ||
        get_bool(group, "amsgrad", &h->amsgrad) < 0 ||
        get_bool(group, "centered", &h->centered) < 0 ||
        get_bool(group, "maximize", &h->maximize) < 0)
        return -1;
    return 0;
}

/* _optim_update(kind, param, grad, state, group): state is a list with one
 * entry (a Tensor or None) per state name of the kind, in the library's
 * order; entries the update creates are stored into it. */
static PyObject *m_optim_update(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    PyObject *param, *grad, *state, *group;
    if (!PyArg_ParseTuple(args, "sO!O!O!O:_optim_update", &name, JGTensor_Type, &param,
                          JGTensor_Type, &grad, &PyList_Type, &state, &group))
        return NULL;
    jg_optim_kind kind;
    if (kind_from_name(name, &kind) < 0)
        return NULL;
    jg_optim_hparams h = jg_optim_defaults(kind);
    if (parse_hparams(group, &h) < 0)
        return NULL;
    int n = 0;
    while (jg_optim_state_name(kind, n))
        n++;
    if (PyList_GET_SIZE(state) != n) {
        PyErr_Format(PyExc_ValueError, "_optim_update: %s keeps %d state tensors, got %zd", name, n,
                     PyList_GET_SIZE(state));
        return NULL;
    }
    jg_tensor *st[JG_OPTIM_MAX_STATE] = {NULL};
    for (int i = 0; i < n; i++) {
        PyObject *o = PyList_GET_ITEM(state, i);
        if (jgp_is_tensor(o)) {
            st[i] = jgp_t(o); /* borrowed: the list keeps it */
        } else if (o != Py_None) {
            PyErr_Format(PyExc_TypeError, "optimizer state '%s' must be a Tensor, not %s",
                         jg_optim_state_name(kind, i), Py_TYPE(o)->tp_name);
            return NULL;
        }
    }
    int rc = jg_optim_update(kind, &h, jgp_t(param), jgp_t(grad), st);
    /* state the update created is ours now, even after a failure */
    for (int i = 0; i < n; i++) {
        if (st[i] && PyList_GET_ITEM(state, i) == Py_None) {
            PyObject *w = jgp_wrap(st[i]);
            if (!w)
                return NULL;
            PyList_SetItem(state, i, w); /* steals w, drops None */
        }
    }
    if (rc < 0)
        return jgp_raise();
    Py_RETURN_NONE;
}

PyMethodDef jgp_module_optim_functions[] = {
    {"_optim_update", m_optim_update, METH_VARARGS,
     "_optim_update(kind, param, grad, state, group): one parameter's optimizer step"},
    {NULL, NULL, 0, NULL},
};
