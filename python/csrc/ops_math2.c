/* Bindings of the math2 ops (floor ... erfc, atan2, addcmul, addcdiv,
 * lerp) and PyTorch's alias spellings, with PyTorch's signatures.  Each
 * one is a library call; only argument handling lives here. */
#include "jgpy.h"

#define KW (METH_VARARGS | METH_KEYWORDS)
#define CF(f) ((PyCFunction)(void (*)(void))(f))

#define UNARY(name, fn)                                                                            \
    static PyObject *m_##name(PyObject *self, PyObject *unused) {                                  \
        (void)unused;                                                                              \
        return jgp_wrap_new(fn(jgp_t(self)));                                                      \
    }
UNARY(floor, jg_floor)
UNARY(ceil, jg_ceil)
UNARY(trunc, jg_trunc)
UNARY(frac, jg_frac)
UNARY(sign, jg_sign)
UNARY(sgn, jg_sgn)
UNARY(log1p, jg_log1p)
UNARY(expm1, jg_expm1)
UNARY(log2, jg_log2)
UNARY(log10, jg_log10)
UNARY(rsqrt, jg_rsqrt)
UNARY(reciprocal, jg_reciprocal)
UNARY(sinh, jg_sinh)
UNARY(cosh, jg_cosh)
UNARY(tan, jg_tan)
UNARY(asin, jg_asin)
UNARY(acos, jg_acos)
UNARY(atan, jg_atan)
UNARY(erfc, jg_erfc)

static bool is_number(PyObject *o) {
    return !jgp_is_tensor(o) && (PyFloat_Check(o) || PyLong_Check(o));
}

/* A tensor argument: TypeError as PyTorch words it otherwise. */
static bool tensor_arg(PyObject *o, const char *fn, const char *name, int pos) {
    if (jgp_is_tensor(o))
        return true;
    PyErr_Format(PyExc_TypeError, "%s(): argument '%s' (position %d) must be Tensor, not %s", fn,
                 name, pos, o ? Py_TYPE(o)->tp_name : "None");
    return false;
}

/* round(*, decimals=0) */
static PyObject *m_round(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"decimals", NULL};
    int decimals = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$i:round", kwlist, &decimals))
        return NULL;
    jg_tensor *t = jgp_t(self);
    if (decimals == 0 && (!kw || !PyDict_Size(kw)))
        return jgp_wrap_new(jg_round(t));
    return jgp_wrap_new(jg_round_decimals(t, decimals));
}

static PyObject *m_atan2(PyObject *self, PyObject *other) {
    if (!tensor_arg(other, "atan2", "other", 1))
        return NULL;
    return jgp_wrap_new(jg_atan2(jgp_t(self), jgp_t(other)));
}

/* value=: a number, or a one-element tensor read as one (PyTorch's Scalar) */
static int scalar_value(PyObject *o, const char *fn, const char *name, double *v) {
    if (!o)
        return 0;
    if (!is_number(o) && !PyBool_Check(o) && !jgp_is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be Number, not %s", fn, name,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    PyObject *f = PyNumber_Float(o);
    if (!f)
        return -1;
    *v = PyFloat_AsDouble(f);
    Py_DECREF(f);
    return 0;
}

static PyObject *addc(PyObject *self, PyObject *args, PyObject *kw, const char *fn,
                      jg_tensor *(*op)(jg_tensor *, jg_tensor *, jg_tensor *, double)) {
    static char *kwlist[] = {"tensor1", "tensor2", "value", NULL};
    PyObject *t1, *t2, *value = NULL;
    char fmt[32];
    snprintf(fmt, sizeof fmt, "OO|$O:%s", fn);
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &t1, &t2, &value))
        return NULL;
    double v = 1.0;
    if (!tensor_arg(t1, fn, "tensor1", 1) || !tensor_arg(t2, fn, "tensor2", 2) ||
        scalar_value(value, fn, "value", &v) < 0)
        return NULL;
    return jgp_wrap_new(op(jgp_t(self), jgp_t(t1), jgp_t(t2), v));
}

static PyObject *m_addcmul(PyObject *self, PyObject *args, PyObject *kw) {
    return addc(self, args, kw, "addcmul", jg_addcmul);
}

static PyObject *m_addcdiv(PyObject *self, PyObject *args, PyObject *kw) {
    return addc(self, args, kw, "addcdiv", jg_addcdiv);
}

/* lerp(end, weight): weight a number or a tensor */
static PyObject *m_lerp(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"end", "weight", NULL};
    PyObject *end, *weight;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:lerp", kwlist, &end, &weight))
        return NULL;
    if (!tensor_arg(end, "lerp", "end", 1))
        return NULL;
    if (jgp_is_tensor(weight))
        return jgp_wrap_new(jg_lerp(jgp_t(self), jgp_t(end), jgp_t(weight)));
    if (!is_number(weight)) {
        PyErr_Format(PyExc_TypeError,
                     "lerp(): argument 'weight' (position 2) must be Number or Tensor, not %s",
                     Py_TYPE(weight)->tp_name);
        return NULL;
    }
    double w = PyFloat_AsDouble(weight);
    if (w == -1.0 && PyErr_Occurred())
        return NULL;
    return jgp_wrap_new(jg_lerp_scalar(jgp_t(self), jgp_t(end), w));
}

PyMethodDef jgp_tensor_math2_methods[] = {
    {"floor", m_floor, METH_NOARGS, "floor() -> Tensor: largest integer <= each element"},
    {"ceil", m_ceil, METH_NOARGS, "ceil() -> Tensor: smallest integer >= each element"},
    {"trunc", m_trunc, METH_NOARGS, "trunc() -> Tensor: integer part, towards zero"},
    {"fix", m_trunc, METH_NOARGS, "fix() -> Tensor: alias of trunc"},
    {"round", CF(m_round), KW, "round(*, decimals=0) -> Tensor: half to even"},
    {"frac", m_frac, METH_NOARGS, "frac() -> Tensor: self - trunc(self)"},
    {"sign", m_sign, METH_NOARGS, "sign() -> Tensor: -1, 0 or 1"},
    {"sgn", m_sgn, METH_NOARGS, "sgn() -> Tensor: sign (of real numbers)"},
    {"log1p", m_log1p, METH_NOARGS, "log1p() -> Tensor: log(1 + x)"},
    {"expm1", m_expm1, METH_NOARGS, "expm1() -> Tensor: exp(x) - 1"},
    {"log2", m_log2, METH_NOARGS, "log2() -> Tensor"},
    {"log10", m_log10, METH_NOARGS, "log10() -> Tensor"},
    {"rsqrt", m_rsqrt, METH_NOARGS, "rsqrt() -> Tensor: 1 / sqrt(x)"},
    {"reciprocal", m_reciprocal, METH_NOARGS, "reciprocal() -> Tensor: 1 / x"},
    {"sinh", m_sinh, METH_NOARGS, "sinh() -> Tensor"},
    {"cosh", m_cosh, METH_NOARGS, "cosh() -> Tensor"},
    {"tan", m_tan, METH_NOARGS, "tan() -> Tensor"},
    {"asin", m_asin, METH_NOARGS, "asin() -> Tensor"},
    {"arcsin", m_asin, METH_NOARGS, "arcsin() -> Tensor: alias of asin"},
    {"acos", m_acos, METH_NOARGS, "acos() -> Tensor"},
    {"arccos", m_acos, METH_NOARGS, "arccos() -> Tensor: alias of acos"},
    {"atan", m_atan, METH_NOARGS, "atan() -> Tensor"},
    {"arctan", m_atan, METH_NOARGS, "arctan() -> Tensor: alias of atan"},
    {"erfc", m_erfc, METH_NOARGS, "erfc() -> Tensor: 1 - erf(x)"},
    {"atan2", m_atan2, METH_O, "atan2(other) -> Tensor: the angle of (other, self)"},
    {"arctan2", m_atan2, METH_O, "arctan2(other) -> Tensor: alias of atan2"},
    {"addcmul", CF(m_addcmul), KW, "addcmul(tensor1, tensor2, *, value=1) -> Tensor"},
    {"addcdiv", CF(m_addcdiv), KW, "addcdiv(tensor1, tensor2, *, value=1) -> Tensor"},
    {"lerp", CF(m_lerp), KW, "lerp(end, weight) -> Tensor: self + weight * (end - self)"},
    {NULL, NULL, 0, NULL},
};
