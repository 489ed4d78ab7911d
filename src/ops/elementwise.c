/* Eager kernels of the elementwise ops, instantiated per dtype from the
 * expressions in elementwise.def (the same text the code generator emits). */
#include "core/copy.h"
#include "core/iter.h"
#include "core/parallel.h"
#include "ops/decls.h"
#include "ops/ew_math.h"

#include <tgmath.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* relu's NaN test (a != a) is a tautology for the integer instantiations;
 * the bool ones convert arithmetic to bool on purpose (add is or, mul is
 * and, as in PyTorch). */
#pragma GCC diagnostic ignored "-Wtautological-compare"
#pragma GCC diagnostic ignored "-Wint-in-bool-context"
#pragma GCC diagnostic ignored "-Wbool-operation"
#pragma GCC diagnostic ignored "-Wbool-compare"

typedef float jg_f32;
typedef double jg_f64;
typedef int64_t jg_i64;
typedef bool jg_b8;
typedef int32_t jg_i32;

/* The row functions are the hot loops of eager mode.  gcc's -O2 cost model
 * ("very cheap") never vectorizes a loop with an unknown trip count, so they
 * are compiled with the dynamic cost model.  Vectorizing an elementwise loop
 * does not change any result: every element is still computed by the same
 * IEEE operations in the same order (no -ffast-math, no reassociation, no
 * contraction), and libm calls such as expf stay scalar.  The clones: AVX2
 * (8 f32 lanes) and AVX-512 F (16 lanes: gcc's generic tuning, which the
 * clone keeps, picks 512-bit vectors), chosen by CPUID at load time; the
 * math (jg_ew_tanh, exp, erf: GELU) is compute-bound, so twice the lanes
 * gain, and neither enables fma, so all give the same bits
 * (tests/shared/test_isa_clones.c). */
#define EW_VECTORIZE                                                                               \
    __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic"),                          \
                   target_clones("avx512f", "avx2", "default")))

/* True if the n-element rows at o and x (element size es) share no byte.
 * Only then may the loops below mark them restrict.  Exact aliasing (in
 * place, out == a) and partial overlap take the plain loops, which process
 * elements one by one in order as before. */
static inline bool ew_disjoint(const char *o, const char *x, int64_t n, size_t es) {
    uintptr_t a = (uintptr_t)o, b = (uintptr_t)x, len = (uintptr_t)n * es;
    return a + len <= b || b + len <= a;
}

/* The contiguous loops, as functions whose restrict pointers are
 * parameters: gcc trusts restrict there and vectorizes without the runtime
 * overlap checks it adds for restrict locals, which made a 16-element row
 * cost twice its arithmetic.  Callers pass only rows that share no byte.
 * EW_LOOP(fn, TY, expr, A, B, params...) defines
 * fn(n, params..., s): for each i, a = A and b = B, o[i] = expr. */
#define EW_LOOP(fn, TY, expr, A, B, ...)                                                           \
    static EW_VECTORIZE void fn(int64_t n, __VA_ARGS__, double s) {                                \
        typedef jg_##TY T;                                                                         \
        (void)s;                                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T a = (A), b = (B);                                                                    \
            (void)a, (void)b;                                                                      \
            o[i] = (T)(expr);                                                                      \
        }                                                                                          \
    }
#define EW_OUT(TY) jg_##TY *restrict o
#define EW_ROW(TY, p) const jg_##TY *restrict p

/* f32 exp, sigmoid and silu: blocks of EW_NBLK elements whose every |a| is
 * at most JG_EW_EXPF_NORMAL_MAX run `fast`, the op's expression with
 * jg_ew_expf_normal for jg_ew_expf, which gives jg_ew_expf's bits there
 * without its clamp, NaN test and two-step scale (a third of its
 * instructions); a block holding a larger |a|, an inf or a NaN runs the
 * op's plain loop (its expression from elementwise.def).  Out of place, a
 * block is computed first and redone if its largest |a| (the f32 bits,
 * unsigned max) is out of range; in place, the range is tested first.
 * Either way every element gets the expression's bits. */
enum { EW_NBLK = 512 };
typedef void (*ew_plain_c)(int64_t n, float *restrict o, const float *restrict x, double s);
typedef void (*ew_plain_i)(int64_t n, float *restrict o, double s);
#define EW_NORMAL_LOOPS(name, fast)                                                                \
    static EW_VECTORIZE void name##_nc(int64_t n, float *restrict o, const float *restrict x,      \
                                       ew_plain_c plain) {                                         \
        for (int64_t i0 = 0; i0 < n; i0 += EW_NBLK) {                                              \
            const int64_t i1 = n - i0 < EW_NBLK ? n : i0 + EW_NBLK;                                \
            uint32_t big = 0;                                                                      \
            for (int64_t i = i0; i < i1; i++) {                                                    \
                const float a = x[i];                                                              \
                const uint32_t au = (uint32_t)jg_ew_f32bits(a) & 0x7fffffffu;                      \
                big = au > big ? au : big;                                                         \
                o[i] = (fast);                                                                     \
            }                                                                                      \
            if (big > JG_EW_EXPF_NORMAL_MAX)                                                       \
                plain(i1 - i0, o + i0, x + i0, 0.0);                                               \
        }                                                                                          \
    }                                                                                              \
    static EW_VECTORIZE void name##_ni(int64_t n, float *restrict o, ew_plain_i plain) {           \
        for (int64_t i0 = 0; i0 < n; i0 += EW_NBLK) {                                              \
            const int64_t i1 = n - i0 < EW_NBLK ? n : i0 + EW_NBLK;                                \
            uint32_t big = 0;                                                                      \
            for (int64_t i = i0; i < i1; i++) {                                                    \
                const uint32_t au = (uint32_t)jg_ew_f32bits(o[i]) & 0x7fffffffu;                   \
                big = au > big ? au : big;                                                         \
            }                                                                                      \
            if (big > JG_EW_EXPF_NORMAL_MAX) {                                                     \
                plain(i1 - i0, o + i0, 0.0);                                                       \
            } else {                                                                               \
                for (int64_t i = i0; i < i1; i++) {                                                \
                    const float a = o[i];                                                          \
                    o[i] = (fast);                                                                 \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
/* the rows' expressions (elementwise.def, nn.def) with jg_ew_expf_normal */
EW_NORMAL_LOOPS(ew_exp, jg_ew_expf_normal(a))
EW_NORMAL_LOOPS(ew_sigmoid, 1.0f / (1.0f + jg_ew_expf_normal(-a)))
EW_NORMAL_LOOPS(ew_silu, a / (1.0f + jg_ew_expf_normal(-a)))

/* The ops with such loops, for f32 (dt and id are constants where this is
 * called, so the test folds away in every other instantiation; plain is
 * the op's own f32 loop). */
static inline bool ew_normal_c(jg_dtype dt, jg_opcode id, int64_t n, void *o, const void *x,
                               ew_plain_c plain) {
    if (dt != JG_F32)
        return false;
    switch (id) {
    case JG_OP_EXP:
        ew_exp_nc(n, o, x, plain);
        return true;
    case JG_OP_SIGMOID:
        ew_sigmoid_nc(n, o, x, plain);
        return true;
    case JG_OP_SILU:
        ew_silu_nc(n, o, x, plain);
        return true;
    default:
        return false;
    }
}
static inline bool ew_normal_i(jg_dtype dt, jg_opcode id, int64_t n, void *o, ew_plain_i plain) {
    if (dt != JG_F32)
        return false;
    switch (id) {
    case JG_OP_EXP:
        ew_exp_ni(n, o, plain);
        return true;
    case JG_OP_SIGMOID:
        ew_sigmoid_ni(n, o, plain);
        return true;
    case JG_OP_SILU:
        ew_silu_ni(n, o, plain);
        return true;
    default:
        return false;
    }
}
/* fn for the f32 instantiation, a null FT elsewhere (never called there) */
#define EW_IF_F32(TY, fn, FT) _Generic((jg_##TY)0, jg_f32 : (fn), default : (FT)0)
#define EW_DT_f32 JG_F32
#define EW_DT_f64 JG_F64
#define EW_DT_i64 JG_I64
#define EW_DT_b8 JG_BOOL
#define EW_DT_i32 JG_I32

/* Unary: a row (c); in place (i: out is the operand's row exactly, each
 * element read before it is written at the same index, so this is the
 * plain loop's result). */
#define EW_CONTIG1(ID, name, TY, expr)                                                             \
    EW_LOOP(name##_cl_##TY, TY, expr, x[i], 0, EW_OUT(TY), EW_ROW(TY, x))                          \
    EW_LOOP(name##_il_##TY, TY, expr, o[i], 0, EW_OUT(TY))                                         \
    static inline void name##_c_##TY(int64_t n, jg_##TY *restrict o, const jg_##TY *restrict x,    \
                                     double s) {                                                   \
        if (!ew_normal_c(EW_DT_##TY, JG_OP_##ID, n, o, x,                                          \
                         EW_IF_F32(TY, name##_cl_##TY, ew_plain_c)))                               \
            name##_cl_##TY(n, o, x, s);                                                            \
    }                                                                                              \
    static inline void name##_i_##TY(int64_t n, jg_##TY *restrict o, double s) {                   \
        if (!ew_normal_i(EW_DT_##TY, JG_OP_##ID, n, o, EW_IF_F32(TY, name##_il_##TY, ew_plain_i))) \
            name##_il_##TY(n, o, s);                                                               \
    }

/* Binary: both operands rows (vv), b one element (vs), a one element (sv);
 * in place, out being a's row, with b a row (iv) or one element (is) that
 * shares no byte with it. */
#define EW_CONTIG2(name, TY, expr)                                                                 \
    EW_LOOP(name##_vv_##TY, TY, expr, x[i], y[i], EW_OUT(TY), EW_ROW(TY, x), EW_ROW(TY, y))        \
    EW_LOOP(name##_vs_##TY, TY, expr, x[i], y0, EW_OUT(TY), EW_ROW(TY, x), const jg_##TY y0)       \
    EW_LOOP(name##_sv_##TY, TY, expr, x0, y[i], EW_OUT(TY), const jg_##TY x0, EW_ROW(TY, y))       \
    EW_LOOP(name##_iv_##TY, TY, expr, o[i], y[i], EW_OUT(TY), EW_ROW(TY, y))                       \
    EW_LOOP(name##_is_##TY, TY, expr, o[i], y0, EW_OUT(TY), const jg_##TY y0)

/* True if the element at x (size es) lies outside the n-element row at o. */
static inline bool ew_outside(const char *x, const char *o, int64_t n, size_t es) {
    uintptr_t a = (uintptr_t)o, b = (uintptr_t)x, len = (uintptr_t)n * es;
    return b + es <= a || a + len <= b;
}

/* Large rows run on the pool in chunks of JG_PARALLEL_GRAIN elements, each
 * the same row call on a sub-row: elements are computed independently, so
 * any split gives the serial bits.  A row function calls these when
 * jg_parallel_worth(n); the chunks' calls are small and compute inline. */
typedef struct {
    jg_inner_fn row;
    void *ctx;
    int nops;
    char *p[3];
    const int64_t *st;
} ew_split;

static void ew_split_chunk(void *vc, int64_t lo, int64_t hi) {
    const ew_split *c = vc;
    char *p[3];
    for (int k = 0; k < c->nops; k++)
        p[k] = c->p[k] + lo * c->st[k];
    c->row(c->ctx, hi - lo, p, c->st);
}

/* Bytes [lo, hi) an n-element strided row of elements of size es covers. */
static inline void ew_span(const char *p, int64_t st, int64_t n, size_t es, uintptr_t *lo,
                           uintptr_t *hi) {
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)(p + (n - 1) * st);
    *lo = a < b ? a : b;
    *hi = (a < b ? b : a) + es;
}

/* Splits a row over the pool when every operand is exactly out's row or
 * shares no byte with it; partial overlap keeps the serial element order.
 * Returns false (nothing done) when it does not split. */
static bool ew_row_split(jg_inner_fn row, void *ctx, int nops, int64_t n, char **p,
                         const int64_t *st, size_t es) {
    if (st[0] == 0)
        return false;
    uintptr_t olo, ohi;
    ew_span(p[0], st[0], n, es, &olo, &ohi);
    for (int k = 1; k < nops; k++) {
        if (p[k] == p[0] && st[k] == st[0])
            continue;
        uintptr_t lo, hi;
        ew_span(p[k], st[k], n, es, &lo, &hi);
        if (lo < ohi && olo < hi)
            return false;
    }
    ew_split c = {row, ctx, nops, {p[0], p[1], nops > 2 ? p[2] : NULL}, st};
    jg_parallel_for(n, JG_PARALLEL_GRAIN, ew_split_chunk, &c);
    return true;
}

typedef struct {
    jg_dense_fn fn;
    char *o;
    const char *x, *y;
    double s;
    size_t es;
    bool binary;
} ew_dense_split;

static void ew_dense_chunk(void *vc, int64_t lo, int64_t hi) {
    const ew_dense_split *c = vc;
    size_t off = (size_t)lo * c->es;
    c->fn(hi - lo, c->o + off, c->x + off, c->binary ? c->y + off : c->y, c->s);
}

/* The dense loops' split (out shares no byte with a or b by contract). */
static void ew_dense_par(jg_dense_fn fn, int64_t n, void *o, const void *x, const void *y, double s,
                         size_t es, bool binary) {
    ew_dense_split c = {fn, o, x, y, s, es, binary};
    jg_parallel_for(n, JG_PARALLEL_GRAIN, ew_dense_chunk, &c);
}

/* One row of a unary op: p[0] = out, p[1] = a.  The restrict loop runs only
 * when out and a do not share memory; out == a (in place) takes the plain
 * loop, which gives the same values. */
#define EW_INNER1(ID, name, TY, expr)                                                              \
    EW_CONTIG1(ID, name, TY, expr)                                                                 \
    static void name##_d_##TY(int64_t n, void *o, const void *x, const void *y, double s) {        \
        if (jg_parallel_worth(n)) {                                                                \
            ew_dense_par(name##_d_##TY, n, o, x, y, s, sizeof(jg_##TY), false);                    \
            return;                                                                                \
        }                                                                                          \
        name##_c_##TY(n, o, x, s);                                                                 \
    }                                                                                              \
    static void name##_row_##TY(void *ctx, int64_t n, char **p, const int64_t *st) {               \
        typedef jg_##TY T;                                                                         \
        if (jg_parallel_worth(n) && ew_row_split(name##_row_##TY, ctx, 2, n, p, st, sizeof(T)))    \
            return;                                                                                \
        const double s = *(const double *)ctx;                                                     \
        (void)s;                                                                                   \
        if (st[0] == sizeof(T) && st[1] == sizeof(T)) {                                            \
            if (p[0] == p[1]) {                                                                    \
                name##_i_##TY(n, (T *)p[0], s);                                                    \
                return;                                                                            \
            }                                                                                      \
            if (ew_disjoint(p[0], p[1], n, sizeof(T))) {                                           \
                name##_c_##TY(n, (T *)p[0], (const T *)p[1], s);                                   \
                return;                                                                            \
            }                                                                                      \
        }                                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T a = *(const T *)(p[1] + i * st[1]);                                                  \
            *(T *)(p[0] + i * st[0]) = (T)(expr);                                                  \
        }                                                                                          \
    }

/* One row of a binary op: p[0] = out, p[1] = a, p[2] = b.  Fast paths: in
 * place (out is exactly a's row) with b a row or one element that shares
 * no memory with it; both operands contiguous, or one of them broadcast
 * (stride 0) and the other contiguous, with no memory shared between out
 * and an operand.  Then the restrict loops vectorize; anything else takes
 * the plain strided loop, element by element in order. */
#define EW_INNER2(ID, name, TY, expr)                                                              \
    EW_CONTIG2(name, TY, expr)                                                                     \
    static void name##_d_##TY(int64_t n, void *o, const void *x, const void *y, double s) {        \
        if (jg_parallel_worth(n)) {                                                                \
            ew_dense_par(name##_d_##TY, n, o, x, y, s, sizeof(jg_##TY), true);                     \
            return;                                                                                \
        }                                                                                          \
        name##_vv_##TY(n, o, x, y, s);                                                             \
    }                                                                                              \
    static void name##_row_##TY(void *ctx, int64_t n, char **p, const int64_t *st) {               \
        typedef jg_##TY T;                                                                         \
        if (jg_parallel_worth(n) && ew_row_split(name##_row_##TY, ctx, 3, n, p, st, sizeof(T)))    \
            return;                                                                                \
        const double s = *(const double *)ctx;                                                     \
        (void)s;                                                                                   \
        const size_t es = sizeof(T);                                                               \
        if (st[0] == (int64_t)es && p[0] == p[1] && st[1] == (int64_t)es &&                        \
            (st[2] ? st[2] == (int64_t)es && ew_disjoint(p[0], p[2], n, es)                        \
                   : ew_outside(p[2], p[0], n, es))) {                                             \
            if (st[2])                                                                             \
                name##_iv_##TY(n, (T *)p[0], (const T *)p[2], s);                                  \
            else                                                                                   \
                name##_is_##TY(n, (T *)p[0], *(const T *)p[2], s);                                 \
            return;                                                                                \
        }                                                                                          \
        if (st[0] == (int64_t)es) {                                                                \
            bool ok1 = (st[1] == 0 || st[1] == (int64_t)es) && ew_disjoint(p[0], p[1], n, es);     \
            bool ok2 = (st[2] == 0 || st[2] == (int64_t)es) && ew_disjoint(p[0], p[2], n, es);     \
            if (ok1 && ok2) {                                                                      \
                if (st[1] && st[2])                                                                \
                    name##_vv_##TY(n, (T *)p[0], (const T *)p[1], (const T *)p[2], s);             \
                else if (st[1])                                                                    \
                    name##_vs_##TY(n, (T *)p[0], (const T *)p[1], *(const T *)p[2], s);            \
                else if (st[2])                                                                    \
                    name##_sv_##TY(n, (T *)p[0], *(const T *)p[1], (const T *)p[2], s);            \
                else                                                                               \
                    goto strided;                                                                  \
                return;                                                                            \
            }                                                                                      \
        }                                                                                          \
    strided:                                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T a = *(const T *)(p[1] + i * st[1]);                                                  \
            T b = *(const T *)(p[2] + i * st[2]);                                                  \
            *(T *)(p[0] + i * st[0]) = (T)(expr);                                                  \
        }                                                                                          \
    }

/* Integer remainder, fmod and floor_divide refuse a zero divisor, as
 * PyTorch does ("ZeroDivisionError").  Checked in the kernel, so a compiled
 * program whose divisor is only known when it runs fails as eager does,
 * before anything is written. */
static bool int_div_op(jg_opcode op) {
    return op == JG_OP_REMAINDER || op == JG_OP_FMOD || op == JG_OP_FLOOR_DIVIDE;
}

static int check_int_divisor(const jg_tensor *b, jg_dtype out) {
    if (out != JG_I64 && out != JG_I32)
        return 0;
    int64_t idx[JG_MAX_DIMS] = {0};
    const char *base = jg_tensor_ptr((jg_tensor *)b);
    for (int64_t n = 0; n < b->numel; n++) {
        int64_t off = 0;
        for (int d = 0; d < b->ndim; d++)
            off += idx[d] * b->stride[d];
        bool zero = b->dtype == JG_I64   ? ((const int64_t *)base)[off] == 0
                    : b->dtype == JG_I32 ? ((const int32_t *)base)[off] == 0
                                         : ((const unsigned char *)base)[off] == 0;
        if (zero)
            return jg_errorf("ZeroDivisionError");
        for (int d = b->ndim - 1; d >= 0 && ++idx[d] == b->shape[d]; d--)
            idx[d] = 0;
    }
    return 0;
}

/* The kernel: broadcast every operand to the output and walk it. */
#define EW_KERNEL(ID, name, n_in, expr)                                                            \
    EW_INNER##n_in(ID, name, f32, expr) EW_INNER##n_in(ID, name, f64, expr)                        \
        EW_INNER##n_in(ID, name, i64, expr) EW_INNER##n_in(ID, name, b8, expr)                     \
            EW_INNER##n_in(ID, name, i32, expr) int jg_k_##name(                                   \
                const jg_attrs *at, jg_tensor *const *in, jg_tensor **out) {                       \
        static const jg_inner_fn rows[JG_NDTYPES] = EW_BY_DTYPE(name##_row);                       \
        if (int_div_op(JG_OP_##ID) && check_int_divisor(in[n_in - 1], out[0]->dtype) < 0)          \
            return -1;                                                                             \
        return jg_ew_run(rows[out[0]->dtype], at, n_in, in, out[0]);                               \
    }

/* {fn_f32, ...} indexed by dtype */
#define EW_BY_DTYPE(fn)                                                                            \
    {                                                                                              \
        [JG_F32] = fn##_f32, [JG_F64] = fn##_f64, [JG_I64] = fn##_i64, [JG_BOOL] = fn##_b8,        \
        [JG_I32] = fn##_i32                                                                        \
    }

/* A binary op on a row-major [rows, cols] output whose one operand is
 * column-major (out += w.t(), a transposed gradient added into .grad): the
 * iterator would walk that operand with a large stride, one element at a
 * time.  Instead, bands of TR_ROWS rows, in tiles of TR_COLS columns: the
 * tile of the transposed operand is copied into a row-major buffer (its
 * lines stay in L1), then the row function runs on unit strides (its
 * vectorized loops).  Each element is computed by the same expression from
 * the same operands, so the result is the iterator's, for any tiling and
 * thread count. */
enum { TR_ROWS = 32, TR_COLS = 64, TR_MIN = 4096 };

typedef struct {
    jg_inner_fn row;
    void *ctx;
    char *o;
    const char *x[2]; /* the operands; x[tr] is the column-major one */
    int tr;
    int64_t rows, cols, ld; /* ld: x[tr]'s column stride, in elements */
    size_t es;
} ew_tr;

/* buf[i][j] = s[i + j * ld] for an nr x nc tile: 4x4 blocks transposed in
 * SSE registers (bit copies), the edges element by element. */
static void tr_gather_u32(uint32_t *buf, const uint32_t *s, int64_t ld, int64_t nr, int64_t nc) {
    int64_t j = 0;
#if defined(__SSE2__)
    for (; j + 4 <= nc; j += 4) {
        int64_t i = 0;
        for (; i + 4 <= nr; i += 4) {
            const uint32_t *p = s + i + j * ld;
            __m128 r0 = _mm_loadu_ps((const float *)p);
            __m128 r1 = _mm_loadu_ps((const float *)(p + ld));
            __m128 r2 = _mm_loadu_ps((const float *)(p + 2 * ld));
            __m128 r3 = _mm_loadu_ps((const float *)(p + 3 * ld));
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            uint32_t *d = buf + i * TR_COLS + j;
            _mm_storeu_ps((float *)d, r0);
            _mm_storeu_ps((float *)(d + TR_COLS), r1);
            _mm_storeu_ps((float *)(d + 2 * TR_COLS), r2);
            _mm_storeu_ps((float *)(d + 3 * TR_COLS), r3);
        }
        for (; i < nr; i++)
            for (int m = 0; m < 4; m++)
                buf[i * TR_COLS + j + m] = s[i + (j + m) * ld];
    }
#endif
    for (; j < nc; j++)
        for (int64_t i = 0; i < nr; i++)
            buf[i * TR_COLS + j] = s[i + j * ld];
}

static void ew_tr_bands(void *vc, int64_t lo, int64_t hi) {
    const ew_tr *c = vc;
    _Alignas(64) char buf[TR_ROWS * TR_COLS * 8];
    const int64_t es = (int64_t)c->es, st[3] = {es, es, es};
    for (int64_t band = lo; band < hi; band++) {
        int64_t r0 = band * TR_ROWS, nr = c->rows - r0 < TR_ROWS ? c->rows - r0 : TR_ROWS;
        for (int64_t c0 = 0; c0 < c->cols; c0 += TR_COLS) {
            int64_t nc = c->cols - c0 < TR_COLS ? c->cols - c0 : TR_COLS;
            /* element (r0 + i, c0 + j) of x[tr] is at (r0 + i) + (c0 + j) * ld */
            const char *base = c->x[c->tr] + (size_t)(c0 * c->ld) * c->es;
            const char *src = base + (size_t)r0 * c->es;
            if (c->es == 4)
                tr_gather_u32((uint32_t *)buf, (const uint32_t *)src, c->ld, nr, nc);
            else
                for (int64_t j = 0; j < nc; j++)
                    for (int64_t i = 0; i < nr; i++)
                        ((uint64_t *)buf)[i * TR_COLS + j] = ((const uint64_t *)src)[i + j * c->ld];
            for (int64_t i = 0; i < nr; i++) {
                size_t at = (size_t)((r0 + i) * c->cols + c0) * c->es;
                char *p[3] = {c->o + at, NULL, NULL};
                p[1 + c->tr] = buf + (size_t)(i * TR_COLS) * c->es;
                p[2 - c->tr] = (char *)c->x[1 - c->tr] + at;
                c->row(c->ctx, nc, p, st);
            }
        }
    }
}

static bool ew_transposed2(jg_inner_fn row, void *ctx, jg_tensor *const *in, jg_tensor *out) {
    size_t es = jg_dtype_size(out->dtype);
    if (out->ndim != 2 || out->numel < TR_MIN || (es != 4 && es != 8) || !jg_is_contiguous(out))
        return false;
    int64_t rows = out->shape[0], cols = out->shape[1];
    int tr = -1;
    for (int k = 0; k < 2; k++) {
        const jg_tensor *t = in[k];
        if (!jg_same_shape(t, out))
            return false;
        if (t->stride[0] == 1 && t->stride[1] >= rows) { /* column-major */
            if (tr >= 0 || t->storage == out->storage)
                return false;
            tr = k;
        } else if (t->stride[1] != 1 || t->stride[0] != cols ||
                   (t->storage == out->storage && t->offset != out->offset)) {
            return false; /* row-major like out: out itself (in place) or apart from it */
        }
    }
    if (tr < 0)
        return false;
    ew_tr c = {row,
               ctx,
               jg_tensor_ptr(out),
               {jg_tensor_ptr(in[0]), jg_tensor_ptr(in[1])},
               tr,
               rows,
               cols,
               in[tr]->stride[1],
               es};
    int64_t bands = (rows + TR_ROWS - 1) / TR_ROWS, per = TR_ROWS * cols;
    if (jg_parallel_worth(out->numel))
        jg_parallel_for(bands, per >= JG_PARALLEL_GRAIN ? 1 : JG_PARALLEL_GRAIN / per, ew_tr_bands,
                        &c);
    else
        ew_tr_bands(&c, 0, bands);
    return true;
}

static int jg_ew_run(jg_inner_fn row, const jg_attrs *at, int n_in, jg_tensor *const *in,
                     jg_tensor *out) {
    double s = at ? at->s : 0.0;
    char *base[3];
    base[0] = jg_tensor_ptr(out);
    for (int k = 0; k < n_in; k++) {
        JG_ASSERT(in[k]->dtype == out->dtype);
        base[k + 1] = jg_tensor_ptr(in[k]);
    }
    /* Shortcut: a dense output and operands that are dense with its shape or
     * single elements.  jg_iter_run would merge all dims into this one row
     * (a single element broadcasts with stride 0), so the call is the same. */
    if (jg_dense(out)) {
        int64_t es = (int64_t)jg_dtype_size(out->dtype);
        int64_t st[3] = {es, 0, 0};
        bool flat = true;
        for (int k = 0; k < n_in && flat; k++) {
            if (in[k]->numel == 1 && in[k]->ndim <= out->ndim)
                st[k + 1] = 0;
            else if (jg_same_shape(in[k], out) && jg_dense(in[k]))
                st[k + 1] = es;
            else
                flat = false;
        }
        if (flat) {
            if (out->numel > 0)
                row(&s, out->numel, base, st);
            return 0;
        }
    }
    /* clone of a transposed or permuted tensor (contiguous()): in tiles */
    if (n_in == 1 && row == jg_ew_rows[JG_OP_CLONE][out->dtype] && jg_copy_blocked(out, in[0]))
        return 0;
    if (n_in == 2 && ew_transposed2(row, &s, in, out))
        return 0;
    int64_t st[3][JG_MAX_DIMS];
    jg_broadcast_strides(out, out->ndim, out->shape, st[0]);
    for (int k = 0; k < n_in; k++)
        jg_broadcast_strides(in[k], out->ndim, out->shape, st[k + 1]);
    jg_iter_run(out->ndim, out->shape, n_in + 1, base, st, row, &s);
    return 0;
}

#define JG_EW(ID, name, bw_name, n_in, flags, vjp, expr) EW_KERNEL(ID, name, n_in, expr)
#include "ops/elementwise.def"
#include "ops/nn.def"
#undef JG_EW

/* The row functions by op and dtype (NULL for ops not in elementwise.def),
 * for dispatch's shortcut (ops/dispatch.c), which makes the one row call that
 * jg_ew_run would make for dense operands of the output's shape. */
const jg_inner_fn jg_ew_rows[JG_OP_COUNT][JG_NDTYPES] = {
#define JG_EW(ID, name, bw_name, n_in, flags, vjp, expr) [JG_OP_##ID] = EW_BY_DTYPE(name##_row),
#include "ops/elementwise.def"
#include "ops/nn.def"
#undef JG_EW
};

/* The dense loops by op and dtype: out, a (and b) dense rows of n elements,
 * out sharing no byte with a or b (a fresh output); what the row functions
 * above run for such operands, without their stride and overlap tests. */
const jg_dense_fn jg_ew_dense[JG_OP_COUNT][JG_NDTYPES] = {
#define JG_EW(ID, name, bw_name, n_in, flags, vjp, expr) [JG_OP_##ID] = EW_BY_DTYPE(name##_d),
#include "ops/elementwise.def"
#include "ops/nn.def"
#undef JG_EW
};

int jg_k_to_dtype(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    (void)a;
    jg_copy_data(out[0], in[0]);
    return 0;
}

/* x += y * (T)s: mul_scalar's product, then add's sum, in one loop (the
 * product is rounded to T before the add, as the two ops round it). */
EW_LOOP(add_scaled_f32, f32, a + b * (T)s, o[i], y[i], EW_OUT(f32), EW_ROW(f32, y))
EW_LOOP(add_scaled_f64, f64, a + b * (T)s, o[i], y[i], EW_OUT(f64), EW_ROW(f64, y))

typedef struct {
    char *x;
    const char *y;
    double s;
    bool f64;
} add_scaled_split;

static void add_scaled_chunk(void *vc, int64_t lo, int64_t hi) {
    const add_scaled_split *c = vc;
    if (c->f64)
        add_scaled_f64(hi - lo, (jg_f64 *)c->x + lo, (const jg_f64 *)c->y + lo, c->s);
    else
        add_scaled_f32(hi - lo, (jg_f32 *)c->x + lo, (const jg_f32 *)c->y + lo, c->s);
}

bool jg_add_scaled_dense_(jg_tensor *x, const jg_tensor *y, double alpha) {
    /* (not while a program is traced: the write must be recorded there) */
    if (jg_trace_capture || x->dtype != y->dtype || (x->dtype != JG_F32 && x->dtype != JG_F64) ||
        x->sym || y->sym || x->view || y->view || !x->storage || !y->storage ||
        !jg_same_shape(x, y) || !jg_dense(x) || !jg_dense(y))
        return false;
    size_t es = jg_dtype_size(x->dtype);
    add_scaled_split c = {jg_tensor_ptr(x), jg_tensor_ptr(y), alpha, x->dtype == JG_F64};
    if (x->numel > 0 && !ew_disjoint(c.x, c.y, x->numel, es))
        return false;
    if (jg_parallel_worth(x->numel))
        jg_parallel_for(x->numel, JG_PARALLEL_GRAIN, add_scaled_chunk, &c);
    else
        add_scaled_chunk(&c, 0, x->numel);
    x->storage->version++;
    return true;
}
