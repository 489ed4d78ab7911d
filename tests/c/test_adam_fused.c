/* The eager one-pass Adam/AdamW update (src/optim/adam_fused.c) against the
 * composed ops it replaces (JITGRAD_OPTIM_FUSED=0's path): 10 steps of
 * each give bitwise the same parameters and state, for Adam and AdamW,
 * with and without amsgrad, maximize and weight decay, f32 and f64, sizes
 * on both sides of the thread pool's threshold, gradients holding zeros
 * of both signs, huge values and NaN; non-contiguous parameters take the
 * composed path and stay correct. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "optim/adam_fused.h"

enum { STEPS = 10 };

typedef struct {
    jg_optim_kind kind;
    bool amsgrad, maximize, transposed;
    double weight_decay;
    jg_dtype dtype;
    int64_t n;
} adam_case;

/* The bytes of t's elements in row-major order. */
static void *bytes_of(const jg_tensor *t, size_t *size) {
    *size = (size_t)jg_numel(t) * (jg_dtype_of(t) == JG_F32 ? 4 : 8);
    void *buf = malloc(*size ? *size : 1);
    assert_non_null(buf);
    assert_int_equal(jg_copy_to(t, buf, *size), 0);
    return buf;
}

static void assert_same_bits(const jg_tensor *a, const jg_tensor *b, const char *what) {
    size_t na, nb;
    void *x = bytes_of(a, &na), *y = bytes_of(b, &nb);
    assert_int_equal(na, nb);
    if (memcmp(x, y, na)) {
        size_t es = jg_dtype_of(a) == JG_F32 ? 4 : 8;
        for (size_t i = 0; i < na / es; i++)
            if (memcmp((char *)x + i * es, (char *)y + i * es, es)) {
                uint64_t u = 0, w = 0;
                memcpy(&u, (char *)x + i * es, es);
                memcpy(&w, (char *)y + i * es, es);
                print_error("%s: element %zu differs (%llx, %llx)\n", what, i,
                            (unsigned long long)u, (unsigned long long)w);
                break;
            }
        free(x);
        free(y);
        fail();
    }
    free(x);
    free(y);
}

/* A parameter of c's geometry (transposed: a [n/7, 7] view of a [7, n/7]
 * tensor), values from seed; a few special values where it has room. */
static jg_tensor *make_param(const adam_case *c) {
    jg_manual_seed(1234);
    jg_tensor *p;
    if (c->transposed) {
        p = jg_transpose(jg_randn(c->dtype, 2, TU_SHAPE(7, c->n / 7)), 0, 1);
        assert_false(jg_is_contiguous(p));
        p = jg_detach(p);
    } else {
        p = jg_randn(c->dtype, 1, TU_SHAPE(c->n));
    }
    assert_non_null(p);
    jg_set_requires_grad(p, true);
    return p;
}

/* The gradient of step s: random, with -0.0, 0.0, a value whose square
 * overflows and (in the last steps) a NaN. */
static jg_tensor *make_grad(const adam_case *c, const jg_tensor *p, int s) {
    jg_manual_seed(99 + (uint64_t)s);
    jg_tensor *g = jg_randn(c->dtype, jg_ndim(p), jg_shape(p));
    assert_non_null(g);
    if (c->n >= 7) {
        double big = c->dtype == JG_F32 ? 3e25 : 1e200;
        double special[4] = {-0.0, 0.0, s % 3 == 0 ? big : -1e-30, s >= STEPS - 2 ? NAN : 1.0};
        void *d = jg_data(g);
        for (int i = 0; i < 4; i++) {
            if (c->dtype == JG_F32)
                ((float *)d)[1 + i] = (float)special[i];
            else
                ((double *)d)[1 + i] = special[i];
        }
    }
    return g;
}

/* STEPS updates of c with the fused path on or off: the parameter and the
 * state (step, exp_avg, exp_avg_sq, max_exp_avg_sq) go to out, the state
 * owned by the caller. */
static void run(const adam_case *c, bool fused, jg_tensor **out) {
    bool was = jg_adam_fused_set_enabled(fused);
    jg_optim_hparams h = jg_optim_defaults(c->kind);
    h.lr = 0.01;
    h.weight_decay = c->weight_decay;
    h.amsgrad = c->amsgrad;
    h.maximize = c->maximize;
    jg_tensor *p = make_param(c);
    jg_tensor *st[JG_OPTIM_MAX_STATE] = {NULL};
    for (int s = 0; s < STEPS; s++) {
        jg_scope_push();
        uint64_t v0 = st[1] ? jg_version(st[1]) : 0;
        assert_int_equal(jg_optim_update(c->kind, &h, p, make_grad(c, p, s), st), 0);
        /* the fused loop writes exp_avg once, the composed ops twice */
        if (s > 0)
            assert_int_equal(jg_version(st[1]) - v0, fused && !c->transposed ? 1 : 2);
        jg_scope_pop();
    }
    out[0] = p;
    for (int i = 0; i < 4; i++)
        out[1 + i] = st[i];
    assert_int_equal(out[4] != NULL, c->amsgrad);
    jg_adam_fused_set_enabled(was);
}

static void check_case(const adam_case *c) {
    jg_scope_push();
    jg_tensor *a[5], *b[5];
    run(c, true, a);
    run(c, false, b);
    static const char *const what[5] = {"param", "step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    for (int i = 0; i < 5; i++) {
        if (!a[i])
            continue;
        char desc[160];
        snprintf(desc, sizeof desc, "%s (kind %d amsgrad %d maximize %d wd %g %s n %lld%s)",
                 what[i], (int)c->kind, c->amsgrad, c->maximize, c->weight_decay,
                 jg_dtype_name(c->dtype), (long long)c->n, c->transposed ? " transposed" : "");
        assert_same_bits(a[i], b[i], desc);
    }
    /* (not vacuous: the update moved the first element, whose gradient is
     * random at every step) */
    double *x = malloc(sizeof(double) * (size_t)c->n), *y = malloc(sizeof(double) * (size_t)c->n);
    assert_true(x && y);
    tu_values(a[0], x);
    tu_values(make_param(c), y);
    assert_true(x[0] != y[0]);
    free(x);
    free(y);
    for (int i = 1; i < 5; i++) {
        if (a[i])
            jg_release(a[i]);
        if (b[i])
            jg_release(b[i]);
    }
    jg_scope_pop();
}

static const int64_t sizes[] = {1, 7, 1000, 100003};

static void check_all(jg_optim_kind kind, jg_dtype dtype) {
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (int flags = 0; flags < 8; flags++) {
            /* (the pool's size: no option and all options, to stay quick
             * under valgrind) */
            if (sizes[k] > 2 * 32768 && flags != 0 && flags != 7)
                continue;
            adam_case c = {kind,  flags & 1, (flags & 2) != 0, false, (flags & 4) ? 0.1 : 0,
                           dtype, sizes[k]};
            check_case(&c);
        }
}

static void test_adam_fused_f32(void **state) {
    (void)state;
    check_all(JG_OPTIM_ADAM, JG_F32);
}

static void test_adam_fused_f64(void **state) {
    (void)state;
    check_all(JG_OPTIM_ADAM, JG_F64);
}

static void test_adamw_fused_f32(void **state) {
    (void)state;
    check_all(JG_OPTIM_ADAMW, JG_F32);
}

static void test_adamw_fused_f64(void **state) {
    (void)state;
    check_all(JG_OPTIM_ADAMW, JG_F64);
}

/* A transposed parameter is not a dense row: the composed ops run (the
 * version count in run() tells) and give the same bits as a dense
 * parameter holding the same values. */
static void test_adam_fused_noncontiguous_param(void **state) {
    (void)state;
    for (int kind = JG_OPTIM_ADAM; kind <= JG_OPTIM_ADAMW; kind++)
        for (int dt = 0; dt < 2; dt++) {
            adam_case c = {(jg_optim_kind)kind,  true,   false, true, 0.1,
                           dt ? JG_F64 : JG_F32, 7 * 143};
            check_case(&c);
        }
}

/* Regression: maximize negated the gradient as `-g` in the loop, and gcc
 * folded (-g) + p * wd into p * wd - g, which returns a NaN gradient's NaN
 * with its sign unflipped; the composed ops negate first (neg flips the
 * sign bit), so Adam with maximize and weight decay gave NaNs of the other
 * sign.  The loop flips the sign bit where gcc cannot see a negation. */
static void test_adam_fused_maximize_nan_gradient_sign(void **state) {
    (void)state;
    for (int dt = 0; dt < 2; dt++) {
        adam_case c = {JG_OPTIM_ADAM, false, true, false, 0.1, dt ? JG_F64 : JG_F32, 7};
        check_case(&c);
    }
}

/* Chunks over the pool's threads compute each element as one thread does. */
static void test_adam_fused_threads(void **state) {
    (void)state;
    int nt = jg_get_num_threads();
    jg_tensor *a[5], *b[5];
    adam_case c = {JG_OPTIM_ADAMW, true, false, false, 0.1, JG_F32, 100003};
    jg_set_num_threads(4);
    run(&c, true, a);
    jg_set_num_threads(1);
    run(&c, true, b);
    jg_set_num_threads(nt);
    for (int i = 0; i < 5; i++) {
        assert_same_bits(a[i], b[i], "threads");
        if (i > 0) {
            jg_release(a[i]);
            jg_release(b[i]);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_adam_fused_f32),
        TU_TEST(test_adam_fused_f64),
        TU_TEST(test_adamw_fused_f32),
        TU_TEST(test_adamw_fused_f64),
        TU_TEST(test_adam_fused_noncontiguous_param),
        TU_TEST(test_adam_fused_maximize_nan_gradient_sign),
        TU_TEST(test_adam_fused_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
