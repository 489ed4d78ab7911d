/* Gradient hooks on leaves: grad-ready hooks run once per leaf when its
 * gradient is final, in the engine's order, before any .grad changes;
 * queued callbacks, jg_backward_set_grad, post-accumulate hooks, the error
 * paths (nothing committed) and the registry's bookkeeping. */
#include "testutil.h"

#include <string.h>

static jg_tensor *leaf(int n, const double *v) {
    jg_tensor *t = tu_tensor(JG_F32, 1, TU_SHAPE(n), v);
    jg_set_requires_grad(t, true);
    return t;
}

typedef struct {
    int order[8];
    jg_tensor *seen[8]; /* copies of the gradients the hooks saw */
    bool committed_at_hook[8];
    int n;
    int n_cb, cb_status[4], hooks_before_cb;
    bool queue_cb, cb_fails, replace;
} record;

typedef struct {
    record *r;
    int id;
} hook_arg;

static int cb(void *user, int status) {
    record *r = user;
    r->cb_status[r->n_cb++] = status;
    r->hooks_before_cb = r->n;
    if (status == 0 && r->cb_fails)
        return jg_set_error("callback refused");
    return 0;
}

static int ready(void *user, jg_tensor *leaf_t, jg_tensor *grad) {
    hook_arg *a = user;
    record *r = a->r;
    r->order[r->n] = a->id;
    r->committed_at_hook[r->n] = jg_grad(leaf_t) != NULL;
    jg_release(r->seen[r->n]); /* (slots are reused across backwards) */
    r->seen[r->n] = jg_keep(jg_clone(grad));
    r->n++;
    if (r->queue_cb && r->n == 1 && jg_backward_queue_callback(cb, r) < 0)
        return -1;
    if (r->replace && jg_backward_set_grad(leaf_t, jg_mul_scalar(grad, 10)) < 0)
        return -1;
    return 0;
}

static void record_free(record *r) {
    for (int i = 0; i < 8; i++) {
        jg_release(r->seen[i]);
        r->seen[i] = NULL;
    }
}

static int failing_ready(void *user, jg_tensor *leaf_t, jg_tensor *grad) {
    (void)user, (void)leaf_t, (void)grad;
    return jg_set_error("hook says no");
}

/* loss = sum(w2 * tanh(w1)) + sum(w1 * w1): w2's gradient is final first;
 * w1 gets three contributions, summed before its hook runs. */
static jg_tensor *loss_of(jg_tensor *w1, jg_tensor *w2) {
    return jg_add(jg_sum(jg_mul(w2, jg_tanh(w1))), jg_sum(jg_mul(w1, w1)));
}

static void test_ready_order_and_value(void **state) {
    (void)state;
    jg_tensor *w1 = leaf(2, TU_VALS(0.5, -1)), *w2 = leaf(2, TU_VALS(3, 4));
    record r = {0};
    hook_arg a1 = {&r, 1}, a2 = {&r, 2};
    assert_true(jg_register_grad_ready_hook(w1, ready, &a1, NULL) > 0);
    assert_true(jg_register_grad_ready_hook(w2, ready, &a2, NULL) > 0);
    assert_int_equal(jg_backward(loss_of(w1, w2), NULL, 0), 0);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.order[0], 2);
    assert_int_equal(r.order[1], 1);
    assert_false(r.committed_at_hook[0]); /* before the commit */
    assert_false(r.committed_at_hook[1]);
    TU_SAME(r.seen[0], jg_grad(w2)); /* the would-be gradient is the one committed */
    TU_SAME(r.seen[1], jg_grad(w1));
    /* a second backward: hooks see this backward's gradient, not the sum */
    r.n = 0;
    assert_int_equal(jg_backward(loss_of(w1, w2), NULL, 0), 0);
    assert_int_equal(r.n, 2);
    TU_SAME(jg_add(r.seen[0], r.seen[0]), jg_grad(w2));
    /* autograd.grad touches no .grad: no hooks */
    r.n = 0;
    jg_tensor *res[1];
    assert_int_equal(
        jg_autograd_grad(1, (jg_tensor *[]){loss_of(w1, w2)}, NULL, 1, (jg_tensor *[]){w1}, 0, res),
        0);
    assert_int_equal(r.n, 0);
    record_free(&r);
}

static void test_hook_failure_changes_nothing(void **state) {
    (void)state;
    jg_tensor *w1 = leaf(2, TU_VALS(0.5, -1)), *w2 = leaf(2, TU_VALS(3, 4));
    assert_int_equal(jg_backward(loss_of(w1, w2), NULL, 0), 0);
    jg_tensor *g1 = jg_clone(jg_grad(w1)), *g2 = jg_clone(jg_grad(w2));
    int h = jg_register_grad_ready_hook(w1, failing_ready, NULL, NULL);
    assert_true(h > 0);
    assert_int_equal(jg_backward(loss_of(w1, w2), NULL, 0), -1);
    TU_ERROR("hook says no");
    TU_SAME(jg_grad(w1), g1);
    TU_SAME(jg_grad(w2), g2);
    assert_int_equal(jg_remove_grad_hook(w1, h), 0);
    assert_int_equal(jg_remove_grad_hook(w1, h), -1);
    TU_ERROR("no hook");
    assert_int_equal(jg_backward(loss_of(w1, w2), NULL, 0), 0);
}

static void test_callback_and_set_grad(void **state) {
    (void)state;
    jg_tensor *w1 = leaf(2, TU_VALS(0.5, -1)), *w2 = leaf(2, TU_VALS(3, 4));
    record r = {.queue_cb = true, .replace = true};
    hook_arg a1 = {&r, 1}, a2 = {&r, 2};
    jg_register_grad_ready_hook(w1, ready, &a1, NULL);
    jg_register_grad_ready_hook(w2, ready, &a2, NULL);
    assert_int_equal(jg_backward(loss_of(w1, w2), NULL, 0), 0);
    assert_int_equal(r.n_cb, 1);
    assert_int_equal(r.cb_status[0], 0);
    assert_int_equal(r.hooks_before_cb, 2); /* after every hook */
    TU_SAME(jg_grad(w2), jg_mul_scalar(r.seen[0], 10));
    TU_SAME(jg_grad(w1), jg_mul_scalar(r.seen[1], 10));
    /* a failing callback fails the backward: nothing committed */
    jg_tensor *g1 = jg_clone(jg_grad(w1));
    record_free(&r);
    r = (record){.queue_cb = true, .cb_fails = true};
    assert_int_equal(jg_backward(loss_of(w1, w2), NULL, 0), -1);
    TU_ERROR("callback refused");
    TU_SAME(jg_grad(w1), g1);
    /* outside a backward both calls are errors */
    assert_int_equal(jg_backward_queue_callback(cb, &r), -1);
    TU_ERROR("no backward with hooks is running");
    assert_int_equal(jg_backward_set_grad(w1, NULL), -1);
    record_free(&r);
}

static int fail_fwd(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx, (void)n;
    out[0] = jg_mul_scalar(in[0], 1);
    return 1;
}
static int fail_bwd(jg_ctx *ctx, int n_out, jg_tensor *const *dout, int n_in, jg_tensor **din) {
    (void)ctx, (void)n_out, (void)dout, (void)n_in, (void)din;
    return jg_set_error("boom in backward");
}
static const jg_function Fail = {"Fail", fail_fwd, fail_bwd, NULL};

/* A node failing after some hooks ran: the queued callbacks learn it (status
 * -1), the error is the node's, nothing is committed. */
static void test_failure_after_hooks(void **state) {
    (void)state;
    jg_tensor *w1 = leaf(2, TU_VALS(0.5, -1)), *w2 = leaf(2, TU_VALS(3, 4));
    record r = {.queue_cb = true};
    hook_arg a2 = {&r, 2};
    jg_register_grad_ready_hook(w2, ready, &a2, NULL);
    jg_tensor *u;
    assert_int_equal(jg_apply(&Fail, 1, &w1, NULL, 0, &u), 1);
    assert_int_equal(jg_backward(jg_sum(jg_mul(w2, u)), NULL, 0), -1);
    TU_ERROR("boom in backward");
    assert_int_equal(r.n, 1); /* w2's hook ran before the failure */
    assert_int_equal(r.n_cb, 1);
    assert_int_equal(r.cb_status[0], -1);
    assert_null(jg_grad(w1));
    assert_null(jg_grad(w2));
    record_free(&r);
}

typedef struct {
    int calls;
    jg_tensor *grad_then;
    int freed;
} post_rec;

static int post(void *user, jg_tensor *leaf_t) {
    post_rec *p = user;
    p->calls++;
    p->grad_then = jg_grad(leaf_t);
    return 0;
}

static void free_user(void *user) {
    ((post_rec *)user)->freed++;
}

static void test_post_accumulate_and_lifetime(void **state) {
    (void)state;
    post_rec p = {0};
    jg_tensor *w = jg_keep(leaf(2, TU_VALS(1, 2)));
    int h = jg_register_post_accumulate_grad_hook(w, post, &p, free_user);
    assert_true(h > 0);
    assert_int_equal(jg_backward(jg_sum(jg_mul(w, w)), NULL, 0), 0);
    assert_int_equal(p.calls, 1);
    assert_ptr_equal(p.grad_then, jg_grad(w)); /* .grad was already written */
    TU_CHECK(jg_grad(w), 1, TU_SHAPE(2), TU_VALS(2, 4), 0);
    assert_int_equal(jg_remove_grad_hook(w, h), 0);
    assert_int_equal(p.freed, 1);
    assert_int_equal(jg_backward(jg_sum(jg_mul(w, w)), NULL, 0), 0);
    assert_int_equal(p.calls, 1);
    /* the hook's user data is freed when the tensor dies */
    jg_release(w); /* (the graphs above still hold w) */
    jg_tensor *v = jg_keep(leaf(2, TU_VALS(1, 2)));
    jg_register_post_accumulate_grad_hook(v, post, &p, free_user);
    jg_register_grad_ready_hook(v, ready, &p, free_user);
    jg_release(v);
    assert_int_equal(p.freed, 3);
}

static void test_registration_errors(void **state) {
    (void)state;
    jg_tensor *w = leaf(2, TU_VALS(1, 2));
    jg_tensor *plain = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    assert_int_equal(jg_register_grad_ready_hook(plain, ready, NULL, NULL), -1);
    TU_ERROR("cannot register a hook on a tensor that doesn't require gradient");
    assert_int_equal(jg_register_grad_ready_hook(jg_mul(w, w), ready, NULL, NULL), -1);
    TU_ERROR("only be registered on leaf tensors");
    assert_int_equal(jg_register_grad_ready_hook(w, NULL, NULL, NULL), -1);
    TU_ERROR("hook function is NULL");
    /* a leaf root: its hook runs too */
    record r = {0};
    hook_arg a = {&r, 7};
    jg_register_grad_ready_hook(w, ready, &a, NULL);
    assert_int_equal(jg_backward(w, jg_full(JG_F32, 1, TU_SHAPE(2), 3), 0), 0);
    assert_int_equal(r.n, 1);
    TU_CHECK(r.seen[0], 1, TU_SHAPE(2), TU_VALS(3, 3), 0);
    record_free(&r);
}

typedef struct {
    int expected, ready_seen_at_expected;
    record *r;
} exp_rec;

static int expected(void *user, jg_tensor *leaf_t) {
    exp_rec *e = user;
    (void)leaf_t;
    e->expected++;
    e->ready_seen_at_expected = e->r->n;
    return jg_backward_queue_callback(cb, e->r);
}

/* Expected hooks run before any node, only for leaves the backward reaches,
 * and what they queue runs even when the backward fails before any
 * gradient is final. */
static void test_expected_hook(void **state) {
    (void)state;
    jg_tensor *w1 = leaf(2, TU_VALS(0.5, -1)), *w2 = leaf(2, TU_VALS(3, 4));
    record r = {0};
    exp_rec e = {0, -1, &r};
    hook_arg a1 = {&r, 1};
    jg_register_grad_ready_hook(w1, ready, &a1, NULL);
    assert_true(jg_register_grad_expected_hook(w1, expected, &e, NULL) > 0);
    assert_int_equal(jg_backward(loss_of(w1, w2), NULL, 0), 0);
    assert_int_equal(e.expected, 1);
    assert_int_equal(e.ready_seen_at_expected, 0);
    assert_int_equal(r.n_cb, 1);
    /* a backward that does not reach w1 */
    assert_int_equal(jg_backward(jg_sum(w2), NULL, 0), 0);
    assert_int_equal(e.expected, 1);
    /* failing before w1's gradient is final: the callback learns it */
    jg_tensor *l, *s = jg_sum(jg_mul(w1, w2));
    assert_int_equal(jg_apply(&Fail, 1, &s, NULL, 0, &l), 1);
    r.n = r.n_cb = 0;
    assert_int_equal(jg_backward(l, NULL, 0), -1);
    TU_ERROR("boom in backward");
    assert_int_equal(e.expected, 2);
    assert_int_equal(r.n, 0);
    assert_int_equal(r.n_cb, 1);
    assert_int_equal(r.cb_status[0], -1);
    record_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_ready_order_and_value),
        TU_TEST(test_hook_failure_changes_nothing),
        TU_TEST(test_callback_and_set_grad),
        TU_TEST(test_failure_after_hooks),
        TU_TEST(test_post_accumulate_and_lifetime),
        TU_TEST(test_registration_errors),
        TU_TEST(test_expected_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
