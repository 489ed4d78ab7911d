/* The optimizer API (src/optim): 20 steps of each algorithm on a small
 * problem against PyTorch 1.13's torch.optim (expected values printed by
 * it, float64), groups, state export/import, zero_grad and bad input. */
#include <math.h>
#include <string.h>

#include "testutil.h"

/* loss = sum((w - t)^2 * c) + (b * sum(w) - 1)^2 */
static jg_tensor *loss_of(jg_tensor *w, jg_tensor *b) {
    jg_tensor *t = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(0.2, 0.4, -1.0));
    jg_tensor *c = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(1.0, 3.0, 0.5));
    jg_tensor *d = jg_sub(w, t);
    jg_tensor *l1 = jg_sum(jg_mul(jg_mul(d, d), c));
    jg_tensor *e = jg_add_scalar(jg_mul(b, jg_sum(w)), -1.0);
    return jg_add(l1, jg_sum(jg_mul(e, e)));
}

static void make_params(jg_tensor **p) {
    p[0] = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(1.0, -2.0, 0.5));
    p[1] = tu_tensor(JG_F64, 1, TU_SHAPE(1), TU_VALS(0.3));
    jg_set_requires_grad(p[0], true);
    jg_set_requires_grad(p[1], true);
}

static void train(jg_optim *opt, jg_tensor **p, int steps) {
    for (int s = 0; s < steps; s++) {
        jg_scope_push();
        assert_int_equal(jg_optim_zero_grad(opt, false), 0);
        jg_tensor *loss = loss_of(p[0], p[1]);
        assert_non_null(loss);
        assert_int_equal(jg_backward(loss, NULL, 0), 0);
        assert_int_equal(jg_optim_step(opt), 0);
        jg_scope_pop();
    }
}

static void check_run(jg_optim *opt, jg_tensor **p, const double *want) {
    assert_non_null(opt);
    train(opt, p, 20);
    TU_CHECK(p[0], 1, TU_SHAPE(3), want, 1e-12);
    TU_CHECK(p[1], 1, TU_SHAPE(1), want + 3, 1e-12);
    jg_optim_free(opt);
}

static void test_optim_sgd_matches_torch(void **state) {
    (void)state;
    jg_tensor *p[2];
    make_params(p);
    check_run(
        jg_optim_sgd(p, 2, 0.05, 0, 0, 0, false), p,
        TU_VALS(0.4918622871865997, 0.4760645539049815, -0.17927052818260875, 0.9152367728817534));
    make_params(p);
    check_run(
        jg_optim_sgd(p, 2, 0.05, 0.9, 0.1, 0.01, false), p,
        TU_VALS(0.16638385256698995, 0.6257438681298849, -1.3323404620186836, -2.890610315457961));
    make_params(p);
    check_run(
        jg_optim_sgd(p, 2, 0.05, 0.9, 0, 0, true), p,
        TU_VALS(0.4017230768016472, 0.513615118969027, -0.5187032093821238, 2.216853112065974));
}

static void test_optim_adam_matches_torch(void **state) {
    (void)state;
    jg_tensor *p[2];
    make_params(p);
    check_run(jg_optim_adam(p, 2, 0.1, 0.9, 0.999, 1e-8, 0.01), p,
              TU_VALS(0.15391682803666318, -0.16389530038316044, -0.9717544515926241,
                      -0.8510263451266677));
    make_params(p);
    check_run(jg_optim_adamw(p, 2, 0.1, 0.8, 0.99, 1e-8, 0.1), p,
              TU_VALS(0.1802543602172186, -0.11772602883546367, -0.9738778075948907,
                      -0.8526483510040876));
}

/* amsgrad keeps the running maximum of exp_avg_sq in "max_exp_avg_sq" */
static void test_optim_adam_amsgrad_matches_torch(void **state) {
    (void)state;
    jg_tensor *p[2];
    for (int k = JG_OPTIM_ADAM; k <= JG_OPTIM_ADAMW; k++) {
        make_params(p);
        jg_optim_hparams h = jg_optim_defaults((jg_optim_kind)k);
        h.lr = 0.1;
        h.amsgrad = true;
        jg_optim *o = jg_optim_new((jg_optim_kind)k, p, 2, &h);
        assert_non_null(o);
        train(o, p, 1);
        assert_non_null(jg_optim_state(o, 0, 0, "max_exp_avg_sq"));
        jg_optim_free(o);
        make_params(p);
        check_run(jg_optim_new((jg_optim_kind)k, p, 2, &h), p,
                  k == JG_OPTIM_ADAM ? TU_VALS(0.15704850937401899, -0.16373580076480931,
                                               -0.9743700827055639, -0.8538997618146951)
                                     : TU_VALS(0.15219432768124377, -0.1462542093276175,
                                               -0.9767402150526616, -0.8600569353133336));
    }
}

static void test_optim_adagrad_rmsprop_match_torch(void **state) {
    (void)state;
    jg_tensor *p[2];
    make_params(p);
    check_run(jg_optim_adagrad(p, 2, 0.3, 0.01, 0.01, 0.1, 1e-10), p,
              TU_VALS(0.15336226122185467, -0.33990891147346786, -0.9500475378981543,
                      -0.8264857051663425));
    make_params(p);
    check_run(
        jg_optim_rmsprop(p, 2, 0.01, 0.99, 1e-8, 0.01, 0.5, false), p,
        TU_VALS(0.16288442267223688, -0.7242308835614425, -0.771054737110246, -0.7085951143870983));
    make_params(p);
    check_run(jg_optim_rmsprop(p, 2, 0.01, 0.9, 1e-8, 0, 0, true), p,
              TU_VALS(0.5120696195515602, -1.5457487153181548, -0.014838778769672888,
                      -0.2081625834998736));
}

static void test_optim_adadelta_matches_torch(void **state) {
    (void)state;
    jg_tensor *p[2];
    make_params(p);
    check_run(
        jg_optim_adadelta(p, 2, 1.0, 0.9, 1e-6, 0), p,
        TU_VALS(0.9292207086538078, -1.931096791054319, 0.42705781456597935, 0.22699322438079989));
    make_params(p);
    check_run(
        jg_optim_adadelta(p, 2, 0.5, 0.8, 1e-5, 0.1), p,
        TU_VALS(0.9111482754854588, -1.9134004673011789, 0.40834878683097364, 0.2081115447962239));
    assert_null(jg_optim_adadelta(p, 2, 1.0, 1.5, 1e-6, 0));
    TU_ERROR("Invalid rho value: 1.5");
    assert_string_equal(jg_optim_state_name(JG_OPTIM_ADADELTA, 2), "acc_delta");
}

/* Two groups with their own lr equal one optimizer per group; the step
 * bumps the parameters' version counters like any in-place op. */
static void test_optim_groups_and_lr(void **state) {
    (void)state;
    jg_tensor *p[2], *q[2];
    make_params(p);
    make_params(q);
    jg_optim *a = jg_optim_adam(p, 1, 0.1, 0.9, 0.999, 1e-8, 0);
    assert_int_equal(jg_optim_add_param_group(a, p + 1, 1, NULL), 1);
    assert_int_equal(jg_optim_set_lr(a, 1, 0.05), 0);
    assert_true(jg_optim_get_lr(a, 1) == 0.05);
    assert_true(jg_optim_get_lr(a, 0) == 0.1);
    jg_optim *b = jg_optim_adam(q, 1, 0.1, 0.9, 0.999, 1e-8, 0);
    jg_optim_hparams h;
    assert_int_equal(jg_optim_get_hparams(b, 0, &h), 0);
    h.lr = 0.05;
    assert_int_equal(jg_optim_add_param_group(b, q + 1, 1, &h), 1);
    uint64_t v = jg_version(p[0]);
    train(a, p, 5);
    train(b, q, 5);
    assert_true(jg_version(p[0]) > v);
    TU_SAME(p[0], q[0]);
    TU_SAME(p[1], q[1]);
    assert_int_equal(jg_optim_n_groups(a), 2);
    assert_int_equal(jg_optim_group_size(a, 1), 1);
    assert_ptr_equal(jg_optim_param(a, 1, 0), p[1]);
    jg_optim_free(a);
    jg_optim_free(b);
}

/* Groups added without hyperparameters copy the first group's, which must
 * be read before the group array grows (ASan caught a read of the old one). */
static void test_optim_add_param_group_copies_first_group_hparams(void **state) {
    (void)state;
    enum { G = 24 };
    jg_tensor *p[G];
    for (int i = 0; i < G; i++) {
        p[i] = jg_full(JG_F32, 1, TU_SHAPE(2), i);
        jg_set_requires_grad(p[i], true);
    }
    jg_optim *o = jg_optim_rmsprop(p, 1, 0.125, 0.5, 1e-6, 0.25, 0.75, true);
    for (int i = 1; i < G; i++)
        assert_int_equal(jg_optim_add_param_group(o, p + i, 1, NULL), i);
    jg_optim_hparams first, h;
    assert_int_equal(jg_optim_get_hparams(o, 0, &first), 0);
    for (int i = 1; i < G; i++) {
        assert_int_equal(jg_optim_get_hparams(o, i, &h), 0);
        assert_true(h.lr == first.lr && h.alpha == first.alpha && h.eps == first.eps &&
                    h.weight_decay == first.weight_decay && h.momentum == first.momentum &&
                    h.centered == first.centered);
    }
    jg_optim_free(o);
}

/* Exporting the state after some steps and importing it into a fresh
 * optimizer continues the same trajectory bit for bit. */
static void test_optim_state_save_load(void **state) {
    (void)state;
    for (int kind = JG_OPTIM_SGD; kind <= JG_OPTIM_ADADELTA; kind++) {
        jg_tensor *p[2], *q[2];
        make_params(p);
        jg_optim_hparams h = jg_optim_defaults((jg_optim_kind)kind);
        h.momentum = 0.5;
        h.centered = true;
        h.amsgrad = true;
        jg_optim *a = jg_optim_new((jg_optim_kind)kind, p, 2, &h);
        assert_non_null(a);
        for (int i = 0; jg_optim_state_name((jg_optim_kind)kind, i); i++)
            if (kind != JG_OPTIM_ADAGRAD)
                assert_null(jg_optim_state(a, 0, 0, jg_optim_state_name((jg_optim_kind)kind, i)));
        train(a, p, 3);
        /* q: the parameters' values now, in a new optimizer loaded with a's state */
        make_params(q);
        assert_int_equal(jg_copy_(q[0], p[0]), -1); /* leaf requiring grad, grad mode on */
        bool was = jg_set_grad_enabled(false);
        assert_int_equal(jg_copy_(q[0], p[0]), 0);
        assert_int_equal(jg_copy_(q[1], p[1]), 0);
        jg_set_grad_enabled(was);
        jg_optim *b = jg_optim_new((jg_optim_kind)kind, q, 2, &h);
        for (int j = 0; j < 2; j++) {
            for (int i = 0; jg_optim_state_name((jg_optim_kind)kind, i); i++) {
                const char *name = jg_optim_state_name((jg_optim_kind)kind, i);
                jg_tensor *s = jg_optim_state(a, 0, j, name);
                assert_non_null(s);
                assert_int_equal(jg_optim_set_state(b, 0, j, name, s), 0);
                assert_ptr_not_equal(jg_optim_state(b, 0, j, name), s);
            }
        }
        train(a, p, 4);
        train(b, q, 4);
        TU_SAME(p[0], q[0]);
        TU_SAME(p[1], q[1]);
        jg_tensor *st = jg_optim_state(b, 0, 0, "step");
        if (kind != JG_OPTIM_SGD) {
            assert_int_equal(jg_dtype_of(st), JG_F32);
            assert_true(jg_item(st) == 7.0);
        }
        jg_optim_free(a);
        jg_optim_free(b);
    }
}

static void test_optim_zero_grad_and_skip(void **state) {
    (void)state;
    jg_tensor *p[2];
    make_params(p);
    jg_optim *o = jg_optim_sgd(p, 2, 0.1, 0, 0, 0, false);
    assert_int_equal(jg_optim_step(o), 0); /* no grads: nothing moves */
    TU_CHECK(p[0], 1, TU_SHAPE(3), TU_VALS(1.0, -2.0, 0.5), 0);
    assert_int_equal(jg_backward(jg_sum(jg_mul(p[0], p[0])), NULL, 0), 0);
    assert_int_equal(jg_optim_step(o), 0);
    TU_CHECK(p[0], 1, TU_SHAPE(3), TU_VALS(0.8, -1.6, 0.4), 1e-15);
    TU_CHECK(p[1], 1, TU_SHAPE(1), TU_VALS(0.3), 0);
    jg_tensor *g = jg_grad(p[0]);
    assert_int_equal(jg_optim_zero_grad(o, false), 0);
    assert_ptr_equal(jg_grad(p[0]), g);
    TU_CHECK(g, 1, TU_SHAPE(3), TU_VALS(0, 0, 0), 0);
    assert_int_equal(jg_optim_zero_grad(o, true), 0);
    assert_null(jg_grad(p[0]));
    /* a gradient with history (create_graph) is detached, then zeroed */
    assert_int_equal(jg_backward(jg_sum(jg_mul(p[0], jg_mul(p[0], p[0]))), NULL, JG_CREATE_GRAPH),
                     0);
    assert_non_null(jg_grad_fn_name(jg_grad(p[0])));
    assert_int_equal(jg_optim_zero_grad(o, false), 0);
    assert_null(jg_grad_fn_name(jg_grad(p[0])));
    assert_false(jg_requires_grad(jg_grad(p[0])));
    TU_CHECK(jg_grad(p[0]), 1, TU_SHAPE(3), TU_VALS(0, 0, 0), 0);
    jg_optim_free(o);
}

static void test_optim_float32(void **state) {
    (void)state;
    jg_tensor *w = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1.0, -1.0));
    jg_set_requires_grad(w, true);
    jg_optim *o = jg_optim_adam(&w, 1, 0.1, 0.9, 0.999, 1e-8, 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(jg_optim_zero_grad(o, true), 0);
        assert_int_equal(jg_backward(jg_sum(jg_mul(w, w)), NULL, 0), 0);
        assert_int_equal(jg_optim_step(o), 0);
    }
    /* torch.optim.Adam([w], lr=0.1) on sum(w*w), float32, 3 steps */
    TU_CHECK(w, 1, TU_SHAPE(2), TU_VALS(0.7015863060951233, -0.7015863060951233), 1e-7);
    assert_int_equal(jg_dtype_of(jg_optim_state(o, 0, 0, "exp_avg")), JG_F32);
    jg_optim_free(o);
}

/* jg_optim_update alone: it creates the state the algorithm needs (the
 * caller owns it) and equals a one-parameter optimizer's step. */
static void test_optim_update_creates_owned_state(void **state) {
    (void)state;
    jg_tensor *p[2];
    make_params(p);
    jg_tensor *q = jg_clone(jg_detach(p[0]));
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_ADAM);
    h.lr = 0.1;
    jg_optim *o = jg_optim_new(JG_OPTIM_ADAM, p, 1, &h);
    jg_tensor *g = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(0.5, -1.0, 2.0));
    jg_tensor *st[JG_OPTIM_MAX_STATE] = {NULL};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(jg_set_grad(p[0], g), 0);
        assert_int_equal(jg_optim_step(o), 0);
        assert_int_equal(jg_optim_update(JG_OPTIM_ADAM, &h, q, g, st), 0);
    }
    TU_SAME(q, p[0]);
    assert_non_null(st[0]);
    assert_non_null(st[2]);
    assert_null(st[3]); /* max_exp_avg_sq: amsgrad only */
    TU_SAME(st[1], jg_optim_state(o, 0, 0, "exp_avg"));
    for (int i = 0; i < JG_OPTIM_MAX_STATE; i++)
        if (st[i])
            jg_release(st[i]);
    jg_optim_free(o);
}

static int step_program(void *user, const void *args, int n_inputs, jg_tensor *const *inputs,
                        jg_tensor **outputs) {
    (void)args;
    (void)n_inputs;
    if (jg_optim_step((jg_optim *)user) < 0)
        return -1;
    outputs[0] = jg_mul_scalar(inputs[0], 1.0);
    return outputs[0] ? 1 : -1;
}

/* A first step inside a compiled program creates the optimizer's state:
 * that call runs eagerly before anything is written (no traced tensor
 * reaches the state), with or without fullgraph. */
static void test_optim_step_in_compiled_program(void **state) {
    (void)state;
    for (int fullgraph = 1; fullgraph >= 0; fullgraph--) {
        jg_tensor *p[2];
        make_params(p);
        jg_optim *o = jg_optim_sgd(p, 2, 0.1, 0.9, 0, 0, false);
        assert_int_equal(jg_backward(jg_sum(jg_mul(p[0], p[0])), NULL, 0), 0);
        jg_compile_options opts = {.backend = "interp", .fullgraph = fullgraph};
        jg_compiled *c = jg_compile(step_program, o, &opts);
        jg_tensor *x = jg_full(JG_F64, 1, TU_SHAPE(1), 1), *out = NULL;
        int rc = jg_compiled_call(c, NULL, 0, 1, &x, &out);
        /* the first step creates the momentum buffer: that call runs
         * eagerly, also under fullgraph (the next one is traced) */
        assert_int_equal(rc, 1); /* out: owned by the test's scope */
        assert_int_equal(jg_compiled_fallbacks(c), 1);
        assert_int_equal(jg_compiled_entries(c), 0);
        TU_CHECK(p[0], 1, TU_SHAPE(3), TU_VALS(0.8, -1.6, 0.4), 1e-15);
        TU_CHECK(jg_optim_state(o, 0, 0, "momentum_buffer"), 1, TU_SHAPE(3),
                 TU_VALS(2.0, -4.0, 1.0), 0);
        jg_compiled_free(c);
        jg_optim_free(o);
    }
}

static int loss_program(void *user, const void *args, int n_inputs, jg_tensor *const *inputs,
                        jg_tensor **outputs) {
    (void)user;
    (void)args;
    (void)n_inputs;
    outputs[0] = loss_of(inputs[0], inputs[1]);
    return outputs[0] ? 1 : -1;
}

/* The loss compiled (interp and c), backward and step outside: parameters,
 * grads and state equal eager training's bit for bit. */
static void test_optim_compiled_loss_matches_eager(void **state) {
    (void)state;
    const char *backends[] = {"interp", "c"};
    for (int k = JG_OPTIM_SGD; k <= JG_OPTIM_ADADELTA; k++) {
        jg_optim_hparams h = jg_optim_defaults((jg_optim_kind)k);
        h.lr = 0.05;
        h.momentum = 0.5;
        h.weight_decay = 0.01;
        jg_tensor *p[2];
        make_params(p);
        jg_optim *eager = jg_optim_new((jg_optim_kind)k, p, 2, &h);
        train(eager, p, 5);
        for (int b = 0; b < 2; b++) {
            if (!jg_compile_backend_available(backends[b]))
                continue;
            jg_tensor *q[2];
            make_params(q);
            jg_optim *o = jg_optim_new((jg_optim_kind)k, q, 2, &h);
            jg_compile_options opts = {.backend = backends[b], .fullgraph = true};
            jg_compiled *c = jg_compile(loss_program, NULL, &opts);
            for (int s = 0; s < 5; s++) {
                jg_scope_push();
                jg_tensor *loss = NULL;
                assert_int_equal(jg_optim_zero_grad(o, false), 0);
                assert_int_equal(jg_compiled_call(c, NULL, 0, 2, q, &loss), 1);
                assert_int_equal(jg_backward(loss, NULL, 0), 0);
                assert_int_equal(jg_optim_step(o), 0);
                jg_scope_pop();
            }
            for (int i = 0; i < 2; i++) {
                TU_SAME(q[i], p[i]);
                TU_SAME(jg_grad(q[i]), jg_grad(p[i]));
                for (int n = 0; jg_optim_state_name((jg_optim_kind)k, n); n++) {
                    const char *name = jg_optim_state_name((jg_optim_kind)k, n);
                    jg_tensor *a = jg_optim_state(eager, 0, i, name);
                    jg_tensor *z = jg_optim_state(o, 0, i, name);
                    assert_true((a == NULL) == (z == NULL));
                    if (a)
                        TU_SAME(z, a);
                }
            }
            assert_int_equal(jg_compiled_fallbacks(c), 0);
            jg_compiled_free(c);
            jg_optim_free(o);
        }
        jg_optim_free(eager);
    }
}

static void test_optim_bad_input(void **state) {
    (void)state;
    jg_tensor *p[2];
    make_params(p);
    assert_null(jg_optim_sgd(p, 2, -0.1, 0, 0, 0, false));
    TU_ERROR("Invalid learning rate: -0.1");
    assert_null(jg_optim_sgd(p, 2, 0.1, 0, 0, 0, true));
    TU_ERROR("Nesterov momentum requires a momentum and zero dampening");
    assert_null(jg_optim_adam(p, 2, 0.1, 1.0, 0.999, 1e-8, 0));
    TU_ERROR("Invalid beta parameter at index 0: 1");
    assert_null(jg_optim_adam(p, 2, 0.1, 0.9, 0.999, -1, 0));
    TU_ERROR("Invalid epsilon value: -1");
    assert_null(jg_optim_rmsprop(p, 2, 0.1, -0.5, 1e-8, 0, 0, false));
    TU_ERROR("Invalid alpha value: -0.5");
    assert_null(jg_optim_adagrad(p, 2, 0.1, -1, 0, 0, 1e-10));
    TU_ERROR("Invalid lr_decay value: -1");
    assert_null(jg_optim_sgd(p, 0, 0.1, 0, 0, 0, false));
    TU_ERROR("optimizer got an empty parameter list");
    jg_tensor *dup[2] = {p[0], p[0]};
    assert_null(jg_optim_sgd(dup, 2, 0.1, 0, 0, 0, false));
    TU_ERROR("duplicate parameters");
    jg_tensor *nonleaf = jg_mul_scalar(p[0], 2);
    assert_null(jg_optim_sgd(&nonleaf, 1, 0.1, 0, 0, 0, false));
    TU_ERROR("can't optimize a non-leaf Tensor");
    jg_tensor *ints = jg_full(JG_I64, 1, TU_SHAPE(2), 1);
    assert_null(jg_optim_sgd(&ints, 1, 0.1, 0, 0, 0, false));
    TU_ERROR("floating point");

    jg_optim *o = jg_optim_adam(p, 1, 0.1, 0.9, 0.999, 1e-8, 0);
    assert_int_equal(jg_optim_add_param_group(o, p, 1, NULL), -1);
    TU_ERROR("some parameters appear in more than one parameter group");
    assert_int_equal(jg_optim_n_groups(o), 1);
    assert_int_equal(jg_optim_set_lr(o, 0, -1), -1);
    TU_ERROR("Invalid learning rate: -1");
    assert_true(jg_optim_get_lr(o, 0) == 0.1);
    assert_true(isnan(jg_optim_get_lr(o, 3)));
    TU_ERROR("no parameter group 3");
    assert_null(jg_optim_state(o, 0, 0, "sum"));
    TU_ERROR("Adam has no state 'sum'");
    jg_tensor *wrong = jg_full(JG_F64, 1, TU_SHAPE(2), 0);
    assert_int_equal(jg_optim_set_state(o, 0, 0, "exp_avg", wrong), -1);
    TU_ERROR("does not fit parameter f64[3]");
    assert_null(jg_optim_state(o, 0, 0, "exp_avg"));

    /* a state tensor of the wrong shape is refused before anything moves */
    jg_tensor *st[JG_OPTIM_MAX_STATE] = {NULL, wrong, NULL, NULL};
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_ADAM);
    jg_tensor *g = jg_full(JG_F64, 1, TU_SHAPE(3), 1);
    assert_int_equal(jg_optim_update(JG_OPTIM_ADAM, &h, p[0], g, st), -1);
    TU_ERROR("state 'exp_avg' f64[2] does not fit parameter f64[3]");
    assert_null(st[0]);
    TU_CHECK(p[0], 1, TU_SHAPE(3), TU_VALS(1.0, -2.0, 0.5), 0);
    jg_tensor *g2 = jg_full(JG_F64, 1, TU_SHAPE(2), 1);
    assert_int_equal(jg_optim_update(JG_OPTIM_SGD, &h, p[0], g2, st), -1);
    TU_ERROR("gradient f64[2] does not match parameter f64[3]");
    jg_optim_free(o);
    jg_optim_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_optim_sgd_matches_torch),
        TU_TEST(test_optim_adam_matches_torch),
        TU_TEST(test_optim_adam_amsgrad_matches_torch),
        TU_TEST(test_optim_adagrad_rmsprop_match_torch),
        TU_TEST(test_optim_adadelta_matches_torch),
        TU_TEST(test_optim_groups_and_lr),
        TU_TEST(test_optim_add_param_group_copies_first_group_hparams),
        TU_TEST(test_optim_state_save_load),
        TU_TEST(test_optim_zero_grad_and_skip),
        TU_TEST(test_optim_float32),
        TU_TEST(test_optim_update_creates_owned_state),
        TU_TEST(test_optim_step_in_compiled_program),
        TU_TEST(test_optim_compiled_loss_matches_eager),
        TU_TEST(test_optim_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
