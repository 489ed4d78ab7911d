/* jg_autograd_grad and jg_backward inside a compiled program: traced into
 * the program's graph (graph autodiff of the graph recorded so far, each
 * input's contributions summed in the eager engine's order), the results
 * symbolic tensors of the program.  Every case compares the
 * compiled call with the same program run eagerly, bitwise, on both
 * backends. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    jg_tensor *w, *u; /* captured leaves (u: never used by the programs) */
    unsigned flags;   /* extra jg_autograd_grad flags */
    bool unused_none; /* p_unused: the result for u was NULL */
    bool second;      /* p_create: also differentiates the penalty in the program */
} ctx;

/* gradient penalty: loss + sum(g*g), g = d loss / d w (a constant: no
 * create_graph) */
static int p_penalty(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *loss = jg_sum(jg_tanh(jg_matmul(in[0], c->w)));
    jg_tensor *g = NULL;
    if (jg_autograd_grad(1, &loss, NULL, 1, &c->w, c->flags, &g) < 0)
        return -1;
    out[0] = jg_add(loss, jg_sum(jg_mul(g, g)));
    return 1;
}

/* gradients w.r.t. the program's input (requiring grad) and a captured
 * leaf used twice (two contributions summed as the engine sums them) */
static int p_inputs(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *h = jg_matmul(in[0], c->w);
    jg_tensor *loss = jg_sum(jg_mul(jg_tanh(h), jg_sin(jg_matmul(in[0], c->w))));
    jg_tensor *ins[2] = {in[0], c->w};
    if (jg_autograd_grad(1, &loss, NULL, 2, ins, 0, out) < 0)
        return -1;
    return 2;
}

/* two outputs, a grad_output (the program's input) for the non-scalar one */
static int p_multi(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *y1 = jg_tanh(jg_matmul(in[0], c->w));
    jg_tensor *y2 = jg_sum(jg_sin(jg_mul(c->w, c->w)));
    jg_tensor *outs[2] = {y1, y2}, *gouts[2] = {in[1], NULL};
    if (jg_autograd_grad(2, outs, gouts, 1, &c->w, 0, out) < 0)
        return -1;
    return 1;
}

static int p_unused(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *loss = jg_sum(jg_tanh(jg_matmul(in[0], c->w)));
    jg_tensor *ins[2] = {c->w, c->u}, *r[2];
    if (jg_autograd_grad(1, &loss, NULL, 2, ins, c->flags, r) < 0)
        return -1;
    c->unused_none = r[1] == NULL;
    out[0] = r[0];
    return 1;
}

/* two grads through the same graph: the first one frees it unless it
 * retains it */
static int p_twice(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *loss = jg_sum(jg_tanh(jg_matmul(in[0], c->w)));
    jg_tensor *g1 = NULL, *g2 = NULL;
    if (jg_autograd_grad(1, &loss, NULL, 1, &c->w, c->flags, &g1) < 0 ||
        jg_autograd_grad(1, &loss, NULL, 1, &c->w, 0, &g2) < 0)
        return -1;
    out[0] = jg_add(g1, g2);
    return 1;
}

/* with respect to intermediate values (used twice: contributions summed
 * as the engine sums them; one of them asked for twice) */
static int p_inter(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *h = jg_matmul(in[0], c->w), *t = jg_tanh(h), *u = jg_sin(h);
    jg_tensor *loss = jg_sum(jg_mul(jg_mul(t, u), t));
    jg_tensor *one[1] = {h}, *two[3] = {u, t, u};
    if (!c->second)
        return jg_autograd_grad(1, &loss, NULL, 1, one, 0, out) < 0 ? -1 : 1;
    return jg_autograd_grad(1, &loss, NULL, 3, two, 0, out) < 0 ? -1 : 3;
}

/* with respect to a value and one it is computed from: the value's
 * gradient is the engine's buffer of its node, the ancestor's flows on
 * through it (PyTorch: both, as if asked one at a time) */
static int p_inter_up(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *h = jg_matmul(in[0], c->w), *t = jg_tanh(h);
    jg_tensor *loss = jg_sum(jg_mul(t, jg_sin(h)));
    jg_tensor *ins[3] = {t, c->w, h};
    if (jg_autograd_grad(1, &loss, NULL, 3, ins, c->flags, out) < 0)
        return -1;
    return 3;
}

/* the same output twice (its gradients added, as the engine adds root
 * gradients), the same input twice (the same gradient twice) */
static int p_dup(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *y = jg_tanh(jg_matmul(in[0], c->w));
    jg_tensor *outs[2] = {y, y}, *gouts[2] = {in[1], jg_sin(in[1])}, *ins[2] = {c->w, c->w};
    if (jg_autograd_grad(2, outs, gouts, 2, ins, 0, out) < 0)
        return -1;
    return 2;
}

/* retain_graph is per backward: a grad without it frees only the nodes it
 * went through, so one through other nodes is traced (eager succeeds) */
static int p_disjoint(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *l1 = jg_sum(jg_tanh(jg_matmul(in[0], c->w)));
    jg_tensor *l2 = jg_sum(jg_sin(jg_matmul(in[0], c->w)));
    jg_tensor *g1 = NULL, *g2 = NULL;
    if (jg_autograd_grad(1, &l1, NULL, 1, &c->w, 0, &g1) < 0 ||
        jg_autograd_grad(1, &l2, NULL, 1, &c->w, 0, &g2) < 0)
        return -1;
    out[0] = jg_add(g1, g2);
    return 1;
}

/* a second grad shares the first one's (freed) matmul node: eager fails */
static int p_shared(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *h = jg_matmul(in[0], c->w);
    jg_tensor *l1 = jg_sum(jg_tanh(h)), *l2 = jg_sum(jg_sin(h));
    jg_tensor *g1 = NULL, *g2 = NULL;
    if (jg_autograd_grad(1, &l1, NULL, 1, &c->w, 0, &g1) < 0 ||
        jg_autograd_grad(1, &l2, NULL, 1, &c->w, 0, &g2) < 0)
        return -1;
    out[0] = jg_add(g1, g2);
    return 1;
}

/* backward(create_graph=True) inside the program: .grad gets history in
 * the program; a penalty of it is returned (differentiated outside) */
static int p_bw_create(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *loss = jg_sum(jg_tanh(jg_matmul(in[0], c->w)));
    if (jg_backward(loss, NULL, JG_CREATE_GRAPH) < 0)
        return -1;
    jg_tensor *g = jg_grad(c->w);
    out[0] = loss;
    out[1] = jg_sum(jg_mul(g, g));
    return 2;
}

/* a MAML-style inner step: the adapted weight is computed from .grad (with
 * history), the outer loss returned (its backward outside goes through
 * the inner gradient: second order) */
static int p_maml(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *loss = jg_sum(jg_tanh(jg_matmul(in[0], c->w)));
    if (jg_backward(loss, NULL, JG_CREATE_GRAPH) < 0)
        return -1;
    jg_tensor *w2 = jg_sub(c->w, jg_mul_scalar(jg_grad(c->w), 0.1));
    out[0] = jg_sum(jg_mul(jg_sin(jg_matmul(in[0], w2)), in[1]));
    return 1;
}

/* backward(gradient) of a non-scalar, into .grad */
static int p_bw_gradient(void *user, const void *args, int n, jg_tensor *const *in,
                         jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *y = jg_tanh(jg_matmul(in[0], c->w));
    if (jg_backward(y, in[1], c->flags) < 0)
        return -1;
    out[0] = y;
    return 1;
}

/* create_graph: the gradient has history in the program; the penalty is
 * differentiated again inside it (second) or through the compiled node */
static int p_create(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *loss = jg_sum(jg_tanh(jg_matmul(in[0], c->w)));
    jg_tensor *g = NULL;
    if (jg_autograd_grad(1, &loss, NULL, 1, &c->w, JG_CREATE_GRAPH, &g) < 0)
        return -1;
    out[0] = jg_add(loss, jg_sum(jg_mul(g, g)));
    if (!c->second)
        return 1;
    if (jg_autograd_grad(1, &out[0], NULL, 1, &c->w, 0, &out[1]) < 0)
        return -1;
    return 2;
}

/* exp as a custom function that saves its own output */
static int expout_forward(jg_ctx *cx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    out[0] = jg_exp(in[0]);
    return jg_ctx_save_for_backward(cx, 1, out) < 0 ? -1 : 1;
}

static int expout_backward(jg_ctx *cx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out, (void)n_in;
    jg_tensor *y = jg_ctx_saved(cx, 0);
    if (!y)
        return -1;
    din[0] = jg_mul(g[0], y);
    return 1;
}

static const jg_function ExpOut = {"ExpOut", expout_forward, expout_backward, NULL};

/* create_graph through a custom function that saved its output: the saved
 * output carries the call's history (as eager's), so the second-order
 * terms through it go through the call again */
static int p_custom_saved_output(void *user, const void *args, int n, jg_tensor *const *in,
                                 jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *h = jg_mul_scalar(jg_matmul(in[0], c->w), 0.25), *y = NULL, *g = NULL;
    if (jg_apply(&ExpOut, 1, &h, NULL, 0, &y) < 0)
        return -1;
    jg_tensor *loss = jg_sum(y);
    if (jg_autograd_grad(1, &loss, NULL, 1, &c->w, JG_CREATE_GRAPH, &g) < 0)
        return -1;
    out[0] = jg_add(loss, jg_sum(jg_mul(g, g)));
    return jg_autograd_grad(1, &out[0], NULL, 1, &c->w, 0, &out[1]) < 0 ? -1 : 2;
}

static const char *backends[] = {"interp", "c"};

static void ctx_init(ctx *c) {
    memset(c, 0, sizeof *c);
    c->w = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(5, 3)));
    c->u = jg_keep(jg_randn(JG_F32, 1, TU_SHAPE(3)));
    jg_set_requires_grad(c->w, true);
    jg_set_requires_grad(c->u, true);
}

static void ctx_free(ctx *c) {
    jg_release(c->w), jg_release(c->u);
}

/* Three calls with new inputs: the compiled outputs equal the eager ones
 * bitwise; no .grad is written. */
static void check_program(jg_program_fn fn, ctx *c, int n_in, bool x_requires_grad,
                          const char *backend, int want_fallbacks) {
    jg_compile_options o = {.backend = backend, .fullgraph = want_fallbacks == 0};
    jg_compiled *k = jg_compile(fn, c, &o);
    assert_non_null(k);
    for (int call = 0; call < 3; call++) {
        jg_scope_push();
        jg_tensor *in[2] = {jg_randn(JG_F32, 2, TU_SHAPE(4, 5)),
                            jg_randn(JG_F32, 2, TU_SHAPE(4, 3))};
        jg_set_requires_grad(in[0], x_requires_grad);
        jg_tensor *oe[3] = {0}, *ok[3] = {0};
        int ne = fn(c, NULL, n_in, in, oe);
        assert_true(ne > 0);
        int nk = jg_compiled_call(k, NULL, 0, n_in, in, ok);
        assert_int_equal(nk, ne);
        for (int i = 0; i < ne; i++)
            TU_SAME(ok[i], oe[i]);
        assert_null(jg_grad(c->w));
        assert_null(jg_grad(in[0]));
        jg_scope_pop();
    }
    assert_int_equal(jg_compiled_entries(k), 1);
    assert_int_equal(jg_compiled_fallbacks(k), want_fallbacks);
    jg_compiled_free(k);
}

static void test_compile_autograd_grad_penalty(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        ctx c;
        ctx_init(&c);
        check_program(p_penalty, &c, 1, false, backends[b], 0);
        /* backward of the returned value (eager needs retain_graph: the
         * grad freed loss's graph): the penalty is a constant (no
         * create_graph), as eager's */
        c.flags = JG_RETAIN_GRAPH;
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *k = jg_compile(p_penalty, &c, &o);
        jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(4, 5)), *oe = NULL, *ok = NULL;
        assert_int_equal(p_penalty(&c, NULL, 1, &x, &oe), 1);
        assert_int_equal(jg_backward(oe, NULL, 0), 0);
        jg_tensor *ge = jg_keep(jg_clone(jg_grad(c.w)));
        jg_clear_grad(c.w);
        assert_int_equal(jg_compiled_call(k, NULL, 0, 1, &x, &ok), 1);
        TU_SAME(ok, oe);
        assert_int_equal(jg_backward(ok, NULL, 0), 0);
        TU_SAME(jg_grad(c.w), ge);
        jg_clear_grad(c.w);
        jg_release(ge);
        jg_compiled_free(k);
        ctx_free(&c);
    }
}

static void test_compile_autograd_grad_create_graph(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        ctx c;
        ctx_init(&c);
        c.second = true;
        check_program(p_create, &c, 1, false, backends[b], 0);
        c.second = false;
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *k = jg_compile(p_create, &c, &o);
        jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(4, 5)), *oe = NULL, *ok = NULL;
        assert_int_equal(p_create(&c, NULL, 1, &x, &oe), 1);
        assert_int_equal(jg_backward(oe, NULL, 0), 0);
        jg_tensor *ge = jg_keep(jg_clone(jg_grad(c.w)));
        jg_clear_grad(c.w);
        assert_int_equal(jg_compiled_call(k, NULL, 0, 1, &x, &ok), 1);
        TU_SAME(ok, oe);
        assert_int_equal(jg_backward(ok, NULL, 0), 0);
        TU_SAME(jg_grad(c.w), ge);
        jg_clear_grad(c.w);
        jg_release(ge);
        assert_int_equal(jg_compiled_entries(k), 1);
        assert_int_equal(jg_compiled_fallbacks(k), 0);
        jg_compiled_free(k);
        ctx_free(&c);
    }
}

static void test_compile_autograd_grad_custom_saved_output(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        ctx c;
        ctx_init(&c);
        check_program(p_custom_saved_output, &c, 1, false, backends[b], 0);
        ctx_free(&c);
    }
}

static void test_compile_autograd_grad_inputs(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        ctx c;
        ctx_init(&c);
        check_program(p_inputs, &c, 1, true, backends[b], 0);
        ctx_free(&c);
    }
}

static void test_compile_autograd_grad_multi(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        ctx c;
        ctx_init(&c);
        check_program(p_multi, &c, 2, false, backends[b], 0);
        ctx_free(&c);
    }
}

static void test_compile_autograd_grad_unused(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        ctx c;
        ctx_init(&c);
        c.flags = JG_ALLOW_UNUSED;
        check_program(p_unused, &c, 1, false, backends[b], 0);
        assert_true(c.unused_none);
        /* without allow_unused: eager's error, from the traced call too */
        c.flags = 0;
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *k = jg_compile(p_unused, &c, &o);
        jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(4, 5)), *out = NULL;
        assert_true(jg_compiled_call(k, NULL, 0, 1, &x, &out) < 0);
        TU_ERROR("appears to not have been used in the graph. Set allow_unused=True");
        assert_true(p_unused(&c, NULL, 1, &x, &out) < 0);
        TU_ERROR("appears to not have been used in the graph. Set allow_unused=True");
        jg_compiled_free(k);
        ctx_free(&c);
    }
}

static void test_compile_autograd_grad_retain(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        ctx c;
        ctx_init(&c);
        c.flags = JG_RETAIN_GRAPH;
        check_program(p_twice, &c, 1, false, backends[b], 0);
        /* the first grad frees the graph: eager's error; under fullgraph a
         * graph break that fails, without it the eager run raises */
        c.flags = 0;
        jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(4, 5)), *out = NULL;
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *k = jg_compile(p_twice, &c, &o);
        assert_true(jg_compiled_call(k, NULL, 0, 1, &x, &out) < 0);
        TU_ERROR("a second backward through the same graph");
        jg_compiled_free(k);
        o.fullgraph = false;
        k = jg_compile(p_twice, &c, &o);
        assert_true(jg_compiled_call(k, NULL, 0, 1, &x, &out) < 0);
        TU_ERROR("Trying to backward through the graph a second time");
        assert_true(p_twice(&c, NULL, 1, &x, &out) < 0);
        TU_ERROR("Trying to backward through the graph a second time");
        jg_compiled_free(k);
        ctx_free(&c);
    }
}

static void test_compile_autograd_grad_intermediate(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        ctx c;
        ctx_init(&c);
        check_program(p_inter, &c, 1, false, backends[b], 0);
        c.second = true;
        check_program(p_inter, &c, 1, false, backends[b], 0);
        ctx_free(&c);
    }
}

static void test_compile_autograd_grad_intermediate_and_ancestor(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        ctx c;
        ctx_init(&c);
        check_program(p_inter_up, &c, 1, false, backends[b], 0);
        c.flags = JG_CREATE_GRAPH;
        check_program(p_inter_up, &c, 1, false, backends[b], 0);
        ctx_free(&c);
    }
}

static void test_compile_autograd_grad_duplicates(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        ctx c;
        ctx_init(&c);
        check_program(p_dup, &c, 2, false, backends[b], 0);
        ctx_free(&c);
    }
}

static void test_compile_autograd_grad_retain_per_backward(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        ctx c;
        ctx_init(&c);
        check_program(p_disjoint, &c, 1, false, backends[b], 0);
        /* through a node the first one freed: eager's error (fullgraph: the
         * graph break's) */
        jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(4, 5)), *out = NULL;
        assert_true(p_shared(&c, NULL, 1, &x, &out) < 0);
        TU_ERROR("Trying to backward through the graph a second time");
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *k = jg_compile(p_shared, &c, &o);
        assert_true(jg_compiled_call(k, NULL, 0, 1, &x, &out) < 0);
        TU_ERROR("a second backward through the same graph");
        jg_compiled_free(k);
        o.fullgraph = false;
        k = jg_compile(p_shared, &c, &o);
        assert_true(jg_compiled_call(k, NULL, 0, 1, &x, &out) < 0);
        TU_ERROR("Trying to backward through the graph a second time");
        jg_compiled_free(k);
        ctx_free(&c);
    }
}

/* A program writing c->w's .grad, called eagerly and compiled from the same
 * starting .grad (none, or zeros without history): outputs and .grad
 * bitwise equal, then after a backward outside the call of its last output
 * (through the .grad's history: second order) .grad again, and after one
 * of a function of .grad itself. */
static void check_grad_program(jg_program_fn fn, ctx *c, int n_in, const char *backend, bool preset,
                               bool outer) {
    jg_compile_options o = {.backend = backend, .fullgraph = true};
    jg_compiled *k = jg_compile(fn, c, &o);
    assert_non_null(k);
    for (int call = 0; call < 3; call++) {
        jg_scope_push();
        jg_tensor *in[2] = {jg_randn(JG_F32, 2, TU_SHAPE(4, 5)),
                            jg_randn(JG_F32, 2, TU_SHAPE(4, 3))};
        jg_tensor *o_[2][3] = {{0}}, *g1[2], *g2[2] = {0}, *g3[2] = {0};
        int no[2];
        for (int run = 0; run < 2; run++) {
            jg_clear_grad(c->w);
            if (preset)
                assert_int_equal(jg_set_grad(c->w, jg_full(JG_F32, 2, TU_SHAPE(5, 3), 0.0)), 0);
            no[run] = run == 0 ? fn(c, NULL, n_in, in, o_[0])
                               : jg_compiled_call(k, NULL, 0, n_in, in, o_[1]);
            assert_true(no[run] > 0);
            g1[run] = jg_clone(jg_grad(c->w));
            if (outer) {
                assert_int_equal(jg_backward(o_[run][no[run] - 1], NULL, JG_RETAIN_GRAPH), 0);
                g2[run] = jg_clone(jg_grad(c->w));
                /* and through .grad itself, which the program also saved
                 * for its own backward (a clone of it keeps its history) */
                jg_tensor *q = jg_sum(jg_sin(jg_grad(c->w)));
                assert_true(q && jg_requires_grad(q));
                assert_int_equal(jg_backward(q, NULL, 0), 0);
                g3[run] = jg_clone(jg_grad(c->w));
            }
        }
        assert_int_equal(no[1], no[0]);
        for (int i = 0; i < no[0]; i++)
            TU_SAME(o_[1][i], o_[0][i]);
        TU_SAME(g1[1], g1[0]);
        if (outer) {
            TU_SAME(g2[1], g2[0]);
            TU_SAME(g3[1], g3[0]);
        }
        jg_clear_grad(c->w);
        jg_scope_pop();
    }
    assert_int_equal(jg_compiled_entries(k), 1);
    assert_int_equal(jg_compiled_fallbacks(k), 0);
    jg_compiled_free(k);
}

static void test_compile_backward_create_graph(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        ctx c;
        ctx_init(&c);
        for (int preset = 0; preset < 2; preset++) {
            check_grad_program(p_bw_create, &c, 1, backends[b], preset, true);
            check_grad_program(p_maml, &c, 2, backends[b], preset, true);
        }
        ctx_free(&c);
    }
}

static void test_compile_backward_gradient(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        ctx c;
        ctx_init(&c);
        check_grad_program(p_bw_gradient, &c, 2, backends[b], false, false);
        check_grad_program(p_bw_gradient, &c, 2, backends[b], true, false);
        c.flags = JG_CREATE_GRAPH;
        check_grad_program(p_bw_gradient, &c, 2, backends[b], false, false);
        ctx_free(&c);
    }
}

/* user: the flags of the program's backward (0, or JG_RETAIN_GRAPH); a
 * second output that the backward does not reach */
static int p_bw_freed(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    ctx *c = user;
    jg_tensor *loss = jg_sum(jg_tanh(jg_matmul(in[0], c->w)));
    if (!loss || jg_backward(loss, NULL, c->flags) < 0)
        return -1;
    out[0] = loss;
    out[1] = jg_sum(jg_mul_scalar(jg_matmul(in[0], c->w), 2.0));
    return out[1] ? 2 : -1;
}

/* Regression: after an in-program backward without retain_graph, the
 * returned loss could be backpropagated again after the call (its compiled
 * node kept what eager frees).  Now eager's error, .grad intact; with
 * JG_RETAIN_GRAPH, or through an output the backward did not reach, the
 * second backward runs as eagerly (bitwise). */
static void test_compile_backward_again_after_in_program_backward(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        for (int retain = 0; retain < 2; retain++) {
            for (int again = 0; again < 2; again++) { /* through the loss, the other output */
                ctx c;
                ctx_init(&c);
                c.flags = retain ? JG_RETAIN_GRAPH : 0;
                jg_compile_options o = {.backend = backends[b], .fullgraph = true};
                jg_compiled *k = jg_compile(p_bw_freed, &c, &o);
                jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(4, 5)), *g[2][2];
                int rc[2];
                for (int run = 0; run < 2; run++) {
                    jg_tensor *out[2];
                    jg_clear_grad(c.w);
                    int n = run ? jg_compiled_call(k, NULL, 0, 1, &x, out)
                                : p_bw_freed(&c, NULL, 1, &x, out);
                    assert_int_equal(n, 2);
                    g[run][0] = jg_clone(jg_grad(c.w));
                    rc[run] = jg_backward(out[again], NULL, 0);
                    if (rc[run] < 0)
                        TU_ERROR("Trying to backward through the graph a second time");
                    g[run][1] = jg_clone(jg_grad(c.w));
                }
                assert_int_equal(rc[1], rc[0]);
                assert_int_equal(rc[0], retain || again ? 0 : -1);
                TU_SAME(g[1][0], g[0][0]);
                TU_SAME(g[1][1], g[0][1]);
                if (rc[0] < 0)
                    TU_SAME(g[1][1], g[1][0]); /* (intact) */
                assert_int_equal(jg_compiled_fallbacks(k), 0);
                jg_compiled_free(k);
                ctx_free(&c);
            }
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_compile_autograd_grad_penalty),
        TU_TEST(test_compile_autograd_grad_create_graph),
        TU_TEST(test_compile_autograd_grad_custom_saved_output),
        TU_TEST(test_compile_autograd_grad_inputs),
        TU_TEST(test_compile_autograd_grad_multi),
        TU_TEST(test_compile_autograd_grad_unused),
        TU_TEST(test_compile_autograd_grad_retain),
        TU_TEST(test_compile_autograd_grad_intermediate),
        TU_TEST(test_compile_autograd_grad_intermediate_and_ancestor),
        TU_TEST(test_compile_autograd_grad_duplicates),
        TU_TEST(test_compile_autograd_grad_retain_per_backward),
        TU_TEST(test_compile_backward_create_graph),
        TU_TEST(test_compile_backward_gradient),
        TU_TEST(test_compile_backward_again_after_in_program_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
