/* Custom differentiable functions in eager mode: the per-slot rule and
 * PyTorch's autograd.Function semantics. */
#include "testutil.h"
#include "testutil_fns.h"

#include <math.h>
#include <string.h>

/* MyFn (the seed report's function) and Mul live in testutil_fns.c. */
#define MyFn tf_myfn
#define MulFn tf_mul
#define apply1 tf_apply1
#define mul_forward tf_mul_forward
#define mul_backward tf_mul_backward
typedef tf_mul_cfg mul_cfg;

static void leaves(jg_tensor **q, jg_tensor **k, jg_dtype dt) {
    jg_manual_seed(0);
    *q = jg_randn(dt, 1, TU_SHAPE(16));
    *k = jg_randn(dt, 1, TU_SHAPE(16));
    jg_set_requires_grad(*q, true);
    jg_set_requires_grad(*k, true);
}

static void check_times(jg_tensor *got, jg_tensor *x, double factor) {
    jg_tensor *want = jg_mul_scalar(x, factor);
    TU_SAME(got, want);
}

static void seed_program(bool mask) {
    jg_tensor *q, *k;
    leaves(&q, &k, JG_F32);
    jg_tensor *y = apply1(&MyFn, 3, (jg_tensor *[]){q, k, k}, &mask, sizeof mask);
    assert_non_null(y);
    assert_string_equal(jg_grad_fn_name(y), "MyFnBackward");
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    check_times(jg_grad(k), q, 2.0); /* exactly 2q: q + q == 2 * q in IEEE */
    check_times(jg_grad(q), k, 2.0);
}

static void test_seed_mask_true(void **s) {
    (void)s;
    seed_program(true);
}

static void test_seed_mask_false(void **s) {
    (void)s;
    seed_program(false);
}

static void test_same_tensor_all_slots(void **s) {
    (void)s;
    for (int m = 0; m < 2; m++) {
        bool mask = m;
        jg_tensor *q, *k;
        leaves(&q, &k, JG_F64);
        jg_tensor *y = apply1(&MyFn, 3, (jg_tensor *[]){k, k, k}, &mask, sizeof mask);
        assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
        /* d/dk sum(2k^2) = 4k */
        double g[16], kv[16];
        tu_values(jg_grad(k), g);
        tu_values(k, kv);
        for (int i = 0; i < 16; i++)
            assert_true(g[i] == 4 * kv[i]);
        assert_null(jg_grad(q));
    }
}

/* ---- a*b with configurable per-slot returns ---- */

static jg_tensor *run_mul(jg_tensor *a, jg_tensor *b, mul_cfg c) {
    jg_tensor *y = apply1(&MulFn, 2, (jg_tensor *[]){a, b}, &c, sizeof c);
    assert_non_null(y);
    return jg_sum(y);
}

static void test_both_slots_non_null(void **s) {
    (void)s;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, -2, 3));
    jg_set_requires_grad(x, true);
    assert_int_equal(jg_backward(run_mul(x, x, (mul_cfg){0}), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(2, -4, 6), 0);
}

static void test_null_first_then_second(void **s) {
    (void)s;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, -2, 3));
    jg_set_requires_grad(x, true);
    assert_int_equal(jg_backward(run_mul(x, x, (mul_cfg){.null0 = true}), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(1, -2, 3), 0);
    jg_clear_grad(x);
    assert_int_equal(jg_backward(run_mul(x, x, (mul_cfg){.null1 = true}), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(1, -2, 3), 0);
}

static void test_all_slots_null(void **s) {
    (void)s;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, -2, 3));
    jg_set_requires_grad(x, true);
    assert_int_equal(jg_backward(run_mul(x, x, (mul_cfg){.null0 = true, .null1 = true}), NULL, 0),
                     0);
    assert_null(jg_grad(x));
}

static void test_used_outside_and_two_functions(void **s) {
    (void)s;
    bool mask = true;
    jg_tensor *q, *k;
    leaves(&q, &k, JG_F64);
    jg_tensor *y1 = apply1(&MyFn, 3, (jg_tensor *[]){q, k, k}, &mask, sizeof mask);
    jg_tensor *y2 = apply1(&MyFn, 3, (jg_tensor *[]){k, q, q}, &mask, sizeof mask);
    jg_tensor *loss = jg_add(jg_add(jg_sum(y1), jg_sum(y2)), jg_sum(jg_mul(k, k)));
    assert_int_equal(jg_backward(loss, NULL, 0), 0);
    /* loss = sum(2qk) + sum(2kq) + sum(k^2): dk = 4q + 2k, dq = 4k */
    double gk[16], gq[16], qv[16], kv[16];
    tu_values(jg_grad(k), gk);
    tu_values(jg_grad(q), gq);
    tu_values(q, qv);
    tu_values(k, kv);
    for (int i = 0; i < 16; i++) {
        assert_true(fabs(gk[i] - (4 * qv[i] + 2 * kv[i])) < 1e-12);
        assert_true(fabs(gq[i] - 4 * kv[i]) < 1e-12);
    }
}

static int needs_seen[3];

static int probe_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    for (int i = 0; i < n; i++)
        needs_seen[i] = jg_ctx_needs_input_grad(ctx, i);
    return mul_forward(ctx, n, in, out);
}

static const jg_function ProbeFn = {"Probe", probe_forward, mul_backward, NULL};

static void test_input_without_grad(void **s) {
    (void)s;
    jg_tensor *a = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_tensor *b = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(3, 4));
    jg_set_requires_grad(b, true);
    mul_cfg c = {0};
    jg_tensor *y = apply1(&ProbeFn, 2, (jg_tensor *[]){a, b}, &c, sizeof c);
    assert_int_equal(needs_seen[0], 0);
    assert_int_equal(needs_seen[1], 1);
    assert_true(jg_requires_grad(y));
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    assert_null(jg_grad(a)); /* its slot's gradient was dropped */
    TU_CHECK(jg_grad(b), 1, TU_SHAPE(2), TU_VALS(1, 2), 0);
    /* no input requires grad: no history at all */
    jg_tensor *z = apply1(&ProbeFn, 2, (jg_tensor *[]){a, a}, &c, sizeof c);
    assert_false(jg_requires_grad(z));
    assert_null(jg_grad_fn_name(z));
    /* grad mode off: no history either */
    bool prev = jg_set_grad_enabled(false);
    z = apply1(&ProbeFn, 2, (jg_tensor *[]){b, b}, &c, sizeof c);
    jg_set_grad_enabled(prev);
    assert_false(jg_requires_grad(z));
}

/* ---- two outputs: materialisation and non-differentiable outputs ---- */

typedef struct {
    bool materialize;
    bool nondiff1;
} two_cfg;
static int two_saw_null;

static int two_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    const two_cfg *c = jg_ctx_args(ctx);
    jg_ctx_set_materialize_grads(ctx, c->materialize);
    out[0] = jg_mul_scalar(in[0], 2);
    out[1] = jg_mul_scalar(in[0], 3);
    if (c->nondiff1)
        jg_ctx_mark_non_differentiable(ctx, out[1]);
    return 2;
}

static int two_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)ctx;
    (void)n_out;
    two_saw_null = (g[0] == NULL) + 2 * (g[1] == NULL);
    jg_tensor *acc = NULL;
    if (g[0])
        acc = jg_mul_scalar(g[0], 2);
    if (g[1])
        acc = acc ? jg_add(acc, jg_mul_scalar(g[1], 3)) : jg_mul_scalar(g[1], 3);
    din[0] = acc;
    return n_in;
}

static const jg_function TwoFn = {"Two", two_forward, two_backward, NULL};

static void test_multi_output_materialize(void **s) {
    (void)s;
    for (int m = 0; m < 2; m++) {
        jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
        jg_set_requires_grad(x, true);
        two_cfg c = {.materialize = m};
        jg_tensor *out[2];
        assert_int_equal(jg_apply(&TwoFn, 1, &x, &c, sizeof c, out), 2);
        assert_int_equal(jg_backward(jg_sum(out[0]), NULL, 0), 0);
        assert_int_equal(two_saw_null, m ? 0 : 2); /* unused output: zeros or NULL */
        TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(2, 2), 0);
    }
}

static void test_non_differentiable_output(void **s) {
    (void)s;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_set_requires_grad(x, true);
    two_cfg c = {.materialize = true, .nondiff1 = true};
    jg_tensor *out[2];
    assert_int_equal(jg_apply(&TwoFn, 1, &x, &c, sizeof c, out), 2);
    assert_true(jg_requires_grad(out[0]));
    assert_false(jg_requires_grad(out[1]));
    assert_int_equal(jg_backward(jg_sum(jg_add(out[0], out[1])), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(2, 2), 0);
}

/* ---- double backward: cube with a backward written in jitgrad ops ---- */

static int cube_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_ctx_save_for_backward(ctx, 1, in);
    out[0] = jg_mul(jg_mul(in[0], in[0]), in[0]);
    return 1;
}

static int cube_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out;
    jg_tensor *x = jg_ctx_saved(ctx, 0);
    din[0] = jg_mul(g[0], jg_mul_scalar(jg_mul(x, x), 3));
    return n_in;
}

static const jg_function Cube = {"Cube", cube_forward, cube_backward, NULL};

static void test_double_backward(void **s) {
    (void)s;
    jg_tensor *x = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(1, -2, 0.5));
    jg_set_requires_grad(x, true);
    jg_tensor *y = jg_sum(apply1(&Cube, 1, &x, NULL, 0));
    jg_tensor *g;
    assert_int_equal(jg_autograd_grad(1, &y, NULL, 1, &x, JG_CREATE_GRAPH, &g), 0);
    TU_CHECK(g, 1, TU_SHAPE(3), TU_VALS(3, 12, 0.75), 0);
    assert_true(jg_requires_grad(g));
    assert_int_equal(jg_backward(jg_sum(g), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(6, -12, 3), 0);
}

static jg_tensor *cube_prog(void *user, int n, jg_tensor *const *in) {
    (void)user;
    (void)n;
    jg_tensor *out[1];
    bool mask = false;
    jg_tensor *m = apply1(&MyFn, 3, (jg_tensor *[]){in[0], in[1], in[1]}, &mask, sizeof mask);
    if (jg_apply(&Cube, 1, &m, NULL, 0, out) < 0)
        return NULL;
    return out[0];
}

static void test_gradcheck_custom(void **s) {
    (void)s;
    jg_manual_seed(3);
    jg_tensor *q = jg_randn(JG_F64, 1, TU_SHAPE(5)), *k = jg_randn(JG_F64, 1, TU_SHAPE(5));
    jg_set_requires_grad(q, true);
    jg_set_requires_grad(k, true);
    assert_int_equal(jg_gradcheck(cube_prog, NULL, 2, (jg_tensor *[]){q, k}, 1e-6, 1e-5, 1e-4), 0);
    assert_null(jg_grad(q));
}

/* ---- validation of returned gradients ---- */

typedef struct {
    int mode; /* 0 wrong count, 1 bad shape, 2 broadcast shape, 3 other dtype, 4 fail */
} bad_cfg;

static int bad_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx;
    (void)n;
    out[0] = jg_mul(in[0], in[1]);
    return 1;
}

static int bad_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out;
    const bad_cfg *c = jg_ctx_args(ctx);
    switch (c->mode) {
    case 0:
        din[0] = g[0];
        return n_in - 1;
    case 1:
        din[0] = g[0];
        din[1] = jg_full(JG_F32, 1, TU_SHAPE(3), 1);
        return n_in;
    case 2:
        din[0] = g[0];
        din[1] = jg_full(JG_F32, 2, TU_SHAPE(2, 4), 1); /* sums down to [4] */
        return n_in;
    case 3:
        din[0] = jg_full(JG_F64, 1, TU_SHAPE(4), 0.5);
        return n_in;
    default:
        return jg_set_error("Bad.backward: deliberate failure");
    }
}

static const jg_function BadFn = {"Bad", bad_forward, bad_backward, NULL};

static void test_gradient_validation(void **s) {
    (void)s;
    jg_tensor *a = jg_full(JG_F32, 1, TU_SHAPE(4), 1.0);
    jg_tensor *b = jg_full(JG_F32, 1, TU_SHAPE(4), 1.0);
    jg_set_requires_grad(a, true);
    jg_set_requires_grad(b, true);
    /* a gradient from an earlier backward that failures must not touch */
    assert_int_equal(jg_backward(jg_sum(jg_mul(a, b)), NULL, 0), 0);
    jg_tensor *ga = jg_grad(a), *gb = jg_grad(b);

    bad_cfg c = {0};
    jg_tensor *y = apply1(&BadFn, 2, (jg_tensor *[]){a, b}, &c, sizeof c);
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), -1);
    TU_ERROR("function BadBackward returned an incorrect number of gradients (expected 2, got 1)");
    c.mode = 1;
    y = apply1(&BadFn, 2, (jg_tensor *[]){a, b}, &c, sizeof c);
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), -1);
    TU_ERROR("Function BadBackward returned an invalid gradient at index 1 - got [3] but expected "
             "shape compatible with [4]");
    c.mode = 4;
    y = apply1(&BadFn, 2, (jg_tensor *[]){a, b}, &c, sizeof c);
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), -1);
    TU_ERROR("Bad.backward: deliberate failure");
    /* nothing changed by the failures */
    assert_ptr_equal(jg_grad(a), ga);
    assert_ptr_equal(jg_grad(b), gb);
    TU_CHECK(ga, 1, TU_SHAPE(4), TU_VALS(1, 1, 1, 1), 0);
    TU_CHECK(gb, 1, TU_SHAPE(4), TU_VALS(1, 1, 1, 1), 0);

    jg_clear_grad(a);
    jg_clear_grad(b);
    c.mode = 2;
    y = apply1(&BadFn, 2, (jg_tensor *[]){a, b}, &c, sizeof c);
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    TU_CHECK(jg_grad(b), 1, TU_SHAPE(4), TU_VALS(2, 2, 2, 2), 0);
    c.mode = 3;
    y = apply1(&BadFn, 2, (jg_tensor *[]){a, b}, &c, sizeof c);
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    assert_int_equal(jg_dtype_of(jg_grad(a)), JG_F32); /* cast to the input's dtype */
    TU_CHECK(jg_grad(a), 1, TU_SHAPE(4), TU_VALS(1.5, 1.5, 1.5, 1.5), 0);
}

/* ---- forward failures, saved tensors, args, state, nesting ---- */

static int fail_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx;
    (void)n;
    out[0] = jg_mul(in[0], in[0]); /* a temporary that must not leak */
    return jg_set_error("Fail.forward: no thanks");
}

static const jg_function FailFn = {"Fail", fail_forward, mul_backward, NULL};

static int null_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx;
    (void)n;
    (void)in;
    (void)out;
    return 1; /* claims an output it did not write */
}

static const jg_function NullFn = {"NullOut", null_forward, mul_backward, NULL};

static void test_forward_errors(void **s) {
    (void)s;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_set_requires_grad(x, true);
    jg_tensor *out[JG_MAX_OUTPUTS];
    assert_int_equal(jg_apply(&FailFn, 1, &x, NULL, 0, out), -1);
    TU_ERROR("Fail.forward: no thanks");
    assert_int_equal(jg_apply(&NullFn, 1, &x, NULL, 0, out), -1);
    TU_ERROR("NullOut.forward returned 1 outputs but output 0 is NULL");
    assert_int_equal(jg_apply(&MulFn, 2, (jg_tensor *[]){x, NULL}, NULL, 0, out), -1);
    TU_ERROR("jg_apply(Mul): input 1 is NULL");
    assert_int_equal(jg_apply(NULL, 1, &x, NULL, 0, out), -1);
    assert_int_equal(jg_apply(&MulFn, 1, &x, NULL, 4, out), -1);
    TU_ERROR("args is NULL");
    assert_null(jg_grad(x));
}

static void test_saved_modified_in_place(void **s) {
    (void)s;
    jg_tensor *a = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1, 2, 3, 4));
    jg_tensor *b = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1, 1, 1, 1));
    jg_set_requires_grad(a, true);
    mul_cfg c = {0};
    jg_tensor *y = apply1(&MulFn, 2, (jg_tensor *[]){a, b}, &c, sizeof c);
    assert_int_equal(jg_mul_scalar_(b, 2.0), 0);
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), -1);
    TU_ERROR("one of the variables needed for gradient computation has been modified by an "
             "inplace operation: [f32 [4]] is at version 1; expected version 0 instead");
    assert_null(jg_grad(a));
}

static void test_second_backward_needs_retain(void **s) {
    (void)s;
    jg_tensor *x = tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_set_requires_grad(x, true);
    jg_tensor *y = jg_sum(apply1(&Cube, 1, &x, NULL, 0));
    assert_int_equal(jg_backward(y, NULL, JG_RETAIN_GRAPH), 0);
    assert_int_equal(jg_backward(y, NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(6, 24), 0);
    assert_int_equal(jg_backward(y, NULL, 0), -1);
    TU_ERROR("second time");
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(6, 24), 0);
}

typedef struct {
    double scale;
} scale_args;
static int state_frees;

static void free_counter(void *p) {
    (void)p;
    state_frees++;
}

static int scale_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    const scale_args *a = jg_ctx_args(ctx);
    assert_int_equal(jg_ctx_args_size(ctx), sizeof *a);
    assert_ptr_equal(jg_ctx_function(ctx)->forward, scale_forward);
    assert_false(jg_is_grad_enabled()); /* forward runs with grad mode off */
    jg_ctx_set_state(ctx, &state_frees, free_counter);
    out[0] = jg_mul_scalar(in[0], a->scale);
    return 1;
}

static int scale_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out;
    assert_ptr_equal(jg_ctx_state(ctx), &state_frees);
    din[0] = jg_mul_scalar(g[0], ((const scale_args *)jg_ctx_args(ctx))->scale);
    return n_in;
}

static const jg_function ScaleFn = {"Scale", scale_forward, scale_backward, NULL};

static void test_args_copied_and_state_freed(void **s) {
    (void)s;
    state_frees = 0;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_set_requires_grad(x, true);
    scale_args a = {3.0};
    jg_scope_push();
    jg_tensor *y = apply1(&ScaleFn, 1, &x, &a, sizeof a);
    a.scale = 100.0; /* the call keeps its own copy */
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(3, 3), 0);
    assert_int_equal(state_frees, 0);
    jg_scope_pop(); /* y and its node die: the state is freed once */
    assert_int_equal(state_frees, 1);
}

/* forward that applies another custom function, and one that returns its
 * input unchanged */
static int outer_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx;
    (void)n;
    jg_tensor *o[1];
    if (jg_apply(&Cube, 1, in, NULL, 0, o) < 0)
        return -1;
    out[0] = o[0];
    return 1;
}

static int outer_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)ctx;
    (void)n_out;
    din[0] = jg_mul_scalar(g[0], 10); /* deliberately not the true derivative */
    return n_in;
}

static const jg_function Outer = {"Outer", outer_forward, outer_backward, NULL};

static int ident_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx;
    (void)n;
    out[0] = in[0];
    return 1;
}

static const jg_function Ident = {"Ident", ident_forward, outer_backward, NULL};

static void test_nesting_and_identity(void **s) {
    (void)s;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_set_requires_grad(x, true);
    jg_tensor *y = apply1(&Outer, 1, &x, NULL, 0);
    TU_CHECK(y, 1, TU_SHAPE(2), TU_VALS(1, 8), 0);
    assert_string_equal(jg_grad_fn_name(y), "OuterBackward");
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(10, 10), 0);
    jg_clear_grad(x);
    jg_tensor *z = apply1(&Ident, 1, &x, NULL, 0);
    assert_ptr_not_equal(z, x);
    assert_true(jg_same_storage(z, x));
    assert_true(jg_is_leaf(x)); /* the input's own history is untouched */
    assert_string_equal(jg_grad_fn_name(z), "IdentBackward");
    assert_int_equal(jg_backward(jg_sum(z), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(10, 10), 0);
}

/* A backward started from inside a custom backward, over a graph that shares
 * nodes with the running one (the engine finds nodes through a per-node run
 * index that the nested run overwrites). */
static jg_tensor *nest_root, *nest_x;

static int nest_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx;
    (void)n;
    out[0] = jg_mul_scalar(in[0], 2);
    return 1;
}

static int nest_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)ctx;
    (void)n_out;
    jg_tensor *gx[1];
    if (jg_autograd_grad(1, &nest_root, NULL, 1, &nest_x, JG_RETAIN_GRAPH, gx) < 0)
        return -1;
    din[0] = jg_add(jg_mul_scalar(g[0], 2), gx[0]); /* d/db: 2 + the nested 6x */
    return n_in;
}

static const jg_function NestFn = {"Nest", nest_forward, nest_backward, NULL};

static void test_backward_inside_backward(void **s) {
    (void)s;
    nest_x = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_set_requires_grad(nest_x, true);
    for (int round = 0; round < 2; round++) {
        jg_tensor *a = jg_mul(nest_x, nest_x), *b = jg_add_scalar(a, 1);
        /* nested graph: 3 * sum(x * x + 1), deeper than the outer one */
        nest_root = jg_sum(jg_mul_scalar(jg_mul_scalar(jg_mul_scalar(b, 3), 1), 1));
        jg_tensor *y = apply1(&NestFn, 1, &b, NULL, 0);
        assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
        /* (2 + 6x) * 2x */
        TU_CHECK(jg_grad(nest_x), 1, TU_SHAPE(2), TU_VALS(16, 56), 0);
        jg_clear_grad(nest_x);
    }
}

/* ---- PyTorch's rules for what forward returns and saves ---- */

/* y = 2x is saved, then written in place (y *= 3) before forward returns:
 * PyTorch takes saved versions once forward has returned, so backward reads
 * the written y without a "modified by an inplace operation" error. */
static int savewrite_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_tensor *y = jg_mul_scalar(in[0], 2.0);
    if (jg_ctx_save_for_backward(ctx, 1, &y) < 0 || jg_mul_scalar_(y, 3.0) < 0)
        return -1;
    out[0] = jg_mul_scalar(y, 1.0);
    return 1;
}

static int savewrite_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in,
                              jg_tensor **din) {
    (void)n_out;
    (void)n_in;
    jg_tensor *y = jg_ctx_saved(ctx, 0);
    if (!y)
        return -1;
    din[0] = jg_mul(g[0], y);
    return 1;
}

static const jg_function SaveWrite = {"SaveWrite", savewrite_forward, savewrite_backward, NULL};

static void test_saved_version_taken_after_forward(void **s) {
    (void)s;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_set_requires_grad(x, true);
    jg_tensor *y = apply1(&SaveWrite, 1, &x, NULL, 0);
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(6, 12), 0);
}

/* x *= 2 in place, marked dirty, returned twice */
static int dirty2_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_ctx_mark_dirty(ctx, in[0]);
    if (jg_mul_scalar_(in[0], 2.0) < 0)
        return -1;
    out[0] = out[1] = in[0];
    return 2;
}

static int dirty2_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)ctx;
    (void)n_out;
    (void)n_in;
    din[0] = jg_add(jg_mul_scalar(g[0], 2.0), jg_mul_scalar(g[1], 2.0));
    return 1;
}

static const jg_function Dirty2 = {"Dirty2", dirty2_forward, dirty2_backward, NULL};

/* A dirty input returned twice is the last of those outputs (PyTorch sets
 * its output_nr once per place, the last stays); a dirty view cannot be
 * returned with another output (its history goes through the base). */
static void test_dirty_returned_twice(void **s) {
    (void)s;
    jg_tensor *p = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2)), *o[2];
    jg_set_requires_grad(p, true);
    jg_tensor *b = jg_mul_scalar(p, 1.0);
    assert_int_equal(jg_apply(&Dirty2, 1, &b, NULL, 0, o), 2);
    assert_ptr_equal(o[1], b);
    assert_ptr_not_equal(o[0], b);
    assert_string_equal(jg_grad_fn_name(b), "Dirty2Backward");
    assert_int_equal(jg_backward(jg_sum(b), NULL, 0), 0);
    TU_CHECK(jg_grad(p), 1, TU_SHAPE(2), TU_VALS(2, 2), 0);

    jg_tensor *b2 = jg_mul_scalar(p, 1.0), *v = jg_slice(b2, 0, 0, 1);
    assert_int_equal(jg_apply(&Dirty2, 1, &v, NULL, 0, o), -1);
    TU_ERROR("If your Function modifies inplace an input that is a view of another Tensor, your "
             "Function cannot return more than one Tensor.");
}

/* Without grad mode there is no history to attach: a dirty input that
 * requires grad (a leaf may be written then) comes back as a detached
 * alias, as PyTorch's _wrap_outputs returns it. */
static void test_dirty_without_grad_mode(void **s) {
    (void)s;
    jg_tensor *p = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2)), *o[2];
    jg_set_requires_grad(p, true);
    bool prev = jg_set_grad_enabled(false);
    assert_int_equal(jg_apply(&Dirty2, 1, &p, NULL, 0, o), 2);
    jg_set_grad_enabled(prev);
    assert_ptr_not_equal(o[1], p);
    assert_false(jg_requires_grad(o[1]));
    assert_true(jg_same_storage(o[1], p));
    TU_CHECK(p, 1, TU_SHAPE(2), TU_VALS(2, 4), 0);
    assert_true(jg_is_leaf(p));
}

/* forward returns (2x, x[1:]) */
static int twoviews_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx;
    (void)n;
    out[0] = jg_mul_scalar(in[0], 2.0);
    out[1] = jg_slice(in[0], 0, 1, 3);
    return 2;
}

static const jg_function TwoViews = {"TwoViews", twoviews_forward, dirty2_backward, NULL};

/* Views a custom function returns (an input returned as is, a view made in
 * forward) refuse in-place ops in grad mode: their history through the base
 * would bypass the function's backward (PyTorch's creation metas). */
static void test_inplace_on_returned_view_refused(void **s) {
    (void)s;
    jg_tensor *p = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3)), *o[2];
    jg_set_requires_grad(p, true);
    jg_tensor *b = jg_mul_scalar(p, 1.0);
    jg_tensor *z = apply1(&Ident, 1, &b, NULL, 0);
    assert_int_equal(jg_mul_scalar_(z, 2.0), -1);
    TU_ERROR("Output 0 of IdentBackward is a view and is being modified inplace. This view was "
             "created inside a custom Function (or because an input was returned as-is)");
    TU_CHECK(b, 1, TU_SHAPE(3), TU_VALS(1, 2, 3), 0);
    /* made without grad mode: it needs no grad, and may be written */
    bool prev = jg_set_grad_enabled(false);
    jg_tensor *z2 = apply1(&Ident, 1, &b, NULL, 0);
    jg_set_grad_enabled(prev);
    assert_int_equal(jg_mul_scalar_(z2, 2.0), 0);
    TU_CHECK(b, 1, TU_SHAPE(3), TU_VALS(2, 4, 6), 0);
    /* several differentiable outputs: the views, and views of them, refuse */
    assert_int_equal(jg_apply(&TwoViews, 1, &b, NULL, 0, o), 2);
    assert_int_equal(jg_mul_scalar_(o[1], 2.0), -1);
    TU_ERROR("Output 1 of TwoViewsBackward is a view and is being modified inplace. This view is "
             "the output of a function that returns multiple views.");
    assert_int_equal(jg_mul_scalar_(jg_slice(o[1], 0, 0, 1), 2.0), -1);
    TU_ERROR("This view is the output of a function that returns multiple views.");
    assert_int_equal(jg_mul_scalar_(o[0], 2.0), 0); /* not a view */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_seed_mask_true),
        TU_TEST(test_seed_mask_false),
        TU_TEST(test_same_tensor_all_slots),
        TU_TEST(test_both_slots_non_null),
        TU_TEST(test_null_first_then_second),
        TU_TEST(test_all_slots_null),
        TU_TEST(test_used_outside_and_two_functions),
        TU_TEST(test_input_without_grad),
        TU_TEST(test_multi_output_materialize),
        TU_TEST(test_non_differentiable_output),
        TU_TEST(test_double_backward),
        TU_TEST(test_gradcheck_custom),
        TU_TEST(test_gradient_validation),
        TU_TEST(test_forward_errors),
        TU_TEST(test_saved_modified_in_place),
        TU_TEST(test_second_backward_needs_retain),
        TU_TEST(test_args_copied_and_state_freed),
        TU_TEST(test_nesting_and_identity),
        TU_TEST(test_backward_inside_backward),
        TU_TEST(test_saved_version_taken_after_forward),
        TU_TEST(test_dirty_returned_twice),
        TU_TEST(test_dirty_without_grad_mode),
        TU_TEST(test_inplace_on_returned_view_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
