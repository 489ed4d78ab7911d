/* Storage access for serialization: the whole memory a tensor views, and new
 * tensors over it with any geometry (PyTorch's untyped_storage() and
 * set_/as_strided without history).  Checkpoint writers save each storage
 * once and record every tensor as (storage, offset, shape, strides), so that
 * views stay views after a round trip. */
#include "core/tensor.h"
#include <stdio.h>
#include <string.h>

int64_t jg_storage_nbytes(const jg_tensor *t) {
    if (jg_check_concrete(t, "jg_storage_nbytes") < 0)
        return -1;
    return (int64_t)t->storage->nbytes;
}

static void dims_str(char *buf, size_t n, int ndim, const int64_t *v) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)v[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

jg_tensor *jg_storage_view(jg_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                           int64_t offset) {
    if (jg_check_concrete(t, "jg_storage_view") < 0)
        return NULL;
    if (ndim < 0 || ndim > JG_MAX_DIMS || (ndim > 0 && (!shape || !strides)))
        return jg_errorf_null("jg_storage_view: bad number of dimensions %d", ndim);
    if (offset < 0)
        return jg_errorf_null("as_strided: Negative storage offset %lld", (long long)offset);
    int64_t last = 0; /* the highest element index the view touches, plus one */
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return jg_errorf_null("as_strided: negative size %lld in dimension %d",
                                  (long long)shape[i], i);
        if (strides[i] < 0)
            return jg_errorf_null("as_strided: Negative strides are not supported at the moment, "
                                  "got strides: %lld in dimension %d",
                                  (long long)strides[i], i);
        if (shape[i] == 0)
            empty = true;
        int64_t span;
        if (shape[i] > 1 && __builtin_mul_overflow(shape[i] - 1, strides[i], &span))
            return jg_errorf_null("as_strided: the view is larger than memory");
        if (shape[i] > 1 && __builtin_add_overflow(last, span, &last))
            return jg_errorf_null("as_strided: the view is larger than memory");
    }
    int64_t item = (int64_t)jg_dtype_size(t->dtype);
    int64_t need = 0; /* bytes, as PyTorch counts them: none for an empty view */
    if (!empty && (__builtin_add_overflow(last, offset + 1, &need) ||
                   __builtin_mul_overflow(need, item, &need)))
        return jg_errorf_null("as_strided: the view is larger than memory");
    if (need > (int64_t)t->storage->nbytes) {
        char sh[256], st[256];
        dims_str(sh, sizeof sh, ndim, shape);
        dims_str(st, sizeof st, ndim, strides);
        return jg_errorf_null("setStorage: sizes %s, strides %s, storage offset %lld, and itemsize "
                              "%lld requiring a storage size of %lld are out of bounds for storage "
                              "of size %zu",
                              sh, st, (long long)offset, (long long)item, (long long)need,
                              t->storage->nbytes);
    }
    return jg_scope_track(jg_tensor_view_of(t, ndim, shape, strides, offset));
}
