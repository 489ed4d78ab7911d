/* Bindings of the shape, indexing and creation ops (the library's OPS-SHAPE
 * block).  Keyword handling and the torch-like signatures that are easier
 * in Python (split, chunk, new_*, advanced indexing) live in
 * jitgrad/_opsshape.py, which calls the primitives here. */
#include "jgpy.h"

#include <math.h>

#define KW (METH_VARARGS | METH_KEYWORDS)
#define CF(f) ((PyCFunction)(void (*)(void))(f))

/* A list or tuple of tensors as a new array of borrowed pointers. */
static jg_tensor **tensor_seq(PyObject *seq, const char *fn, int *n) {
    if (jgp_is_tensor(seq) || !PySequence_Check(seq)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'tensors' (position 1) must be tuple of Tensors, not %s", fn,
                     jgp_is_tensor(seq) ? "Tensor" : Py_TYPE(seq)->tp_name);
        return NULL;
    }
    Py_ssize_t len = PySequence_Size(seq);
    if (len < 0)
        return NULL;
    jg_tensor **ts = PyMem_Malloc(sizeof(jg_tensor *) * (size_t)(len ? len : 1));
    if (!ts) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t k = 0; k < len; k++) {
        PyObject *o = PySequence_GetItem(seq, k);
        if (!o || !jgp_is_tensor(o)) {
            if (o)
                PyErr_Format(PyExc_TypeError,
                             "expected Tensor as element %zd in argument 0, but got %s", k,
                             Py_TYPE(o)->tp_name);
            Py_XDECREF(o);
            PyMem_Free(ts);
            return NULL;
        }
        ts[k] = jgp_t(o); /* the sequence keeps it alive */
        Py_DECREF(o);
    }
    *n = (int)len;
    return ts;
}

static PyObject *join(PyObject *args, bool stack) {
    PyObject *seq;
    int dim = 0, n = 0;
    if (!PyArg_ParseTuple(args, stack ? "O|i:stack" : "O|i:cat", &seq, &dim))
        return NULL;
    jg_tensor **ts = tensor_seq(seq, stack ? "stack" : "cat", &n);
    if (!ts)
        return NULL;
    jg_tensor *r = stack ? jg_stack(n, ts, dim) : jg_cat(n, ts, dim);
    PyMem_Free(ts);
    return jgp_wrap_new(r);
}

static PyObject *f_cat(PyObject *m, PyObject *args) {
    (void)m;
    return join(args, false);
}

static PyObject *f_stack(PyObject *m, PyObject *args) {
    (void)m;
    return join(args, true);
}

static PyObject *f_eye(PyObject *m, PyObject *args) {
    (void)m;
    long long n, k;
    PyObject *dt;
    jg_dtype d;
    bool given;
    if (!PyArg_ParseTuple(args, "LLO", &n, &k, &dt) || jgp_parse_dtype(dt, &d, &given) < 0)
        return NULL;
    return jgp_wrap_new(jg_eye(given ? d : JG_F32, n, k));
}

static PyObject *f_linspace(PyObject *m, PyObject *args) {
    (void)m;
    double a, b;
    long long steps;
    PyObject *dt;
    jg_dtype d;
    bool given;
    if (!PyArg_ParseTuple(args, "ddLO", &a, &b, &steps, &dt) || jgp_parse_dtype(dt, &d, &given) < 0)
        return NULL;
    return jgp_wrap_new(jg_linspace(given ? d : JG_F32, a, b, steps));
}

static PyObject *f_randint(PyObject *m, PyObject *args) {
    (void)m;
    long long lo, hi;
    PyObject *size, *dt;
    jg_dtype d;
    bool given;
    int nd;
    int64_t shape[JG_MAX_DIMS];
    if (!PyArg_ParseTuple(args, "LLOO", &lo, &hi, &size, &dt) ||
        jgp_parse_dtype(dt, &d, &given) < 0)
        return NULL;
    PyObject *sa = PyTuple_Pack(1, size);
    int rc = sa ? jgp_parse_shape(sa, &nd, shape) : -1;
    Py_XDECREF(sa);
    if (rc < 0)
        return NULL;
    return jgp_wrap_new(jg_randint(given ? d : JG_I64, lo, hi, nd, shape));
}

static PyObject *f_randperm(PyObject *m, PyObject *args) {
    (void)m;
    long long n;
    PyObject *dt;
    jg_dtype d;
    bool given;
    if (!PyArg_ParseTuple(args, "LO", &n, &dt) || jgp_parse_dtype(dt, &d, &given) < 0)
        return NULL;
    return jgp_wrap_new(jg_randperm(given ? d : JG_I64, n));
}

/* ------------------------------------------------------------ methods */

static PyObject *tri(PyObject *self, PyObject *args, PyObject *kw, bool upper) {
    static char *kwlist[] = {"diagonal", NULL};
    long long k = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, upper ? "|L:triu" : "|L:tril", kwlist, &k))
        return NULL;
    return jgp_wrap_new(upper ? jg_triu(jgp_t(self), k) : jg_tril(jgp_t(self), k));
}

static PyObject *m_tril(PyObject *self, PyObject *args, PyObject *kw) {
    return tri(self, args, kw, false);
}

static PyObject *m_triu(PyObject *self, PyObject *args, PyObject *kw) {
    return tri(self, args, kw, true);
}

static PyObject *m_narrow(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dim", "start", "length", NULL};
    int dim;
    PyObject *st;
    long long len;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iOL:narrow", kwlist, &dim, &st, &len))
        return NULL;
    long long start;
    if (jgp_is_tensor(st)) { /* PyTorch accepts a 0-d integer tensor */
        double v = jg_item(jgp_t(st));
        if (isnan(v))
            return jgp_raise();
        start = (long long)v;
    } else {
        start = PyLong_AsLongLong(st);
        if (start == -1 && PyErr_Occurred())
            return NULL;
    }
    return jgp_wrap_new(jg_narrow(jgp_t(self), dim, start, len));
}

static PyObject *m_index_select(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dim", "index", NULL};
    int dim;
    PyObject *idx;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iO:index_select", kwlist, &dim, &idx))
        return NULL;
    if (!jgp_is_tensor(idx)) {
        PyErr_Format(PyExc_TypeError,
                     "index_select(): argument 'index' (position 2) must be Tensor, not %s",
                     Py_TYPE(idx)->tp_name);
        return NULL;
    }
    return jgp_wrap_new(jg_index_select(jgp_t(self), dim, jgp_t(idx)));
}

static PyObject *m_multinomial(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"num_samples", "replacement", "generator", NULL};
    long long n;
    int repl = 0;
    PyObject *gen = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "L|p$O:multinomial", kwlist, &n, &repl, &gen))
        return NULL;
    jg_generator *g;
    if (jgp_generator_arg(gen, "multinomial", &g) < 0)
        return NULL;
    jg_generator *prev = g ? jg_generator_use(g) : NULL;
    jg_tensor *r = jg_multinomial(jgp_t(self), n, repl);
    if (g)
        jg_generator_use(prev);
    return jgp_wrap_new(r);
}

/* _index(dim, idx): jg_index; _index_put_(dim, idx, values): jg_index_put_ */
static PyObject *m_index(PyObject *self, PyObject *args) {
    int dim;
    PyObject *idx;
    if (!PyArg_ParseTuple(args, "iO!", &dim, JGTensor_Type, &idx))
        return NULL;
    return jgp_wrap_new(jg_index(jgp_t(self), dim, jgp_t(idx)));
}

static PyObject *m_index_put_(PyObject *self, PyObject *args) {
    int dim;
    PyObject *idx, *v;
    if (!PyArg_ParseTuple(args, "iO!O!", &dim, JGTensor_Type, &idx, JGTensor_Type, &v))
        return NULL;
    if (jg_index_put_(jgp_t(self), dim, jgp_t(idx), jgp_t(v)) < 0)
        return jgp_raise();
    Py_INCREF(self);
    return self;
}

static PyObject *m_nonzero_(PyObject *self, PyObject *noargs) {
    (void)noargs;
    return jgp_wrap_new(jg_nonzero(jgp_t(self)));
}

PyMethodDef jgp_tensor_opsshape_methods[] = {
    {"_nonzero", m_nonzero_, METH_NOARGS, NULL},
    {"tril", CF(m_tril), KW, "tril(diagonal=0): lower triangle of the last two dims"},
    {"triu", CF(m_triu), KW, "triu(diagonal=0): upper triangle of the last two dims"},
    {"narrow", CF(m_narrow), KW, "narrow(dim, start, length): a view of a range of dim"},
    {"index_select", CF(m_index_select), KW,
     "index_select(dim, index): the entries of a 1-D int64 index along dim"},
    {"multinomial", CF(m_multinomial), KW,
     "multinomial(num_samples, replacement=False): category indices drawn per row"},
    {"_index", m_index, METH_VARARGS, NULL},
    {"_index_put_", m_index_put_, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyMethodDef jgp_module_opsshape_functions[] = {
    {"_cat", f_cat, METH_VARARGS, NULL},
    {"_stack", f_stack, METH_VARARGS, NULL},
    {"_eye", f_eye, METH_VARARGS, NULL},
    {"_linspace", f_linspace, METH_VARARGS, NULL},
    {"_randint", f_randint, METH_VARARGS, NULL},
    {"_randperm", f_randperm, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};
