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
 * compares them).  Never used while a program is traced: the graph needs
 * the composed ops. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "core/tensor.h"
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

/* (the loop-invariant flags are unswitched, so each variant vectorizes) */
#define ADAM_VECTORIZE                                                                             \
    __attribute__((optimize("tree-vectorize", "unswitch-loops", "vect-cost-model=dynamic"),        \
                   target_clones("avx2", "default")))

/* One loop per dtype: T the element type, SQRT its square root (sqrt on
 * float is sqrtf, as the composed kernel's <tgmath.h> sqrt). */
#define ADAM_LOOP(name, T, SQRT)                                                                   \
    static ADAM_VECTORIZE void name(int64_t n, T *restrict p, const T *restrict g, T *restrict m,  \
                                    T *restrict v, T *restrict vmax,                               \
                                    const jg_adam_fused_args *a) {                                 \
        const bool decoupled = a->decoupled, maximize = a->maximize,                               \
                   weight_decay = a->weight_decay, amsgrad = vmax != NULL;                         \
        const T decay = (T)a->decay, wd = (T)a->wd, beta1 = (T)a->beta1,                           \
                omb1 = (T)a->one_minus_beta1, beta2 = (T)a->beta2, omb2 = (T)a->one_minus_beta2,   \
                rbc2 = (T)a->rbc2, eps = (T)a->eps, nss = (T)a->neg_step_size;                     \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T gi = g[i], pi = p[i];                                                                \
            if (maximize)                                                                          \
                gi = flip_##T(gi);                                                                 \
            if (decoupled) {                                                                       \
                pi = pi * decay; /* param.mul_(1 - lr * wd) */                                     \
            } else if (weight_decay) {                                                             \
                T t = pi * wd; /* grad.add(param, alpha=wd) */                                     \
                gi = gi + t;                                                                       \
            }                                                                                      \
            T mi = m[i] * beta1; /* exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1) */             \
            T gs = gi * omb1;                                                                      \
            mi = mi + gs;                                                                          \
            T vi = v[i] * beta2; /* exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2) */      \
            T gg = gi * omb2;                                                                      \
            gg = gg * gi;                                                                          \
            vi = vi + gg;                                                                          \
            T sq = vi;                                                                             \
            if (amsgrad) { /* torch.maximum: a NaN on either side wins */                          \
                T mx = vmax[i];                                                                    \
                mx = vi != vi ? vi : mx < vi ? vi : mx;                                            \
                vmax[i] = mx;                                                                      \
                sq = mx;                                                                           \
            }                                                                                      \
            T d = SQRT(sq); /* (sqrt / bias_correction2_sqrt).add_(eps) */                         \
            d = d * rbc2;                                                                          \
            d = d + eps;                                                                           \
            T u = mi * nss; /* param.addcdiv_(exp_avg, denom, value=-step_size) */                 \
            u = u / d;                                                                             \
            p[i] = pi + u;                                                                         \
            m[i] = mi;                                                                             \
            v[i] = vi;                                                                             \
        }                                                                                          \
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
