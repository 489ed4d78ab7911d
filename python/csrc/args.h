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

#endif
