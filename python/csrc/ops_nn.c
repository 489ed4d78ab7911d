/* jitgrad.nn's bindings: making instances of Tensor subclasses
 * (nn.Parameter). */
#include "jgpy.h"

#include <string.h>

/* _make_subclass(cls, data, requires_grad): an instance of cls (a subclass
 * of Tensor) that shares data's storage, without its history, as a leaf
 * (torch.Tensor._make_subclass). */
static PyObject *make_subclass(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *cls, *data;
    int requires_grad = 0;
    if (!PyArg_ParseTuple(args, "OO|p:_make_subclass", &cls, &data, &requires_grad))
        return NULL;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, JGTensor_Type)) {
        PyErr_SetString(PyExc_TypeError, "_make_subclass: cls must be a subclass of Tensor");
        return NULL;
    }
    if (!jgp_is_tensor(data)) {
        PyErr_Format(PyExc_TypeError, "_make_subclass: data must be a Tensor, not %s",
                     Py_TYPE(data)->tp_name);
        return NULL;
    }
    jg_tensor *t = jg_detach(jgp_t(data));
    if (!t)
        return jgp_raise();
    t = jg_keep(t);
    if (requires_grad) {
        if (!jgp_dtype_is_float(jg_dtype_of(t))) {
            jg_release(t);
            PyErr_SetString(
                PyExc_RuntimeError,
                "Only Tensors of floating point and complex dtype can require gradients");
            return NULL;
        }
        jg_set_requires_grad(t, true);
    }
    PyTypeObject *tp = (PyTypeObject *)cls;
    JGTensor *o = (JGTensor *)tp->tp_alloc(tp, 0);
    if (!o) {
        jg_release(t);
        return NULL;
    }
    o->t = t;
    o->weakrefs = NULL;
    return (PyObject *)o;
}

/* _has_data(t): False for a symbolic tensor of a program being traced, whose
 * values do not exist yet (checks that read values are skipped for it).
 * Asks jg_is_traced: jg_data() on a traced tensor would record a graph break. */
static PyObject *has_data(PyObject *mod, PyObject *arg) {
    (void)mod;
    if (!jgp_is_tensor(arg)) {
        PyErr_Format(PyExc_TypeError, "_has_data: expected a Tensor, got %s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    /* jg_is_traced, not jg_data: reading a traced tensor's data is itself a
     * capture failure, which made every program calling this uncompilable */
    jg_tensor *t = jgp_t(arg);
    return PyBool_FromLong(jg_numel(t) == 0 || !jg_is_traced(t));
}

static jg_tensor *tensor_arg(PyObject *o, const char *fn) {
    if (!jgp_is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'input' (position 1) must be Tensor, not %s",
                     fn, Py_TYPE(o)->tp_name);
        return NULL;
    }
    return jgp_t(o);
}

static PyObject *gelu(PyObject *mod, PyObject *args, PyObject *kw) {
    (void)mod;
    static char *names[] = {"input", "approximate", NULL};
    PyObject *x;
    const char *approximate = "none";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|s:gelu", names, &x, &approximate))
        return NULL;
    jg_tensor *t = tensor_arg(x, "gelu");
    if (!t)
        return NULL;
    jg_gelu_approximate a;
    if (strcmp(approximate, "none") == 0)
        a = JG_GELU_NONE;
    else if (strcmp(approximate, "tanh") == 0)
        a = JG_GELU_TANH;
    else {
        PyErr_SetString(PyExc_RuntimeError, "approximate argument must be either none or tanh.");
        return NULL;
    }
    return jgp_wrap_new(jg_gelu(t, a));
}

static PyObject *hardswish(PyObject *mod, PyObject *x) {
    (void)mod;
    jg_tensor *t = tensor_arg(x, "hardswish");
    return t ? jgp_wrap_new(jg_hardswish(t)) : NULL;
}

static PyObject *leaky_relu(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x;
    double slope;
    if (!PyArg_ParseTuple(args, "Od:_leaky_relu", &x, &slope))
        return NULL;
    jg_tensor *t = tensor_arg(x, "leaky_relu");
    return t ? jgp_wrap_new(jg_leaky_relu(t, slope)) : NULL;
}

static PyObject *hardtanh(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x;
    double lo, hi;
    if (!PyArg_ParseTuple(args, "Odd:_hardtanh", &x, &lo, &hi))
        return NULL;
    jg_tensor *t = tensor_arg(x, "hardtanh");
    return t ? jgp_wrap_new(jg_hardtanh(t, lo, hi)) : NULL;
}

static PyObject *hardsigmoid(PyObject *mod, PyObject *x) {
    (void)mod;
    jg_tensor *t = tensor_arg(x, "hardsigmoid");
    return t ? jgp_wrap_new(jg_hardsigmoid(t)) : NULL;
}

static PyObject *silu(PyObject *mod, PyObject *x) {
    (void)mod;
    jg_tensor *t = tensor_arg(x, "silu");
    return t ? jgp_wrap_new(jg_silu(t)) : NULL;
}

static PyObject *embedding(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *w, *ix;
    long long padding_idx;
    if (!PyArg_ParseTuple(args, "OOL:_embedding", &w, &ix, &padding_idx))
        return NULL;
    if (!jgp_is_tensor(w) || !jgp_is_tensor(ix)) {
        PyErr_SetString(PyExc_TypeError, "embedding(): weight and indices must be Tensors");
        return NULL;
    }
    return jgp_wrap_new(jg_embedding(jgp_t(w), jgp_t(ix), (int64_t)padding_idx));
}

static jg_tensor *opt_tensor(PyObject *o, bool *ok) {
    *ok = true;
    if (o == Py_None)
        return NULL;
    if (!jgp_is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "expected a Tensor or None, got %s", Py_TYPE(o)->tp_name);
        *ok = false;
        return NULL;
    }
    return jgp_t(o);
}

static PyObject *layer_norm(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x, *w, *b;
    int n;
    double eps;
    if (!PyArg_ParseTuple(args, "OiOOd:_layer_norm", &x, &n, &w, &b, &eps))
        return NULL;
    jg_tensor *t = tensor_arg(x, "layer_norm");
    bool okw, okb;
    jg_tensor *wt = opt_tensor(w, &okw), *bt = opt_tensor(b, &okb);
    if (!t || !okw || !okb)
        return NULL;
    return jgp_wrap_new(jg_layer_norm(t, n, wt, bt, eps));
}

static PyObject *batch_norm(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x, *rm, *rv, *w, *b;
    int training;
    double momentum, eps;
    if (!PyArg_ParseTuple(args, "OOOOOpdd:_batch_norm", &x, &rm, &rv, &w, &b, &training, &momentum,
                          &eps))
        return NULL;
    jg_tensor *t = tensor_arg(x, "batch_norm");
    bool ok[4];
    jg_tensor *rmt = opt_tensor(rm, &ok[0]), *rvt = opt_tensor(rv, &ok[1]);
    jg_tensor *wt = opt_tensor(w, &ok[2]), *bt = opt_tensor(b, &ok[3]);
    if (!t || !ok[0] || !ok[1] || !ok[2] || !ok[3])
        return NULL;
    return jgp_wrap_new(jg_batch_norm(t, rmt, rvt, wt, bt, training, momentum, eps));
}

static PyObject *dropout(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x;
    double p;
    int train;
    if (!PyArg_ParseTuple(args, "Odp:_dropout", &x, &p, &train))
        return NULL;
    jg_tensor *t = tensor_arg(x, "dropout");
    return t ? jgp_wrap_new(jg_dropout(t, p, train)) : NULL;
}

static int parse_reduction(const char *s, jg_reduction *r) {
    if (strcmp(s, "mean") == 0)
        *r = JG_REDUCTION_MEAN;
    else if (strcmp(s, "sum") == 0)
        *r = JG_REDUCTION_SUM;
    else if (strcmp(s, "none") == 0)
        *r = JG_REDUCTION_NONE;
    else {
        PyErr_Format(PyExc_ValueError, "%s is not a valid value for reduction", s);
        return -1;
    }
    return 0;
}

/* _regression_loss(kind, input, target, reduction, beta): kind 0 mse, 1 l1,
 * 2 smooth_l1 */
static PyObject *regression_loss(PyObject *mod, PyObject *args) {
    (void)mod;
    int kind;
    PyObject *x, *y;
    const char *red;
    double beta;
    jg_reduction r;
    if (!PyArg_ParseTuple(args, "iOOsd:_regression_loss", &kind, &x, &y, &red, &beta))
        return NULL;
    if (!jgp_is_tensor(x) || !jgp_is_tensor(y)) {
        PyErr_SetString(PyExc_TypeError, "loss: input and target must be Tensors");
        return NULL;
    }
    if (parse_reduction(red, &r) < 0)
        return NULL;
    jg_tensor *a = jgp_t(x), *b = jgp_t(y);
    return jgp_wrap_new(kind == 0   ? jg_mse_loss(a, b, r)
                        : kind == 1 ? jg_l1_loss(a, b, r)
                                    : jg_smooth_l1_loss(a, b, r, beta));
}

/* _nll_loss(x, target, weight, reduction, ignore_index, label_smoothing,
 * from_logits): jg_cross_entropy_opts (from_logits) or jg_nll_loss */
static PyObject *nll_loss(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x, *t, *w;
    const char *reduction;
    long long ignore_index;
    double smoothing;
    int from_logits;
    if (!PyArg_ParseTuple(args, "OOOsLdp:_nll_loss", &x, &t, &w, &reduction, &ignore_index,
                          &smoothing, &from_logits))
        return NULL;
    bool okw;
    jg_tensor *wt = opt_tensor(w, &okw);
    if (!okw)
        return NULL;
    if (!jgp_is_tensor(x) || !jgp_is_tensor(t)) {
        PyErr_SetString(PyExc_TypeError, "nll_loss(): input and target must be Tensors");
        return NULL;
    }
    jg_loss_options o = {JG_REDUCTION_MEAN, (int64_t)ignore_index, wt, smoothing};
    if (parse_reduction(reduction, &o.reduction) < 0)
        return NULL;
    return jgp_wrap_new(from_logits ? jg_cross_entropy_opts(jgp_t(x), jgp_t(t), &o)
                                    : jg_nll_loss(jgp_t(x), jgp_t(t), &o));
}

static PyObject *sdpa(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *q, *k, *v, *m;
    double p;
    int causal;
    if (!PyArg_ParseTuple(args, "OOOOdp:_sdpa", &q, &k, &v, &m, &p, &causal))
        return NULL;
    bool okm;
    jg_tensor *mt = opt_tensor(m, &okm);
    if (!okm)
        return NULL;
    if (!jgp_is_tensor(q) || !jgp_is_tensor(k) || !jgp_is_tensor(v)) {
        PyErr_SetString(PyExc_TypeError,
                        "scaled_dot_product_attention(): query, key and value must be Tensors");
        return NULL;
    }
    return jgp_wrap_new(
        jg_scaled_dot_product_attention(jgp_t(q), jgp_t(k), jgp_t(v), mt, p, causal));
}

PyMethodDef jgp_module_nn_functions[] = {
    {"_sdpa", sdpa, METH_VARARGS, "_sdpa(q, k, v, attn_mask, dropout_p, is_causal)"},
    {"_regression_loss", regression_loss, METH_VARARGS,
     "_regression_loss(kind, input, target, reduction, beta): 0 mse, 1 l1, 2 smooth_l1"},
    {"_nll_loss", nll_loss, METH_VARARGS,
     "_nll_loss(x, target, weight, reduction, ignore_index, label_smoothing, from_logits)"},
    {"_layer_norm", layer_norm, METH_VARARGS, "_layer_norm(x, n_norm, weight, bias, eps)"},
    {"_batch_norm", batch_norm, METH_VARARGS,
     "_batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)"},
    {"_dropout", dropout, METH_VARARGS, "_dropout(x, p, training)"},
    {"_embedding", embedding, METH_VARARGS,
     "_embedding(weight, indices, padding_idx): padding_idx -1 for none"},
    {"_gelu", (PyCFunction)(void (*)(void))gelu, METH_VARARGS | METH_KEYWORDS,
     "_gelu(input, approximate='none')"},
    {"_silu", silu, METH_O, "_silu(input)"},
    {"_hardswish", hardswish, METH_O, "_hardswish(input)"},
    {"_leaky_relu", leaky_relu, METH_VARARGS, "_leaky_relu(input, negative_slope)"},
    {"_hardtanh", hardtanh, METH_VARARGS, "_hardtanh(input, min_val, max_val)"},
    {"_hardsigmoid", hardsigmoid, METH_O, "_hardsigmoid(input)"},
    {"_has_data", has_data, METH_O, "_has_data(t): whether t's values exist (not traced)"},
    {"_make_subclass", make_subclass, METH_VARARGS,
     "_make_subclass(cls, data, requires_grad=False): a cls instance sharing data's storage"},
    {NULL, NULL, 0, NULL},
};
