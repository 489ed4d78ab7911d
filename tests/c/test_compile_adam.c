/* Adam, AdamW, Adagrad and RMSprop steps inside a compiled program: the
 * step-dependent numbers (bias corrections, Adagrad's clr) are graph ops on
 * the count tensor, so a whole training step (forward, jg_backward,
 * jg_optim_step, zero_grad) is one graph.  The first call creates the
 * optimizer state and runs eagerly; the other 19 replay the graph, with
 * losses, parameters and state bitwise equal to the eager loop, on both
 * backends, for f32 and f64 parameters.  A traced Adam/AdamW step without
 * amsgrad is two nodes per parameter (adam_moments, adam_update: the eager
 * one-pass update's arithmetic); JITGRAD_OPTIM_FUSED off, the composed ops. */
#include "testutil.h"

#include "backend/cgen.h"
#include "compile/compile.h"
#include "ops/optable.h"
#include "optim/adam_fused.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int count_of(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

typedef struct {
    jg_tensor *w, *b;
    jg_optim *opt;
} model;

static void model_init(model *m, jg_dtype dtype, jg_optim_kind kind, const jg_optim_hparams *h) {
    jg_manual_seed(5);
    m->w = jg_keep(jg_randn(dtype, 2, TU_SHAPE(4, 3)));
    m->b = jg_keep(jg_randn(dtype, 1, TU_SHAPE(3)));
    jg_set_requires_grad(m->w, true);
    jg_set_requires_grad(m->b, true);
    jg_tensor *ps[2] = {m->w, m->b};
    m->opt = jg_optim_new(kind, ps, 2, h);
    assert_non_null(m->opt);
}

static void model_free(model *m) {
    jg_optim_free(m->opt);
    jg_release(m->w), jg_release(m->b);
}

static int p_step(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    model *m = user;
    jg_tensor *y = jg_add(jg_matmul(in[0], m->w), m->b);
    jg_tensor *loss = jg_mse_loss(jg_tanh(y), in[1], JG_REDUCTION_MEAN);
    if (!loss || jg_backward(loss, NULL, 0) < 0 || jg_optim_step(m->opt) < 0 ||
        jg_optim_zero_grad(m->opt, true) < 0)
        return -1;
    out[0] = loss;
    return 1;
}

/* 20 steps, eagerly (c NULL) or through c; the losses' bytes into losses */
static void train(model *m, jg_compiled *c, jg_dtype dtype, double *losses) {
    jg_manual_seed(9);
    jg_tensor *x = jg_keep(jg_randn(dtype, 2, TU_SHAPE(8, 4)));
    jg_tensor *y = jg_keep(jg_randn(dtype, 2, TU_SHAPE(8, 3)));
    for (int s = 0; s < 20; s++) {
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

static void same_bits(jg_tensor *a, jg_tensor *b) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(jg_dtype_of(a), jg_dtype_of(b));
    assert_int_equal(jg_numel(a), jg_numel(b));
    size_t n = (size_t)jg_numel(a) * (jg_dtype_of(a) == JG_F64 ? 8 : 4);
    char *x = malloc(n), *y = malloc(n);
    assert_int_equal(jg_copy_to(a, x, n), 0);
    assert_int_equal(jg_copy_to(b, y, n), 0);
    assert_memory_equal(x, y, n);
    free(x), free(y);
}

static void check_same(model *a, model *b) {
    jg_tensor *pa[2] = {a->w, a->b}, *pb[2] = {b->w, b->b};
    jg_optim_kind kind = jg_optim_kind_of(a->opt);
    for (int i = 0; i < 2; i++) {
        same_bits(pa[i], pb[i]);
        for (int k = 0; jg_optim_state_name(kind, k); k++) {
            const char *name = jg_optim_state_name(kind, k);
            jg_tensor *sa = jg_optim_state(a->opt, 0, i, name),
                      *sb = jg_optim_state(b->opt, 0, i, name);
            assert_true((sa == NULL) == (sb == NULL));
            if (sa)
                same_bits(sa, sb);
        }
    }
    jg_tensor *step = jg_optim_state(b->opt, 0, 0, "step");
    assert_non_null(step);
    assert_true(jg_item(step) >= 20);
}

/* first_step: the count the training starts from (a loaded state) */
static void run_case(jg_optim_kind kind, const jg_optim_hparams *h, jg_dtype dtype,
                     double first_step) {
    for (int be = 0; be < 2; be++) {
        const char *backend = be ? "c" : "interp";
        if (!jg_compile_backend_available(backend))
            continue;
        model e = {0}, k = {0};
        model_init(&e, dtype, kind, h);
        model_init(&k, dtype, kind, h);
        if (first_step > 0)
            for (int i = 0; i < 2; i++) {
                jg_tensor *s = jg_scalar(JG_F32, first_step);
                assert_int_equal(jg_optim_set_state(e.opt, 0, i, "step", s), 0);
                assert_int_equal(jg_optim_set_state(k.opt, 0, i, "step", s), 0);
            }
        double le[20], lk[20];
        train(&e, NULL, dtype, le);
        jg_compile_options o = {.backend = backend, .fullgraph = true};
        jg_compiled *c = jg_compile(p_step, &k, &o);
        assert_non_null(c);
        train(&k, c, dtype, lk);
        assert_memory_equal(le, lk, sizeof le);
        check_same(&e, &k);
        /* the first call creates the state (eagerly), the others replay one
         * graph: no break on the step count */
        assert_int_equal(jg_compiled_fallbacks(c), 1);
        assert_int_equal(jg_compiled_entries(c), 1);
        char *g = jg_compiled_graph(c, 0);
        assert_non_null(g);
        int fused = (kind == JG_OPTIM_ADAM || kind == JG_OPTIM_ADAMW) && !h->amsgrad &&
                            jg_adam_fused_enabled()
                        ? 2
                        : 0; /* one of each per parameter */
        assert_int_equal(count_of(g, "= adam_moments("), fused);
        assert_int_equal(count_of(g, "= adam_update("), fused);
        /* the bias corrections inside adam_update: no per-parameter chain
         * of 0-d ops (to_dtype, pow, sub, div, sqrt, their stack) */
        if (fused) {
            assert_int_equal(count_of(g, "= pow("), 0);
            assert_int_equal(count_of(g, "= slice_scatter("), 0);
            assert_int_equal(count_of(g, "= to_dtype("), 0);
        }
        free(g);
        jg_compiled_free(c);
        model_free(&e);
        model_free(&k);
    }
}

static void test_compile_adam(void **state) {
    (void)state;
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_ADAM);
    h.lr = 0.05;
    run_case(JG_OPTIM_ADAM, &h, JG_F32, 0);
    run_case(JG_OPTIM_ADAM, &h, JG_F64, 0);
    /* weight decay on the gradient, amsgrad's maximum, maximize */
    h.weight_decay = 0.1;
    h.amsgrad = true;
    h.maximize = true;
    h.beta1 = 0.8;
    run_case(JG_OPTIM_ADAM, &h, JG_F32, 0);
}

/* The two nodes for every variant they take (weight decay on the gradient
 * or decoupled, maximize), and the composed ops with JITGRAD_OPTIM_FUSED off:
 * each bitwise equal to the eager loop. */
static void test_compile_adam_nodes(void **state) {
    (void)state;
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_ADAM);
    h.lr = 0.05;
    h.weight_decay = 0.1;
    h.maximize = true;
    h.beta1 = 0.8;
    run_case(JG_OPTIM_ADAM, &h, JG_F32, 0);
    run_case(JG_OPTIM_ADAM, &h, JG_F64, 0);
    jg_optim_hparams w = jg_optim_defaults(JG_OPTIM_ADAMW);
    w.lr = 0.05;
    w.weight_decay = 0.1;
    w.maximize = true;
    run_case(JG_OPTIM_ADAMW, &w, JG_F32, 0);
    run_case(JG_OPTIM_ADAMW, &w, JG_F64, 3);
    bool was = jg_adam_fused_set_enabled(false);
    run_case(JG_OPTIM_ADAM, &h, JG_F32, 0);
    run_case(JG_OPTIM_ADAMW, &w, JG_F32, 0);
    jg_adam_fused_set_enabled(was);
}

/* The nodes' kernels run eagerly too: the same bits as the one-pass update,
 * with a transposed (strided) gradient and parameter. */
static void test_adam_nodes_eager(void **state) {
    (void)state;
    for (int dt = 0; dt < 2; dt++) {
        jg_dtype d = dt ? JG_F64 : JG_F32;
        for (int variant = 0; variant < 3; variant++) {
            jg_manual_seed(11 + (uint64_t)variant);
            jg_tensor *t[4], *u[4];
            for (int k = 0; k < 4; k++) {
                t[k] = jg_randn(d, 2, TU_SHAPE(70, 3));
                if (k == 3)
                    t[k] = jg_mul(t[k], t[k]); /* exp_avg_sq >= 0 */
                u[k] = jg_clone(t[k]);
            }
            jg_adam_fused_args a = {.decoupled = variant == 1,
                                    .weight_decay = variant == 2,
                                    .decay = 0.995,
                                    .wd = 0.1,
                                    .beta1 = 0.9,
                                    .one_minus_beta1 = 1 - 0.9,
                                    .beta2 = 0.999,
                                    .one_minus_beta2 = 1 - 0.999,
                                    .eps = 1e-8};
            jg_adam_fused_scalars(&a, d, 0.05 / (1 - pow(0.9, 3)), sqrt(1 - pow(0.999, 3)));
            assert_true(jg_adam_fused_(t[0], t[1], t[2], t[3], NULL, &a));
            /* the nodes on a transposed parameter and gradient */
            jg_tensor *pt = jg_contiguous(jg_transpose(u[0], 0, 1)),
                      *gt = jg_contiguous(jg_transpose(u[1], 0, 1));
            jg_tensor *count = jg_scalar(dt ? JG_F64 : JG_F32, 3);
            jg_tensor *p = jg_transpose(pt, 0, 1), *g = jg_transpose(gt, 0, 1);
            a.lr = 0.05;
            assert_int_equal(jg_adam_step_traced_(p, g, u[2], u[3], count, &a), 0);
            same_bits(t[0], p);
            same_bits(t[2], u[2]);
            same_bits(t[3], u[3]);
        }
    }
}

/* adam_moments reads a column-major gradient (a traced Linear's weight
 * gradient) in bands gathered into a cache-sized buffer: the same bits as
 * from a contiguous copy of it, for several bands, a partial last one, both
 * dtypes and 1 or 2 threads. */
static void test_adam_moments_transposed_grad(void **state) {
    (void)state;
    int threads = jg_get_num_threads();
    for (int dt = 0; dt < 2; dt++)
        for (int nt = 1; nt <= 2; nt++) {
            jg_set_num_threads(nt);
            jg_dtype d = dt ? JG_F64 : JG_F32;
            jg_manual_seed(21);
            /* [301, 200]: 40 (f32) or 20 (f64) rows a band, 301 rows */
            jg_tensor *gt = jg_randn(d, 2, TU_SHAPE(200, 301));
            jg_tensor *g = jg_transpose(gt, 0, 1), *gc = jg_contiguous(g);
            jg_tensor *t[3], *u[3];
            for (int k = 0; k < 3; k++) {
                t[k] = jg_randn(d, 2, TU_SHAPE(301, 200));
                if (k == 2)
                    t[k] = jg_mul(t[k], t[k]); /* exp_avg_sq >= 0 */
                u[k] = jg_clone(t[k]);
            }
            jg_adam_fused_args a = {.decoupled = true,
                                    .decay = 0.995,
                                    .beta1 = 0.9,
                                    .one_minus_beta1 = 1 - 0.9,
                                    .beta2 = 0.999,
                                    .one_minus_beta2 = 1 - 0.999,
                                    .eps = 1e-8,
                                    .lr = 0.01};
            jg_tensor *count = jg_scalar(JG_F32, 7);
            assert_int_equal(jg_adam_step_traced_(t[0], g, t[1], t[2], count, &a), 0);
            assert_int_equal(jg_adam_step_traced_(u[0], gc, u[1], u[2], count, &a), 0);
            for (int k = 0; k < 3; k++)
                same_bits(t[k], u[k]);
        }
    jg_set_num_threads(threads);
}

/* The nodes' shape rules refuse what a step never gives them. */
static void test_adam_nodes_refuse(void **state) {
    (void)state;
    jg_tensor *p = jg_randn(JG_F32, 1, TU_SHAPE(4)), *g3 = jg_randn(JG_F32, 1, TU_SHAPE(3));
    jg_tensor *i = jg_full(JG_I64, 1, TU_SHAPE(4), 1), *s = jg_scalar(JG_F64, 1);
    jg_adam_fused_args a = {.beta1 = 0.9,
                            .one_minus_beta1 = 0.1,
                            .beta2 = 0.999,
                            .one_minus_beta2 = 0.001,
                            .eps = 1e-8};
    assert_int_equal(jg_adam_step_traced_(p, g3, p, p, s, &a), -1);
    TU_ERROR("adam_moments(): grad must have the parameter's dtype and shape");
    assert_int_equal(jg_adam_step_traced_(i, i, i, i, s, &a), -1);
    TU_ERROR("adam_moments(): expected a float32 or float64 parameter, got int64");
    static const jg_attrs none;
    jg_tensor *out = NULL, *d = jg_randn(JG_F64, 1, TU_SHAPE(4));
    jg_tensor *in[4] = {p, p, d, jg_full(JG_F64, 1, TU_SHAPE(2), 1)};
    assert_int_equal(jg_op_call(JG_OP_ADAM_UPDATE, &none, in, &out), -1);
    TU_ERROR("adam_update(): exp_avg_sq must have the parameter's dtype and shape");
    in[2] = p;
    in[3] = jg_full(JG_F64, 1, TU_SHAPE(2), 1);
    assert_int_equal(jg_op_call(JG_OP_ADAM_UPDATE, &none, in, &out), -1);
    TU_ERROR("adam_update(): step must be a float32 or float64 tensor of one element (the step "
             "count)");
    in[3] = jg_full(JG_I64, 1, TU_SHAPE(1), 1);
    assert_int_equal(jg_op_call(JG_OP_ADAM_UPDATE, &none, in, &out), -1);
    TU_ERROR("adam_update(): step must be a float32 or float64 tensor of one element (the step "
             "count)");
    in[3] = jg_full(JG_F32, 1, TU_SHAPE(1), 1); /* a loaded count of shape [1] is one */
    assert_int_equal(jg_op_call(JG_OP_ADAM_UPDATE, &none, in, &out), 0);
}

/* a loaded count of 1234: beta1 ** step is tiny, beta2 ** step far from 1
 * (another range of pow's arguments than steps 1 to 20) */
static void test_compile_adam_loaded_count(void **state) {
    (void)state;
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_ADAM);
    h.lr = 0.05;
    h.beta2 = 0.9999;
    run_case(JG_OPTIM_ADAM, &h, JG_F32, 1234);
    run_case(JG_OPTIM_ADAM, &h, JG_F64, 1234);
}

static void test_compile_adamw(void **state) {
    (void)state;
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_ADAMW);
    h.lr = 0.05;
    run_case(JG_OPTIM_ADAMW, &h, JG_F32, 0);
    h.amsgrad = true;
    h.weight_decay = 0.1;
    run_case(JG_OPTIM_ADAMW, &h, JG_F32, 0);
    run_case(JG_OPTIM_ADAMW, &h, JG_F64, 0);
}

static void test_compile_adagrad(void **state) {
    (void)state;
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_ADAGRAD);
    h.lr = 0.1;
    run_case(JG_OPTIM_ADAGRAD, &h, JG_F32, 0);
    /* clr = lr / (1 + (step - 1) * lr_decay) varies with the count */
    h.lr_decay = 0.05;
    h.weight_decay = 0.1;
    h.initial_accumulator_value = 0.2;
    run_case(JG_OPTIM_ADAGRAD, &h, JG_F32, 0);
    run_case(JG_OPTIM_ADAGRAD, &h, JG_F64, 0);
}

static void test_compile_rmsprop(void **state) {
    (void)state;
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_RMSPROP);
    run_case(JG_OPTIM_RMSPROP, &h, JG_F32, 0);
    h.centered = true;
    h.momentum = 0.5;
    h.weight_decay = 0.01;
    run_case(JG_OPTIM_RMSPROP, &h, JG_F32, 0);
    run_case(JG_OPTIM_RMSPROP, &h, JG_F64, 0);
}

/* Eager steps are unchanged: the count is read as a number (the first
 * step's bias corrections are exact: 1 - beta1 ** 1). */
static void test_eager_adam_first_step(void **state) {
    (void)state;
    jg_tensor *p = jg_keep(tu_tensor(JG_F64, 1, TU_SHAPE(1), TU_VALS(1.0)));
    jg_set_requires_grad(p, true);
    jg_optim *opt = jg_optim_adam(&p, 1, 0.1, 0.9, 0.999, 0, 0);
    assert_int_equal(jg_set_grad(p, tu_tensor(JG_F64, 1, TU_SHAPE(1), TU_VALS(2.0))), 0);
    assert_int_equal(jg_optim_step(opt), 0);
    /* exp_avg 0.2, exp_avg_sq 0.004: 1 - 0.1 * (0.2 / 0.1) / (sqrt(0.004) / sqrt(0.001)) */
    double m = (1 - 0.9) * 2.0, v = (1 - 0.999) * 4.0;
    double want = 1.0 + (m * -(0.1 / (1 - 0.9))) / (sqrt(v) * (1.0 / sqrt(1 - 0.999)) + 0);
    double got = jg_item(p);
    assert_memory_equal(&got, &want, sizeof got);
    assert_true(jg_item(jg_optim_state(opt, 0, 0, "step")) == 1);
    jg_optim_free(opt);
    jg_release(p);
}

/* Regression: a NaN step count (a loaded state) failed the step with no
 * message; PyTorch's update runs and the parameter becomes NaN. */
static void test_nan_step_count(void **state) {
    (void)state;
    jg_optim_kind kinds[2] = {JG_OPTIM_ADAM, JG_OPTIM_ADAGRAD};
    for (int i = 0; i < 2; i++) {
        jg_tensor *p = jg_keep(jg_full(JG_F32, 1, TU_SHAPE(1), 1.0));
        jg_set_requires_grad(p, true);
        jg_optim_hparams h = jg_optim_defaults(kinds[i]);
        h.lr_decay = 0.1;
        jg_optim *opt = jg_optim_new(kinds[i], &p, 1, &h);
        assert_int_equal(jg_set_grad(p, jg_full(JG_F32, 1, TU_SHAPE(1), 2.0)), 0);
        assert_int_equal(jg_optim_step(opt), 0);
        assert_int_equal(jg_optim_set_state(opt, 0, 0, "step", jg_scalar(JG_F32, NAN)), 0);
        assert_int_equal(jg_optim_step(opt), 0);
        assert_true(isnan(jg_item(p)));
        assert_true(isnan(jg_item(jg_optim_state(opt, 0, 0, "step"))));
        jg_optim_free(opt);
        jg_release(p);
    }
}

/* A Linear layer (x w^T + b: w's gradient is column-major in the program)
 * trained by Adam or AdamW. */
typedef struct {
    jg_tensor *w, *b;
    jg_optim *opt;
} lin;

static void lin_init(lin *m, jg_dtype dtype, jg_optim_kind kind, const jg_optim_hparams *h) {
    jg_manual_seed(6);
    m->w = jg_keep(jg_randn(dtype, 2, TU_SHAPE(24, 40)));
    m->b = jg_keep(jg_randn(dtype, 1, TU_SHAPE(24)));
    jg_set_requires_grad(m->w, true);
    jg_set_requires_grad(m->b, true);
    jg_tensor *ps[2] = {m->w, m->b};
    m->opt = jg_optim_new(kind, ps, 2, h);
    assert_non_null(m->opt);
}

static int lin_step(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    lin *m = user;
    jg_tensor *y = jg_add(jg_matmul(in[0], jg_transpose(m->w, 0, 1)), m->b);
    jg_tensor *loss = jg_mse_loss(jg_tanh(y), in[1], JG_REDUCTION_MEAN);
    if (!loss || jg_optim_zero_grad(m->opt, true) < 0 || jg_backward(loss, NULL, 0) < 0 ||
        jg_optim_step(m->opt) < 0)
        return -1;
    out[0] = loss;
    return 1;
}

/* On the c backend a compiled Adam/AdamW step ending the program updates
 * each parameter and its moments in their own memory, in one pass for the
 * two nodes (docs/compiler.md, "Updates in place"): 3 values in place per
 * parameter and call, the tensors keep their storage, and every loss,
 * parameter and moment is bitwise the eager loop's -- with the returned
 * loss's backward holding w transposed, and w's gradient column-major.
 * max-autotune's timing trials run the nodes out of place (each trial
 * would otherwise apply the step again), then the chosen variant in place. */
static void test_compile_adam_in_place(void **state) {
    (void)state;
    if (!jg_compile_backend_available("c"))
        return;
    for (int variant = 0; variant < 4; variant++) {
        bool tune = variant == 3;
        jg_optim_kind kind = variant == 1 ? JG_OPTIM_ADAM : JG_OPTIM_ADAMW;
        jg_dtype dtype = variant == 2 ? JG_F64 : JG_F32;
        jg_optim_hparams h = jg_optim_defaults(kind);
        h.lr = 0.05;
        h.weight_decay = 0.1;
        lin e = {0}, k = {0};
        lin_init(&e, dtype, kind, &h);
        lin_init(&k, dtype, kind, &h);
        jg_compiled *c = jg_compile(lin_step, &k, &(jg_compile_options){.backend = "c"});
        assert_non_null(c);
        if (tune) {
            assert_int_equal(jg_compiled_set_mode(c, "max-autotune"), 0);
            jg_modes_debug_force = 0; /* (the c loops, whatever the timings) */
        }
        jg_manual_seed(9);
        jg_tensor *x = jg_keep(jg_randn(dtype, 2, TU_SHAPE(16, 40)));
        jg_tensor *t = jg_keep(jg_randn(dtype, 2, TU_SHAPE(16, 24)));
        jg_storage *mem[6] = {0};
        int64_t in0, cp0, in1, cp1, in2, cp2;
        jg_cgen_inout_totals(&in0, &cp0);
        for (int s = 0; s < 8; s++) {
            jg_scope_push();
            jg_tensor *in[2] = {x, t}, *oe = NULL, *ok = NULL;
            assert_int_equal(lin_step(&e, NULL, 2, in, &oe), 1);
            if (s == 2)
                jg_cgen_inout_totals(&in1, &cp1);
            assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &ok), 1);
            same_bits(oe, ok);
            jg_tensor *pe[2] = {e.w, e.b}, *pk[2] = {k.w, k.b};
            for (int i = 0; i < 2; i++) {
                same_bits(pe[i], pk[i]);
                jg_tensor *w[3] = {pk[i], jg_optim_state(k.opt, 0, i, "exp_avg"),
                                   jg_optim_state(k.opt, 0, i, "exp_avg_sq")};
                same_bits(jg_optim_state(e.opt, 0, i, "exp_avg"), w[1]);
                same_bits(jg_optim_state(e.opt, 0, i, "exp_avg_sq"), w[2]);
                /* from the third call (the second traced) on: the same memory */
                for (int q = 0; q < 3; q++) {
                    assert_true(s < 3 || w[q]->storage == mem[i * 3 + q]);
                    mem[i * 3 + q] = w[q]->storage;
                }
            }
            jg_scope_pop();
        }
        jg_cgen_inout_totals(&in2, &cp2);
        jg_modes_debug_force = -1;
        /* calls 3 to 8: 2 parameters and their moments */
        assert_int_equal(in2 - in1, 6 * 6);
        assert_int_equal(cp2 - cp1, 0);
        /* the trials, on the traced call: out of place */
        assert_true(tune ? cp1 - cp0 >= 6 : cp1 == cp0);
        assert_int_equal(jg_compiled_entries(c), 1);
        jg_compiled_free(c);
        jg_release(x), jg_release(t);
        jg_optim_free(e.opt), jg_optim_free(k.opt);
        jg_release(e.w), jg_release(e.b), jg_release(k.w), jg_release(k.b);
    }
}

/* The kernels with their outputs over their inputs (the c backend's updates
 * in place: adam_moments' two moments, adam_update's parameter, and the two
 * as one pass) give the bits of the nodes out of place, with a contiguous
 * or a column-major gradient, for each variant and dtype. */
static void test_adam_kernels_in_place(void **state) {
    (void)state;
    for (int dt = 0; dt < 2; dt++)
        for (int variant = 0; variant < 6; variant++) {
            jg_dtype d = dt ? JG_F64 : JG_F32;
            jg_manual_seed(31 + (uint64_t)variant);
            /* [70, 30]: several bands of the gathered gradient */
            jg_tensor *ref[4], *ip[4], *one[4];
            for (int q = 0; q < 4; q++) {
                ref[q] = jg_randn(d, 2, TU_SHAPE(70, 30));
                if (q == 3)
                    ref[q] = jg_mul(ref[q], ref[q]); /* exp_avg_sq >= 0 */
                ip[q] = jg_clone(ref[q]);
                one[q] = jg_clone(ref[q]);
            }
            if (variant >= 3) /* the gradient column-major */
                for (int q = 0; q < 3; q++) {
                    jg_tensor **g = q == 0 ? &ref[1] : q == 1 ? &ip[1] : &one[1];
                    *g = jg_transpose(jg_contiguous(jg_transpose(*g, 0, 1)), 0, 1);
                    assert_true(jg_adam_grad_banded(*g));
                }
            jg_adam_fused_args a = {.decoupled = variant % 3 == 1,
                                    .weight_decay = variant % 3 == 2,
                                    .decay = 0.995,
                                    .wd = 0.1,
                                    .beta1 = 0.9,
                                    .one_minus_beta1 = 1 - 0.9,
                                    .beta2 = 0.999,
                                    .one_minus_beta2 = 1 - 0.999,
                                    .eps = 1e-8,
                                    .lr = 0.05};
            jg_tensor *count = jg_scalar(d, 4);
            /* out of place: the traced step's two nodes, eagerly */
            assert_int_equal(jg_adam_step_traced_(ref[0], ref[1], ref[2], ref[3], count, &a), 0);
            /* the kernels, each output over the input it replaces (the
             * attributes as the trace records them) */
            jg_attrs attrs;
            memset(&attrs, 0, sizeof attrs);
            double v8[8] = {a.decay,           a.wd,  a.beta1, a.one_minus_beta1, a.beta2,
                            a.one_minus_beta2, a.eps, a.lr};
            for (int q = 0; q < 8; q++)
                memcpy(&attrs.i[q], &v8[q], sizeof(double));
            attrs.n = 8;
            attrs.keepdim = (a.decoupled ? 1 : 0) | (a.weight_decay ? 2 : 0);
            const jg_attrs *at = &attrs;
            jg_tensor *mo[2] = {ip[2], ip[3]};
            assert_int_equal(jg_ops[JG_OP_ADAM_MOMENTS].kernel(at, ip, mo), 0);
            jg_tensor *uin[4] = {ip[0], ip[2], ip[3], count}, *uo[1] = {ip[0]};
            assert_int_equal(jg_ops[JG_OP_ADAM_UPDATE].kernel(at, uin, uo), 0);
            /* one pass */
            assert_int_equal(jg_adam_step_inplace_(at, one[0], one[1], one[2], one[3], count), 0);
            for (int q = 0; q < 4; q += q == 0 ? 2 : 1) {
                same_bits(ref[q], ip[q]);
                same_bits(ref[q], one[q]);
            }
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_compile_adam),
        TU_TEST(test_compile_adam_loaded_count),
        TU_TEST(test_compile_adamw),
        TU_TEST(test_compile_adagrad),
        TU_TEST(test_compile_adam_nodes),
        TU_TEST(test_adam_nodes_eager),
        TU_TEST(test_adam_nodes_refuse),
        TU_TEST(test_compile_rmsprop),
        TU_TEST(test_adam_moments_transposed_grad),
        TU_TEST(test_eager_adam_first_step),
        TU_TEST(test_nan_step_count),
        TU_TEST(test_compile_adam_in_place),
        TU_TEST(test_adam_kernels_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
