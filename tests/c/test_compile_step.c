/* A training step inside a compiled program: jg_backward is traced into
 * the program's graph, the in-place updates of the parameters, the
 * optimizer's state and .grad are traced as writes of captured tensors,
 * and .grad assignments (set_to_none) are recorded; each call applies them
 * to the real tensors afterwards.  Twenty steps give losses, parameters,
 * .grad and state bitwise equal to the eager loop, on both backends. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    jg_tensor *w1, *b1, *w2, *b2;
    jg_optim *opt;
    bool zero_grad; /* the program also zeroes the gradients (in place) */
} mlp;

static jg_tensor *forward(mlp *m, jg_tensor *x) {
    jg_tensor *h = jg_relu(jg_add(jg_matmul(x, m->w1), m->b1));
    return jg_add(jg_matmul(h, m->w2), m->b2);
}

static int p_opt_step(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n, (void)in, (void)out;
    mlp *m = user;
    if (jg_optim_step(m->opt) < 0)
        return -1;
    if (m->zero_grad && jg_optim_zero_grad(m->opt, false) < 0)
        return -1;
    return 0;
}

static int p_zero_grad_to_none(void *user, const void *args, int n, jg_tensor *const *in,
                               jg_tensor **out) {
    (void)args, (void)n, (void)in, (void)out;
    mlp *m = user;
    return jg_optim_zero_grad(m->opt, true) < 0 ? -1 : 0;
}

static void mlp_init(mlp *m, jg_optim_kind kind, double momentum) {
    jg_manual_seed(3);
    jg_tensor **p[4] = {&m->w1, &m->b1, &m->w2, &m->b2};
    const int64_t shapes[4][2] = {{4, 8}, {8, 0}, {8, 2}, {2, 0}};
    for (int i = 0; i < 4; i++) {
        *p[i] = jg_keep(jg_randn(JG_F32, shapes[i][1] ? 2 : 1, shapes[i]));
        jg_set_requires_grad(*p[i], true);
    }
    jg_tensor *ps[4] = {m->w1, m->b1, m->w2, m->b2};
    jg_optim_hparams h = jg_optim_defaults(kind);
    h.lr = 0.05;
    h.momentum = momentum;
    h.weight_decay = kind == JG_OPTIM_SGD ? 0.01 : h.weight_decay;
    m->opt = jg_optim_new(kind, ps, 4, &h);
    assert_non_null(m->opt);
}

static void mlp_free(mlp *m) {
    jg_optim_free(m->opt);
    jg_release(m->w1), jg_release(m->b1), jg_release(m->w2), jg_release(m->b2);
}

/* 20 steps: eager forward and backward, then the optimizer step eagerly
 * (c NULL) or through c. */
static void train(mlp *m, jg_compiled *c, double *losses) {
    jg_manual_seed(11);
    jg_tensor *x = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(16, 4)));
    jg_tensor *y = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(16, 2)));
    for (int s = 0; s < 20; s++) {
        jg_scope_push();
        jg_tensor *loss = jg_mse_loss(forward(m, x), y, JG_REDUCTION_MEAN);
        assert_non_null(loss);
        losses[s] = jg_item(loss);
        assert_int_equal(jg_backward(loss, NULL, 0), 0);
        jg_tensor *none[1];
        if (c)
            assert_int_equal(jg_compiled_call(c, NULL, 0, 0, NULL, none), 0);
        else
            assert_int_equal(p_opt_step(m, NULL, 0, NULL, none), 0);
        if (!m->zero_grad)
            assert_int_equal(jg_optim_zero_grad(m->opt, true), 0);
        jg_scope_pop();
    }
    jg_release(x), jg_release(y);
}

static void check_same_state(mlp *a, mlp *b) {
    jg_tensor *pa[4] = {a->w1, a->b1, a->w2, a->b2}, *pb[4] = {b->w1, b->b1, b->w2, b->b2};
    jg_optim_kind kind = jg_optim_kind_of(a->opt);
    for (int i = 0; i < 4; i++) {
        TU_SAME(pa[i], pb[i]);
        assert_true((jg_grad(pa[i]) == NULL) == (jg_grad(pb[i]) == NULL));
        if (jg_grad(pa[i]))
            TU_SAME(jg_grad(pa[i]), jg_grad(pb[i]));
        assert_int_equal(jg_version(pa[i]), jg_version(pb[i]));
        for (int k = 0; jg_optim_state_name(kind, k); k++) {
            const char *name = jg_optim_state_name(kind, k);
            jg_tensor *sa = jg_optim_state(a->opt, 0, i, name),
                      *sb = jg_optim_state(b->opt, 0, i, name);
            assert_true((sa == NULL) == (sb == NULL));
            if (sa)
                TU_SAME(sa, sb);
        }
    }
}

static void run_case(jg_optim_kind kind, double momentum, bool zero_grad, const char *backend,
                     int want_entries, int want_fallbacks) {
    mlp e = {0}, k = {0};
    mlp_init(&e, kind, momentum);
    mlp_init(&k, kind, momentum);
    e.zero_grad = k.zero_grad = zero_grad;
    double le[20], lk[20];
    train(&e, NULL, le);
    jg_compile_options o = {.backend = backend, .fullgraph = want_fallbacks <= 1};
    jg_compiled *c = jg_compile(p_opt_step, &k, &o);
    assert_non_null(c);
    train(&k, c, lk);
    assert_memory_equal(le, lk, sizeof le);
    check_same_state(&e, &k);
    assert_int_equal(jg_compiled_entries(c), want_entries);
    assert_int_equal(jg_compiled_fallbacks(c), want_fallbacks);
    jg_compiled_free(c);
    mlp_free(&e);
    mlp_free(&k);
}

static const char *backends[] = {"interp", "c"};

static void test_compile_step_sgd(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        run_case(JG_OPTIM_SGD, 0, false, backends[b], 1, 0);
        run_case(JG_OPTIM_SGD, 0, true, backends[b], 1, 0);
    }
}

/* the first step creates the momentum buffers: that call runs eagerly and
 * the next one is traced (also under fullgraph) */
static void test_compile_step_sgd_momentum(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        run_case(JG_OPTIM_SGD, 0.9, false, backends[b], 1, 1);
        run_case(JG_OPTIM_SGD, 0.9, true, backends[b], 1, 1);
    }
}

/* zero_grad(set_to_none) inside a program: recorded, applied after every
 * call (not only while traced) */
static void test_compile_step_set_to_none(void **state) {
    (void)state;
    mlp m = {0};
    mlp_init(&m, JG_OPTIM_SGD, 0);
    jg_compile_options o = {.fullgraph = true};
    jg_compiled *c = jg_compile(p_zero_grad_to_none, &m, &o);
    jg_tensor *none[1];
    for (int i = 0; i < 2; i++) {
        jg_tensor *loss = jg_sum(forward(&m, jg_full(JG_F32, 2, TU_SHAPE(1, 4), 1.0)));
        assert_int_equal(jg_backward(loss, NULL, 0), 0);
        assert_non_null(jg_grad(m.w1));
        assert_int_equal(jg_compiled_call(c, NULL, 0, 0, NULL, none), 0);
        assert_null(jg_grad(m.w1));
        assert_null(jg_grad(m.b2));
    }
    assert_int_equal(jg_compiled_entries(c), 1);
    assert_int_equal(jg_compiled_fallbacks(c), 0);
    jg_compiled_free(c);
    mlp_free(&m);
}

/* The whole step: forward, jg_backward, jg_optim_step, zero_grad, one
 * graph; 20 steps bitwise equal to eager on both backends. */
static int p_whole_step(void *user, const void *args, int n, jg_tensor *const *in,
                        jg_tensor **out) {
    (void)args, (void)n;
    mlp *m = user;
    jg_tensor *loss = jg_mse_loss(forward(m, in[0]), in[1], JG_REDUCTION_MEAN);
    if (!loss || jg_backward(loss, NULL, 0) < 0 || jg_optim_step(m->opt) < 0 ||
        jg_optim_zero_grad(m->opt, !m->zero_grad) < 0)
        return -1;
    out[0] = loss;
    return 1;
}

static void whole(mlp *m, jg_compiled *c, double *losses) {
    jg_manual_seed(11);
    jg_tensor *x = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(16, 4)));
    jg_tensor *y = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(16, 2)));
    for (int s = 0; s < 20; s++) {
        jg_scope_push();
        jg_tensor *in[2] = {x, y}, *loss = NULL;
        if (c)
            assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &loss), 1);
        else
            assert_int_equal(p_whole_step(m, NULL, 2, in, &loss), 1);
        losses[s] = jg_item(loss);
        jg_scope_pop();
    }
    jg_release(x), jg_release(y);
}

static void test_compile_step_whole(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        for (int mom = 0; mom < 2; mom++)
            for (int zero = 0; zero < 2; zero++) {
                mlp e = {0}, k = {0};
                mlp_init(&e, JG_OPTIM_SGD, mom ? 0.9 : 0);
                mlp_init(&k, JG_OPTIM_SGD, mom ? 0.9 : 0);
                e.zero_grad = k.zero_grad = zero; /* zero: in place, else set to none */
                double le[20], lk[20];
                whole(&e, NULL, le);
                jg_compile_options o = {.backend = backends[b], .fullgraph = true};
                jg_compiled *c = jg_compile(p_whole_step, &k, &o);
                whole(&k, c, lk);
                assert_memory_equal(le, lk, sizeof le);
                check_same_state(&e, &k);
                /* momentum: the first call creates the buffers (eager); in
                 * place zeroing: the first call sees no .grad, the others a
                 * zeroed one */
                assert_int_equal(jg_compiled_fallbacks(c), mom);
                assert_int_equal(jg_compiled_entries(c), zero && !mom ? 2 : 1);
                jg_compiled_free(c);
                mlp_free(&e);
                mlp_free(&k);
            }
    }
}

/* jg_optim_set_lr / jg_optim_set_hparams between calls (a schedule): the
 * next call uses the new values, as eager does (regression: the traced lr
 * was a constant of the graph). */
static void test_compile_step_set_lr(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        for (int kind = 0; kind < 2; kind++) {
            jg_optim_kind k = kind ? JG_OPTIM_ADAM : JG_OPTIM_SGD;
            mlp e = {0}, m = {0};
            mlp_init(&e, k, 0);
            mlp_init(&m, k, 0);
            jg_compiled *c =
                jg_compile(p_opt_step, &m, &(jg_compile_options){.backend = backends[b]});
            jg_manual_seed(11);
            jg_tensor *x = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(16, 4)));
            for (int s = 0; s < 8; s++) {
                jg_scope_push();
                mlp *both[2] = {&e, &m};
                for (int i = 0; i < 2; i++) {
                    jg_tensor *loss = jg_sum(jg_tanh(forward(both[i], x)));
                    assert_int_equal(jg_backward(loss, NULL, 0), 0);
                    jg_tensor *none[1];
                    if (i)
                        assert_int_equal(jg_compiled_call(c, NULL, 0, 0, NULL, none), 0);
                    else
                        assert_int_equal(p_opt_step(&e, NULL, 0, NULL, none), 0);
                    assert_int_equal(jg_optim_zero_grad(both[i]->opt, true), 0);
                    if (s % 3 == 2)
                        assert_int_equal(jg_optim_set_lr(both[i]->opt, 0, 0.5 / (s + 1)), 0);
                    if (s == 4) {
                        jg_optim_hparams h;
                        assert_int_equal(jg_optim_get_hparams(both[i]->opt, 0, &h), 0);
                        h.weight_decay = 0.1;
                        assert_int_equal(jg_optim_set_hparams(both[i]->opt, 0, &h), 0);
                    }
                }
                TU_SAME(m.w1, e.w1);
                TU_SAME(m.b2, e.b2);
                jg_scope_pop();
            }
            jg_release(x);
            jg_compiled_free(c);
            mlp_free(&e);
            mlp_free(&m);
        }
    }
}

/* Dynamic batch sizes and a schedule together: the whole step compiled
 * with JG_DYNAMIC_AUTO, the batch size changing and the lr set every few
 * steps; every step bitwise eager (an instance built for a new size must
 * keep the hyperparameter guard of the trace it comes from). */
static void test_compile_step_dynamic_set_lr(void **state) {
    (void)state;
    static const int64_t batch[] = {16, 16, 7, 16, 9, 5, 16, 7, 12, 3, 16, 9};
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        mlp e = {0}, k = {0};
        mlp_init(&e, JG_OPTIM_ADAM, 0);
        mlp_init(&k, JG_OPTIM_ADAM, 0);
        jg_compiled *c =
            jg_compile(p_whole_step, &k, &(jg_compile_options){.backend = backends[b]});
        assert_int_equal(jg_compiled_set_dynamic(c, JG_DYNAMIC_AUTO), 0);
        jg_manual_seed(11);
        for (int s = 0; s < 12; s++) {
            jg_scope_push();
            jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(batch[s], 4));
            jg_tensor *y = jg_randn(JG_F32, 2, TU_SHAPE(batch[s], 2));
            jg_tensor *in[2] = {x, y}, *le = NULL, *lk = NULL;
            assert_int_equal(p_whole_step(&e, NULL, 2, in, &le), 1);
            assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &lk), 1);
            TU_SAME(lk, le);
            TU_SAME(k.w1, e.w1);
            TU_SAME(k.b2, e.b2);
            if (s % 4 == 3) {
                assert_int_equal(jg_optim_set_lr(e.opt, 0, 0.3 / (s + 1)), 0);
                assert_int_equal(jg_optim_set_lr(k.opt, 0, 0.3 / (s + 1)), 0);
            }
            jg_scope_pop();
        }
        jg_compiled_free(c);
        mlp_free(&e);
        mlp_free(&k);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_compile_step_sgd),         TU_TEST(test_compile_step_sgd_momentum),
        TU_TEST(test_compile_step_set_to_none), TU_TEST(test_compile_step_whole),
        TU_TEST(test_compile_step_set_lr),      TU_TEST(test_compile_step_dynamic_set_lr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
