/* The eager Adam/AdamW update in one pass over each element.
 *
 * optim.c composes the update from ~9 elementwise ops (mul_scalar_, add_,
 * addcmul, sqrt, the division by a scalar, add_scalar, addcdiv ...), each a
 * pass over parameter-sized memory plus temporaries.  This loop does the
 * same arithmetic per element: each intermediate rounded to the tensors'
 * dtype T as the op that makes it rounds it, in the same order, every
 * scalar converted to T as the scalar ops convert it (a * (T)s).  The
 * build compiles with -ffp-contract=off, so no a * b + c here becomes an
 * FMA: the bits are those of the composed path (tests/c/test_adam_fused.c
 * compares them).  jg_adam_fused_ itself never runs while a program is
 * traced; a traced step records the adam_moments and adam_update nodes
 * (below), whose kernels do the same arithmetic. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/decls.h"
#include "ops/viewtrack.h"
#include "optim/adam_fused.h"
#include "trace/trace.h"

/* -1: not yet read from the environment */
static _Atomic int fused_on = -1;

bool jg_adam_fused_enabled(void) {
    int on = atomic_load(&fused_on);
    if (on < 0) {
        const char *e = getenv("JITGRAD_OPTIM_FUSED");
        int want = !(e && e[0] == '0' && e[1] == '\0');
        atomic_compare_exchange_strong(&fused_on, &on, want);
        on = atomic_load(&fused_on);
    }
    return on != 0;
}

bool jg_adam_fused_set_enabled(bool enable) {
    bool was = jg_adam_fused_enabled();
    atomic_store(&fused_on, enable ? 1 : 0);
    return was;
}

/* -x as the sign bit flipped, where gcc cannot see a negation: it folds
 * (-g) + t into t - g, which returns g's NaN unflipped, while the composed
 * ops negate first (a NaN gradient then gives a NaN of the other sign). */
static inline float flip_float(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u ^= UINT32_C(1) << 31;
    memcpy(&x, &u, sizeof u);
    return x;
}

static inline double flip_double(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    u ^= UINT64_C(1) << 63;
    memcpy(&x, &u, sizeof u);
    return x;
}

/* (the loop-invariant flags are unswitched, so each variant vectorizes;
 * AVX2 and AVX-512 F clones as in ops/elementwise.c, the same bits) */
#define ADAM_VECTORIZE                                                                             \
    __attribute__((optimize("tree-vectorize", "unswitch-loops", "vect-cost-model=dynamic"),        \
                   target_clones("avx512f", "avx2", "default")))

/* One element's update: reads p0[i], g[i], m0[i], v0[i] (and vmax[i]),
 * writes p[i], m[i], v[i] (and vmax[i]). */
#define ADAM_ELEM(T, SQRT)                                                                         \
    do {                                                                                           \
        T gi = g[i], pi = p0[i];                                                                   \
        if (maximize)                                                                              \
            gi = flip_##T(gi);                                                                     \
        if (decoupled) {                                                                           \
            pi = pi * decay; /* param.mul_(1 - lr * wd) */                                         \
        } else if (weight_decay) {                                                                 \
            T t = pi * wd; /* grad.add(param, alpha=wd) */                                         \
            gi = gi + t;                                                                           \
        }                                                                                          \
        T mi = m0[i] * beta1; /* exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1) */                \
        T gs = gi * omb1;                                                                          \
        mi = mi + gs;                                                                              \
        T vi = v0[i] * beta2; /* exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2) */         \
        T gg = gi * omb2;                                                                          \
        gg = gg * gi;                                                                              \
        vi = vi + gg;                                                                              \
        T sq = vi;                                                                                 \
        if (amsgrad) { /* torch.maximum: a NaN on either side wins */                              \
            T mx = vmax[i];                                                                        \
            mx = vi != vi ? vi : mx < vi ? vi : mx;                                                \
            vmax[i] = mx;                                                                          \
            sq = mx;                                                                               \
        }                                                                                          \
        T d = SQRT(sq); /* (sqrt / bias_correction2_sqrt).add_(eps) */                             \
        d = d * rbc2;                                                                              \
        d = d + eps;                                                                               \
        T u = mi * nss; /* param.addcdiv_(exp_avg, denom, value=-step_size) */                     \
        u = u / d;                                                                                 \
        p[i] = pi + u;                                                                             \
        m[i] = mi;                                                                                 \
        v[i] = vi;                                                                                 \
    } while (0)

#define ADAM_CONSTS(T)                                                                             \
    const bool decoupled = a->decoupled, maximize = a->maximize, weight_decay = a->weight_decay;   \
    const T decay = (T)a->decay, wd = (T)a->wd, beta1 = (T)a->beta1, omb1 = (T)a->one_minus_beta1, \
            beta2 = (T)a->beta2, omb2 = (T)a->one_minus_beta2, rbc2 = (T)a->rbc2, eps = (T)a->eps, \
            nss = (T)a->neg_step_size

/* One loop per dtype: T the element type, SQRT its square root (sqrt on
 * float is sqrtf, as the composed kernel's <tgmath.h> sqrt). */
#define ADAM_LOOP(name, T, SQRT)                                                                   \
    static ADAM_VECTORIZE void name(int64_t n, T *restrict p, const T *restrict g, T *restrict m,  \
                                    T *restrict v, T *restrict vmax,                               \
                                    const jg_adam_fused_args *a) {                                 \
        ADAM_CONSTS(T);                                                                            \
        const bool amsgrad = vmax != NULL;                                                         \
        T *p0 = p, *m0 = m, *v0 = v;                                                               \
        for (int64_t i = 0; i < n; i++)                                                            \
            ADAM_ELEM(T, SQRT);                                                                    \
    }

ADAM_LOOP(adam_f32, float, sqrtf)
ADAM_LOOP(adam_f64, double, sqrt)

typedef struct {
    char *p, *m, *v, *vmax;
    const char *g;
    const jg_adam_fused_args *a;
    bool f64;
} adam_split;

static void adam_chunk(void *vc, int64_t lo, int64_t hi) {
    const adam_split *c = vc;
    if (c->f64) {
        double *vmax = c->vmax ? (double *)c->vmax + lo : NULL;
        adam_f64(hi - lo, (double *)c->p + lo, (const double *)c->g + lo, (double *)c->m + lo,
                 (double *)c->v + lo, vmax, c->a);
    } else {
        float *vmax = c->vmax ? (float *)c->vmax + lo : NULL;
        adam_f32(hi - lo, (float *)c->p + lo, (const float *)c->g + lo, (float *)c->m + lo,
                 (float *)c->v + lo, vmax, c->a);
    }
}

/* A tensor the loop may read or write as a plain row like p's. */
static bool row_ok(const jg_tensor *t, const jg_tensor *p) {
    return t && t->dtype == p->dtype && !t->sym && !t->view && t->storage && jg_same_shape(t, p) &&
           jg_dense(t);
}

static bool disjoint(const jg_tensor *a, const jg_tensor *b, size_t bytes) {
    uintptr_t x = (uintptr_t)jg_tensor_ptr(a), y = (uintptr_t)jg_tensor_ptr(b);
    return x + bytes <= y || y + bytes <= x;
}

bool jg_adam_fused_(jg_tensor *param, jg_tensor *grad, jg_tensor *exp_avg, jg_tensor *exp_avg_sq,
                    jg_tensor *max_exp_avg_sq, const jg_adam_fused_args *args) {
    if (jg_tracing() || jg_trace_capture || !jg_adam_fused_enabled())
        return false;
    if (!param || (param->dtype != JG_F32 && param->dtype != JG_F64) || !row_ok(param, param))
        return false;
    jg_tensor *t[5] = {param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq};
    int n = max_exp_avg_sq ? 5 : 4;
    size_t bytes = (size_t)param->numel * jg_dtype_size(param->dtype);
    for (int i = 1; i < n; i++)
        if (!row_ok(t[i], param))
            return false;
    /* the loop's restrict rows: no two may share a byte */
    for (int i = 0; i < n && bytes > 0; i++)
        for (int j = i + 1; j < n; j++)
            if (!disjoint(t[i], t[j], bytes))
                return false;
    adam_split c = {
        jg_tensor_ptr(param),      jg_tensor_ptr(exp_avg),
        jg_tensor_ptr(exp_avg_sq), max_exp_avg_sq ? jg_tensor_ptr(max_exp_avg_sq) : NULL,
        jg_tensor_ptr(grad),       args,
        param->dtype == JG_F64};
    /* per element, so the chunks (and the thread count) do not change bits */
    if (jg_parallel_worth(param->numel))
        jg_parallel_for(param->numel, JG_PARALLEL_GRAIN, adam_chunk, &c);
    else
        adam_chunk(&c, 0, param->numel);
    /* the versions the composed in-place ops would have bumped */
    param->storage->version++;
    exp_avg->storage->version++;
    exp_avg_sq->storage->version++;
    if (max_exp_avg_sq)
        max_exp_avg_sq->storage->version++;
    return true;
}

/* ---- the adam_moments and adam_update graph ops ----
 *
 * A traced Adam/AdamW step (a whole training step compiled as one graph)
 * records two nodes per parameter instead of ~15 composed ops (an op has
 * at most 4 operands and 2 outputs):
 *   adam_moments(param, grad, exp_avg, exp_avg_sq) -> the new exp_avg and
 *     exp_avg_sq;
 *   adam_update(param, exp_avg, exp_avg_sq, step) -> the new param, where
 *     step is the parameter's (incremented) step count: the kernel derives
 *     step_size and bias_correction2_sqrt from it as the eager step does
 *     (jg_adam_bias_scalars), one node instead of a chain of 0-d graph ops
 *     (to_dtype, pow, sub, div, sqrt, the pair's stack) per parameter;
 * the three tensors then take the results as their values (as a traced
 * in-place op's target does).  The kernels do the one-pass loop's
 * arithmetic, split where the moments are stored (each intermediate
 * rounded as there), and derive rbc2 and -step_size from the two numbers
 * as the eager step does (jg_adam_fused_scalars): a compiled step has the
 * eager step's bits.  The c backend may hand each kernel its outputs as
 * the inputs they replace (updates in place, backend/cgen.h) and run a
 * pair as the one-pass loop itself (jg_adam_step_inplace_).
 * attrs: i[0..8) the bit patterns of decay, wd, beta1, 1 - beta1, beta2,
 * 1 - beta2, eps, lr; keepdim: 1 decoupled (AdamW) | 2 weight_decay (Adam's). */

void jg_adam_bias_scalars(double lr, double beta1, double beta2, double step, double *step_size,
                          double *bias_correction2_sqrt) {
    double bias_correction1 = 1 - pow(beta1, step);
    double bias_correction2 = 1 - pow(beta2, step);
    *step_size = lr / bias_correction1;
    *bias_correction2_sqrt = sqrt(bias_correction2);
}

void jg_adam_fused_scalars(jg_adam_fused_args *a, jg_dtype d, double step_size,
                           double bias_correction2_sqrt) {
    double s = bias_correction2_sqrt;
    a->rbc2 = d == JG_F32 ? (double)(1.0f / (float)s) : 1.0 / s;
    a->neg_step_size = -step_size;
}

static int64_t dbits(double x) {
    int64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static double bitsd(int64_t u) {
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static jg_attrs step_attrs(const jg_adam_fused_args *a) {
    jg_attrs at;
    memset(&at, 0, sizeof at);
    double v[8] = {a->decay,           a->wd,  a->beta1, a->one_minus_beta1, a->beta2,
                   a->one_minus_beta2, a->eps, a->lr};
    for (int k = 0; k < 8; k++)
        at.i[k] = dbits(v[k]);
    at.n = 8;
    at.keepdim = (a->decoupled ? 1 : 0) | (a->weight_decay ? 2 : 0);
    return at;
}

void jg_adam_step_attrs_read(const jg_attrs *at, jg_adam_fused_args *a) {
    memset(a, 0, sizeof *a);
    a->decoupled = at->keepdim & 1;
    a->weight_decay = (at->keepdim & 2) != 0;
    a->decay = bitsd(at->i[0]);
    a->wd = bitsd(at->i[1]);
    a->beta1 = bitsd(at->i[2]);
    a->one_minus_beta1 = bitsd(at->i[3]);
    a->beta2 = bitsd(at->i[4]);
    a->one_minus_beta2 = bitsd(at->i[5]);
    a->eps = bitsd(at->i[6]);
    a->lr = at->n > 7 ? bitsd(at->i[7]) : 0;
}

/* IP: the new moments overwrite the old (m0x, v0x unused), each element read
 * before it is written through the one restrict pointer. */
#define MOMENTS_LOOP(name, T, IP)                                                                  \
    static ADAM_VECTORIZE void name(int64_t n, T *restrict m, T *restrict v, const T *restrict p0, \
                                    const T *restrict g, const T *restrict m0x,                    \
                                    const T *restrict v0x, const jg_adam_fused_args *a) {          \
        ADAM_CONSTS(T);                                                                            \
        (void)maximize, (void)decay, (void)rbc2, (void)eps, (void)nss;                             \
        const T *m0 = IP ? m : m0x, *v0 = IP ? v : v0x;                                            \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T gi = g[i];                                                                           \
            if (!decoupled && weight_decay) {                                                      \
                T t = p0[i] * wd; /* grad.add(param, alpha=wd) */                                  \
                gi = gi + t;                                                                       \
            }                                                                                      \
            T mi = m0[i] * beta1;                                                                  \
            T gs = gi * omb1;                                                                      \
            m[i] = mi + gs;                                                                        \
            T vi = v0[i] * beta2;                                                                  \
            T gg = gi * omb2;                                                                      \
            gg = gg * gi;                                                                          \
            v[i] = vi + gg;                                                                        \
        }                                                                                          \
    }

/* IP: the new parameter overwrites the old (p0x unused). */
#define UPDATE_LOOP(name, T, SQRT, IP)                                                             \
    static ADAM_VECTORIZE void name(int64_t n, T *restrict p, const T *restrict p0x,               \
                                    const T *restrict m, const T *restrict v,                      \
                                    const jg_adam_fused_args *a) {                                 \
        ADAM_CONSTS(T);                                                                            \
        (void)maximize, (void)weight_decay, (void)wd, (void)beta1, (void)omb1, (void)beta2,        \
            (void)omb2;                                                                            \
        const T *p0 = IP ? p : p0x;                                                                \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T pi = p0[i];                                                                          \
            if (decoupled)                                                                         \
                pi = pi * decay;                                                                   \
            T d = SQRT(v[i]);                                                                      \
            d = d * rbc2;                                                                          \
            d = d + eps;                                                                           \
            T u = m[i] * nss;                                                                      \
            u = u / d;                                                                             \
            p[i] = pi + u;                                                                         \
        }                                                                                          \
    }

MOMENTS_LOOP(moments_f32, float, 0)
MOMENTS_LOOP(moments_f64, double, 0)
MOMENTS_LOOP(moments_ip_f32, float, 1)
MOMENTS_LOOP(moments_ip_f64, double, 1)
UPDATE_LOOP(update_f32, float, sqrtf, 0)
UPDATE_LOOP(update_f64, double, sqrt, 0)
UPDATE_LOOP(update_ip_f32, float, sqrtf, 1)
UPDATE_LOOP(update_ip_f64, double, sqrt, 1)

static bool same_meta(const jg_meta *x, const jg_meta *y) {
    if (x->dtype != y->dtype || x->ndim != y->ndim)
        return false;
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] != y->shape[d])
            return false;
    return true;
}

static int check_param(const char *op, const jg_meta *p) {
    if (p->dtype != JG_F32 && p->dtype != JG_F64)
        return jg_errorf("%s(): expected a float32 or float64 parameter, got %s", op,
                         jg_dtype_name(p->dtype));
    return 0;
}

int jg_infer_adam_moments(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    (void)a;
    if (check_param("adam_moments", &in[0]) < 0)
        return -1;
    static const char *const names[] = {"param", "grad", "exp_avg", "exp_avg_sq"};
    for (int k = 1; k < 4; k++)
        if (!same_meta(&in[k], &in[0]))
            return jg_errorf("adam_moments(): %s must have the parameter's dtype and shape",
                             names[k]);
    out[0] = out[1] = in[0];
    return 0;
}

int jg_infer_adam_update(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    (void)a;
    if (check_param("adam_update", &in[0]) < 0)
        return -1;
    for (int k = 1; k < 3; k++)
        if (!same_meta(&in[k], &in[0]))
            return jg_errorf("adam_update(): %s must have the parameter's dtype and shape",
                             k == 1 ? "exp_avg" : "exp_avg_sq");
    int64_t n = 1;
    for (int d = 0; d < in[3].ndim; d++)
        n *= in[3].shape[d];
    if (n != 1 || (in[3].dtype != JG_F32 && in[3].dtype != JG_F64))
        return jg_errorf("adam_update(): step must be a float32 or float64 tensor of one element "
                         "(the step count)");
    out[0] = in[0];
    return 0;
}

/* What a pass computes: an adam_moments node, an adam_update node, or both
 * in one pass (jg_adam_step_inplace_). */
typedef enum { STEP_MOMENTS, STEP_UPDATE, STEP_BOTH } step_mode;

typedef struct {
    char *out, *out2, *out3;      /* moments: exp_avg, exp_avg_sq; update: param; both: p, m, v */
    const char *p0, *g, *m0, *v0; /* update: m0, v0 the new moments */
    int64_t n;
    const jg_adam_fused_args *a;
    bool f64, ip; /* ip: the outputs are the old values' memory (moments, update) */
    step_mode mode;
} step_split;

/* Elements [lo, lo + k) of the pass, the gradient's read from g (already
 * at lo: the gradient's own row or a gathered band). */
#define STEP_ROWS(T, SUF)                                                                          \
    static void step_rows_##SUF(const step_split *c, int64_t lo, int64_t k, const T *g) {          \
        T *o = (T *)c->out + lo, *o2 = c->out2 ? (T *)c->out2 + lo : NULL;                         \
        const T *p0 = c->p0 ? (const T *)c->p0 + lo : NULL;                                        \
        const T *m0 = c->m0 ? (const T *)c->m0 + lo : NULL;                                        \
        const T *v0 = c->v0 ? (const T *)c->v0 + lo : NULL;                                        \
        if (c->mode == STEP_BOTH)                                                                  \
            adam_##SUF(k, o, g, o2, (T *)c->out3 + lo, NULL, c->a);                                \
        else if (c->mode == STEP_UPDATE && c->ip)                                                  \
            update_ip_##SUF(k, o, NULL, m0, v0, c->a);                                             \
        else if (c->mode == STEP_UPDATE)                                                           \
            update_##SUF(k, o, p0, m0, v0, c->a);                                                  \
        else if (c->ip)                                                                            \
            moments_ip_##SUF(k, o, o2, p0, g, NULL, NULL, c->a);                                   \
        else                                                                                       \
            moments_##SUF(k, o, o2, p0, g, m0, v0, c->a);                                          \
    }

STEP_ROWS(float, f32)
STEP_ROWS(double, f64)

static void step_chunk(void *vc, int64_t lo, int64_t hi) {
    const step_split *c = vc;
    if (c->f64)
        step_rows_f64(c, lo, hi - lo, c->g ? (const double *)c->g + lo : NULL);
    else
        step_rows_f32(c, lo, hi - lo, c->g ? (const float *)c->g + lo : NULL);
}

/* adam_moments (or the one-pass step) with a column-major 2-D gradient (in
 * a traced step, a Linear's weight gradient is the transpose of x^T g):
 * bands of rows of it are gathered into a row-major buffer that stays in
 * cache, and the loop runs on each band, instead of a full contiguous copy
 * of the gradient first.  Each element is the same expression of the same
 * operands: the bits do not depend on the bands (or the thread count). */
enum { TR_BUF_BYTES = 32768 };

typedef struct {
    const step_split *c;
    const char *gt; /* the gradient's element (0, 0); (r, j) at r + j * rows */
    int64_t rows, cols, band;
} tr_split;

#define TR_BAND(T, SUF)                                                                            \
    do {                                                                                           \
        T buf[TR_BUF_BYTES / sizeof(T)];                                                           \
        const T *gt = (const T *)t->gt;                                                            \
        for (int64_t r0 = lo; r0 < hi; r0 += t->band) {                                            \
            int64_t nr = hi - r0 < t->band ? hi - r0 : t->band;                                    \
            for (int64_t j = 0; j < t->cols; j++)                                                  \
                for (int64_t i = 0; i < nr; i++)                                                   \
                    buf[i * t->cols + j] = gt[r0 + i + j * t->rows];                               \
            step_rows_##SUF(t->c, r0 * t->cols, nr * t->cols, buf);                                \
        }                                                                                          \
    } while (0)

static void tr_chunk(void *vt, int64_t lo, int64_t hi) {
    const tr_split *t = vt;
    if (t->c->f64)
        TR_BAND(double, f64);
    else
        TR_BAND(float, f32);
}

/* Whether g is a column-major 2-D matrix whose rows of a band fit the buffer. */
static bool transposed_grad(const jg_tensor *g) {
    return g->ndim == 2 && g->shape[0] > 1 && g->shape[1] > 1 && g->stride[0] == 1 &&
           g->stride[1] == g->shape[0] &&
           g->shape[1] * (int64_t)jg_dtype_size(g->dtype) <= TR_BUF_BYTES;
}

bool jg_adam_grad_banded(const jg_tensor *grad) {
    return transposed_grad(grad);
}

/* t as a dense row: itself (a new reference) or a contiguous copy. */
static jg_tensor *dense_row(jg_tensor *t) {
    if (jg_dense(t))
        return jg_retain(t);
    jg_tensor *c = jg_tensor_alloc(t->dtype, t->ndim, t->shape);
    if (c)
        jg_copy_data(c, t);
    return c;
}

static bool same_data(const jg_tensor *x, const jg_tensor *y) {
    return x->storage == y->storage && x->offset == y->offset;
}

/* The pass over dense copies of the operands (the gradient may stay
 * column-major: transposed_grad); in[1] is the gradient unless mode is
 * STEP_UPDATE.  An output that is its old value's tensor (the c backend's
 * updates in place, backend/cgen.h) is updated where it is: then every
 * output is, and those tensors are dense. */
static int step_run(jg_tensor *const *in, jg_tensor **out, const jg_adam_fused_args *a,
                    step_mode mode) {
    bool update = mode == STEP_UPDATE;
    jg_tensor *row[4] = {0};
    int rc = 0, n_rows = update ? 3 : 4;
    bool tr = !update && transposed_grad(in[1]);
    bool ip = mode == STEP_BOTH || (update ? same_data(out[0], in[0]) : same_data(out[0], in[2]));
    /* (all or none: cgen.c grants a node's outputs together) */
    JG_ASSERT(mode == STEP_BOTH || update || ip == same_data(out[1], in[3]));
    JG_ASSERT(!ip || mode != STEP_BOTH || (jg_dense(in[0]) && jg_dense(in[2]) && jg_dense(in[3])));
    for (int k = 0; k < n_rows; k++)
        if (!(row[k] = tr && k == 1 ? jg_retain(in[1]) : dense_row(in[k])))
            rc = -1;
    if (rc == 0) {
        step_split c = {
            .n = in[0]->numel, .a = a, .f64 = in[0]->dtype == JG_F64, .ip = ip, .mode = mode};
        if (mode == STEP_BOTH) {
            c.out = jg_tensor_ptr(in[0]);
            c.out2 = jg_tensor_ptr(in[2]);
            c.out3 = jg_tensor_ptr(in[3]);
            c.g = jg_tensor_ptr(row[1]);
        } else {
            c.out = jg_tensor_ptr(out[0]);
            c.out2 = update ? NULL : jg_tensor_ptr(out[1]);
            c.p0 = jg_tensor_ptr(row[0]);
            c.g = update ? NULL : jg_tensor_ptr(row[1]);
            c.m0 = jg_tensor_ptr(row[update ? 1 : 2]);
            c.v0 = jg_tensor_ptr(row[update ? 2 : 3]);
        }
        /* per element, so the chunks (and the thread count) do not change bits */
        if (tr) {
            int64_t rows = in[1]->shape[0], cols = in[1]->shape[1];
            int64_t band = TR_BUF_BYTES / ((int64_t)jg_dtype_size(in[1]->dtype) * cols);
            tr_split t = {&c, jg_tensor_ptr(row[1]), rows, cols, band};
            if (jg_parallel_worth(c.n))
                jg_parallel_for(rows, (JG_PARALLEL_GRAIN + cols - 1) / cols, tr_chunk, &t);
            else
                tr_chunk(&t, 0, rows);
        } else if (jg_parallel_worth(c.n)) {
            jg_parallel_for(c.n, JG_PARALLEL_GRAIN, step_chunk, &c);
        } else if (c.n > 0) {
            step_chunk(&c, 0, c.n);
        }
    }
    for (int k = 0; k < n_rows; k++)
        jg_release(row[k]);
    return rc;
}

int jg_k_adam_moments(const jg_attrs *at, jg_tensor *const *in, jg_tensor **out) {
    jg_adam_fused_args a;
    jg_adam_step_attrs_read(at, &a);
    return step_run(in, out, &a, STEP_MOMENTS);
}

/* a's rbc2 and neg_step_size from the count step (adam_update's in[3]) */
static void count_scalars(jg_adam_fused_args *a, jg_dtype d, const jg_tensor *step) {
    /* the count as a double, as the eager step's step.item() reads it */
    const char *cp = jg_tensor_ptr(step);
    double n = step->dtype == JG_F64 ? *(const double *)cp : (double)*(const float *)cp;
    double step_size, bias_correction2_sqrt;
    jg_adam_bias_scalars(a->lr, a->beta1, a->beta2, n, &step_size, &bias_correction2_sqrt);
    jg_adam_fused_scalars(a, d, step_size, bias_correction2_sqrt);
}

int jg_k_adam_update(const jg_attrs *at, jg_tensor *const *in, jg_tensor **out) {
    jg_adam_fused_args a;
    jg_adam_step_attrs_read(at, &a);
    count_scalars(&a, in[0]->dtype, in[3]);
    return step_run(in, out, &a, STEP_UPDATE);
}

int jg_adam_step_inplace_(const struct jg_attrs *at, jg_tensor *param, jg_tensor *grad,
                          jg_tensor *exp_avg, jg_tensor *exp_avg_sq, const jg_tensor *step) {
    jg_adam_fused_args a;
    jg_adam_step_attrs_read(at, &a);
    count_scalars(&a, param->dtype, step);
    jg_tensor *in[4] = {param, grad, exp_avg, exp_avg_sq};
    return step_run(in, NULL, &a, STEP_BOTH);
}

int jg_adam_step_traced_(jg_tensor *param, jg_tensor *grad, jg_tensor *exp_avg,
                         jg_tensor *exp_avg_sq, jg_tensor *step, const jg_adam_fused_args *args) {
    jg_attrs at = step_attrs(args);
    jg_tensor *in[4] = {param, grad, exp_avg, exp_avg_sq}, *mv[2] = {0}, *p = NULL;
    if (jg_op_call(JG_OP_ADAM_MOMENTS, &at, in, mv) < 0)
        return -1;
    jg_tensor *uin[4] = {param, mv[0], mv[1], step};
    if (jg_op_call(JG_OP_ADAM_UPDATE, &at, uin, &p) < 0)
        return -1;
    jg_tensor *dst[3] = {exp_avg, exp_avg_sq, param}, *src[3] = {mv[0], mv[1], p};
    for (int k = 0; k < 3; k++) /* traced: no copy in the graph */
        if (jg_inplace_take_(dst[k], src[k]) < 0)
            return -1;
    return 0;
}
