/* .grad takes the gradient a backward produced without copying it, as
 * PyTorch's AccumulateGrad steals one, whenever nothing else can see that
 * gradient or its memory: in eager backward (autograd/engine.c commit_leaf)
 * and in the write-back of a compiled training step that sets .grad
 * (compile/mutation.c).  A view whose base is gone counts (a weight used
 * transposed gets its gradient through TransposeBackward, a view of the
 * matmul's result); it becomes a plain tensor.  Still copied: a gradient
 * whose memory something else holds.  Either way .grad aliases nothing the
 * user can see: an in-place change of it leaks nowhere.  Counted through
 * jg_engine_grad_copies and jg_writeback_copies; values bitwise eager's. */
#include "testutil.h"

#include "autograd/engine.h"
#include "compile/compile.h"
#include "core/tensor.h"

enum { IN = 24, OUT = 20, BATCH = 6, STEPS = 5 };

/* F.linear(x, w, b): x @ w.t() + b */
static jg_tensor *linear(jg_tensor *x, jg_tensor *w, jg_tensor *b) {
    return jg_add(jg_matmul(x, jg_transpose(w, 0, 1)), b);
}

static jg_tensor *leaf(int ndim, const int64_t *shape) {
    jg_tensor *t = jg_randn(JG_F32, ndim, shape);
    jg_set_requires_grad(t, true);
    return t;
}

static void check_own(const jg_tensor *g) {
    assert_non_null(g);
    assert_false(g->is_view);
    assert_int_equal(g->refcount, 1);
    assert_int_equal(g->storage->refcount, 1);
    assert_int_equal(g->offset, 0);
}

/* Regression (the eager GPT step copied every weight's and bias's
 * gradient): the engine held the gradients that reached each node until
 * the end of the backward, so TransposeBackward's view of the weight's
 * gradient (and sum_to's reshape for the bias) shared its memory with them
 * at commit and was cloned.  Now they are dropped before the commit and
 * every gradient is taken as it is. */
static void test_grad_steal_linear(void **state) {
    (void)state;
    jg_manual_seed(3);
    jg_tensor *w = leaf(2, TU_SHAPE(OUT, IN)), *b = leaf(1, TU_SHAPE(OUT));
    jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(BATCH, IN));
    jg_tensor *c = jg_randn(JG_F32, 2, TU_SHAPE(BATCH, OUT));
    int64_t before = jg_engine_grad_copies();
    assert_int_equal(jg_backward(jg_sum(jg_mul(linear(x, w, b), c)), NULL, 0), 0);
    assert_int_equal(jg_engine_grad_copies() - before, 0);
    check_own(jg_grad(w));
    check_own(jg_grad(b));
    /* the values: d/dw = c^T x, d/db = c summed over the batch */
    bool prev = jg_set_grad_enabled(false);
    jg_tensor *gw = jg_matmul(jg_transpose(c, 0, 1), x);
    jg_tensor *gb = jg_sum_dims(c, 1, (int[]){0}, false);
    double want_w[OUT * IN], got_w[OUT * IN], want_b[OUT], got_b[OUT];
    tu_values(gw, want_w);
    tu_values(jg_grad(w), got_w);
    tu_values(gb, want_b);
    tu_values(jg_grad(b), got_b);
    for (int i = 0; i < OUT * IN; i++)
        assert_float_equal(got_w[i], want_w[i], 1e-5);
    for (int i = 0; i < OUT; i++)
        assert_float_equal(got_b[i], want_b[i], 1e-5);
    /* .grad is the leaf's own: changing it changes nothing else, and the
     * next backward adds into it */
    jg_tensor *w_before = jg_clone(w), *x_before = jg_clone(x), *c_before = jg_clone(c);
    jg_set_grad_enabled(prev);
    assert_int_equal(jg_mul_scalar_(jg_grad(w), 0.0), 0);
    assert_int_equal(jg_mul_scalar_(jg_grad(b), 0.0), 0);
    TU_SAME(w, w_before);
    TU_SAME(x, x_before);
    TU_SAME(c, c_before);
    assert_int_equal(jg_backward(jg_sum(jg_mul(linear(x, w, b), c)), NULL, 0), 0);
    tu_values(jg_grad(w), got_w);
    for (int i = 0; i < OUT * IN; i++)
        assert_float_equal(got_w[i], want_w[i], 1e-5);
}

/* A custom function whose backward hands back a gradient of its own
 * making: a reshape of a fresh tensor (a view whose base is dropped), of
 * which it keeps a reference when keep_ref. */
static jg_tensor *kept;  /* the backward's result, when keep_ref */
static const void *made; /* the address of the memory it wrote */
static bool keep_ref;

static int id_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx, (void)n;
    out[0] = jg_mul_scalar(in[0], 1.0);
    return out[0] ? 1 : -1;
}

static int id_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)ctx, (void)n_out, (void)n_in;
    int64_t numel = jg_numel(g[0]);
    jg_tensor *flat = jg_mul_scalar(jg_reshape(g[0], 1, &numel), 2.0);
    if (!flat)
        return -1;
    made = jg_tensor_ptr(flat);
    din[0] = jg_reshape(flat, jg_ndim(g[0]), jg_shape(g[0])); /* a view of flat */
    if (keep_ref)
        kept = jg_retain(din[0]);
    return din[0] ? 1 : -1;
}

static const jg_function Double = {"Double", id_forward, id_backward, NULL};

static void custom_backward(jg_tensor *a) {
    jg_tensor *y;
    assert_int_equal(jg_apply(&Double, 1, &a, NULL, 0, &y), 1);
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
}

static void test_grad_steal_view_of_dropped_base(void **state) {
    (void)state;
    jg_tensor *a = leaf(2, TU_SHAPE(8, 9));
    keep_ref = false;
    int64_t before = jg_engine_grad_copies();
    custom_backward(a);
    assert_int_equal(jg_engine_grad_copies() - before, 0);
    check_own(jg_grad(a));
    assert_ptr_equal(jg_tensor_ptr(jg_grad(a)), made); /* the very memory */
    double v[72];
    tu_values(jg_grad(a), v);
    for (int i = 0; i < 72; i++)
        assert_true(v[i] == 2.0);
}

/* The backward keeps a reference to the gradient it returns: .grad must
 * be a copy, which later changes of either do not reach. */
static void test_grad_steal_not_when_held(void **state) {
    (void)state;
    jg_tensor *a = leaf(2, TU_SHAPE(8, 9));
    keep_ref = true;
    int64_t before = jg_engine_grad_copies();
    custom_backward(a);
    keep_ref = false;
    assert_int_equal(jg_engine_grad_copies() - before, 1);
    check_own(jg_grad(a));
    assert_ptr_not_equal(jg_tensor_ptr(jg_grad(a)), made);
    assert_int_equal(jg_mul_scalar_(jg_grad(a), 3.0), 0);
    double v[72];
    tu_values(kept, v);
    for (int i = 0; i < 72; i++)
        assert_true(v[i] == 2.0);
    jg_release(kept);
    kept = NULL;
}

/* d(sum(a * a))/da: MulBackward's two contributions (products with a, which
 * it saved) are summed into a fresh tensor, taken as .grad; it must not
 * share a's memory. */
static void test_grad_steal_not_when_saved_input(void **state) {
    (void)state;
    jg_tensor *a = leaf(1, TU_SHAPE(100));
    jg_tensor *a_before = jg_clone(a);
    assert_int_equal(jg_backward(jg_sum(jg_mul(a, a)), NULL, 0), 0);
    check_own(jg_grad(a));
    assert_ptr_not_equal(jg_tensor_ptr(jg_grad(a)), jg_tensor_ptr(a));
    assert_int_equal(jg_mul_scalar_(jg_grad(a), 0.0), 0);
    TU_SAME(a, a_before);
}

/* ---- a compiled training step that sets .grad (zero_grad(set_to_none)) */

typedef struct {
    jg_tensor *p[4]; /* w1 [OUT, IN], b1, w2 [IN, OUT], b2: both used as F.linear */
    jg_optim *opt;
} net;

static void net_init(net *m) {
    jg_manual_seed(11);
    const int64_t shapes[4][2] = {{OUT, IN}, {OUT, 0}, {IN, OUT}, {IN, 0}};
    for (int i = 0; i < 4; i++)
        m->p[i] = jg_keep(leaf(shapes[i][1] ? 2 : 1, shapes[i]));
    m->opt = jg_optim_adamw(m->p, 4, 1e-2, 0.9, 0.999, 1e-8, 0.01);
    assert_non_null(m->opt);
}

static void net_free(net *m) {
    jg_optim_free(m->opt);
    for (int i = 0; i < 4; i++)
        jg_release(m->p[i]);
}

static int p_step(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    net *m = user;
    jg_tensor *h = jg_gelu(linear(in[0], m->p[0], m->p[1]), JG_GELU_TANH);
    out[0] = jg_mse_loss(linear(h, m->p[2], m->p[3]), in[1], JG_REDUCTION_MEAN);
    if (!out[0] || jg_optim_zero_grad(m->opt, true) < 0 || jg_backward(out[0], NULL, 0) < 0 ||
        jg_optim_step(m->opt) < 0)
        return -1;
    return 1;
}

/* Regression (the compiled GPT step cloned every gradient, 3 MB per
 * call): the program's gradient outputs are views (TransposeBackward's,
 * sum_to's reshape) of buffers the program has dropped, and the write-back
 * cloned every view.  Now each is taken as .grad as it is; bits eager's. */
static void test_grad_steal_compiled_step(void **state) {
    (void)state;
    const char *backends[] = {"interp", "c"};
    for (int bk = 0; bk < 2; bk++) {
        if (!jg_compile_backend_available(backends[bk]))
            continue;
        net e = {0}, k = {0};
        net_init(&e);
        net_init(&k);
        jg_compiled *c = jg_compile(p_step, &k, &(jg_compile_options){.backend = backends[bk]});
        assert_non_null(c);
        jg_manual_seed(7);
        jg_tensor *x = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(BATCH, IN)));
        jg_tensor *y = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(BATCH, IN)));
        for (int s = 0; s < STEPS; s++) {
            jg_scope_push();
            jg_tensor *le = NULL, *lk = NULL;
            assert_int_equal(p_step(&e, NULL, 2, (jg_tensor *[]){x, y}, &le), 1);
            int64_t before = jg_writeback_copies();
            assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){x, y}, &lk), 1);
            if (s >= 1) /* (the first call runs eagerly: AdamW's state is new) */
                assert_int_equal(jg_writeback_copies() - before, 0);
            TU_SAME(le, lk);
            for (int i = 0; i < 4; i++) {
                TU_SAME(e.p[i], k.p[i]);
                TU_SAME(jg_grad(e.p[i]), jg_grad(k.p[i]));
                check_own(jg_grad(k.p[i]));
            }
            jg_scope_pop();
        }
        assert_int_equal(jg_compiled_fallbacks(c), 1);
        /* .grad is the parameter's own: zeroing it in place reaches
         * nothing else */
        jg_scope_push();
        jg_tensor *before[4];
        for (int i = 0; i < 4; i++)
            before[i] = jg_clone(k.p[i]);
        for (int i = 0; i < 4; i++)
            assert_int_equal(jg_mul_scalar_(jg_grad(k.p[i]), 0.0), 0);
        for (int i = 0; i < 4; i++)
            TU_SAME(k.p[i], before[i]);
        jg_scope_pop();
        jg_compiled_free(c);
        jg_release(x), jg_release(y);
        net_free(&e);
        net_free(&k);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_grad_steal_linear),        TU_TEST(test_grad_steal_view_of_dropped_base),
        TU_TEST(test_grad_steal_not_when_held), TU_TEST(test_grad_steal_not_when_saved_input),
        TU_TEST(test_grad_steal_compiled_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
