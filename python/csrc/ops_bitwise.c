/* Bindings of the bitwise ops (Tensor._bitwise_and(other) etc., both
 * operands tensors) and of lgamma / digamma / trigamma.
 * jitgrad/_more_ops2.py gives them PyTorch's signatures (numbers as
 * operands, dtype promotion, the operators). */
#include "jgpy.h"

#define BINARY(name)                                                                               \
    static PyObject *m_##name(PyObject *self, PyObject *other) {                                   \
        if (!jgp_is_tensor(other)) {                                                               \
            PyErr_Format(PyExc_TypeError, #name "(): argument 'other' must be Tensor, not %s",     \
                         Py_TYPE(other)->tp_name);                                                 \
            return NULL;                                                                           \
        }                                                                                          \
        return jgp_wrap_new(jg_##name(jgp_t(self), jgp_t(other)));                                 \
    }
BINARY(bitwise_and)
BINARY(bitwise_or)
BINARY(bitwise_xor)
BINARY(bitwise_left_shift)
BINARY(bitwise_right_shift)

static PyObject *m_bitwise_not(PyObject *self, PyObject *unused) {
    (void)unused;
    return jgp_wrap_new(jg_bitwise_not(jgp_t(self)));
}

/* lgamma, digamma, trigamma: Tensor._lgamma() etc. (jitgrad/_more_ops2.py
 * gives the public spellings) */
#define UNARY(name)                                                                                \
    static PyObject *m_##name(PyObject *self, PyObject *unused) {                                  \
        (void)unused;                                                                              \
        return jgp_wrap_new(jg_##name(jgp_t(self)));                                               \
    }
UNARY(lgamma)
UNARY(digamma)
UNARY(trigamma)

PyMethodDef jgp_tensor_bitwise_methods[] = {
    {"_bitwise_and", m_bitwise_and, METH_O, "_bitwise_and(other) -> Tensor (tensors only)"},
    {"_bitwise_or", m_bitwise_or, METH_O, "_bitwise_or(other) -> Tensor (tensors only)"},
    {"_bitwise_xor", m_bitwise_xor, METH_O, "_bitwise_xor(other) -> Tensor (tensors only)"},
    {"_bitwise_left_shift", m_bitwise_left_shift, METH_O,
     "_bitwise_left_shift(other) -> Tensor (tensors only)"},
    {"_bitwise_right_shift", m_bitwise_right_shift, METH_O,
     "_bitwise_right_shift(other) -> Tensor (tensors only)"},
    {"_bitwise_not", m_bitwise_not, METH_NOARGS, "_bitwise_not() -> Tensor"},
    {"_lgamma", m_lgamma, METH_NOARGS, "_lgamma() -> Tensor"},
    {"_digamma", m_digamma, METH_NOARGS, "_digamma() -> Tensor"},
    {"_trigamma", m_trigamma, METH_NOARGS, "_trigamma() -> Tensor: polygamma(1, x)"},
    {NULL, NULL, 0, NULL},
};
