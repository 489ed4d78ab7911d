/* Tensor gradient hooks (PyTorch's Tensor.register_hook) on leaves and
 * non-leaves, retain_grad, and a compiled program that registers one: the
 * values each hook sees, replacements, order, removal, a tensor used
 * several times (one call with the sum), the error paths (nothing
 * committed), create_graph and jg_autograd_grad.  Expected values are
 * PyTorch 1.13's (python/tests/test_tensor_hooks.py checks them against
 * torch). */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

static jg_tensor *leaf(int n, const double *v) {
    jg_tensor *t = tu_tensor(JG_F32, 1, TU_SHAPE(n), v);
    jg_set_requires_grad(t, true);
    return t;
}

typedef struct {
    int calls;
    jg_tensor *seen[4]; /* copies of the gradients seen, one per call */
    bool requires_grad[4], grad_mode[4];
    int *log, *n_log, id; /* shared call order */
    double scale;         /* != 0: replace grad by grad * scale */
    jg_tensor *bad;       /* replacement of the wrong shape or dtype */
    bool fail;
} hk;

static int hook(void *user, jg_tensor *grad, jg_tensor **rep) {
    hk *h = user;
    if (h->calls < 4) {
        jg_release(h->seen[h->calls]);
        h->seen[h->calls] = jg_retain(jg_detach(jg_clone(grad)));
        h->requires_grad[h->calls] = jg_requires_grad(grad);
        h->grad_mode[h->calls] = jg_is_grad_enabled();
    }
    h->calls++;
    if (h->log)
        h->log[(*h->n_log)++] = h->id;
    if (h->fail)
        return jg_set_error("hook refused");
    if (h->bad)
        *rep = jg_retain(h->bad);
    else if (h->scale != 0)
        *rep = jg_retain(jg_mul_scalar(grad, h->scale));
    return 0;
}

static void hk_free(hk *h) {
    for (int i = 0; i < 4; i++) {
        jg_release(h->seen[i]);
        h->seen[i] = NULL;
    }
}

static int freed;
static void count_free(void *u) {
    (void)u;
    freed++;
}

/* y = 2x, loss = sum(y*y): dloss/dy = 4x */
static void test_nonleaf_hook_replaces(void **state) {
    (void)state;
    jg_tensor *x = leaf(2, TU_VALS(1, 2));
    jg_tensor *y = jg_mul_scalar(x, 2);
    hk a = {.scale = 10};
    int id = jg_register_tensor_hook(y, hook, &a, count_free);
    assert_true(id > 0);
    assert_int_equal(jg_backward(jg_sum(jg_mul(y, y)), NULL, 0), 0);
    assert_int_equal(a.calls, 1);
    TU_CHECK(a.seen[0], 1, TU_SHAPE(2), TU_VALS(4, 8), 0);
    assert_false(a.requires_grad[0]);
    assert_false(a.grad_mode[0]);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(80, 160), 0);
    assert_null(jg_grad(y)); /* no retain_grad */
    /* removed: the next backward is plain; free_user ran */
    freed = 0;
    assert_int_equal(jg_remove_grad_hook(y, id), 0);
    assert_int_equal(freed, 1);
    assert_int_equal(jg_remove_grad_hook(y, id), -1);
    jg_clear_grad(x);
    assert_int_equal(jg_backward(jg_sum(jg_mul(y, y)), NULL, 0), 0);
    assert_int_equal(a.calls, 1);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(8, 16), 0);
    hk_free(&a);
}

/* Several hooks on one tensor: registration order, each seeing the one
 * before's answer; a leaf's tensor hooks run before its grad-ready hooks,
 * which see the replaced gradient. */
static int ready_seen(void *user, jg_tensor *l, jg_tensor *grad) {
    (void)l;
    jg_release(*(jg_tensor **)user);
    *(jg_tensor **)user = jg_retain(jg_detach(jg_clone(grad)));
    return 0;
}

static void test_order_and_leaf(void **state) {
    (void)state;
    int log[8], n_log = 0;
    jg_tensor *x = leaf(2, TU_VALS(1, 2));
    jg_tensor *y = jg_mul_scalar(x, 2);
    hk a = {.scale = 2, .log = log, .n_log = &n_log, .id = 1};
    hk b = {.scale = 3, .log = log, .n_log = &n_log, .id = 2};
    hk c = {.scale = 0.5, .log = log, .n_log = &n_log, .id = 3};
    jg_tensor *ready_g = NULL;
    assert_true(jg_register_grad_ready_hook(x, ready_seen, &ready_g, NULL) > 0);
    assert_true(jg_register_tensor_hook(y, hook, &a, NULL) > 0);
    assert_true(jg_register_tensor_hook(y, hook, &b, NULL) > 0);
    assert_true(jg_register_tensor_hook(x, hook, &c, NULL) > 0);
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    assert_int_equal(n_log, 3);
    assert_int_equal(log[0], 1);
    assert_int_equal(log[1], 2);
    assert_int_equal(log[2], 3);
    TU_CHECK(a.seen[0], 1, TU_SHAPE(2), TU_VALS(1, 1), 0);
    TU_CHECK(b.seen[0], 1, TU_SHAPE(2), TU_VALS(2, 2), 0);
    TU_CHECK(c.seen[0], 1, TU_SHAPE(2), TU_VALS(12, 12), 0);
    TU_CHECK(ready_g, 1, TU_SHAPE(2), TU_VALS(6, 6), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(6, 6), 0);
    /* a leaf that is the root */
    jg_clear_grad(x);
    assert_int_equal(jg_backward(x, tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2)), 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(0.5, 1), 0);
    TU_CHECK(ready_g, 1, TU_SHAPE(2), TU_VALS(0.5, 1), 0);
    jg_release(ready_g);
    hk_free(&a);
    hk_free(&b);
    hk_free(&c);
}

/* One call with the gradient summed over every use: b*b*b, and one custom
 * function filling two slots with b (per-slot gradients 2g and 3g). */
static int two_fwd(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx;
    (void)n;
    out[0] = jg_mul(in[0], in[1]);
    return 1;
}
static int two_bwd(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **gin) {
    (void)ctx;
    (void)n_out;
    (void)n_in;
    gin[0] = jg_mul_scalar(g[0], 2);
    gin[1] = jg_mul_scalar(g[0], 3);
    return 2;
}
static const jg_function Two = {"Two", two_fwd, two_bwd, NULL};

static void test_used_twice(void **state) {
    (void)state;
    jg_tensor *x = leaf(2, TU_VALS(1, 2));
    jg_tensor *b = jg_mul_scalar(x, 1);
    hk a = {0};
    assert_true(jg_register_tensor_hook(b, hook, &a, NULL) > 0);
    assert_int_equal(jg_backward(jg_sum(jg_mul(jg_mul(b, b), b)), NULL, 0), 0);
    assert_int_equal(a.calls, 1);
    TU_CHECK(a.seen[0], 1, TU_SHAPE(2), TU_VALS(3, 12), 0);
    jg_tensor *o;
    assert_int_equal(jg_apply(&Two, 2, (jg_tensor *[]){b, b}, NULL, 0, &o), 1);
    assert_int_equal(jg_backward(jg_sum(o), NULL, 0), 0);
    assert_int_equal(a.calls, 2);
    TU_CHECK(a.seen[1], 1, TU_SHAPE(2), TU_VALS(5, 5), 0);
    hk_free(&a);
}

/* A wrong replacement, or a failing hook: an error, every .grad (leaf and
 * retained) as it was. */
static void test_errors_change_nothing(void **state) {
    (void)state;
    jg_tensor *x = leaf(2, TU_VALS(1, 2));
    jg_tensor *y = jg_mul_scalar(x, 2);
    assert_int_equal(jg_retain_grad(y), 0);
    assert_int_equal(jg_backward(jg_sum(y), NULL, JG_RETAIN_GRAPH), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(2, 2), 0);
    TU_CHECK(jg_grad(y), 1, TU_SHAPE(2), TU_VALS(1, 1), 0);
    jg_tensor *gx = jg_grad(x), *gy = jg_grad(y);
    hk bad = {.bad = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0, 0, 0))};
    int id = jg_register_tensor_hook(y, hook, &bad, NULL);
    assert_int_equal(jg_backward(jg_sum(y), NULL, JG_RETAIN_GRAPH), -1);
    char want[64];
    snprintf(want, sizeof want, "hook %d has changed the size of value", id);
    TU_ERROR(want);
    bad.bad = tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(0, 0));
    assert_int_equal(jg_backward(jg_sum(y), NULL, JG_RETAIN_GRAPH), -1);
    TU_ERROR("has changed the type of value (was float32 got float64)");
    jg_remove_grad_hook(y, id);
    hk f = {.fail = true};
    id = jg_register_tensor_hook(x, hook, &f, NULL);
    assert_int_equal(jg_backward(jg_sum(y), NULL, JG_RETAIN_GRAPH), -1);
    TU_ERROR("hook refused");
    assert_ptr_equal(jg_grad(x), gx);
    assert_ptr_equal(jg_grad(y), gy);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(2, 2), 0);
    TU_CHECK(jg_grad(y), 1, TU_SHAPE(2), TU_VALS(1, 1), 0);
    jg_remove_grad_hook(x, id);
    /* registration */
    jg_tensor *c = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    assert_int_equal(jg_register_tensor_hook(c, hook, &f, NULL), -1);
    TU_ERROR("cannot register a hook on a tensor that doesn't require gradient");
    assert_int_equal(jg_retain_grad(c), -1);
    TU_ERROR("can't retain_grad on Tensor that has requires_grad=False");
    assert_int_equal(jg_register_tensor_hook(x, NULL, NULL, NULL), -1);
    TU_ERROR("hook function is NULL");
    hk_free(&bad);
    hk_free(&f);
}

/* retain_grad accumulates over backwards; it is a hook in registration
 * order (a hook registered before it changes what it keeps); a leaf's is a
 * no-op; a tensor that dies first stops it. */
static void test_retain_grad(void **state) {
    (void)state;
    jg_tensor *x = leaf(2, TU_VALS(1, 2));
    assert_int_equal(jg_retain_grad(x), 0);
    assert_false(jg_retains_grad(x));
    jg_tensor *y = jg_mul_scalar(x, 2);
    assert_false(jg_retains_grad(y));
    hk a = {.scale = 10};
    assert_true(jg_register_tensor_hook(y, hook, &a, NULL) > 0);
    assert_int_equal(jg_retain_grad(y), 0);
    assert_int_equal(jg_retain_grad(y), 0);
    assert_true(jg_retains_grad(y));
    jg_tensor *loss = jg_sum(jg_mul(y, y));
    assert_int_equal(jg_backward(loss, NULL, JG_RETAIN_GRAPH), 0);
    TU_CHECK(jg_grad(y), 1, TU_SHAPE(2), TU_VALS(40, 80), 0);
    assert_int_equal(jg_backward(loss, NULL, 0), 0);
    TU_CHECK(jg_grad(y), 1, TU_SHAPE(2), TU_VALS(80, 160), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(160, 320), 0);
    /* the retained tensor dies before the backward */
    jg_scope_push();
    jg_tensor *z = jg_keep(jg_mul_scalar(x, 3));
    jg_scope_pop();
    assert_int_equal(jg_retain_grad(z), 0);
    jg_scope_push();
    jg_tensor *l2 = jg_keep(jg_sum(z));
    jg_scope_pop();
    jg_release(z);
    assert_int_equal(jg_backward(l2, NULL, 0), 0);
    jg_release(l2);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(163, 323), 0);
    /* an in-place op after retain_grad: retain_grad follows the tensor to
     * its new grad_fn (a tensor hook stays on the old one), as PyTorch */
    jg_tensor *w = jg_mul_scalar(x, 2);
    hk b = {0};
    assert_int_equal(jg_retain_grad(w), 0);
    assert_true(jg_register_tensor_hook(w, hook, &b, NULL) > 0);
    assert_int_equal(jg_mul_scalar_(w, 3), 0);
    assert_true(jg_retains_grad(w));
    assert_int_equal(jg_backward(jg_sum(jg_mul(w, w)), NULL, 0), 0);
    TU_CHECK(jg_grad(w), 1, TU_SHAPE(2), TU_VALS(12, 24), 0);
    TU_CHECK(b.seen[0], 1, TU_SHAPE(2), TU_VALS(36, 72), 0);
    hk_free(&b);
    hk_free(&a);
}

/* create_graph: hooks run with grad mode on and see a gradient with
 * history; jg_autograd_grad runs a non-leaf's hooks when its grad_fn runs,
 * and retain_grad keeps that gradient too (PyTorch 1.13). */
static void test_create_graph_and_autograd_grad(void **state) {
    (void)state;
    jg_tensor *x = leaf(2, TU_VALS(1, 2));
    jg_tensor *y = jg_mul(x, x);
    hk a = {0};
    assert_true(jg_register_tensor_hook(y, hook, &a, NULL) > 0);
    assert_int_equal(jg_backward(jg_sum(jg_mul(y, x)), NULL, JG_CREATE_GRAPH), 0);
    assert_int_equal(a.calls, 1);
    assert_true(a.requires_grad[0]);
    assert_true(a.grad_mode[0]);
    TU_CHECK(a.seen[0], 1, TU_SHAPE(2), TU_VALS(1, 2), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(3, 12), 0);
    assert_true(jg_requires_grad(jg_grad(x)));
    jg_clear_grad(x);

    jg_tensor *w = jg_mul_scalar(x, 2);
    hk b = {.scale = 10};
    assert_true(jg_register_tensor_hook(w, hook, &b, NULL) > 0);
    assert_int_equal(jg_retain_grad(w), 0);
    hk c = {.scale = 10};
    assert_true(jg_register_tensor_hook(x, hook, &c, NULL) > 0);
    jg_tensor *r;
    assert_int_equal(jg_autograd_grad(1, (jg_tensor *[]){jg_sum(jg_mul(w, w))}, NULL, 1, &x, 0, &r),
                     0);
    assert_int_equal(b.calls, 1);
    assert_int_equal(c.calls, 0); /* a captured leaf's hooks do not run */
    TU_CHECK(r, 1, TU_SHAPE(2), TU_VALS(80, 160), 0);
    TU_CHECK(jg_grad(w), 1, TU_SHAPE(2), TU_VALS(40, 80), 0);
    assert_null(jg_grad(x));
    /* w captured, and its grad_fn leads to no other capture: PyTorch runs
     * neither the node nor its hooks; the result is taken before them */
    assert_int_equal(jg_autograd_grad(1, (jg_tensor *[]){jg_sum(jg_mul(w, w))}, NULL, 1, &w, 0, &r),
                     0);
    assert_int_equal(b.calls, 1);
    TU_CHECK(r, 1, TU_SHAPE(2), TU_VALS(4, 8), 0);
    TU_CHECK(jg_grad(w), 1, TU_SHAPE(2), TU_VALS(40, 80), 0);
    hk_free(&a);
    hk_free(&b);
    hk_free(&c);
}

/* A program that registers a hook on a tensor it computes: a graph break,
 * so the compiled call runs eagerly and the hook runs as in eager mode. */
static hk prog_hook;
static int prog(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user;
    (void)args;
    (void)n;
    jg_tensor *y = jg_mul(in[0], in[0]);
    if (!y || jg_register_tensor_hook(y, hook, &prog_hook, NULL) < 0)
        return -1;
    out[0] = jg_sum(jg_mul(y, in[0]));
    return out[0] ? 1 : -1;
}

static void test_compiled_program_with_hook(void **state) {
    (void)state;
    jg_tensor *xe = leaf(3, TU_VALS(1, 2, 3)), *xc = leaf(3, TU_VALS(1, 2, 3));
    prog_hook = (hk){.scale = 3};
    jg_compiled *cc = jg_compile(prog, NULL, NULL);
    assert_non_null(cc);
    for (int rep = 0; rep < 2; rep++) {
        jg_tensor *le, *lc;
        assert_int_equal(prog(NULL, NULL, 1, &xe, &le), 1);
        assert_int_equal(jg_backward(le, NULL, 0), 0);
        int before = prog_hook.calls;
        assert_int_equal(jg_compiled_call(cc, NULL, 0, 1, &xc, &lc), 1);
        assert_int_equal(jg_backward(lc, NULL, 0), 0);
        assert_int_equal(prog_hook.calls, before + 1);
        TU_SAME(lc, le);
        TU_SAME(jg_grad(xc), jg_grad(xe));
    }
    TU_CHECK(jg_grad(xe), 1, TU_SHAPE(3), TU_VALS(14, 56, 126), 0); /* 2 x 7x^2 */
    assert_int_equal(jg_compiled_fallbacks(cc), 2);
    jg_compiled_free(cc);
    hk_free(&prog_hook);
}

/* A backward inside a compiled program reaching a leaf with a tensor hook:
 * the backward runs eagerly, and so does the hook. */
static int prog_bwd(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user;
    (void)args;
    (void)n;
    jg_tensor *l = jg_sum(jg_mul(in[0], in[0]));
    if (!l || jg_backward(l, NULL, 0) < 0)
        return -1;
    out[0] = jg_mul_scalar(in[0], 1);
    return out[0] ? 1 : -1;
}

static void test_compiled_backward_reaches_hooked_leaf(void **state) {
    (void)state;
    jg_tensor *xe = leaf(2, TU_VALS(1, 2)), *xc = leaf(2, TU_VALS(1, 2));
    hk he = {.scale = 5}, hc = {.scale = 5};
    assert_true(jg_register_tensor_hook(xe, hook, &he, NULL) > 0);
    assert_true(jg_register_tensor_hook(xc, hook, &hc, NULL) > 0);
    jg_compiled *cc = jg_compile(prog_bwd, NULL, NULL);
    jg_tensor *oe, *oc;
    assert_int_equal(prog_bwd(NULL, NULL, 1, &xe, &oe), 1);
    assert_int_equal(jg_compiled_call(cc, NULL, 0, 1, &xc, &oc), 1);
    assert_int_equal(hc.calls, he.calls);
    TU_SAME(jg_grad(xc), jg_grad(xe));
    TU_CHECK(jg_grad(xe), 1, TU_SHAPE(2), TU_VALS(10, 20), 0);
    jg_compiled_free(cc);
    hk_free(&he);
    hk_free(&hc);
}

/* jg_graph_break: nothing outside a trace; inside, the call runs eagerly
 * (the code after it runs on every call), or fails under fullgraph. */
static int n_prog_runs;
static int prog_break(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user;
    (void)args;
    (void)n;
    if (jg_graph_break("side effects on every call") < 0)
        return -1;
    n_prog_runs++;
    out[0] = jg_sum(jg_mul(in[0], in[0]));
    return out[0] ? 1 : -1;
}

static void test_graph_break(void **state) {
    (void)state;
    assert_int_equal(jg_graph_break("not tracing"), 0);
    jg_tensor *x = leaf(2, TU_VALS(1, 2)), *o;
    jg_compiled *cc = jg_compile(prog_break, NULL, NULL);
    n_prog_runs = 0;
    for (int rep = 0; rep < 3; rep++)
        assert_int_equal(jg_compiled_call(cc, NULL, 0, 1, &x, &o), 1);
    assert_int_equal(n_prog_runs, 3);
    assert_int_equal(jg_compiled_fallbacks(cc), 3);
    TU_CHECK(o, 0, NULL, TU_VALS(5), 0);
    jg_compiled_free(cc);
    cc = jg_compile(prog_break, NULL, &(jg_compile_options){.fullgraph = true});
    assert_int_equal(jg_compiled_call(cc, NULL, 0, 1, &x, &o), -1);
    TU_ERROR("side effects on every call");
    jg_compiled_free(cc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_nonleaf_hook_replaces),
        TU_TEST(test_order_and_leaf),
        TU_TEST(test_used_twice),
        TU_TEST(test_errors_change_nothing),
        TU_TEST(test_retain_grad),
        TU_TEST(test_create_graph_and_autograd_grad),
        TU_TEST(test_compiled_program_with_hook),
        TU_TEST(test_compiled_backward_reaches_hooked_leaf),
        TU_TEST(test_graph_break),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
