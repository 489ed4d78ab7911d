/* Slice-gradient fusion (passes/slices.c, op slice_backward2): the
 * gradient of two disjoint slices of one tensor, made in one write, must
 * have eager's bits (-0 becomes +0, NaNs stay NaN) in the interp and c
 * backends; what the pass must not fuse (overlapping ranges, broadcasting,
 * two dtypes, a value used twice) stays as it was. */
#include "testutil.h"

#include "compile/compile.h"
#include "graph/graph.h"
#include "ops/optable.h"
#include "passes/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *backends[] = {"interp", "c"};

static size_t dtype_bytes(jg_dtype dt) {
    return dt == JG_F64 ? 8 : 4;
}

/* a and b hold the same bits (element by element, row-major order), NaN
 * for NaN (which operand's NaN a binary op passes on, sign included, is
 * the compiler's choice: not part of the contract) */
static void same_bits(jg_tensor *a, jg_tensor *b) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(jg_dtype_of(a), jg_dtype_of(b));
    assert_int_equal(jg_numel(a), jg_numel(b));
    jg_tensor *ca = jg_contiguous(a), *cb = jg_contiguous(b);
    size_t es = dtype_bytes(jg_dtype_of(a));
    const char *pa = jg_data(ca), *pb = jg_data(cb);
    for (int64_t i = 0; i < jg_numel(a); i++)
        if (memcmp(pa + (size_t)i * es, pb + (size_t)i * es, es) &&
            !(es == 8 ? isnan(((const double *)pa)[i]) && isnan(((const double *)pb)[i])
                      : isnan(((const float *)pa)[i]) && isnan(((const float *)pb)[i])))
            fail_msg("element %lld: bits differ (%g vs %g)", (long long)i,
                     es == 8 ? ((const double *)pa)[i] : ((const float *)pa)[i],
                     es == 8 ? ((const double *)pb)[i] : ((const float *)pb)[i]);
}

/* -0, NaN, +-inf and ordinary values, cycled */
static jg_tensor *special(jg_dtype dt, int ndim, const int64_t *shape, int seed) {
    static const double v[] = {-0.0, 1.5, NAN, -2.25, INFINITY, 0.0, -INFINITY, 3.0, -0.0, -7.5};
    int64_t n = tu_numel(ndim, shape);
    double *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = v[(i * 7 + seed) % 10] * (i % 3 ? 1 : -1);
    jg_tensor *t = tu_tensor(dt, ndim, shape, x);
    free(x);
    return t;
}

/* ---- the kernel against eager's add(slice_backward, slice_backward) ---- */

static jg_tensor *slice_backward(jg_tensor *g, int dim, int64_t s, int64_t e, int nd,
                                 const int64_t *shape) {
    jg_attrs a = {.n = 3 + nd};
    a.i[0] = dim, a.i[1] = s, a.i[2] = e;
    for (int d = 0; d < nd; d++)
        a.i[3 + d] = shape[d];
    return jg_op1(JG_OP_SLICE_BACKWARD, &a, g, NULL);
}

static jg_attrs sb2_attrs(int dim, int64_t s0, int64_t e0, int64_t s1, int64_t e1, int nd,
                          const int64_t *shape) {
    jg_attrs a = {.n = 5 + nd};
    a.i[0] = dim, a.i[1] = s0, a.i[2] = e0, a.i[3] = s1, a.i[4] = e1;
    for (int d = 0; d < nd; d++)
        a.i[5 + d] = shape[d];
    return a;
}

/* operands given permuted ([.., H, D] seen as [.., D, H] transposed) and
 * of another shape than their range (a folded reshape), with a gap */
static void test_kernel_matches_eager(void **state) {
    (void)state;
    const jg_dtype dts[2] = {JG_F32, JG_F64};
    for (int di = 0; di < 2; di++)
        for (int dim = 0; dim < 3; dim++) {
            int64_t shape[3] = {3, 4, 6};
            int64_t n = shape[dim];
            /* ranges [n-2, n) and [0, 1): out of order, a gap between */
            int64_t r[2][2] = {{n - 2, n}, {0, 1}};
            jg_tensor *x[2], *piece[2];
            for (int p = 0; p < 2; p++) {
                int64_t ps[3] = {shape[0], shape[1], shape[2]};
                ps[dim] = r[p][1] - r[p][0];
                /* piece p, made contiguous, then seen through a transpose
                 * of a [.., numel / 2, 2] buffer: row-major order is the
                 * same, strides are not */
                int64_t m = ps[0] * ps[1] * ps[2];
                jg_tensor *t = special(dts[di], 2, TU_SHAPE(2, m / 2), p);
                x[p] = jg_transpose(t, 0, 1); /* [m/2, 2], strided */
                piece[p] = jg_reshape(jg_contiguous(x[p]), 3, ps);
            }
            jg_tensor *want = jg_add(slice_backward(piece[0], dim, r[0][0], r[0][1], 3, shape),
                                     slice_backward(piece[1], dim, r[1][0], r[1][1], 3, shape));
            jg_attrs a = sb2_attrs(dim, r[0][0], r[0][1], r[1][0], r[1][1], 3, shape);
            jg_tensor *got = jg_op1(JG_OP_SLICE_BACKWARD2, &a, x[0], x[1]);
            if (!got)
                fail_msg("slice_backward2: %s", jg_last_error());
            assert_int_equal(jg_ndim(got), 3);
            same_bits(got, want);
        }
}

static void test_kernel_refuses_bad_operands(void **state) {
    (void)state;
    int64_t shape[2] = {2, 6};
    jg_tensor *a = special(JG_F32, 2, TU_SHAPE(2, 3), 0);
    jg_tensor *b = special(JG_F32, 2, TU_SHAPE(2, 3), 1);
    jg_attrs o = sb2_attrs(1, 0, 3, 2, 5, 2, shape);
    assert_null(jg_op1(JG_OP_SLICE_BACKWARD2, &o, a, b));
    TU_ERROR("slice_backward2: ranges [0, 3) and [2, 5) overlap");
    jg_attrs big = sb2_attrs(1, 0, 3, 3, 7, 2, shape);
    assert_null(jg_op1(JG_OP_SLICE_BACKWARD2, &big, a, b));
    TU_ERROR("slice_backward2: range [3, 7) does not fit dim 1 of size 6");
    jg_attrs few = sb2_attrs(1, 0, 2, 3, 6, 2, shape);
    assert_null(jg_op1(JG_OP_SLICE_BACKWARD2, &few, a, b));
    TU_ERROR("slice_backward2: operand 0 has 6 elements, its range 4");
    jg_attrs ok = sb2_attrs(1, 0, 3, 3, 6, 2, shape);
    assert_null(jg_op1(JG_OP_SLICE_BACKWARD2, &ok, a, jg_to_dtype(b, JG_F64)));
    TU_ERROR("slice_backward2: operands of dtypes float32 and float64");
}

/* ---- whole programs: eager vs compiled, and an oracle ---- */

/* The attention's head layout: h [B, T, W] split along dim 2 into two
 * pieces of C = H * D at 0 and C + gap, each viewed [B, T, H, D] and
 * permuted to [B, H, T, D]; out = q * w1 + k * w2.  gap < 0: overlapping. */
typedef struct {
    int64_t B, T, H, D, gap;
} qk_case;

static int p_qk(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    const qk_case *c = user;
    int64_t C = c->H * c->D, hd[4] = {c->B, c->T, c->H, c->D};
    int perm[4] = {0, 2, 1, 3};
    jg_tensor *q = jg_permute(jg_reshape(jg_slice(in[0], 2, 0, C), 4, hd), perm);
    jg_tensor *k =
        jg_permute(jg_reshape(jg_slice(in[0], 2, C + c->gap, 2 * C + c->gap), 4, hd), perm);
    out[0] = jg_add(jg_mul(q, in[1]), jg_mul(k, in[2]));
    return out[0] ? 1 : -1;
}

/* The same split along dim 0 of a 2-D tensor, the pieces used as they are. */
static int p_rows(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n, (void)user;
    int64_t r = jg_shape(in[1])[0];
    out[0] = jg_add(jg_mul(jg_slice(in[0], 0, 0, r), in[1]),
                    jg_mul(jg_slice(in[0], 0, r + 1, 2 * r + 1), in[2]));
    return out[0] ? 1 : -1;
}

static char *g_log;

/* Runs prog eagerly (backward through sum(out 0)), then compiled with each
 * backend (a trace, then a cache hit): every gradient of in[0] must have
 * eager's bits.  Returns eager's gradient; *fused tells whether the c
 * backend's graphs (JITGRAD_LOG=graphs) hold a slice_backward2. */
static jg_program_fn g_prog;
static void *g_user;
static jg_tensor **g_in;
static jg_tensor *g_grad;

static void run_compiled(void) {
    const jg_compile_options o = {.backend = "c", .fullgraph = true};
    jg_compiled *c = jg_compile(g_prog, g_user, &o);
    assert_non_null(c);
    jg_tensor *out[1];
    assert_int_equal(jg_compiled_call(c, NULL, 0, 3, g_in, out), 1);
    assert_int_equal(jg_backward(jg_sum(out[0]), NULL, 0), 0);
    g_grad = jg_clone(jg_grad(g_in[0]));
    jg_clear_grad(g_in[0]);
    jg_compiled_free(c);
}

static jg_tensor *check_program(jg_program_fn prog, void *user, jg_tensor **in, bool *fused) {
    jg_tensor *eo[1];
    jg_clear_grad(in[0]);
    assert_int_equal(prog(user, NULL, 3, in, eo), 1);
    assert_int_equal(jg_backward(jg_sum(eo[0]), NULL, 0), 0);
    jg_tensor *eg = jg_clone(jg_grad(in[0]));
    jg_clear_grad(in[0]);
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *c = jg_compile(prog, user, &o);
        assert_non_null(c);
        for (int rep = 0; rep < 2; rep++) {
            jg_tensor *out[1];
            if (jg_compiled_call(c, NULL, 0, 3, in, out) != 1)
                fail_msg("%s: %s", backends[b], jg_last_error());
            same_bits(out[0], eo[0]);
            assert_int_equal(jg_backward(jg_sum(out[0]), NULL, 0), 0);
            same_bits(jg_grad(in[0]), eg);
            jg_clear_grad(in[0]);
        }
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        jg_compiled_free(c);
    }
    /* the interp backend's graphs are the c backend's: one log tells */
    g_prog = prog, g_user = user, g_in = in;
    setenv("JITGRAD_LOG", "graphs", 1);
    g_log = tu_capture_stderr(run_compiled);
    unsetenv("JITGRAD_LOG");
    *fused = g_log && strstr(g_log, "slice_backward2(");
    free(g_log);
    same_bits(g_grad, eg);
    return eg;
}

/* What PyTorch gives: w + 0 (so +0 for -0, NaN for NaN) where a piece
 * read h, +0 in the gap. */
static void check_qk_oracle(const qk_case *c, jg_tensor *grad, jg_tensor *w1, jg_tensor *w2) {
    int64_t C = c->H * c->D, W = 2 * C + c->gap;
    jg_tensor *g = jg_contiguous(jg_to_dtype(grad, JG_F64));
    jg_tensor *a = jg_contiguous(jg_to_dtype(w1, JG_F64));
    jg_tensor *b = jg_contiguous(jg_to_dtype(w2, JG_F64));
    const double *pg = jg_data(g), *pa = jg_data(a), *pb = jg_data(b);
    for (int64_t bt = 0; bt < c->B * c->T; bt++)
        for (int64_t j = 0; j < W; j++) {
            int64_t bi = bt / c->T, t = bt % c->T;
            double v[2];
            int got_n = 0;
            for (int p = 0; p < 2; p++) {
                int64_t cc = j - (p ? C + c->gap : 0);
                if (cc >= 0 && cc < C)
                    v[got_n++] =
                        (p ? pb : pa)[((bi * c->H + cc / c->D) * c->T + t) * c->D + cc % c->D];
            }
            /* (the pieces' values are small dyadic numbers: their sum is
             * exact in either dtype) */
            double want = got_n == 0 ? 0.0 : got_n == 1 ? v[0] + 0.0 : v[0] + v[1];
            double got = pg[bt * W + j];
            if (isnan(want) ? !isnan(got) : memcmp(&want, &got, sizeof got))
                fail_msg("grad[%lld, %lld] is %g, expected %g", (long long)bt, (long long)j, got,
                         want);
        }
}

static void qk_run(jg_dtype dt, qk_case c, bool expect_fused) {
    int64_t C = c.H * c.D;
    jg_tensor *h = special(dt, 3, TU_SHAPE(c.B, c.T, 2 * C + c.gap), 3);
    jg_set_requires_grad(h, true);
    jg_tensor *w1 = special(dt, 4, TU_SHAPE(c.B, c.H, c.T, c.D), 0);
    jg_tensor *w2 = special(dt, 4, TU_SHAPE(c.B, c.H, c.T, c.D), 5);
    jg_tensor *in[3] = {h, w1, w2};
    bool fused;
    jg_tensor *eg = check_program(p_qk, &c, in, &fused);
    assert_int_equal(fused, expect_fused);
    check_qk_oracle(&c, eg, w1, w2);
}

/* regression: the fused write must turn -0 gradients into +0 as the add
 * did, and keep NaNs, in f32 and f64 */
static void test_head_layout_negative_zero(void **state) {
    (void)state;
    qk_run(JG_F32, (qk_case){2, 3, 2, 4, 0}, true);
    qk_run(JG_F64, (qk_case){2, 3, 2, 4, 0}, true);
}

static void test_head_layout_gap(void **state) {
    (void)state;
    qk_run(JG_F32, (qk_case){1, 5, 3, 2, 3}, true);
}

/* overlapping ranges add: not fused, still eager's bits */
static void test_head_layout_overlap(void **state) {
    (void)state;
    qk_run(JG_F32, (qk_case){2, 3, 2, 4, -4}, false);
}

static void test_rows_dim0(void **state) {
    (void)state;
    for (int di = 0; di < 2; di++) {
        jg_dtype dt = di ? JG_F64 : JG_F32;
        jg_tensor *h = special(dt, 2, TU_SHAPE(7, 5), 2);
        jg_set_requires_grad(h, true);
        jg_tensor *in[3] = {h, special(dt, 2, TU_SHAPE(3, 5), 4),
                            special(dt, 2, TU_SHAPE(3, 5), 1)};
        bool fused;
        jg_tensor *eg = check_program(p_rows, NULL, in, &fused);
        assert_true(fused);
        /* row 3 (the gap) is +0 */
        jg_tensor *gap = jg_contiguous(jg_slice(eg, 0, 3, 4));
        for (int64_t i = 0; i < 5; i++) {
            double v = dt == JG_F64 ? ((double *)jg_data(gap))[i] : ((float *)jg_data(gap))[i];
            assert_true(v == 0.0 && !signbit(v));
        }
    }
}

/* ---- the pass on hand-built graphs ---- */

/* add(slice_backward(a), slice_backward(b)) over [2, 6] along dim 1, a and
 * b of the given metas and ranges; extra: a second use of the first
 * slice_backward */
static jg_graph *build(jg_meta ma, jg_meta mb, int64_t s1, bool extra) {
    jg_graph *g = jg_graph_new();
    int a = jg_graph_add_input(g, &ma, false, "a"), b = jg_graph_add_input(g, &mb, false, "b");
    jg_meta out_a = {ma.dtype, 2, {ma.shape[0], 6}}, out_b = {mb.dtype, 2, {mb.shape[0], 6}};
    jg_attrs sa = {.n = 5, .i = {1, 0, 3, ma.shape[0], 6}};
    jg_attrs sb = {.n = 5, .i = {1, s1, s1 + 3, mb.shape[0], 6}};
    int ga, gb, sum, outs[2];
    assert_true(jg_graph_add_op(g, JG_OP_SLICE_BACKWARD, &sa, 1, &a, &out_a, false, &ga) >= 0);
    assert_true(jg_graph_add_op(g, JG_OP_SLICE_BACKWARD, &sb, 1, &b, &out_b, false, &gb) >= 0);
    int first = ga;
    jg_meta om = out_a;
    if (ma.dtype != mb.dtype) { /* (the graph spells promotion out: a cast) */
        jg_attrs cast = {.dtype = mb.dtype};
        om.dtype = mb.dtype;
        assert_true(jg_graph_add_op(g, JG_OP_TO_DTYPE, &cast, 1, &ga, &om, false, &first) >= 0);
    }
    assert_true(jg_graph_add_op(g, JG_OP_ADD, NULL, 2, (int[]){first, gb}, &om, false, &sum) >= 0);
    outs[0] = sum, outs[1] = ga;
    assert_int_equal(jg_graph_set_outputs(g, extra ? 2 : 1, outs), 0);
    return g;
}

static int count_op(const jg_graph *g, jg_opcode op) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i].kind == JG_GN_OP && g->nodes[i].op == op;
    return n;
}

static void test_pass_fuses_only_what_it_may(void **state) {
    (void)state;
    const jg_meta f23 = {JG_F32, 2, {2, 3}}, d23 = {JG_F64, 2, {2, 3}}, f13 = {JG_F32, 2, {1, 3}};
    struct {
        jg_meta a, b;
        int64_t s1;
        bool extra, fuse;
    } cases[] = {
        {f23, f23, 3, false, true},  /* disjoint */
        {f23, f23, 2, false, false}, /* overlapping */
        {f23, d23, 3, false, false}, /* two dtypes: the add promotes */
        {f23, f13, 3, false, false}, /* [2, 6] + [1, 6]: the add broadcasts */
        {f23, f23, 3, true, false},  /* the first slice_backward is read again */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        jg_graph *g = build(cases[k].a, cases[k].b, cases[k].s1, cases[k].extra);
        if (jg_compile_passes(g, true) < 0)
            fail_msg("case %zu: %s", k, jg_last_error());
        assert_int_equal(count_op(g, JG_OP_SLICE_BACKWARD2), cases[k].fuse);
        assert_int_equal(count_op(g, JG_OP_SLICE_BACKWARD), cases[k].fuse ? 0 : 2);
        jg_graph_free(g);
    }
}

/* x[:, 0:3] and x[:, 3:6] in Python slice dim 0 whole too: the add's
 * operands are whole-dim slice_backwards of the ones that slice, which the
 * pass looks through (a whole-dim slice_backward is a copy) */
static void test_pass_looks_through_whole_dim_slices(void **state) {
    (void)state;
    const jg_meta m23 = {JG_F32, 2, {2, 3}}, m26 = {JG_F32, 2, {2, 6}};
    for (int whole_used_twice = 0; whole_used_twice < 2; whole_used_twice++) {
        jg_graph *g = jg_graph_new();
        int in[2] = {jg_graph_add_input(g, &m23, false, "a"),
                     jg_graph_add_input(g, &m23, false, "b")};
        int w[2], sum;
        for (int k = 0; k < 2; k++) {
            jg_attrs cols = {.n = 5, .i = {1, 3 * k, 3 * k + 3, 2, 6}};
            jg_attrs rows = {.n = 5, .i = {0, 0, 2, 2, 6}};
            int c;
            assert_true(
                jg_graph_add_op(g, JG_OP_SLICE_BACKWARD, &cols, 1, &in[k], &m26, false, &c) >= 0);
            assert_true(
                jg_graph_add_op(g, JG_OP_SLICE_BACKWARD, &rows, 1, &c, &m26, false, &w[k]) >= 0);
        }
        assert_true(jg_graph_add_op(g, JG_OP_ADD, NULL, 2, w, &m26, false, &sum) >= 0);
        int outs[2] = {sum, w[0]};
        assert_int_equal(jg_graph_set_outputs(g, 1 + whole_used_twice, outs), 0);
        if (jg_compile_passes(g, true) < 0)
            fail_msg("%s", jg_last_error());
        assert_int_equal(count_op(g, JG_OP_SLICE_BACKWARD2), !whole_used_twice);
        assert_int_equal(count_op(g, JG_OP_SLICE_BACKWARD), whole_used_twice ? 4 : 0);
        jg_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_kernel_matches_eager),
        TU_TEST(test_kernel_refuses_bad_operands),
        TU_TEST(test_head_layout_negative_zero),
        TU_TEST(test_head_layout_gap),
        TU_TEST(test_head_layout_overlap),
        TU_TEST(test_rows_dim0),
        TU_TEST(test_pass_fuses_only_what_it_may),
        TU_TEST(test_pass_looks_through_whole_dim_slices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
