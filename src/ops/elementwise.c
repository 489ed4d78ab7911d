/* Eager kernels of the elementwise ops, instantiated per dtype from the
 * expressions in elementwise.def (the same text the code generator emits). */
#include "core/iter.h"
#include "ops/decls.h"

#include <tgmath.h>

/* relu's NaN test (a != a) is a tautology for the int64 instantiation. */
#pragma GCC diagnostic ignored "-Wtautological-compare"

typedef float jg_f32;
typedef double jg_f64;
typedef int64_t jg_i64;

/* One row of a unary op: p[0] = out, p[1] = a. */
#define EW_INNER1(name, TY, expr)                                                                  \
    static void name##_row_##TY(void *ctx, int64_t n, char **p, const int64_t *st) {               \
        typedef jg_##TY T;                                                                         \
        const double s = *(const double *)ctx;                                                     \
        (void)s;                                                                                   \
        if (st[0] == sizeof(T) && st[1] == sizeof(T)) {                                            \
            T *restrict o = (T *)p[0];                                                             \
            const T *restrict x = (const T *)p[1];                                                 \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T a = x[i];                                                                        \
                o[i] = (T)(expr);                                                                  \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T a = *(const T *)(p[1] + i * st[1]);                                                  \
            *(T *)(p[0] + i * st[0]) = (T)(expr);                                                  \
        }                                                                                          \
    }

/* One row of a binary op: p[0] = out, p[1] = a, p[2] = b. */
#define EW_INNER2(name, TY, expr)                                                                  \
    static void name##_row_##TY(void *ctx, int64_t n, char **p, const int64_t *st) {               \
        typedef jg_##TY T;                                                                         \
        const double s = *(const double *)ctx;                                                     \
        (void)s;                                                                                   \
        if (st[0] == sizeof(T) && st[1] == sizeof(T) && st[2] == sizeof(T)) {                      \
            T *restrict o = (T *)p[0];                                                             \
            const T *x = (const T *)p[1], *y = (const T *)p[2];                                    \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T a = x[i], b = y[i];                                                              \
                o[i] = (T)(expr);                                                                  \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        if (st[0] == sizeof(T) && st[1] == sizeof(T) && st[2] == 0) {                              \
            T *restrict o = (T *)p[0];                                                             \
            const T *x = (const T *)p[1], b = *(const T *)p[2];                                    \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T a = x[i];                                                                        \
                o[i] = (T)(expr);                                                                  \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T a = *(const T *)(p[1] + i * st[1]);                                                  \
            T b = *(const T *)(p[2] + i * st[2]);                                                  \
            *(T *)(p[0] + i * st[0]) = (T)(expr);                                                  \
        }                                                                                          \
    }

/* The kernel: broadcast every operand to the output and walk it. */
#define EW_KERNEL(name, n_in, expr)                                                                \
    EW_INNER##n_in(name, f32, expr) EW_INNER##n_in(name, f64, expr)                                \
        EW_INNER##n_in(name, i64, expr) int jg_k_##name(const jg_attrs *at, jg_tensor *const *in,  \
                                                        jg_tensor **out) {                         \
        static const jg_inner_fn rows[3] = {name##_row_f32, name##_row_f64, name##_row_i64};       \
        return jg_ew_run(rows[out[0]->dtype], at, n_in, in, out[0]);                               \
    }

static int jg_ew_run(jg_inner_fn row, const jg_attrs *at, int n_in, jg_tensor *const *in,
                     jg_tensor *out) {
    int64_t st[3][JG_MAX_DIMS];
    char *base[3];
    jg_broadcast_strides(out, out->ndim, out->shape, st[0]);
    base[0] = jg_tensor_ptr(out);
    for (int k = 0; k < n_in; k++) {
        JG_ASSERT(in[k]->dtype == out->dtype);
        jg_broadcast_strides(in[k], out->ndim, out->shape, st[k + 1]);
        base[k + 1] = jg_tensor_ptr(in[k]);
    }
    double s = at ? at->s : 0.0;
    jg_iter_run(out->ndim, out->shape, n_in + 1, base, st, row, &s);
    return 0;
}

#define JG_EW(ID, name, bw_name, n_in, flags, vjp, expr) EW_KERNEL(name, n_in, expr)
#include "ops/elementwise.def"
#undef JG_EW

int jg_k_to_dtype(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    (void)a;
    jg_copy_data(out[0], in[0]);
    return 0;
}
