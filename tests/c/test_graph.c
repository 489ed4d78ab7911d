/* The IR on its own: builder, printer, verifier, CSE/DCE and the
 * interpreter, on hand-built and traced graphs. */
#include "testutil.h"

#include "backend/interp.h"
#include "graph/graph.h"
#include "passes/passes.h"
#include "trace/trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const jg_meta V16 = {JG_F32, 1, {16}};
static const jg_meta S0 = {JG_F32, 0, {0}};

static void expect_text(jg_graph *g, const char *want) {
    char *s = jg_graph_print(g);
    assert_non_null(s);
    if (strcmp(s, want))
        fail_msg("printed:\n%s\nexpected:\n%s", s, want);
    free(s);
}

/* graph(q, k): (q * (k + k)).sum() built by hand */
static jg_graph *build_qk(void) {
    jg_graph *g = jg_graph_new();
    int q = jg_graph_add_input(g, &V16, true, "q"), k = jg_graph_add_input(g, &V16, true, "k");
    int a, m, s;
    assert_true(jg_graph_add_op(g, JG_OP_ADD, NULL, 2, (int[]){k, k}, &V16, true, &a) >= 0);
    assert_true(jg_graph_add_op(g, JG_OP_MUL, NULL, 2, (int[]){q, a}, &V16, true, &m) >= 0);
    jg_attrs all = {.n = 1};
    assert_true(jg_graph_add_op(g, JG_OP_SUM, &all, 1, &m, &S0, true, &s) >= 0);
    assert_int_equal(jg_graph_set_outputs(g, 1, &s), 0);
    return g;
}

static void test_print_and_uses(void **state) {
    (void)state;
    jg_graph *g = build_qk();
    assert_int_equal(jg_graph_verify(g), 0);
    expect_text(g, "graph(q: f32[16], k: f32[16]):\n"
                   "  %0 : f32[16] = add(k, k)\n"
                   "  %1 : f32[16] = mul(q, %0)\n"
                   "  %2 : f32[] = sum(%1)\n"
                   "  return (%2)\n");
    /* x*x style: two uses of one value in one node */
    assert_int_equal(g->vals[g->inputs[1]].uses, 2);
    assert_int_equal(g->vals[g->inputs[0]].uses, 1);
    assert_int_equal(g->vals[g->outputs[0]].uses, 1);
    jg_graph_free(g);
}

static void test_verifier_catches(void **state) {
    (void)state;
    /* use count off by one */
    jg_graph *g = build_qk();
    g->vals[g->inputs[1]].uses = 1;
    assert_int_equal(jg_graph_verify(g), -1);
    TU_ERROR("graph verifier: value 1 has use count 1 but 2 uses");
    jg_graph_free(g);
    /* operand used before its definition */
    g = build_qk();
    g->nodes[1].in[1] = g->nodes[2].out[0];
    g->vals[g->nodes[2].out[0]].uses++;
    g->vals[g->nodes[0].out[0]].uses--;
    assert_int_equal(jg_graph_verify(g), -1);
    TU_ERROR("node 1 (mul) uses value 4 before its definition (node 2): not in SSA/topological "
             "order");
    jg_graph_free(g);
    /* shape disagrees with the op table's rule */
    g = build_qk();
    g->vals[g->nodes[1].out[0]].meta.shape[0] = 8;
    assert_int_equal(jg_graph_verify(g), -1);
    TU_ERROR("node 1 (mul) output 0 is float32[8] but the op's shape rule gives float32[16]");
    jg_graph_free(g);
    /* dtype disagrees */
    g = build_qk();
    g->vals[g->nodes[2].out[0]].meta.dtype = JG_F64;
    assert_int_equal(jg_graph_verify(g), -1);
    TU_ERROR("node 2 (sum) output 0 is float64[] but the op's shape rule gives float32[]");
    jg_graph_free(g);
    /* the rule rejects the operands */
    g = build_qk();
    g->nodes[1].attrs.n = 0;
    g->nodes[0].op = JG_OP_MATMUL;
    g->vals[g->inputs[1]].meta = (jg_meta){JG_F32, 2, {4, 4}};
    assert_int_equal(jg_graph_verify(g), -1);
    TU_ERROR("node 0 (matmul)");
    jg_graph_free(g);
    /* requires_grad without a reason */
    g = build_qk();
    g->vals[g->inputs[0]].requires_grad = false;
    g->vals[g->inputs[1]].requires_grad = false;
    assert_int_equal(jg_graph_verify(g), -1);
    TU_ERROR("node 0 (add) output 0 requires grad but no operand does");
    jg_graph_free(g);
    /* output names nothing */
    g = build_qk();
    g->outputs[0] = 99;
    assert_int_equal(jg_graph_verify(g), -1);
    TU_ERROR("output 0 names no live value");
    jg_graph_free(g);
}

static void test_cse_dce(void **state) {
    (void)state;
    jg_graph *g = jg_graph_new();
    int x = jg_graph_add_input(g, &V16, false, "x"), y = jg_graph_add_input(g, &V16, false, "y");
    int a, b, c, d, dead1, dead2;
    jg_graph_add_op(g, JG_OP_MUL, NULL, 2, (int[]){x, y}, &V16, false, &a);
    jg_graph_add_op(g, JG_OP_EXP, NULL, 1, &x, &V16, false, &dead1);
    jg_graph_add_op(g, JG_OP_MUL, NULL, 2, (int[]){x, y}, &V16, false, &b); /* same as a */
    jg_graph_add_op(g, JG_OP_MUL, NULL, 2, (int[]){y, x}, &V16, false, &c); /* operands differ */
    jg_graph_add_op(g, JG_OP_LOG, NULL, 1, &dead1, &V16, false, &dead2);
    jg_attrs s2 = {.s = 2}, s3 = {.s = 3};
    int e, f;
    jg_graph_add_op(g, JG_OP_MUL_SCALAR, &s2, 1, &a, &V16, false, &e);
    jg_graph_add_op(g, JG_OP_MUL_SCALAR, &s3, 1, &b, &V16, false, &f); /* attrs differ */
    int t1, t2;
    jg_graph_add_op(g, JG_OP_ADD, NULL, 2, (int[]){e, f}, &V16, false, &t1);
    jg_graph_add_op(g, JG_OP_ADD, NULL, 2, (int[]){t1, c}, &V16, false, &t2);
    (void)d;
    jg_graph_set_outputs(g, 1, &t2);
    assert_int_equal(jg_graph_verify(g), 0);
    expect_text(g, "graph(x: f32[16], y: f32[16]):\n"
                   "  %0 : f32[16] = mul(x, y)\n"
                   "  %1 : f32[16] = exp(x)\n"
                   "  %2 : f32[16] = mul(x, y)\n"
                   "  %3 : f32[16] = mul(y, x)\n"
                   "  %4 : f32[16] = log(%1)\n"
                   "  %5 : f32[16] = mul_scalar(%0, 2)\n"
                   "  %6 : f32[16] = mul_scalar(%2, 3)\n"
                   "  %7 : f32[16] = add(%5, %6)\n"
                   "  %8 : f32[16] = add(%7, %3)\n"
                   "  return (%8)\n");
    assert_int_equal(jg_pass_cse(g), 1);
    assert_int_equal(jg_graph_verify(g), 0);
    expect_text(g, "graph(x: f32[16], y: f32[16]):\n"
                   "  %0 : f32[16] = mul(x, y)\n"
                   "  %1 : f32[16] = exp(x)\n"
                   "  %2 : f32[16] = mul(y, x)\n"
                   "  %3 : f32[16] = log(%1)\n"
                   "  %4 : f32[16] = mul_scalar(%0, 2)\n"
                   "  %5 : f32[16] = mul_scalar(%0, 3)\n"
                   "  %6 : f32[16] = add(%4, %5)\n"
                   "  %7 : f32[16] = add(%6, %2)\n"
                   "  return (%7)\n");
    assert_int_equal(jg_pass_dce(g), 2); /* log, then exp */
    assert_int_equal(jg_graph_verify(g), 0);
    expect_text(g, "graph(x: f32[16], y: f32[16]):\n"
                   "  %0 : f32[16] = mul(x, y)\n"
                   "  %1 : f32[16] = mul(y, x)\n"
                   "  %2 : f32[16] = mul_scalar(%0, 2)\n"
                   "  %3 : f32[16] = mul_scalar(%0, 3)\n"
                   "  %4 : f32[16] = add(%2, %3)\n"
                   "  %5 : f32[16] = add(%4, %1)\n"
                   "  return (%5)\n");
    assert_int_equal(jg_pass_cse(g), 0);
    assert_int_equal(jg_pass_dce(g), 0);

    /* the interpreter computes what eager computes, twice (buffer reuse) */
    jg_interp_plan *p = jg_interp_plan_new(g);
    jg_manual_seed(3);
    jg_tensor *xs = jg_randn(JG_F32, 1, TU_SHAPE(16)), *ys = jg_randn(JG_F32, 1, TU_SHAPE(16));
    jg_tensor *m = jg_mul(xs, ys);
    jg_tensor *want = jg_add(jg_add(jg_mul_scalar(m, 2), jg_mul_scalar(m, 3)), jg_mul(ys, xs));
    for (int rep = 0; rep < 3; rep++) {
        jg_tensor *out;
        assert_int_equal(jg_interp_run(p, (jg_tensor *[]){xs, ys}, &out), 0);
        TU_SAME(out, want);
        jg_release(out);
    }
    jg_interp_plan_free(p);
    jg_graph_free(g);
}

/* Tracing directly: ops on symbolic tensors record nodes; constants,
 * multi-output ops and attributes print. */
static void test_trace_print(void **state) {
    (void)state;
    jg_graph *g = jg_graph_new();
    assert_int_equal(jg_trace_begin(g, 0), 0);
    assert_true(jg_tracing());
    jg_scope_push();
    jg_meta m = {JG_F32, 2, {2, 3}};
    jg_tensor *x = jg_scope_track(jg_trace_placeholder(&m, true, true, "x"));
    jg_tensor *c = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    jg_tensor *v, *i;
    assert_int_equal(jg_max_dim(jg_add(x, c), 1, false, &v, &i), 0);
    jg_tensor *r = jg_reshape(jg_softmax(jg_to_dtype(x, JG_F64), -1), 1, TU_SHAPE(6));
    jg_tensor *s = jg_sum_dims(jg_slice(x, 1, 0, 2), 1, (int[]){0}, true);
    assert_true(jg_requires_grad(s));
    assert_false(jg_requires_grad(i));
    assert_true(isnan(jg_item(s)));
    TU_ERROR("jg_item: cannot read the values of a traced tensor");
    assert_int_equal(jg_trace_breaks(), 1);
    int outs[3] = {jg_trace_value(v), jg_trace_value(r), jg_trace_value(s)};
    jg_graph_set_outputs(g, 3, outs);
    jg_scope_pop();
    jg_trace_end();
    assert_false(jg_tracing());
    assert_int_equal(jg_graph_verify(g), 0);
    expect_text(g, "graph(x: f32[2, 3]):\n"
                   "  c0 : f32[3] = constant([1, 2, 3])\n"
                   "  %0 : f32[2, 3] = add(x, c0)\n"
                   "  (%1, %2) : (f32[2], i64[2]) = max(%0, dim=1)\n"
                   "  %3 : f64[2, 3] = to_dtype(x, f64)\n"
                   "  %4 : f64[2, 3] = softmax(%3, dim=1)\n"
                   "  %5 : f64[6] = reshape(%4, [6])\n"
                   "  %6 : f32[2, 2] = slice(x, dim=1, start=0, end=2)\n"
                   "  %7 : f32[1, 2] = sum(%6, dims=[0], keepdim=True)\n"
                   "  return (%1, %5, %7)\n");
    jg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_print_and_uses),
        TU_TEST(test_verifier_catches),
        TU_TEST(test_cse_dce),
        TU_TEST(test_trace_print),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
