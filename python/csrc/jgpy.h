/* Shared declarations of the jitgrad CPython extension (jitgrad._C).
 *
 * Ownership rule of the whole binding: a JGTensor owns exactly one reference
 * to its jg_tensor.  Results of library calls go through jgp_wrap_new(),
 * which is right both with no scope open (the reference is already ours) and
 * inside a callback the library runs in a scope (jg_keep moves it out of the
 * scope); borrowed tensors go through jgp_wrap_borrowed() (jg_retain). */
#ifndef JGPY_H
#define JGPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <jitgrad.h>
#include <stdbool.h>

typedef struct {
    PyObject_HEAD jg_tensor *t; /* one reference, released in tp_dealloc */
    PyObject *weakrefs;
} JGTensor;

typedef struct {
    PyObject_HEAD jg_dtype d;
} JGDtype;

extern PyTypeObject *JGTensor_Type;
extern PyTypeObject JGDtype_Type;

static inline bool jgp_is_tensor(PyObject *o) {
    return PyObject_TypeCheck(o, JGTensor_Type);
}
static inline jg_tensor *jgp_t(PyObject *o) {
    return ((JGTensor *)o)->t;
}

/* ---- tensor.c ---- */
int jgp_tensor_init_type(PyObject *module);
PyObject *jgp_wrap(jg_tensor *t);                           /* steals t (a reference we own) */
PyObject *jgp_wrap_new(jg_tensor *t);                       /* a library result; NULL: raises */
PyObject *jgp_wrap_borrowed(jg_tensor *t);                  /* retains t */
PyObject *jgp_dtype_obj(jg_dtype d);                        /* borrowed */
int jgp_parse_dtype(PyObject *o, jg_dtype *d, bool *given); /* None: given = false */
/* Reads a shape from (*args) or one tuple/list argument. */
int jgp_parse_shape(PyObject *args, int *ndim, int64_t *shape);
int jgp_check_device(PyObject *device);
bool jgp_dtype_is_float(jg_dtype d);
size_t jgp_dtype_size(jg_dtype d);

/* ---- errors.c ---- */
/* Raises the error of the failed library call (an exception a Python
 * callback raised, re-raised as is, or jg_last_error() mapped to
 * RuntimeError / IndexError); returns NULL. */
PyObject *jgp_raise(void);
int jgp_raise_int(void);
/* For C callbacks: records the current Python exception (to re-raise it
 * after the library call returns) and sets the library error; returns -1. */
int jgp_callback_fail(void);
/* For C callbacks the library runs again after one failed (a compiled
 * program's eager run after its trace broke): forgets the earlier failure,
 * so an error of this run is reported as its own. */
void jgp_callback_retry(void);
/* Around every library call that may run Python callbacks. */
void jgp_enter(void);
void jgp_leave(bool ok);
/* Keeps a reference alive until the outermost jgp_leave (for tensors handed
 * to the library from a callback, which it borrows after we return). */
void jgp_defer_release(jg_tensor *t); /* takes t's reference */

/* ---- ops.c ---- */
extern PyNumberMethods jgp_tensor_as_number;
extern PyMethodDef jgp_tensor_op_methods[];
extern PyMethodDef jgp_module_op_functions[];
extern richcmpfunc jgp_tensor_richcompare;
PyObject *jgp_binary(PyObject *a, PyObject *b, int op);
enum { JGP_ADD, JGP_SUB, JGP_MUL, JGP_DIV };

/* ---- ops_opsmath.c ---- */
extern PyMethodDef jgp_tensor_opsmath_methods[];
extern PyMethodDef jgp_tensor_math2_methods[]; /* ops_math2.c */
extern PyMethodDef jgp_module_opsmath_functions[];
/* base ** exponent with a tensor exponent (NotImplemented otherwise) */
PyObject *jgp_pow_tensor(PyObject *base, PyObject *exp);

/* ---- ops_surface2.c ---- */
extern PyMethodDef jgp_tensor_surface2_methods[];
extern PyMethodDef jgp_module_surface2_functions[];
/* the jg_generator of a jitgrad.Generator (None: NULL, the global one);
 * -1 with a TypeError naming fn otherwise */
int jgp_generator_arg(PyObject *o, const char *fn, jg_generator **g);

/* ---- autograd.c ---- */
extern PyMethodDef jgp_autograd_methods[];
extern PyMethodDef jgp_module_autograd_functions[];

/* ---- function.c ---- */
int jgp_function_init(PyObject *module);
extern PyMethodDef jgp_module_function_functions[];
/* set while a compiled function traces: Function classes seen are added */
extern PyObject *jgp_trace_classes;
/* The compiled function's dict from the identity key of each object
 * argument a traced program serialized (guarded by identity) to the object:
 * it keeps them alive as long as the compiled function, so an identity guard
 * cannot match a newer object at a reused address, and an opaque custom call
 * can rebuild its arguments when it runs.  jgp_call_objects is set during a
 * compiled call (lookups), jgp_trace_objects only while its program is
 * traced (additions). */
extern PyObject *jgp_call_objects, *jgp_trace_objects;
/* The object of an identity key: the compiled call's, else that of any
 * live compiled function, else the copy a custom call's ctx keeps for a
 * rerun (jgp_held_object; borrowed; NULL, maybe with an error, if none). */
PyObject *jgp_find_object(PyObject *key);

/* ---- compile.c ---- */
int jgp_compile_init(PyObject *module);
/* A size of a traced tensor as Python sees it: jitgrad's SymInt (an int
 * that reports comparisons to jg_sizes_note, see _symint.py), else an int.
 * New reference. */
PyObject *jgp_size(const jg_tensor *t, int64_t v);
/* Size v of t reaches Python as a plain int (len()): reported as a use
 * the library cannot follow. */
void jgp_size_opaque(const jg_tensor *t, int64_t v);

/* ---- module.c ---- */
extern PyObject *jgp_numpy; /* the numpy module, imported lazily; may be NULL */
PyObject *jgp_import_numpy(void);

/* ---- optim ---- */
extern PyMethodDef jgp_module_optim_functions[]; /* optim.c */
/* ---- ops_io.c (part IO) ---- */
extern PyMethodDef jgp_io_methods[];
extern PyMethodDef jgp_module_io_functions[];
/* Fills the docstrings an entry lacks (docs_io.c). */
void jgp_docs_apply(PyMethodDef *defs);
/* ---- ops_index.c (gather, scatter, ... : jitgrad/_indexops.py) ---- */
extern PyMethodDef jgp_tensor_index_methods[];
/* ---- ops_opsshape.c (OPS-SHAPE) ---- */
extern PyMethodDef jgp_tensor_opsshape_methods[];
extern PyMethodDef jgp_module_opsshape_functions[];
/* ---- nn: ops_nn.c ---- */
extern PyMethodDef jgp_module_nn_functions[];
/* ---- linalg: ops_linalg.c (LAPACK-backed ops, src/ops/lapack.c) ---- */
extern PyMethodDef jgp_module_linalg_functions[];
/* ---- ops_conv.c: convolution and pooling ---- */
extern PyMethodDef jgp_module_conv_functions[];

/* ---- dist.c: gradient hooks, jitgrad.distributed ---- */
extern PyMethodDef jgp_module_dist_functions[];

/* ---- ops_bitwise.c: bitwise and shift ops ---- */
extern PyMethodDef jgp_tensor_bitwise_methods[];

#endif
