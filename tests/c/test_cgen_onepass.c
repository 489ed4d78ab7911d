/* Loop fusion across a sum under the c backend (src/backend/cgen.c,
 * fuse_groups): a loop that ends in a sum and a later loop over the same
 * elements that does not read the sum run as one loop.  A forward and its
 * backward traced into one program (loss.backward() inside it) become one
 * pass: (a * b + c).relu().sum() (or a mean) and its three gradients are
 * computed by a single generated loop, bitwise equal to eager (the sum and every
 * gradient; f32 and f64; below and above the parallel threshold; 1, 2 and
 * 3 threads).  Where the later loop reads the sum, or a node between the
 * two reads the first loop's values, the loops stay apart, with eager's
 * results. */
#include "testutil.h"

#include "backend/cgen.h"
#include "core/parallel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE_C()                                                                                \
    do {                                                                                           \
        if (!jg_compile_backend_available("c")) {                                                  \
            print_message("skipping: the c backend is not available here: %s\n", jg_last_error()); \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* not a multiple of the sum's 4096-element blocks nor of the chunks */
#define N_BIG (3 * JG_PARALLEL_GRAIN + 4099)

/* A training step's forward and backward in one program: the backward of
 * the sum starts from its seed, not from its value. */
static int p_step(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    jg_tensor *loss = jg_sum(jg_relu(jg_add(jg_mul(in[0], in[1]), in[2])));
    if (!loss || jg_backward(loss, NULL, 0) < 0)
        return -1;
    out[0] = jg_detach(loss);
    return out[0] ? 1 : -1;
}

/* The same with a mean (an MSE-style loss): the mean ends the forward's
 * loop (the sum's blocks, then one division by the count), and its
 * backward's seed, the count's reciprocal broadcast, is one value. */
static int p_step_mean(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    jg_tensor *d = jg_sub(jg_mul(in[0], in[1]), in[2]);
    jg_tensor *loss = jg_mean(jg_mul(d, d));
    if (!loss || jg_backward(loss, NULL, 0) < 0)
        return -1;
    out[0] = jg_detach(loss);
    return out[0] ? 1 : -1;
}

/* A mean ending a compiled forward whose backward runs after the call. */
static int p_mean(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    out[0] = jg_mean(jg_relu(jg_add(jg_mul(in[0], in[1]), in[2])));
    return out[0] ? 1 : -1;
}

/* The later loop reads the sum: a * s cannot run in the loop adding s up. */
static int p_reads_sum(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    jg_tensor *s = jg_sum(jg_mul(in[0], in[1]));
    out[0] = jg_add(jg_mul(in[0], s), in[2]);
    return out[0] ? 1 : -1;
}

/* A node between the loops (cumsum, run by its kernel) reads the first
 * loop's value y: the first loop must run before it, the second after it. */
static int p_between(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    jg_tensor *y = jg_mul(in[0], in[1]);
    out[0] = jg_sum(y);
    out[1] = jg_mul(jg_add(in[2], jg_cumsum(y, 0)), in[0]);
    return out[0] && out[1] ? 2 : -1;
}

/* Forward only: a sum and an independent loop over the same elements
 * (both returned) share one pass. */
static int p_sibling(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    out[0] = jg_sum(jg_mul(in[0], in[1]));
    out[1] = jg_sub(in[2], in[0]);
    return out[0] && out[1] ? 2 : -1;
}

typedef struct {
    int n_out;
    jg_tensor *out[2], *grad[3];
} result;

static void make_inputs(jg_tensor **in, jg_dtype dt, int64_t n, bool rg) {
    jg_manual_seed(5);
    for (int i = 0; i < 3; i++) {
        in[i] = jg_randn(dt, 1, (int64_t[]){n});
        assert_non_null(in[i]);
        if (rg)
            jg_set_requires_grad(in[i], true);
    }
}

static result run_once(jg_compiled *c, jg_program_fn prog, jg_tensor *const *in) {
    result r = {0};
    for (int i = 0; i < 3; i++)
        jg_clear_grad(in[i]);
    r.n_out = c ? jg_compiled_call(c, NULL, 0, 3, in, r.out) : prog(NULL, NULL, 3, in, r.out);
    if (r.n_out < 1)
        fail_msg("%s: %s", c ? "c" : "eager", jg_last_error());
    /* an output with history: its backward after the call */
    if (jg_requires_grad(r.out[0]) && jg_backward(r.out[0], NULL, 0) < 0)
        fail_msg("backward: %s", jg_last_error());
    for (int i = 0; i < 3; i++)
        r.grad[i] = jg_grad(in[i]) ? jg_clone(jg_grad(in[i])) : NULL;
    return r;
}

static void same(const result *a, const result *b) {
    assert_int_equal(a->n_out, b->n_out);
    for (int k = 0; k < a->n_out; k++)
        TU_SAME(a->out[k], b->out[k]);
    for (int i = 0; i < 3; i++) {
        assert_true((a->grad[i] == NULL) == (b->grad[i] == NULL));
        if (a->grad[i])
            TU_SAME(a->grad[i], b->grad[i]);
    }
}

/* Compiled (c) against eager, bitwise, on 1, 2 and 3 threads; returns the
 * number of fused loops of the program's graph. */
static int check(jg_program_fn prog, jg_dtype dt, int64_t n, bool rg) {
    jg_scope_push();
    jg_tensor *in[3];
    make_inputs(in, dt, n, rg);
    int threads = jg_get_num_threads(), loops = -1;
    result eager = run_once(NULL, prog, in);
    jg_compiled *c = jg_compile(prog, NULL, &(jg_compile_options){.backend = "c"});
    assert_non_null(c);
    for (int t = 1; t <= 3; t++) {
        assert_int_equal(jg_set_num_threads(t), 0);
        for (int rep = 0; rep < 2; rep++) { /* the trace, then the compiled graph */
            result r = run_once(c, prog, in);
            same(&r, &eager);
            if (t == 1 && rep == 0)
                jg_cgen_last_stats(&loops, NULL, NULL);
        }
    }
    assert_int_equal(jg_set_num_threads(threads), 0);
    assert_int_equal(jg_compiled_fallbacks(c), 0);
    jg_compiled_free(c);
    jg_scope_pop();
    return loops;
}

/* The step is one graph (no separate backward) and one loop: the forward's
 * loop and the backward's share a pass over a, b and c. */
static void test_onepass_step_one_loop(void **state) {
    (void)state;
    REQUIRE_C();
    const int64_t sizes[] = {1, 1000, N_BIG};
    const jg_dtype dts[] = {JG_F32, JG_F64};
    for (size_t s = 0; s < 3; s++)
        for (size_t d = 0; d < 2; d++) {
            int loops = check(p_step, dts[d], sizes[s], true);
            if (sizes[s] > 1)
                assert_int_equal(loops, 1);
        }
    /* the printed graph: the backward is part of the program's one graph */
    jg_tensor *in[3];
    make_inputs(in, JG_F32, 64, true);
    jg_compiled *c = jg_compile(p_step, NULL, &(jg_compile_options){.backend = "c"});
    assert_non_null(c);
    jg_tensor *out[1];
    assert_int_equal(jg_compiled_call(c, NULL, 0, 3, in, out), 1);
    char *text = jg_compiled_graph(c, 0);
    assert_non_null(text);
    assert_non_null(strstr(text, "= sum(%2)"));
    assert_non_null(strstr(text, "= relu_grad("));
    assert_non_null(strstr(text, "backward: none"));
    free(text);
    jg_compiled_free(c);
}

/* A mean ending the chain: one loop in one program, its division by the
 * count that of the eager kernel; compiled forward + later backward too. */
static void test_onepass_mean(void **state) {
    (void)state;
    REQUIRE_C();
    const int64_t sizes[] = {1, 1000, N_BIG};
    const jg_dtype dts[] = {JG_F32, JG_F64};
    for (size_t s = 0; s < 3; s++)
        for (size_t d = 0; d < 2; d++) {
            int loops = check(p_step_mean, dts[d], sizes[s], true);
            if (sizes[s] > 1)
                assert_int_equal(loops, 1);
            check(p_mean, dts[d], sizes[s], true);
        }
}

/* The generated source of the step: one loop function, the sum's blocks
 * and the three gradient stores in it, relu's output never stored. */
static void test_onepass_step_source(void **state) {
    (void)state;
    REQUIRE_C();
    jg_tensor *in[3];
    make_inputs(in, JG_F32, 5000, true);
    jg_compiled *c = jg_compile(p_step, NULL, &(jg_compile_options){.backend = "c"});
    assert_non_null(c);
    jg_tensor *out[1];
    assert_int_equal(jg_compiled_call(c, NULL, 0, 3, in, out), 1);
    int loops = 0, fused = 0;
    jg_cgen_last_stats(&loops, &fused, NULL);
    assert_int_equal(loops, 1);
    assert_int_equal(fused, 7); /* mul, add, relu, sum, relu_grad, mul, mul */
    jg_compiled_free(c);
}

/* The later loop reads the sum: two loops, eager's bits. */
static void test_onepass_reads_sum_stays_apart(void **state) {
    (void)state;
    REQUIRE_C();
    assert_int_equal(check(p_reads_sum, JG_F32, 1000, false), 2);
    assert_int_equal(check(p_reads_sum, JG_F64, N_BIG, false), 2);
}

/* A node between the loops reads the first loop's value: they stay apart. */
static void test_onepass_reader_between_stays_apart(void **state) {
    (void)state;
    REQUIRE_C();
    assert_int_equal(check(p_between, JG_F32, 1000, false), 2);
    assert_int_equal(check(p_between, JG_F32, N_BIG, false), 2);
}

/* Two independent loops of one shape, one ending in a sum: one loop. */
static void test_onepass_sibling_fuses(void **state) {
    (void)state;
    REQUIRE_C();
    assert_int_equal(check(p_sibling, JG_F32, 1000, false), 1);
    assert_int_equal(check(p_sibling, JG_F64, N_BIG, false), 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_onepass_step_one_loop),
        TU_TEST(test_onepass_step_source),
        TU_TEST(test_onepass_mean),
        TU_TEST(test_onepass_reads_sum_stays_apart),
        TU_TEST(test_onepass_reader_between_stays_apart),
        TU_TEST(test_onepass_sibling_fuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
