/* Compile modes (jg_compiled_set_mode): "reduce-overhead" replays from
 * buffers kept across calls without overwriting an output the caller still
 * holds; "max-autotune" times the variants of each graph and logs its
 * choice; every mode trains bitwise as eager does (an MLP and a small
 * transformer block, whole steps: forward, backward, SGD with momentum,
 * zero_grad), on both backends; an unknown mode is an error. */
#include "testutil.h"

#include "backend/static_plan.h"
#include "compile/compile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *backends[] = {"interp", "c"};
static const char *modes[] = {"default", "reduce-overhead", "max-autotune-no-cudagraphs",
                              "max-autotune"};
enum { N_MODES = 4, STEPS = 20 };

/* ---- a program with one output: softmax(exp(x) * 2) + x (the softmax is
 * not fused, so the c backend has intermediate buffers too) ---- */

static jg_tensor *ew(jg_tensor *x) {
    return jg_add(jg_softmax(jg_mul_scalar(jg_exp(x), 2.0), 0), x);
}

static int p_ew(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = ew(in[0]);
    return out[0] ? 1 : -1;
}

static void test_modes_unknown(void **state) {
    (void)state;
    jg_compiled *c = jg_compile(p_ew, NULL, NULL);
    assert_non_null(c);
    assert_int_equal(jg_compiled_set_mode(c, "fastest"), -1);
    TU_ERROR("Unrecognized mode=fastest, should be one of: default, reduce-overhead, "
             "max-autotune-no-cudagraphs, max-autotune");
    assert_int_equal(jg_compiled_set_mode(NULL, "default"), -1);
    TU_ERROR("compiled function is NULL");
    /* the refused call changed nothing: it still runs (as default) */
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0, 1, 2)), *y = NULL;
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &y), 1);
    TU_SAME(y, ew(x));
    /* after the first trace it is too late */
    assert_int_equal(jg_compiled_set_mode(c, "reduce-overhead"), -1);
    TU_ERROR("set it before the first call");
    jg_compiled_free(c);
    /* NULL is "default" */
    c = jg_compile(p_ew, NULL, NULL);
    assert_int_equal(jg_compiled_set_mode(c, NULL), 0);
    jg_compiled_free(c);
}

/* An output the caller keeps is never the buffer of the next call's; a
 * replay allocates no intermediate buffer. */
static void test_modes_held_output(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        jg_compiled *c = jg_compile(p_ew, NULL, &(jg_compile_options){.backend = backends[b]});
        assert_int_equal(jg_compiled_set_mode(c, "reduce-overhead"), 0);
        jg_tensor *x1 = jg_keep(tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(0, 1, 2, 3)));
        jg_tensor *x2 = jg_keep(tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(-1, 5, 0.5, 2)));
        jg_tensor *want1 = jg_keep(ew(x1));
        jg_tensor *want2 = jg_keep(ew(x2));
        jg_tensor *y1 = NULL, *y2 = NULL, *y3 = NULL;
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x1, &y1), 1);
        jg_keep(y1);
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x2, &y2), 1);
        jg_keep(y2);
        TU_SAME(y1, want1); /* held: not overwritten by the second call */
        TU_SAME(y2, want2);
        assert_ptr_not_equal(jg_data(y1), jg_data(y2));
        /* a view of an output holds its storage too */
        jg_tensor *v = jg_keep(jg_slice(y2, 0, 1, 3));
        jg_release(y2);
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x1, &y3), 1);
        jg_keep(y3);
        TU_SAME(y3, want1);
        TU_SAME(v, jg_slice(want2, 0, 1, 3));
        jg_release(v);
        jg_release(y1);
        jg_release(y3);
        /* from here on every intermediate buffer is reused */
        jg_tensor *y = NULL;
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x2, &y), 1);
        jg_release(jg_keep(y));
        jg_static_plan_stats s0, s1;
        jg_static_plan_totals(&s0);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(jg_compiled_call(c, NULL, 0, 1, i % 2 ? &x1 : &x2, &y), 1);
            TU_SAME(y, i % 2 ? want1 : want2);
            jg_release(jg_keep(y));
        }
        jg_static_plan_totals(&s1);
        assert_int_equal(s1.fresh, s0.fresh);
        assert_true(s1.reused >= s0.reused + 3);
        assert_int_equal(jg_compiled_entries(c), 1);
        jg_compiled_free(c);
        jg_release(x1), jg_release(x2), jg_release(want1), jg_release(want2);
    }
}

/* Regression: outputs with history (their node holds the entry) once sat
 * in the static plan's slots, a cycle that kept entry, plan and buffers
 * alive after jg_compiled_free. */
static jg_tensor *w_hist;
static int p_hist(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_tanh(jg_matmul(jg_relu(jg_matmul(in[0], w_hist)), w_hist));
    return out[0] ? 1 : -1;
}

static void test_modes_output_history_freed(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        jg_scope_push();
        jg_manual_seed(5);
        jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(8, 16));
        w_hist = jg_randn(JG_F32, 2, TU_SHAPE(16, 16));
        jg_set_requires_grad(w_hist, true);
        int64_t before = jg_memory_allocated();
        for (int md = 1; md < N_MODES; md++) {
            jg_compiled *c =
                jg_compile(p_hist, NULL, &(jg_compile_options){.backend = backends[b]});
            assert_int_equal(jg_compiled_set_mode(c, modes[md]), 0);
            jg_scope_push();
            for (int i = 0; i < 3; i++) {
                jg_tensor *y = NULL;
                assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &y), 1);
                assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
            }
            jg_scope_pop();
            jg_compiled_free(c);
            jg_clear_grad(w_hist);
            assert_int_equal(jg_memory_allocated(), before);
        }
        jg_scope_pop();
    }
}

/* ---- max-autotune logs the variant it keeps ---- */

static const char *tune_backend;
static void tune_run(void) {
    jg_compiled *c = jg_compile(p_ew, NULL, &(jg_compile_options){.backend = tune_backend});
    assert_int_equal(jg_compiled_set_mode(c, "max-autotune"), 0);
    jg_tensor *x = jg_keep(jg_randn(JG_F32, 1, TU_SHAPE(100000))), *y = NULL;
    jg_tensor *want = jg_keep(ew(x));
    for (int i = 0; i < 3; i++) {
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &y), 1);
        TU_SAME(y, want);
        jg_release(jg_keep(y));
    }
    jg_compiled_free(c);
    jg_release(x), jg_release(want);
}

static void test_modes_autotune_log(void **state) {
    (void)state;
    const char *was = getenv("JITGRAD_LOG");
    char *prev = was ? strdup(was) : NULL;
    setenv("JITGRAD_LOG", "autotune", 1);
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        tune_backend = backends[b];
        char *err = tu_capture_stderr(tune_run);
        /* one choice, on the first call only, naming the timed variants */
        const char *line = strstr(err, "jitgrad: max-autotune: ");
        assert_non_null(line);
        assert_non_null(strstr(line, " runs with "));
        assert_null(strstr(line + 1, "jitgrad: max-autotune: "));
        if (b == 1)
            assert_non_null(strstr(line, "interp kernels"));
        assert_non_null(strstr(line, b ? "c loops" : "interp kernels"));
        free(err);
    }
    if (prev)
        setenv("JITGRAD_LOG", prev, 1);
    else
        unsetenv("JITGRAD_LOG");
    free(prev);
}

/* ---- whole training steps ---- */

typedef struct model {
    int kind; /* 0: MLP, 1: transformer block */
    jg_tensor *p[6];
    int n_p;
    jg_optim *opt;
} model;

enum { D = 8, T = 5, B = 2 };

static void model_init(model *m, int kind) {
    jg_manual_seed(3);
    m->kind = kind;
    if (kind == 0) {
        const int64_t shapes[4][2] = {{6, 16}, {16, 0}, {16, 3}, {3, 0}};
        m->n_p = 4;
        for (int i = 0; i < 4; i++)
            m->p[i] =
                jg_keep(jg_mul_scalar(jg_randn(JG_F32, shapes[i][1] ? 2 : 1, shapes[i]), 0.3));
    } else {
        const int64_t shapes[4][2] = {{D, 3 * D}, {D, D}, {D, 4 * D}, {4 * D, D}};
        m->n_p = 4;
        for (int i = 0; i < 4; i++)
            m->p[i] = jg_keep(jg_mul_scalar(jg_randn(JG_F32, 2, shapes[i]), 0.3));
    }
    for (int i = 0; i < m->n_p; i++)
        jg_set_requires_grad(m->p[i], true);
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_SGD);
    h.lr = 0.05;
    h.momentum = 0.9;
    m->opt = jg_optim_new(JG_OPTIM_SGD, m->p, m->n_p, &h);
    assert_non_null(m->opt);
}

static void model_free(model *m) {
    jg_optim_free(m->opt);
    for (int i = 0; i < m->n_p; i++)
        jg_release(m->p[i]);
}

/* pre-norm attention and a GELU MLP with residuals, no biases (as
 * python/tests/test_compile_whole_step.py's Block) */
static jg_tensor *block_fwd(model *m, jg_tensor *x) {
    jg_tensor *qkv = jg_matmul(jg_layer_norm(x, 1, NULL, NULL, 1e-5), m->p[0]);
    jg_tensor *q = jg_slice(qkv, 2, 0, D), *k = jg_slice(qkv, 2, D, 2 * D),
              *v = jg_slice(qkv, 2, 2 * D, 3 * D);
    jg_tensor *att =
        jg_softmax(jg_mul_scalar(jg_matmul(q, jg_transpose(k, 1, 2)), 1.0 / sqrt((double)D)), 2);
    x = jg_add(x, jg_matmul(jg_matmul(att, v), m->p[1]));
    jg_tensor *h = jg_gelu(jg_matmul(jg_layer_norm(x, 1, NULL, NULL, 1e-5), m->p[2]), JG_GELU_NONE);
    return jg_add(x, jg_matmul(h, m->p[3]));
}

static jg_tensor *mlp_fwd(model *m, jg_tensor *x) {
    jg_tensor *h = jg_relu(jg_add(jg_matmul(x, m->p[0]), m->p[1]));
    return jg_add(jg_matmul(h, m->p[2]), m->p[3]);
}

static int p_step(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    model *m = user;
    jg_tensor *y = m->kind ? block_fwd(m, in[0]) : mlp_fwd(m, in[0]);
    jg_tensor *loss = jg_mse_loss(y, in[1], JG_REDUCTION_MEAN);
    if (!loss || jg_backward(loss, NULL, 0) < 0 || jg_optim_step(m->opt) < 0 ||
        jg_optim_zero_grad(m->opt, true) < 0)
        return -1;
    out[0] = loss;
    return 1;
}

static void train(model *m, jg_compiled *c, double *losses) {
    jg_manual_seed(11);
    const int64_t *xs = m->kind ? TU_SHAPE(B, T, D) : TU_SHAPE(16, 6);
    const int64_t *ys = m->kind ? TU_SHAPE(B, T, D) : TU_SHAPE(16, 3);
    int nd = m->kind ? 3 : 2;
    jg_tensor *x = jg_keep(jg_randn(JG_F32, nd, xs)), *y = jg_keep(jg_randn(JG_F32, nd, ys));
    for (int s = 0; s < STEPS; s++) {
        jg_scope_push();
        jg_tensor *in[2] = {x, y}, *loss = NULL;
        if (c)
            assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &loss), 1);
        else
            assert_int_equal(p_step(m, NULL, 2, in, &loss), 1);
        losses[s] = jg_item(loss);
        jg_scope_pop();
    }
    jg_release(x), jg_release(y);
}

static void check_training(int kind) {
    model e = {0};
    double le[STEPS];
    model_init(&e, kind);
    train(&e, NULL, le);
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        for (int md = 0; md < N_MODES; md++) {
            model k = {0};
            double lk[STEPS];
            model_init(&k, kind);
            jg_compiled *c = jg_compile(
                p_step, &k, &(jg_compile_options){.backend = backends[b], .fullgraph = true});
            assert_int_equal(jg_compiled_set_mode(c, modes[md]), 0);
            train(&k, c, lk);
            assert_memory_equal(le, lk, sizeof le);
            for (int i = 0; i < e.n_p; i++) {
                TU_SAME(k.p[i], e.p[i]);
                assert_null(jg_grad(k.p[i]));
                TU_SAME(jg_optim_state(k.opt, 0, i, "momentum_buffer"),
                        jg_optim_state(e.opt, 0, i, "momentum_buffer"));
            }
            /* the first step makes the momentum buffers (eagerly), then one
             * entry serves every step */
            assert_int_equal(jg_compiled_entries(c), 1);
            assert_int_equal(jg_compiled_fallbacks(c), 1);
            jg_compiled_free(c);
            model_free(&k);
        }
    }
    model_free(&e);
}

static void test_modes_mlp_step(void **state) {
    (void)state;
    check_training(0);
}

static void test_modes_block_step(void **state) {
    (void)state;
    check_training(1);
}

/* ---- every max-autotune variant gives the bits of eager ---- */

static const char *const variant_names[6] = {"c loops (",
                                             "c loops on 1 thread (",
                                             "c loops, math split out (",
                                             "c loops, math split out on 1 thread (",
                                             "interp kernels (",
                                             "interp kernels on 1 thread ("};
static int forced;

static void forced_block_training(void) {
    model e = {0}, k = {0};
    double le[STEPS], lk[STEPS];
    model_init(&e, 1);
    train(&e, NULL, le);
    model_init(&k, 1);
    jg_compiled *c =
        jg_compile(p_step, &k, &(jg_compile_options){.backend = "c", .fullgraph = true});
    assert_int_equal(jg_compiled_set_mode(c, "max-autotune"), 0);
    train(&k, c, lk);
    assert_memory_equal(le, lk, sizeof le);
    for (int i = 0; i < e.n_p; i++)
        TU_SAME(k.p[i], e.p[i]);
    jg_compiled_free(c);
    model_free(&k);
    model_free(&e);
    /* a large elementwise graph: the pool's chunks in the threaded variants */
    tune_backend = "c";
    tune_run();
}

static void test_modes_autotune_every_variant(void **state) {
    (void)state;
    if (!jg_compile_backend_available("c"))
        skip();
    int threads = jg_get_num_threads();
    assert_int_equal(jg_set_num_threads(2), 0); /* so the 1-thread variants are timed too */
    const char *was = getenv("JITGRAD_LOG");
    char *prev = was ? strdup(was) : NULL;
    setenv("JITGRAD_LOG", "autotune", 1);
    for (forced = 0; forced < 6; forced++) {
        jg_modes_debug_force = forced;
        char *err = tu_capture_stderr(forced_block_training);
        jg_modes_debug_force = -1;
        /* the block's step graph (it has GELU: six variants) ran the forced one */
        char want[96];
        snprintf(want, sizeof want, "runs with %s", variant_names[forced]);
        assert_non_null(strstr(err, want));
        free(err);
    }
    if (prev)
        setenv("JITGRAD_LOG", prev, 1);
    else
        unsetenv("JITGRAD_LOG");
    free(prev);
    assert_int_equal(jg_set_num_threads(threads), 0);
}

/* ---- a graph with a custom function is not tuned ---- */

static int twice_fwd(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx, (void)n;
    out[0] = jg_mul_scalar(in[0], 2.0);
    return 1;
}
static int twice_bwd(jg_ctx *ctx, int n_out, jg_tensor *const *dout, int n_in, jg_tensor **din) {
    (void)ctx, (void)n_out, (void)n_in;
    din[0] = jg_mul_scalar(dout[0], 2.0);
    return 1;
}
static const jg_function Twice = {"Twice", twice_fwd, twice_bwd, NULL};

static int p_custom(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *y;
    if (jg_apply(&Twice, 1, in, NULL, 0, &y) < 0)
        return -1;
    out[0] = jg_exp(y);
    return 1;
}

static void custom_run(void) {
    jg_compiled *c = jg_compile(p_custom, NULL, &(jg_compile_options){.backend = tune_backend});
    assert_int_equal(jg_compiled_set_mode(c, "max-autotune"), 0);
    jg_tensor *x = jg_keep(tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0.5, -1, 2))), *y = NULL;
    jg_tensor *want = jg_keep(jg_exp(jg_mul_scalar(x, 2.0)));
    for (int i = 0; i < 2; i++) {
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &y), 1);
        TU_SAME(y, want);
        jg_release(jg_keep(y));
    }
    jg_compiled_free(c);
    jg_release(x), jg_release(want);
}

static void test_modes_custom_runs_as_default(void **state) {
    (void)state;
    const char *was = getenv("JITGRAD_LOG");
    char *prev = was ? strdup(was) : NULL;
    setenv("JITGRAD_LOG", "autotune", 1);
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        tune_backend = backends[b];
        char *err = tu_capture_stderr(custom_run);
        assert_non_null(strstr(err, "runs as default (it calls custom functions)"));
        assert_null(strstr(err, "runs with"));
        free(err);
    }
    if (prev)
        setenv("JITGRAD_LOG", prev, 1);
    else
        unsetenv("JITGRAD_LOG");
    free(prev);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_modes_unknown),
        TU_TEST(test_modes_held_output),
        TU_TEST(test_modes_autotune_log),
        TU_TEST(test_modes_mlp_step),
        TU_TEST(test_modes_block_step),
        TU_TEST(test_modes_autotune_every_variant),
        TU_TEST(test_modes_custom_runs_as_default),
        TU_TEST(test_modes_output_history_freed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
