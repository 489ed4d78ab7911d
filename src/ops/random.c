/* Random numbers, eager and inside a compiled program's graph.
 *
 * The generator is counter-based (core/rng.c): draw k from state s is a
 * function of s + k * gamma.  Eagerly, jg_rand / jg_randn take their draws
 * from the current generator.  Traced by jg_compile (a lifting frame), they
 * record rng_uniform / rng_normal of the generator's state tensor -- a graph
 * input read at every call -- and write rng_advance of it back into the
 * state, an in-place write of a captured tensor that the compiled call
 * applies after running: every call draws new numbers, the same ones eager
 * would, and leaves the generator where eager would. */
#include "ops/decls.h"

#include <string.h>

static int rng_shape_attrs(jg_attrs *a, jg_dtype dtype, int ndim, const int64_t *shape) {
    memset(a, 0, sizeof *a);
    a->n = ndim;
    for (int d = 0; d < ndim; d++)
        a->i[d] = shape[d];
    a->dtype = (int)dtype;
    return 0;
}

int jg_infer_rng(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (in[0].dtype != JG_I64 || in[0].ndim != 0)
        return jg_errorf("rng: the generator state must be a 0-d int64 tensor");
    if (a->n < 0 || a->n > JG_MAX_DIMS || (a->dtype != JG_F32 && a->dtype != JG_F64))
        return jg_errorf("rng: bad shape or dtype");
    out[0].dtype = (jg_dtype)a->dtype;
    out[0].ndim = a->n;
    for (int d = 0; d < a->n; d++)
        out[0].shape[d] = a->i[d];
    return 0;
}

int jg_infer_rng_advance(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    (void)a;
    if (in[0].dtype != JG_I64 || in[0].ndim != 0)
        return jg_errorf("rng_advance: the generator state must be a 0-d int64 tensor");
    out[0] = in[0];
    return 0;
}

static uint64_t state_of(const jg_tensor *t) {
    uint64_t s;
    memcpy(&s, jg_tensor_ptr(t), sizeof s);
    return s;
}

int jg_k_rng_uniform(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    (void)a;
    jg_rng_fill_uniform(out[0], state_of(in[0]));
    return 0;
}

int jg_k_rng_normal(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    (void)a;
    jg_rng_fill_normal(out[0], state_of(in[0]));
    return 0;
}

int jg_k_rng_advance(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    uint64_t s = state_of(in[0]) + (uint64_t)a->i[0] * JG_RNG_GAMMA; /* wraps, as the state does */
    memcpy(jg_tensor_ptr(out[0]), &s, sizeof s);
    return 0;
}

/* The traced draw: values from the state, the state moved on in place. */
static jg_tensor *traced(bool normal, jg_dtype dtype, int ndim, const int64_t *shape) {
    jg_tensor *st = jg_rng_state_tensor();
    if (!st)
        return NULL;
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    jg_attrs a, adv = {.n = 1};
    rng_shape_attrs(&a, dtype, ndim, shape);
    adv.i[0] = normal ? (n + 1) / 2 * 2 : n;
    jg_tensor *out = jg_op1(normal ? JG_OP_RNG_NORMAL : JG_OP_RNG_UNIFORM, &a, st, NULL);
    if (!out)
        return NULL;
    jg_tensor *next = jg_op1(JG_OP_RNG_ADVANCE, &adv, st, NULL);
    if (!next || jg_copy_(st, next) < 0)
        return NULL;
    return out;
}

static jg_tensor *draw(bool normal, jg_dtype dtype, int ndim, const int64_t *shape) {
    if (jg_trace_capture && (dtype == JG_F32 || dtype == JG_F64) && ndim >= 0 &&
        ndim <= JG_MAX_DIMS && (ndim == 0 || shape)) {
        bool ok = true;
        for (int d = 0; d < ndim; d++)
            ok &= shape[d] >= 0;
        if (ok && jg_hooks.lifting && jg_hooks.lifting())
            return traced(normal, dtype, ndim, shape);
        if (ok && jg_hooks.on_untraceable)
            jg_hooks.on_untraceable(
                normal ? "jg_randn() inside a custom function's callback of a compiled program "
                         "draws at trace time only"
                       : "jg_rand() inside a custom function's callback of a compiled program "
                         "draws at trace time only");
    }
    return jg_rng_draw(normal, dtype, ndim, shape);
}

jg_tensor *jg_rand(jg_dtype dtype, int ndim, const int64_t *shape) {
    return draw(false, dtype, ndim, shape);
}

jg_tensor *jg_randn(jg_dtype dtype, int ndim, const int64_t *shape) {
    return draw(true, dtype, ndim, shape);
}
