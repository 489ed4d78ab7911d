/* Shape rules shared by many rows of the op table. */
#include "ops/optable.h"

#include <stdio.h>
#include <string.h>

int jg_wrap_dim(int dim, int ndim) {
    int lo = ndim ? -ndim : -1, hi = ndim ? ndim - 1 : 0;
    if (dim < lo || dim > hi)
        return jg_errorf("Dimension out of range (expected to be in range of [%d, %d], but got %d)",
                         lo, hi, dim);
    return dim < 0 ? dim + (ndim ? ndim : 1) : dim;
}

int jg_broadcast_shapes(const jg_meta *a, const jg_meta *b, jg_meta *out) {
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    out->ndim = nd;
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            return jg_errorf("The size of tensor a (%lld) must match the size of tensor b (%lld) "
                             "at non-singleton dimension %d",
                             (long long)da, (long long)db, i);
        }
        out->shape[i] = da == 1 ? db : da;
    }
    for (int i = nd; i < JG_MAX_DIMS; i++)
        out->shape[i] = 0;
    return 0;
}

int jg_infer_same(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    (void)a;
    out[0] = in[0];
    return 0;
}

int jg_infer_broadcast(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    (void)a;
    if (jg_broadcast_shapes(&in[0], &in[1], &out[0]) < 0)
        return -1;
    out[0].dtype = in[0].dtype;
    return 0;
}

int jg_infer_to_dtype(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (!jg_dtype_valid(a->dtype))
        return jg_errorf("to_dtype: invalid dtype %d", a->dtype);
    out[0] = in[0];
    out[0].dtype = (jg_dtype)a->dtype;
    return 0;
}

int jg_infer_ew1(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    return jg_infer_same(a, in, out);
}

int jg_infer_ew2(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    return jg_infer_broadcast(a, in, out);
}
