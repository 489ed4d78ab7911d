/* Serialising non-tensor arguments to deterministic bytes and back. */
#ifndef JGPY_ARGS_H
#define JGPY_ARGS_H

#include "jgpy.h"

typedef struct {
    char *data;
    size_t len, cap;
} jgp_buf;

void jgp_buf_free(jgp_buf *b);
/* Appends n bytes.  -1 with a Python exception. */
int jgp_buf_put(jgp_buf *b, const void *p, size_t n);
/* Appends o's bytes; tensors found are appended to `tensors` (a list), or
 * are an error when it is NULL.  -1 with a Python exception. */
int jgp_serialize(PyObject *o, jgp_buf *b, PyObject *tensors);
/* Reads one value; 'T' markers take tensors[*next_tensor++] (wrapped). */
PyObject *jgp_deserialize(const char **p, const char *end, jg_tensor *const *tensors, int n_tensors,
                          int *next_tensor);

/* The identity key an object argument is serialised under ("Box@0x...#7"):
 * a new reference, or NULL with an exception. */
PyObject *jgp_object_key(PyObject *o);

/* Objects held for the custom calls a create_graph backward may run again
 * after their Python call returned (function.c): `held` maps identity keys
 * to what the rerun gets for them.  Each holder (its `held` dict, alive
 * meanwhile) adds it once and removes it once; a key is found while any
 * holder has it (the newest holder's value).  jgp_objects_hold: -1 with an
 * exception (nothing held then). */
int jgp_objects_hold(PyObject *held);
void jgp_objects_drop(PyObject *held);    /* never raises; keeps a pending exception */
PyObject *jgp_held_object(PyObject *key); /* borrowed; NULL, maybe with an error */

#endif
