/* The aliasing family under jg_compile: every scenario runs eagerly and
 * compiled (fullgraph, so no fallback can hide a wrong graph) on the same
 * leaves, and the gradients must be bitwise equal — and equal the formula
 * where there is one. */
#include "testutil.h"
#include "testutil_fns.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* from src/compile: the test hook that corrupts compiled backward results */
extern int jg_debug_corrupt_backward;

#define MAXL 4

/* Runs prog eagerly, then compiled through c, each followed by backward of
 * its first output; the leaves' gradients must match bitwise (or both be
 * NULL).  eager_grads (optional) receives copies of the eager gradients. */
static void run_both(jg_compiled *c, jg_program_fn prog, const void *args, size_t args_size,
                     int n_in, jg_tensor **in, int n_leaves, jg_tensor **leaves,
                     jg_tensor **eager_grads) {
    jg_tensor *g[MAXL] = {0}, *out[JG_MAX_OUTPUTS];
    for (int i = 0; i < n_leaves; i++)
        jg_clear_grad(leaves[i]);
    assert_true(prog(NULL, args, n_in, in, out) >= 1);
    assert_int_equal(jg_backward(jg_sum(out[0]), NULL, 0), 0);
    for (int i = 0; i < n_leaves; i++) {
        g[i] = jg_grad(leaves[i]) ? jg_clone(jg_grad(leaves[i])) : NULL;
        if (eager_grads)
            eager_grads[i] = g[i];
        jg_clear_grad(leaves[i]);
    }
    int got = jg_compiled_call(c, args, args_size, n_in, in, out);
    if (got < 1)
        print_error("compiled call failed: %s\n", jg_last_error());
    assert_true(got >= 1);
    assert_int_equal(jg_backward(jg_sum(out[0]), NULL, 0), 0);
    for (int i = 0; i < n_leaves; i++) {
        if (!g[i]) {
            assert_null(jg_grad(leaves[i]));
            continue;
        }
        TU_SAME(jg_grad(leaves[i]), g[i]);
    }
    assert_int_equal(jg_compiled_fallbacks(c), 0);
}

/* every scenario runs once per backend (main) */
static const char *backend = "interp";

static jg_compiled *compile(jg_program_fn prog) {
    jg_compile_options o = {.backend = backend, .fullgraph = true};
    jg_compiled *c = jg_compile(prog, NULL, &o);
    assert_non_null(c);
    return c;
}

static void make_leaves(jg_dtype dt, int n, jg_tensor **l, int64_t size) {
    jg_manual_seed(7);
    for (int i = 0; i < n; i++) {
        l[i] = jg_randn(dt, 1, (int64_t[]){size});
        jg_set_requires_grad(l[i], true);
    }
}

static void check_scaled(jg_tensor *got, jg_tensor *x, double f) {
    TU_SAME(got, jg_mul_scalar(x, f));
}

/* ---- the motivating program: f(q, k) = MyFn(q, k, k, mask).sum() ---- */

static void test_seed_both_masks(void **s) {
    (void)s;
    jg_compiled *c = compile(tf_seed);
    for (int dt = 0; dt < 2; dt++)
        for (int m = 0; m < 2; m++) {
            bool mask = m;
            jg_tensor *l[2];
            make_leaves(dt ? JG_F64 : JG_F32, 2, l, 16);
            run_both(c, tf_seed, &mask, sizeof mask, 2, l, 2, l, NULL);
            check_scaled(jg_grad(l[1]), l[0], 2.0); /* k.grad == 2q */
            check_scaled(jg_grad(l[0]), l[1], 2.0); /* q.grad == 2k */
        }
    assert_int_equal(jg_compiled_entries(c), 4); /* 2 dtypes x 2 mask values */
    jg_compiled_free(c);
}

static void test_seed_golden_graph(void **s) {
    (void)s;
    jg_compiled *c = compile(tf_seed);
    bool mask = true;
    jg_tensor *l[2], *out;
    make_leaves(JG_F32, 2, l, 16);
    assert_int_equal(jg_compiled_call(c, &mask, sizeof mask, 2, l, &out), 1);
    char *g = jg_compiled_graph(c, 0);
    const char *want = "forward(x0: f32[16], x1: f32[16]):\n"
                       "  %0 : f32[16] = custom[MyFn](x0, x1, x1)  slots=(0,1,1) args=0x01  "
                       "saved=(%1, %2, %3)\n"
                       "  return (%0)\n"
                       "    MyFn.forward(in0: f32[16], in1: f32[16], in2: f32[16]):\n"
                       "      %0 : f32[16] = add(in1, in2)\n"
                       "      %1 : f32[16] = mul(in0, %0)\n"
                       "      return (%1, in0, in1, in2)\n"
                       "backward(g0: f32[16], x0: f32[16], x1: f32[16]):\n"
                       "  %0 : f32[16] = mul(g0, x0)\n"
                       "  %1 : f32[16] = add(x1, x1)\n"
                       "  %2 : f32[16] = mul(g0, %1)\n"
                       "  %3 : f32[16] = add(%0, %0)\n"
                       "  return (%2, %3, None)\n"
                       "    MyFn.backward(g0: f32[16], saved0: f32[16], saved1: f32[16], saved2: "
                       "f32[16]):\n"
                       "      %0 : f32[16] = mul(g0, saved0)\n"
                       "      %1 : f32[16] = mul(g0, saved0)\n"
                       "      %2 : f32[16] = add(saved1, saved2)\n"
                       "      %3 : f32[16] = mul(g0, %2)\n"
                       "      %4 : f32[16] = add(%0, %1)\n"
                       "      return (%3, %4, None)\n";
    assert_non_null(g);
    if (strcmp(g, want))
        print_error("got:\n%s\nwant:\n%s\n", g, want);
    assert_string_equal(g, want);
    free(g);
    jg_compiled_free(c);
}

/* ---- one tensor in all three slots ---- */

static void test_same_tensor_all_slots(void **s) {
    (void)s;
    jg_compiled *c = compile(tf_all_slots);
    for (int m = 0; m < 2; m++) {
        bool mask = m;
        jg_tensor *l[1];
        make_leaves(JG_F64, 1, l, 8);
        run_both(c, tf_all_slots, &mask, sizeof mask, 1, l, 1, l, NULL);
        check_scaled(jg_grad(l[0]), l[0], 4.0); /* d/dk sum(2k^2) */
    }
    jg_compiled_free(c);
}

/* ---- Mul(x, x) with each slot's answer configurable ---- */

static int p_mul_xx(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u;
    (void)n;
    jg_tensor *y = tf_apply1(&tf_mul, 2, (jg_tensor *[]){in[0], in[0]}, args, sizeof(tf_mul_cfg));
    return y ? (out[0] = y, 1) : -1;
}

static void test_mul_slot_patterns(void **s) {
    (void)s;
    jg_compiled *c = compile(p_mul_xx);
    const tf_mul_cfg cfgs[] = {{0}, {.null0 = true}, {.null1 = true}, {.null0 = 1, .null1 = 1}};
    const double factor[] = {2.0, 1.0, 1.0, 0.0};
    for (int i = 0; i < 4; i++) {
        jg_tensor *l[1];
        make_leaves(JG_F32, 1, l, 5);
        run_both(c, p_mul_xx, &cfgs[i], sizeof cfgs[i], 1, l, 1, l, NULL);
        if (factor[i] == 0)
            assert_null(jg_grad(l[0])); /* every slot answered NULL: no gradient */
        else
            check_scaled(jg_grad(l[0]), l[0], factor[i]); /* both slots: 2x, not x */
    }
    assert_int_equal(jg_compiled_entries(c), 4); /* the args bytes are guarded */
    jg_compiled_free(c);
}

/* ---- fan-out outside the function, and two functions sharing tensors ---- */

static int p_outside(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u;
    (void)n;
    jg_tensor *y = tf_apply1(&tf_myfn, 3, (jg_tensor *[]){in[0], in[1], in[1]}, args, sizeof(bool));
    jg_tensor *z = tf_apply1(&tf_myfn, 3, (jg_tensor *[]){in[1], in[0], in[0]}, args, sizeof(bool));
    if (!y || !z)
        return -1;
    out[0] = jg_add(jg_add(jg_mul(in[1], in[1]), y), jg_mul_scalar(z, 0.5));
    return 1;
}

static void test_fan_out_and_two_functions(void **s) {
    (void)s;
    jg_compiled *c = compile(p_outside);
    for (int m = 0; m < 2; m++) {
        bool mask = m;
        jg_tensor *l[2];
        make_leaves(JG_F64, 2, l, 6);
        run_both(c, p_outside, &mask, sizeof mask, 2, l, 2, l, NULL);
    }
    jg_compiled_free(c);
}

/* ---- a slot whose tensor requires no grad ---- */

static void test_input_without_grad(void **s) {
    (void)s;
    jg_compiled *c = compile(tf_seed);
    bool mask = true;
    jg_tensor *l[2];
    make_leaves(JG_F32, 2, l, 16);
    jg_set_requires_grad(l[0], false);
    run_both(c, tf_seed, &mask, sizeof mask, 2, l, 2, l, NULL);
    assert_null(jg_grad(l[0]));
    check_scaled(jg_grad(l[1]), l[0], 2.0);
    jg_compiled_free(c);
}

/* ---- views and overlapping slices of one tensor in several slots ---- */

static int p_views(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u;
    (void)n;
    jg_tensor *k = in[1];
    jg_tensor *a = jg_slice(k, 0, 0, 12), *b = jg_slice(k, 0, 4, 16); /* overlap [4, 12) */
    jg_tensor *r = jg_reshape(jg_reshape(k, 2, (int64_t[]){4, 4}), 1, (int64_t[]){16});
    jg_tensor *y1 = tf_apply1(&tf_myfn, 3, (jg_tensor *[]){jg_slice(in[0], 0, 0, 12), a, b}, args,
                              sizeof(bool));
    jg_tensor *y2 = tf_apply1(&tf_myfn, 3, (jg_tensor *[]){in[0], k, r}, args, sizeof(bool));
    if (!y1 || !y2)
        return -1;
    out[0] = jg_add(jg_sum(y1), jg_sum(y2));
    return 1;
}

static void test_views_and_overlapping_slices(void **s) {
    (void)s;
    jg_compiled *c = compile(p_views);
    for (int m = 0; m < 2; m++) {
        bool mask = m;
        jg_tensor *l[2];
        make_leaves(JG_F64, 2, l, 16);
        run_both(c, p_views, &mask, sizeof mask, 2, l, 2, l, NULL);
        /* with the mask, slot 1 carries both slots' share (2 q[0:12] on the
         * first slice) and the overlapping slice gets nothing; without it,
         * each slice gets q[0:12] in its own place.  y2 adds 2q either way. */
        double q[16], gk[16];
        tu_values(l[0], q);
        tu_values(jg_grad(l[1]), gk);
        for (int i = 0; i < 16; i++) {
            double want = mask ? 2 * q[i] + (i < 12 ? 2 * q[i] : 0)
                               : 2 * q[i] + (i < 12 ? q[i] : 0) + (i >= 4 ? q[i - 4] : 0);
            assert_true(fabs(gk[i] - want) < 1e-12);
        }
    }
    jg_compiled_free(c);
}

/* ---- the program's own inputs alias: (q, k, k) then (q, k, v) ---- */

static int p_three(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u;
    (void)n;
    jg_tensor *y = tf_apply1(&tf_myfn, 3, in, args, sizeof(bool));
    return y ? (out[0] = y, 1) : -1;
}

static void test_program_inputs_alias(void **s) {
    (void)s;
    jg_compiled *c = compile(p_three);
    bool mask = true;
    jg_tensor *l[3];
    make_leaves(JG_F32, 3, l, 16);
    run_both(c, p_three, &mask, sizeof mask, 3, (jg_tensor *[]){l[0], l[1], l[1]}, 3, l, NULL);
    check_scaled(jg_grad(l[1]), l[0], 2.0);
    assert_null(jg_grad(l[2]));
    run_both(c, p_three, &mask, sizeof mask, 3, l, 3, l, NULL);
    check_scaled(jg_grad(l[1]), l[0], 2.0); /* dk + dv all lands on k */
    assert_null(jg_grad(l[2]));             /* v's slot answered NULL */
    assert_int_equal(jg_compiled_entries(c), 2);
    run_both(c, p_three, &mask, sizeof mask, 3, (jg_tensor *[]){l[0], l[1], l[1]}, 3, l, NULL);
    assert_int_equal(jg_compiled_entries(c), 2); /* the first entry is reused */
    jg_compiled_free(c);
}

/* ---- two compiled calls accumulating into the same leaves ---- */

static void test_two_calls_accumulate(void **s) {
    (void)s;
    jg_compiled *c = compile(tf_seed);
    bool t = true, f = false;
    jg_tensor *l[2], *o1, *o2;
    make_leaves(JG_F32, 2, l, 16);
    assert_int_equal(jg_compiled_call(c, &t, sizeof t, 2, l, &o1), 1);
    assert_int_equal(jg_compiled_call(c, &f, sizeof f, 2, l, &o2), 1);
    assert_int_equal(jg_backward(jg_add(jg_sum(o1), jg_sum(o2)), NULL, 0), 0);
    jg_tensor *gq = jg_clone(jg_grad(l[0])), *gk = jg_clone(jg_grad(l[1]));
    jg_clear_grad(l[0]);
    jg_clear_grad(l[1]);
    jg_tensor *e1 = NULL, *e2 = NULL;
    tf_seed(NULL, &t, 2, l, &e1);
    tf_seed(NULL, &f, 2, l, &e2);
    assert_int_equal(jg_backward(jg_add(jg_sum(e1), jg_sum(e2)), NULL, 0), 0);
    TU_SAME(gq, jg_grad(l[0]));
    TU_SAME(gk, jg_grad(l[1]));
    check_scaled(gk, l[0], 4.0);
    jg_compiled_free(c);
}

/* ---- two outputs, one unused, with and without materialised grads ---- */

typedef struct {
    bool materialize;
} two_cfg;
static int two_saw_null;

static int two_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_ctx_set_materialize_grads(ctx, ((const two_cfg *)jg_ctx_args(ctx))->materialize);
    jg_ctx_save_for_backward(ctx, 1, in);
    out[0] = jg_mul(in[0], in[0]);
    out[1] = jg_mul_scalar(in[0], 3);
    return 2;
}

static int two_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out;
    jg_tensor *x = jg_ctx_saved(ctx, 0);
    two_saw_null |= g[1] == NULL;
    jg_tensor *acc = jg_mul(jg_mul_scalar(x, 2), g[0]);
    din[0] = g[1] ? jg_add(acc, jg_mul_scalar(g[1], 3)) : acc;
    return n_in;
}

static const jg_function Two = {"Two", two_forward, two_backward, NULL};

static int p_two(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u;
    (void)n;
    jg_tensor *o[2];
    if (jg_apply(&Two, 1, in, args, sizeof(two_cfg), o) < 0)
        return -1;
    out[0] = o[0]; /* o[1] unused: its gradient never arrives */
    return 1;
}

static void test_multi_output_materialize(void **s) {
    (void)s;
    jg_compiled *c = compile(p_two);
    for (int m = 0; m < 2; m++) {
        two_cfg cfg = {m};
        jg_tensor *l[1];
        make_leaves(JG_F32, 1, l, 4);
        two_saw_null = 0;
        run_both(c, p_two, &cfg, sizeof cfg, 1, l, 1, l, NULL);
        assert_int_equal(two_saw_null, !m); /* traced backward saw what eager saw */
        check_scaled(jg_grad(l[0]), l[0], 2.0);
    }
    jg_compiled_free(c);
}

/* ---- verify: catches a wrong compiled gradient ---- */

static void test_verify_catches_wrong_backend(void **s) {
    (void)s;
    jg_compile_options o = {.backend = backend, .fullgraph = true, .verify = true};
    jg_compiled *c = jg_compile(tf_seed, NULL, &o);
    assert_non_null(c);
    bool mask = true;
    jg_tensor *l[2], *out;
    make_leaves(JG_F32, 2, l, 16);
    assert_int_equal(jg_compiled_call(c, &mask, sizeof mask, 2, l, &out), 1);
    assert_null(jg_grad(l[0])); /* verify touched no .grad */
    jg_debug_corrupt_backward = 1;
    int rc = jg_compiled_call(c, &mask, sizeof mask, 2, l, &out);
    jg_debug_corrupt_backward = 0;
    assert_int_equal(rc, -1);
    TU_ERROR("verify: the gradient of input 0 differs from eager");
    assert_null(jg_grad(l[0]));
    assert_null(jg_grad(l[1]));
    jg_compiled_free(c);
}

/* ---- the same inputs through eager and compiled, interleaved ---- */

static void test_mixed_eager_and_compiled(void **s) {
    (void)s;
    jg_compiled *c = compile(tf_seed);
    bool mask = true;
    jg_tensor *l[2], *o;
    make_leaves(JG_F32, 2, l, 16);
    assert_int_equal(jg_compiled_call(c, &mask, sizeof mask, 2, l, &o), 1);
    jg_tensor *e = tf_apply1(&tf_myfn, 3, (jg_tensor *[]){l[1], l[0], l[0]}, &mask, sizeof mask);
    assert_int_equal(jg_backward(jg_add(jg_sum(o), jg_sum(e)), NULL, 0), 0);
    check_scaled(jg_grad(l[1]), l[0], 4.0); /* 2q from each */
    check_scaled(jg_grad(l[0]), l[1], 4.0);
    jg_compiled_free(c);
}

/* ---- opaque calls: callbacks that read tensor values ---- */

typedef struct {
    bool read_in_backward; /* else the forward reads */
    bool null1;            /* slot 1 answers NULL */
} peek_cfg;

/* out = a * b * c where c = 1 + sum(a) is read as a number (data-dependent
 * code that cannot be traced); backward treats c as a constant. */
static int peek_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    const peek_cfg *cfg = jg_ctx_args(ctx);
    double *c = malloc(sizeof *c);
    *c = cfg->read_in_backward ? 2.0 : 1.0 + jg_item(jg_sum(in[0]));
    jg_ctx_set_state(ctx, c, free);
    if (*c != *c) /* the read failed (traced): report it */
        return -1;
    jg_ctx_save_for_backward(ctx, 2, in);
    out[0] = jg_mul_scalar(jg_mul(in[0], in[1]), *c);
    return 1;
}

static int peek_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out;
    const peek_cfg *cfg = jg_ctx_args(ctx);
    double c = *(double *)jg_ctx_state(ctx);
    if (cfg->read_in_backward && jg_item(jg_sum(g[0])) != jg_item(jg_sum(g[0])))
        return -1;
    jg_tensor *a = jg_ctx_saved(ctx, 0), *b = jg_ctx_saved(ctx, 1);
    din[0] = jg_mul_scalar(jg_mul(b, g[0]), c);
    din[1] = cfg->null1 ? NULL : jg_mul_scalar(jg_mul(a, g[0]), c);
    return n_in;
}

static const jg_function Peek = {"Peek", peek_forward, peek_backward, NULL};

static int p_peek(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u;
    (void)n;
    /* the same tensor in both slots, and used once more outside */
    jg_tensor *y = tf_apply1(&Peek, 2, (jg_tensor *[]){in[0], in[0]}, args, sizeof(peek_cfg));
    jg_tensor *z =
        tf_apply1(&Peek, 2, (jg_tensor *[]){in[1], jg_tanh(in[0])}, args, sizeof(peek_cfg));
    if (!y || !z)
        return -1;
    out[0] = jg_add(jg_add(y, z), jg_mul(in[0], in[1]));
    return 1;
}

static void test_opaque_calls(void **s) {
    (void)s;
    const peek_cfg cfgs[] = {{0}, {.null1 = true}, {.read_in_backward = true}, {1, 1}};
    for (int i = 0; i < 4; i++) {
        jg_compiled *c = compile(p_peek);
        jg_tensor *l[2];
        make_leaves(JG_F64, 2, l, 5);
        run_both(c, p_peek, &cfgs[i], sizeof cfgs[i], 2, l, 2, l, NULL);
        /* a second call reuses the entry and runs the callbacks again */
        run_both(c, p_peek, &cfgs[i], sizeof cfgs[i], 2, l, 2, l, NULL);
        assert_int_equal(jg_compiled_entries(c), 1);
        char *g = jg_compiled_graph(c, 0);
        assert_non_null(strstr(g, "custom[Peek]("));
        assert_non_null(strstr(g, " opaque"));
        assert_non_null(strstr(g, "custom[Peek.backward]("));
        free(g);
        jg_compiled_free(c);
    }
}

/* all of a graph input's slots answer NULL through an opaque call: no grad */
static int p_peek_only(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u;
    (void)n;
    jg_tensor *y = tf_apply1(&Peek, 2, (jg_tensor *[]){in[1], in[0]}, args, sizeof(peek_cfg));
    return y ? (out[0] = y, 1) : -1;
}

static void test_opaque_null_slot_leaves_no_grad(void **s) {
    (void)s;
    jg_compiled *c = compile(p_peek_only);
    peek_cfg cfg = {.null1 = true};
    jg_tensor *l[2];
    make_leaves(JG_F32, 2, l, 3);
    run_both(c, p_peek_only, &cfg, sizeof cfg, 2, l, 2, l, NULL);
    assert_null(jg_grad(l[0])); /* slot 1 (l[0]) answered NULL */
    assert_non_null(jg_grad(l[1]));
    jg_compiled_free(c);
}

/* ---- an opaque call whose output shape depends on its data ---- */

static int sized_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx;
    (void)n;
    double v = jg_item(jg_sum(in[0])); /* traced: NaN, which makes the call opaque */
    int64_t len = v == v && v >= 1 ? (int64_t)v : 1;
    out[0] = jg_full(JG_F32, 1, (int64_t[]){len}, 1.0);
    return 1;
}

static int sized_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)ctx, (void)n_out, (void)g;
    din[0] = NULL;
    return n_in;
}

static const jg_function Sized = {"Sized", sized_forward, sized_backward, NULL};

static int p_sized(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    jg_tensor *y = tf_apply1(&Sized, 1, in, NULL, 0);
    return y ? (out[0] = y, 1) : -1;
}

static void test_opaque_data_dependent_shape(void **s) {
    (void)s;
    jg_compiled *c = compile(p_sized);
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 1, 1)), *out = NULL;
    jg_set_requires_grad(x, true);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &out), -1);
    TU_ERROR("Sized output 0 is f32[3] at run time but had shape [1] when traced");
    TU_ERROR("must not depend on its data");
    assert_int_equal(jg_compiled_entries(c), 1); /* the cache stays usable */
    jg_compiled_free(c);
}

/* ---- detach inside a compiled program stops the gradient ---- */

static int p_detach(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u;
    (void)args;
    (void)n;
    jg_tensor *d = jg_detach(in[0]);
    if (!d || jg_requires_grad(d))
        return jg_set_error("detach kept requires_grad");
    out[0] = jg_mul(in[0], d);
    return 1;
}

static void test_detach_in_program(void **s) {
    (void)s;
    jg_compiled *c = compile(p_detach);
    jg_tensor *l[1];
    make_leaves(JG_F32, 1, l, 6);
    run_both(c, p_detach, NULL, 0, 1, l, 1, l, NULL);
    TU_SAME(jg_grad(l[0]), l[0]); /* d(x * stop(x))/dx = x, not 2x */
    jg_compiled_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_seed_both_masks),
        TU_TEST(test_seed_golden_graph),
        TU_TEST(test_same_tensor_all_slots),
        TU_TEST(test_mul_slot_patterns),
        TU_TEST(test_fan_out_and_two_functions),
        TU_TEST(test_input_without_grad),
        TU_TEST(test_views_and_overlapping_slices),
        TU_TEST(test_program_inputs_alias),
        TU_TEST(test_two_calls_accumulate),
        TU_TEST(test_multi_output_materialize),
        TU_TEST(test_verify_catches_wrong_backend),
        TU_TEST(test_mixed_eager_and_compiled),
        TU_TEST(test_opaque_calls),
        TU_TEST(test_detach_in_program),
        TU_TEST(test_opaque_data_dependent_shape),
        TU_TEST(test_opaque_null_slot_leaves_no_grad),
    };
    int failed = cmocka_run_group_tests_name("interp", tests, NULL, NULL);
    if (!jg_compile_backend_available("c")) {
        print_message("the c backend is not available here: %s\n", jg_last_error());
        return failed;
    }
    backend = "c";
    return failed + cmocka_run_group_tests_name("c", tests, NULL, NULL);
}
