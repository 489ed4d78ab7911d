/* A tensor an op saves as its own output (exp, softmax, prod), written in
 * place afterwards: eager's backward fails with "modified by an inplace
 * operation", naming the node that saved it, and so does a compiled
 * call's (interp and c backends, the tracing call and a replay), with the
 * same message and no gradient reaching the input: whether the write is in
 * the op's graph, in a later piece (a read splits the program) or the
 * backward runs inside the program.  An output eager does not save
 * (max(dim)'s values) may be written: the gradients are eager's. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

typedef jg_tensor *(*op_fn)(jg_tensor *x);

static jg_tensor *op_exp(jg_tensor *x) {
    return jg_exp(x);
}

static jg_tensor *op_softmax(jg_tensor *x) {
    return jg_softmax(x, 1);
}

static jg_tensor *op_prod(jg_tensor *x) {
    return jg_prod(x);
}

/* (the programs' user pointer: one of these) */
static const op_fn EXP = op_exp, SOFTMAX = op_softmax, PROD = op_prod;

/* the program's op, then y *= 2 */
static jg_tensor *op_then_write(void *u, jg_tensor *x) {
    jg_tensor *y = (*(const op_fn *)u)(x);
    return y && jg_mul_scalar_(y, 2.0) == 0 ? y : NULL;
}

static int p_whole(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    return (out[0] = op_then_write(u, in[0])) ? 1 : -1;
}

/* a read between the op and the write: the write is in the next piece */
static int p_piece(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    jg_tensor *y = (*(const op_fn *)u)(in[0]);
    double s = y ? jg_item(jg_sum(y)) : 0.0;
    if (!y || s != s || jg_mul_scalar_(y, 2.0) < 0) /* (NaN: the read failed) */
        return -1;
    out[0] = y;
    return 1;
}

/* the backward inside the program */
static int p_inner(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    jg_tensor *y = op_then_write(u, in[0]);
    if (!y || jg_backward(jg_sum(y), NULL, 0) < 0)
        return -1;
    out[0] = y;
    return 1;
}

static jg_tensor *input(void) {
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(0.5, 1.5, 2.0, 0.3, 0.2, 0.9));
    jg_set_requires_grad(x, true);
    return x;
}

/* Runs prog on a fresh input (compiled with c when not NULL): its error
 * message, or "" when it and the backward succeeded. */
static void run(jg_program_fn prog, const op_fn *op, jg_compiled *c, char *msg, size_t size) {
    jg_tensor *x = input(), *out[1];
    jg_clear_error();
    int rc = c ? jg_compiled_call(c, NULL, 0, 1, &x, out) : prog((void *)op, NULL, 1, &x, out);
    if (rc == 1 && prog != p_inner)
        rc = jg_backward(jg_sum(out[0]), NULL, 0);
    snprintf(msg, size, "%s", rc < 0 ? jg_last_error() : "");
    assert_null(jg_grad(x)); /* (nothing reached the input) */
}

static void check(jg_program_fn prog, const op_fn *op, const char *node) {
    char want[512], got[512];
    run(prog, op, NULL, want, sizeof want);
    if (!strstr(want, "modified by an inplace operation") || !strstr(want, node))
        fail_msg("eager: %s", want);
    const char *backends[] = {"interp", "c"};
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        jg_compiled *c =
            jg_compile(prog, (void *)op, &(jg_compile_options){.backend = backends[b]});
        assert_non_null(c);
        for (int rep = 0; rep < 2; rep++) { /* (traced, then replayed) */
            run(prog, op, c, got, sizeof got);
            if (strcmp(got, want))
                fail_msg("%s call %d: %s\neager: %s", backends[b], rep, got, want);
        }
        jg_compiled_free(c);
    }
}

static void test_saved_output_written_in_graph(void **state) {
    (void)state;
    check(p_whole, &EXP, "which is output 0 of ExpBackward0, is at version 1; expected version 0");
    check(p_whole, &SOFTMAX, "output 0 of SoftmaxBackward0");
    check(p_whole, &PROD, "[f32 []], which is output 0 of ProdBackward0");
}

static void test_saved_output_written_in_later_piece(void **state) {
    (void)state;
    check(p_piece, &EXP, "output 0 of ExpBackward0");
    check(p_piece, &PROD, "output 0 of ProdBackward0");
}

static void test_saved_output_written_before_inner_backward(void **state) {
    (void)state;
    check(p_inner, &EXP, "output 0 of ExpBackward0");
}

/* max(dim) keeps only its indices: writing its values is no error */
static int p_max_values(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    jg_tensor *v = NULL, *i = NULL;
    if (jg_max_dim(in[0], 1, false, &v, &i) < 0 || jg_mul_scalar_(v, 2.0) < 0)
        return -1;
    out[0] = v;
    return 1;
}

static void test_unsaved_output_written(void **state) {
    (void)state;
    jg_tensor *x = input(), *out[1];
    assert_int_equal(p_max_values(NULL, NULL, 1, &x, out), 1);
    assert_int_equal(jg_backward(jg_sum(out[0]), NULL, 0), 0);
    jg_tensor *want = jg_grad(x);
    assert_non_null(want);
    const char *backends[] = {"interp", "c"};
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        jg_compiled *c =
            jg_compile(p_max_values, NULL, &(jg_compile_options){.backend = backends[b]});
        assert_non_null(c);
        for (int rep = 0; rep < 2; rep++) {
            jg_tensor *y = input();
            if (jg_compiled_call(c, NULL, 0, 1, &y, out) != 1 ||
                jg_backward(jg_sum(out[0]), NULL, 0) < 0)
                fail_msg("%s: %s", backends[b], jg_last_error());
            TU_SAME(jg_grad(y), want);
        }
        jg_compiled_free(c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_saved_output_written_in_graph),
        TU_TEST(test_saved_output_written_in_later_piece),
        TU_TEST(test_saved_output_written_before_inner_backward),
        TU_TEST(test_unsaved_output_written),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
