/* Ops around the bool dtype: comparisons and logical ops (compare.def),
 * masked_fill and where, their kernels, shape rules and VJPs, and the public
 * functions built from them (any, all, boolean-mask indexing). */
#include "autograd/node.h"
#include "core/iter.h"
#include "ops/decls.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* `x != x` is a tautology for the integer instantiations. */
#pragma GCC diagnostic ignored "-Wtautological-compare"
#pragma GCC diagnostic ignored "-Wbool-compare"

typedef float jg_f32;
typedef double jg_f64;
typedef int64_t jg_i64;
typedef bool jg_b8;
typedef int32_t jg_i32;

/* {fn_f32, ...} indexed by dtype */
#define BY_DTYPE(fn)                                                                               \
    {                                                                                              \
        [JG_F32] = fn##_f32, [JG_F64] = fn##_f64, [JG_I64] = fn##_i64, [JG_BOOL] = fn##_b8,        \
        [JG_I32] = fn##_i32                                                                        \
    }
#define FOR_DTYPES(M, ...)                                                                         \
    M(f32, __VA_ARGS__)                                                                            \
    M(f64, __VA_ARGS__) M(i64, __VA_ARGS__) M(b8, __VA_ARGS__) M(i32, __VA_ARGS__)

/* Walks the output's shape with every operand broadcast to it; p[0] is the
 * output, p[1..] the operands, each with its own dtype. */
static void mixed_run(jg_inner_fn row, double s, int n_in, jg_tensor *const *in, jg_tensor *out) {
    char *base[JG_ITER_MAX_OPS];
    int64_t st[JG_ITER_MAX_OPS][JG_MAX_DIMS];
    JG_ASSERT(n_in + 1 <= JG_ITER_MAX_OPS);
    base[0] = jg_tensor_ptr(out);
    jg_broadcast_strides(out, out->ndim, out->shape, st[0]);
    for (int k = 0; k < n_in; k++) {
        base[k + 1] = jg_tensor_ptr(in[k]);
        jg_broadcast_strides(in[k], out->ndim, out->shape, st[k + 1]);
    }
    jg_iter_run(out->ndim, out->shape, n_in + 1, base, st, row, &s);
}

/* ---- comparisons and logical ops: bool out, operands of one dtype A ---- */

#define CMP_ROW1(TY, name, expr)                                                                   \
    static void name##_row_##TY(void *ctx, int64_t n, char **p, const int64_t *st) {               \
        typedef jg_##TY A;                                                                         \
        const double s = *(const double *)ctx;                                                     \
        (void)s;                                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                          \
            A a = *(const A *)(p[1] + i * st[1]);                                                  \
            *(bool *)(p[0] + i * st[0]) = (bool)(expr);                                            \
        }                                                                                          \
    }
#define CMP_ROW2(TY, name, expr)                                                                   \
    static void name##_row_##TY(void *ctx, int64_t n, char **p, const int64_t *st) {               \
        typedef jg_##TY A;                                                                         \
        (void)ctx;                                                                                 \
        for (int64_t i = 0; i < n; i++) {                                                          \
            A a = *(const A *)(p[1] + i * st[1]);                                                  \
            A b = *(const A *)(p[2] + i * st[2]);                                                  \
            *(bool *)(p[0] + i * st[0]) = (bool)(expr);                                            \
        }                                                                                          \
    }
#define JG_CMP(ID, name, n_in, flags, expr)                                                        \
    FOR_DTYPES(CMP_ROW##n_in, name, expr)                                                          \
    int jg_k_##name(const jg_attrs *at, jg_tensor *const *in, jg_tensor **out) {                   \
        static const jg_inner_fn rows[JG_NDTYPES] = BY_DTYPE(name##_row);                          \
        JG_ASSERT(n_in == 1 || in[0]->dtype == in[n_in - 1]->dtype);                               \
        mixed_run(rows[in[0]->dtype], at ? at->s : 0.0, n_in, in, out[0]);                         \
        return 0;                                                                                  \
    }
#include "ops/compare.def"
#undef JG_CMP

int jg_infer_cmp1(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    (void)a;
    out[0] = in[0];
    out[0].dtype = JG_BOOL;
    return 0;
}

int jg_infer_cmp2(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (jg_infer_broadcast(a, in, out) < 0)
        return -1;
    out[0].dtype = JG_BOOL;
    return 0;
}

int jg_vjp_nondiff(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = NULL; /* never called: the rows using it are JG_OPF_NONDIFF */
    return 0;
}

/* ---- masked_fill(x, mask) and where(cond, x, y) ---- */

/* masked_fill's dense rows (out, x and mask contiguous, out sharing no
 * byte with the mask, and x either exactly out or sharing none with it) of
 * 4- and 8-byte elements run as loops over restrict parameters that pick
 * the bits of s or x by a mask made from the mask byte, which vectorize
 * (gcc does not vectorize b ? s : x itself: its if-conversion makes x a
 * masked load), with AVX2 clones as the elementwise kernels.  Other rows
 * take the strided loop.  Both copy the bits of (T)s or x, so the results
 * are the same. */
#define MF_VECTORIZE                                                                               \
    __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic"),                          \
                   target_clones("avx2", "default")))
#define MF_SELECT(U)                                                                               \
    static MF_VECTORIZE void mf_select_##U(int64_t n, char *restrict o, const char *restrict a,    \
                                           const unsigned char *restrict m, U v) {                 \
        for (int64_t i = 0; i < n; i++) {                                                          \
            U x;                                                                                   \
            memcpy(&x, a + i * (int64_t)sizeof(U), sizeof(U));                                     \
            const U k = (U)0 - (U)m[i];                                                            \
            x = (v & k) | (x & ~k);                                                                \
            memcpy(o + i * (int64_t)sizeof(U), &x, sizeof(U));                                     \
        }                                                                                          \
    }                                                                                              \
    static MF_VECTORIZE void mf_select_in_##U(int64_t n, char *restrict o,                         \
                                              const unsigned char *restrict m, U v) {              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            U x;                                                                                   \
            memcpy(&x, o + i * (int64_t)sizeof(U), sizeof(U));                                     \
            const U k = (U)0 - (U)m[i];                                                            \
            x = (v & k) | (x & ~k);                                                                \
            memcpy(o + i * (int64_t)sizeof(U), &x, sizeof(U));                                     \
        }                                                                                          \
    }
MF_SELECT(uint32_t)
MF_SELECT(uint64_t)

static inline bool mf_apart(const char *p, int64_t np, const char *q, int64_t nq) {
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return a + (uintptr_t)np <= b || b + (uintptr_t)nq <= a;
}

/* The dense row of masked_fill with fill value v (its bits), if it is one. */
static bool mf_dense(int64_t n, char **p, const int64_t *st, const void *v, size_t es) {
    const int64_t nb = n * (int64_t)es;
    if ((es != 4 && es != 8) || st[0] != (int64_t)es || st[1] != (int64_t)es || st[2] != 1 ||
        !mf_apart(p[0], nb, p[2], n) || (p[0] != p[1] && !mf_apart(p[0], nb, p[1], nb)))
        return false;
    const unsigned char *m = (const unsigned char *)p[2];
    if (es == 4) {
        uint32_t u;
        memcpy(&u, v, 4);
        if (p[0] == p[1])
            mf_select_in_uint32_t(n, p[0], m, u);
        else
            mf_select_uint32_t(n, p[0], p[1], m, u);
    } else {
        uint64_t u;
        memcpy(&u, v, 8);
        if (p[0] == p[1])
            mf_select_in_uint64_t(n, p[0], m, u);
        else
            mf_select_uint64_t(n, p[0], p[1], m, u);
    }
    return true;
}

#define MF_ROW(TY, unused)                                                                         \
    static void masked_fill_row_##TY(void *ctx, int64_t n, char **p, const int64_t *st) {          \
        typedef jg_##TY T;                                                                         \
        const double s = *(const double *)ctx;                                                     \
        const T v = (T)s;                                                                          \
        if (mf_dense(n, p, st, &v, sizeof(T)))                                                     \
            return;                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T a = *(const T *)(p[1] + i * st[1]);                                                  \
            bool b = *(const bool *)(p[2] + i * st[2]);                                            \
            *(T *)(p[0] + i * st[0]) = b ? v : a; /* the row's cexpr */                            \
        }                                                                                          \
    }
FOR_DTYPES(MF_ROW, 0)

#define WHERE_ROW(TY, unused)                                                                      \
    static void where_row_##TY(void *ctx, int64_t n, char **p, const int64_t *st) {                \
        typedef jg_##TY T;                                                                         \
        (void)ctx;                                                                                 \
        for (int64_t i = 0; i < n; i++) {                                                          \
            bool c = *(const bool *)(p[1] + i * st[1]);                                            \
            *(T *)(p[0] + i * st[0]) =                                                             \
                c ? *(const T *)(p[2] + i * st[2]) : *(const T *)(p[3] + i * st[3]);               \
        }                                                                                          \
    }
FOR_DTYPES(WHERE_ROW, 0)

int jg_infer_masked_fill(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (in[1].dtype != JG_BOOL)
        return jg_errorf("masked_fill_ only supports boolean masks, but got mask with dtype %s",
                         jg_dtype_name(in[1].dtype));
    if (jg_infer_broadcast(a, in, out) < 0)
        return -1;
    out[0].dtype = in[0].dtype;
    return 0;
}

int jg_k_masked_fill(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    static const jg_inner_fn rows[JG_NDTYPES] = BY_DTYPE(masked_fill_row);
    mixed_run(rows[out[0]->dtype], a ? a->s : 0.0, 2, in, out[0]);
    return 0;
}

/* PyTorch's grad.masked_fill(mask, 0), summed back to x's shape. */
int jg_vjp_masked_fill(VJP_ARGS) {
    (void)out;
    gin[1] = NULL; /* a bool mask has no gradient */
    if (!needs[0])
        return 0;
    jg_attrs z = {0};
    jg_tensor *g = jg_op1(JG_OP_MASKED_FILL, &z, gout[0], in[1]);
    gin[0] = g ? jg_sum_to(g, meta[0].ndim, meta[0].shape) : NULL;
    (void)a;
    return gin[0] ? 0 : -1;
}

int jg_infer_where(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (in[0].dtype != JG_BOOL)
        return jg_errorf("where expected condition to be a boolean tensor, but got a tensor "
                         "with dtype %s",
                         jg_dtype_torch_name(in[0].dtype));
    if (in[1].dtype != in[2].dtype)
        return jg_errorf("expected scalar type %s but found %s", jg_dtype_torch_name(in[1].dtype),
                         jg_dtype_torch_name(in[2].dtype));
    jg_meta t;
    if (jg_infer_broadcast(a, &in[1], &t) < 0)
        return -1;
    jg_meta pair[2] = {in[0], t};
    if (jg_infer_broadcast(a, pair, out) < 0)
        return -1;
    out[0].dtype = in[1].dtype;
    return 0;
}

int jg_k_where(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    static const jg_inner_fn rows[JG_NDTYPES] = BY_DTYPE(where_row);
    (void)a;
    mixed_run(rows[out[0]->dtype], 0.0, 3, in, out[0]);
    return 0;
}

/* PyTorch's where(cond, grad, 0) and where(cond, 0, grad), as masked_fill
 * of the gradient (the same values), summed back to each input's shape. */
int jg_vjp_where(VJP_ARGS) {
    (void)a, (void)out;
    gin[0] = NULL;
    jg_attrs z = {0};
    if (needs[1]) {
        jg_tensor *nc = jg_op1(JG_OP_LOGICAL_NOT, NULL, in[0], NULL);
        jg_tensor *g = nc ? jg_op1(JG_OP_MASKED_FILL, &z, gout[0], nc) : NULL;
        if (!g || !(gin[1] = jg_sum_to(g, meta[1].ndim, meta[1].shape)))
            return -1;
    }
    if (needs[2]) {
        jg_tensor *g = jg_op1(JG_OP_MASKED_FILL, &z, gout[0], in[0]);
        if (!g || !(gin[2] = jg_sum_to(g, meta[2].ndim, meta[2].shape)))
            return -1;
    }
    return 0;
}

/* ---- public functions ---- */

#define CMP_API(fn, OP)                                                                            \
    jg_tensor *jg_##fn(jg_tensor *a, jg_tensor *b) {                                               \
        return jg_ew_call(JG_OP_##OP, a, b);                                                       \
    }                                                                                              \
    jg_tensor *jg_##fn##_scalar(jg_tensor *a, double s) {                                          \
        return cmp_scalar(JG_OP_##OP##_SCALAR, a, s);                                              \
    }

/* The dtype PyTorch compares a tensor of dtype d with a Python number s
 * in: d for floats; for integer and bool tensors float32 when s is not a
 * whole number, int64 when s does not fit d (a bool tensor against 2). */
static jg_dtype scalar_dtype(jg_dtype d, double s) {
    if (jg_dtype_is_float(d))
        return d;
    if (!(s == trunc(s)) || fabs(s) >= 0x1p63) /* NaN, inf, fractions */
        return JG_F32;
    if (d == JG_BOOL && s != 0 && s != 1)
        return JG_I64;
    if (d == JG_I32 && (s < INT32_MIN || s > INT32_MAX))
        return JG_I64;
    return d;
}

static jg_tensor *cmp_scalar(jg_opcode op, jg_tensor *a, double s) {
    if (!a)
        return jg_errorf_null("%s(): argument 0 is NULL", jg_ops[op].name);
    jg_dtype d = scalar_dtype(a->dtype, s);
    if (d == a->dtype)
        return jg_ew_call_scalar(op, a, s);
    jg_scope_push();
    jg_tensor *c = jg_to_dtype(a, d);
    jg_tensor *r = c ? jg_ew_call_scalar(op, c, s) : NULL;
    jg_keep(r);
    jg_scope_pop();
    return jg_scope_track(r);
}

CMP_API(eq, EQ)
CMP_API(ne, NE)
CMP_API(lt, LT)
CMP_API(le, LE)
CMP_API(gt, GT)
CMP_API(ge, GE)

jg_tensor *jg_logical_and(jg_tensor *a, jg_tensor *b) {
    return jg_ew_call(JG_OP_LOGICAL_AND, a, b);
}
jg_tensor *jg_logical_or(jg_tensor *a, jg_tensor *b) {
    return jg_ew_call(JG_OP_LOGICAL_OR, a, b);
}
jg_tensor *jg_logical_xor(jg_tensor *a, jg_tensor *b) {
    return jg_ew_call(JG_OP_LOGICAL_XOR, a, b);
}
jg_tensor *jg_logical_not(jg_tensor *a) {
    return jg_ew_call(JG_OP_LOGICAL_NOT, a, NULL);
}

jg_tensor *jg_masked_fill(jg_tensor *a, jg_tensor *mask, double value) {
    if (!a || !mask)
        return jg_errorf_null("masked_fill(): NULL argument");
    jg_attrs at = {.s = value};
    return jg_op1(JG_OP_MASKED_FILL, &at, a, mask);
}

jg_tensor *jg_where(jg_tensor *cond, jg_tensor *a, jg_tensor *b) {
    if (!cond || !a || !b)
        return jg_errorf_null("where(): NULL argument");
    if (cond->dtype != JG_BOOL)
        return jg_errorf_null("where expected condition to be a boolean tensor, but got a tensor "
                              "with dtype %s",
                              jg_dtype_torch_name(cond->dtype));
    jg_dtype d = jg_dtype_promote(a->dtype, b->dtype);
    jg_scope_push();
    jg_tensor *x = a->dtype == d ? a : jg_to_dtype(a, d);
    jg_tensor *y = b->dtype == d ? b : jg_to_dtype(b, d);
    jg_tensor *r = NULL;
    if (x && y) {
        jg_tensor *in[3] = {cond, x, y}, *out[1];
        if (jg_op_call(JG_OP_WHERE, NULL, in, out) == 0)
            r = out[0];
    }
    jg_keep(r);
    jg_scope_pop();
    return jg_scope_track(r);
}

/* any: some element is nonzero (sum of the nonzero flags > 0); all: none is
 * zero.  Built from ops, so they trace and compile like any other.  Over no
 * elements any is false and all is true, as in PyTorch. */
static jg_tensor *any_all(jg_tensor *a, bool all, int n_dims, const int *dims, bool keepdim) {
    if (!a)
        return jg_errorf_null("%s(): tensor is NULL", all ? "all" : "any");
    jg_scope_push();
    jg_tensor *f = all ? jg_logical_not(a) : a->dtype == JG_BOOL ? a : jg_ne_scalar(a, 0);
    jg_tensor *s = !f ? NULL : n_dims < 0 ? jg_sum(f) : jg_sum_dims(f, n_dims, dims, keepdim);
    jg_tensor *r = !s ? NULL : all ? jg_eq_scalar(s, 0) : jg_ne_scalar(s, 0);
    jg_keep(r);
    jg_scope_pop();
    return jg_scope_track(r);
}

jg_tensor *jg_any(jg_tensor *a) {
    return any_all(a, false, -1, NULL, false);
}
jg_tensor *jg_all(jg_tensor *a) {
    return any_all(a, true, -1, NULL, false);
}
jg_tensor *jg_any_dim(jg_tensor *a, int dim, bool keepdim) {
    return any_all(a, false, 1, &dim, keepdim);
}
jg_tensor *jg_all_dim(jg_tensor *a, int dim, bool keepdim) {
    return any_all(a, true, 1, &dim, keepdim);
}

/* a[mask]: the rows of a (over mask's dims) where mask is set, as
 * PyTorch's indexing by a bool tensor.  The positions are read from the
 * mask's values (so a traced mask cannot be used: the result's shape
 * depends on them); the selection is a gather along the flattened mask
 * dims, whose VJP (scatter_add) gives the gradient. */
jg_tensor *jg_mask_select_rows(jg_tensor *a, jg_tensor *mask) {
    if (!a || !mask)
        return jg_errorf_null("index: NULL argument");
    if (mask->dtype != JG_BOOL)
        return jg_errorf_null("index: the mask must be a bool tensor, got %s",
                              jg_dtype_name(mask->dtype));
    if (mask->ndim > a->ndim)
        return jg_errorf_null("too many indices for tensor of dimension %d", a->ndim);
    for (int d = 0; d < mask->ndim; d++)
        if (mask->shape[d] != a->shape[d]) {
            char s1[160], s2[160];
            jg_format_shape(s1, sizeof s1, mask->ndim, mask->shape);
            jg_format_shape(s2, sizeof s2, a->ndim, a->shape);
            return jg_errorf_null("The shape of the mask %s at index %d does not match the shape "
                                  "of the indexed tensor %s at index %d",
                                  s1, d, s2, d);
        }
    if (jg_check_concrete(mask, "jg_mask_select_rows") < 0)
        return NULL;
    int64_t m = mask->numel, rest = 1;
    for (int d = mask->ndim; d < a->ndim; d++)
        rest *= a->shape[d];
    bool *flags = malloc((size_t)(m ? m : 1));
    if (!flags)
        return jg_errorf_null("out of memory");
    jg_copy_to(mask, flags, (size_t)m);
    int64_t k = 0;
    for (int64_t i = 0; i < m; i++)
        k += flags[i];
    jg_scope_push();
    int64_t ishape[2] = {k, rest};
    jg_tensor *idx = jg_tensor_new(JG_I64, 2, ishape, NULL), *r = NULL;
    if (idx) {
        int64_t *ip = jg_data(idx), row = 0;
        for (int64_t i = 0; i < m; i++)
            if (flags[i]) {
                for (int64_t j = 0; j < rest; j++)
                    ip[row * rest + j] = i;
                row++;
            }
        int64_t flat[2] = {m, rest};
        jg_tensor *a2 = jg_reshape(a, 2, flat);
        jg_attrs ga = {.n = 1};
        jg_tensor *g = a2 ? jg_op1(JG_OP_GATHER, &ga, a2, idx) : NULL;
        int64_t oshape[JG_MAX_DIMS];
        int on = 0;
        oshape[on++] = k;
        for (int d = mask->ndim; d < a->ndim; d++)
            oshape[on++] = a->shape[d];
        r = g ? jg_reshape(g, on, oshape) : NULL;
    }
    jg_autograd_name_node(r, "IndexBackward0"); /* PyTorch's x[mask] */
    jg_keep(r);
    jg_scope_pop();
    free(flags);
    return jg_scope_track(r);
}
