/* dtype facts and shape formatting used in messages. */
#include "core/tensor.h"

#include <stdio.h>

_Noreturn void jg_dtype_bad(jg_dtype d) {
    jg_fatal("bad dtype %d", (int)d);
}

bool jg_dtype_valid(int d) {
    return d == JG_F32 || d == JG_F64 || d == JG_I64 || d == JG_BOOL || d == JG_I32;
}

bool jg_dtype_is_float(jg_dtype d) {
    return d == JG_F32 || d == JG_F64;
}

bool jg_dtype_is_int(jg_dtype d) {
    return d == JG_I32 || d == JG_I64;
}

const char *jg_dtype_name(jg_dtype d) {
    switch (d) {
    case JG_F32:
        return "float32";
    case JG_F64:
        return "float64";
    case JG_I64:
        return "int64";
    case JG_BOOL:
        return "bool";
    case JG_I32:
        return "int32";
    }
    return "invalid";
}

/* Rank in PyTorch's promotion order bool < int32 < int64 < float32 <
 * float64: between two tensors of these dtypes the higher one wins (int64
 * with float32 gives float32, as in PyTorch). */
static int promote_rank(jg_dtype d) {
    switch (d) {
    case JG_BOOL:
        return 0;
    case JG_I32:
        return 1;
    case JG_I64:
        return 2;
    case JG_F32:
        return 3;
    case JG_F64:
        return 4;
    }
    jg_dtype_bad(d);
}

jg_dtype jg_dtype_promote(jg_dtype a, jg_dtype b) {
    return promote_rank(a) >= promote_rank(b) ? a : b;
}

void jg_format_shape(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t used = 0;
    used += (size_t)snprintf(buf + used, used < n ? n - used : 0, "[");
    for (int i = 0; i < ndim; i++)
        used += (size_t)snprintf(buf + used, used < n ? n - used : 0, "%s%lld", i ? ", " : "",
                                 (long long)shape[i]);
    snprintf(buf + used, used < n ? n - used : 0, "]");
}

const char *jg_dtype_short(jg_dtype d) {
    switch (d) {
    case JG_F32:
        return "f32";
    case JG_F64:
        return "f64";
    case JG_I64:
        return "i64";
    case JG_BOOL:
        return "b8";
    case JG_I32:
        return "i32";
    }
    return "?";
}

const char *jg_dtype_torch_name(jg_dtype d) {
    switch (d) {
    case JG_F32:
        return "Float";
    case JG_F64:
        return "Double";
    case JG_I64:
        return "Long";
    case JG_BOOL:
        return "Bool";
    case JG_I32:
        return "Int";
    }
    return "?";
}

int jg_describe(const jg_tensor *t, char *buf, size_t n) {
    if (!t)
        return snprintf(buf, n, "(null)");
    char shp[256];
    jg_format_shape(shp, sizeof shp, t->ndim, t->shape);
    return snprintf(buf, n, "%s%s", jg_dtype_short(t->dtype), shp);
}
