/* dtype facts and shape formatting used in messages. */
#include "core/tensor.h"

#include <stdio.h>

_Noreturn void jg_dtype_bad(jg_dtype d) {
    jg_fatal("bad dtype %d", (int)d);
}

bool jg_dtype_valid(int d) {
    return d == JG_F32 || d == JG_F64 || d == JG_I64;
}

bool jg_dtype_is_float(jg_dtype d) {
    return d == JG_F32 || d == JG_F64;
}

const char *jg_dtype_name(jg_dtype d) {
    switch (d) {
    case JG_F32:
        return "float32";
    case JG_F64:
        return "float64";
    case JG_I64:
        return "int64";
    }
    return "invalid";
}

/* PyTorch's promotion for the three dtypes: any float wins over int64, and
 * f64 wins over f32. */
jg_dtype jg_dtype_promote(jg_dtype a, jg_dtype b) {
    if (a == b)
        return a;
    if (a == JG_F64 || b == JG_F64)
        return JG_F64;
    return JG_F32;
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
    return d == JG_F32 ? "f32" : d == JG_F64 ? "f64" : "i64";
}

const char *jg_dtype_torch_name(jg_dtype d) {
    return d == JG_F32 ? "Float" : d == JG_F64 ? "Double" : "Long";
}

int jg_describe(const jg_tensor *t, char *buf, size_t n) {
    if (!t)
        return snprintf(buf, n, "(null)");
    char shp[256];
    jg_format_shape(shp, sizeof shp, t->ndim, t->shape);
    return snprintf(buf, n, "%s%s", jg_dtype_short(t->dtype), shp);
}
