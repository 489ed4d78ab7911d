/* jitgrad.nn's bindings: making instances of Tensor subclasses
 * (nn.Parameter). */
#include "jgpy.h"

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

PyMethodDef jgp_module_nn_functions[] = {
    {"_make_subclass", make_subclass, METH_VARARGS,
     "_make_subclass(cls, data, requires_grad=False): a cls instance sharing data's storage"},
    {NULL, NULL, 0, NULL},
};
