/* The gradients of a split's pieces (slices along one dim of a tensor with
 * history) are added into the one buffer the first piece's slice_backward
 * made, in place (jg_grad_accumulate_slice), instead of each piece making a
 * zero-filled tensor of the whole shape that is then added: the same
 * additions element by element (acc + 0 outside a piece, acc + g inside),
 * so the bits are those of the ordinary rule, which create_graph and
 * compiled programs (graph autodiff) keep: -0.0 outside a later piece still
 * becomes +0.0.  The peak memory of the backward shows the shortcut: no
 * second whole-shape buffer. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int count_of(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* x [4, 9] -> y = x * 2, split in three [4, 3] pieces along dim 1; loss =
 * sum(q * a) + sum(k * b) (the third piece unused): y's gradient is a, b
 * and zeros side by side.  b holds -0.0 in its first column: k's gradient
 * arrives first (the engine runs the later node first) and is placed; q's
 * is then added over q's range only, so b's -0.0 stays. */
static int p_split(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    const bool *create_graph = user;
    jg_tensor *y = jg_mul_scalar(in[0], 2.0), *piece[3] = {0};
    if (jg_split(y, 1, 3, 3, piece) != 3)
        return -1;
    jg_tensor *loss = jg_add(jg_sum(jg_mul(piece[0], in[1])), jg_sum(jg_mul(piece[1], in[2])));
    if (!loss)
        return -1;
    if (*create_graph) {
        jg_tensor *g = NULL;
        if (jg_autograd_grad(1, &loss, NULL, 1, &in[0], JG_CREATE_GRAPH, &g) < 0)
            return -1;
        out[0] = g;
        return 1;
    }
    if (jg_backward(loss, NULL, 0) < 0)
        return -1;
    out[0] = loss;
    return 1;
}

static void inputs(jg_tensor **in) {
    jg_manual_seed(3);
    in[0] = jg_randn(JG_F32, 2, TU_SHAPE(4, 9));
    jg_set_requires_grad(in[0], true);
    in[1] = jg_randn(JG_F32, 2, TU_SHAPE(4, 3));
    in[2] = jg_randn(JG_F32, 2, TU_SHAPE(4, 3));
    float col[4];
    for (int r = 0; r < 4; r++) /* b[:, 0] = -0.0 */
        col[r] = -0.0f;
    jg_tensor *z = jg_tensor_new(JG_F32, 2, TU_SHAPE(4, 1), col);
    in[2] = jg_cat(2, (jg_tensor *const[]){z, jg_slice(in[2], 1, 1, 3)}, 1);
}

static void grad_bytes(jg_tensor *g, float *out) {
    assert_non_null(g);
    assert_int_equal(jg_numel(g), 36);
    assert_int_equal(jg_copy_to(g, out, 36 * sizeof(float)), 0);
}

/* The expected gradient: 2 * ([0 | b | 0] + [a | 0 | 0]), k's placed
 * first (the engine runs the later node first), then q's added: b's -0.0
 * plus 0 is +0.0. */
static void check_grad(jg_tensor *const *in, const float *got) {
    float a[12], b[12];
    assert_int_equal(jg_copy_to(in[1], a, sizeof a), 0);
    assert_int_equal(jg_copy_to(in[2], b, sizeof b), 0);
    volatile float zero = 0.0f; /* (kept: b + 0 is not b for b = -0.0) */
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 9; c++) {
            float k = c >= 3 && c < 6 ? b[r * 3 + c - 3] : zero;
            float q = c < 3 ? a[r * 3 + c] : zero;
            float want = (k + q) * 2.0f;
            assert_memory_equal(&got[r * 9 + c], &want, sizeof want);
        }
    assert_false(signbit(got[3]));
}

static void test_split_grad_eager(void **state) {
    (void)state;
    jg_tensor *in[3], *out = NULL;
    inputs(in);
    bool cg = false;
    assert_int_equal(p_split(&cg, NULL, 3, in, &out), 1);
    float g[36];
    grad_bytes(jg_grad(in[0]), g);
    check_grad(in, g);
    /* create_graph: the same sums as ops (slice, add, slice_scatter) */
    cg = true;
    assert_int_equal(p_split(&cg, NULL, 3, in, &out), 1);
    float h[36];
    grad_bytes(out, h);
    assert_memory_equal(g, h, sizeof g);
}

/* y = x.expand(512, 512) (x [512, 1]: y's gradient, 1 MB f32, is summed
 * down to x's 2 KB), split in two halves, loss = sum(q * a) + sum(k * b).
 * The backward holds y's gradient and the halves' gradients (0.5 MB each);
 * the ordinary rule also held the second half's zero-filled 1 MB
 * slice_backward. */
static void test_split_grad_peak(void **state) {
    (void)state;
    jg_manual_seed(4);
    jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(512, 1));
    jg_set_requires_grad(x, true);
    jg_tensor *a = jg_randn(JG_F32, 2, TU_SHAPE(512, 256)),
              *b = jg_randn(JG_F32, 2, TU_SHAPE(512, 256));
    jg_tensor *y = jg_expand(x, 2, TU_SHAPE(512, 512)), *piece[2] = {0};
    assert_int_equal(jg_split(y, 1, 256, 2, piece), 2);
    jg_tensor *loss = jg_add(jg_sum(jg_mul(piece[0], a)), jg_sum(jg_mul(piece[1], b)));
    assert_non_null(loss);
    int64_t before = jg_memory_allocated(), full = 512 * 512 * 4;
    jg_reset_peak_memory_stats();
    assert_int_equal(jg_backward(loss, NULL, 0), 0);
    int64_t rise = jg_max_memory_allocated() - before;
    /* 2.0 full with the shortcut (y's gradient and both halves' gradients,
     * which the engine frees at the end), 3.0 without */
    assert_true(rise >= 2 * full);
    assert_true(rise < 2 * full + full / 2);
    /* and the gradient: row sums of [a | b], a's half added to b's */
    jg_tensor *want =
        jg_sum_dims(jg_add(jg_cat(2, (jg_tensor *const[]){jg_mul_scalar(a, 0.0), b}, 1),
                           jg_cat(2, (jg_tensor *const[]){a, jg_mul_scalar(b, 0.0)}, 1)),
                    1, (const int[]){1}, true);
    TU_SAME(jg_grad(x), want);
}

static void test_split_grad_compiled(void **state) {
    (void)state;
    static const char *const backends[] = {"interp", "c"};
    for (int b = 0; b < 2; b++) {
        jg_tensor *in[3], *out = NULL;
        inputs(in);
        bool cg = false;
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *c = jg_compile(p_split, &cg, &o);
        assert_non_null(c);
        float g[36];
        for (int call = 0; call < 2; call++) {
            jg_set_grad(in[0], NULL);
            assert_int_equal(jg_compiled_call(c, NULL, 0, 3, in, &out), 1);
            grad_bytes(jg_grad(in[0]), g);
            check_grad(in, g);
        }
        char *graph = jg_compiled_graph(c, 0);
        assert_non_null(graph);
        char *bwd = strstr(graph, "\nbackward(");
        if (bwd) /* (the graph of the program's own backward, listed after it) */
            *bwd = '\0';
        /* graph autodiff keeps the ordinary rule, a slice_backward per
         * piece, and their add is one slice_backward2 (passes/slices.c) */
        assert_int_equal(count_of(graph, "= slice_backward("), 0);
        assert_int_equal(count_of(graph, "= slice_backward2("), 1);
        free(graph);
        jg_compiled_free(c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_split_grad_eager),
        TU_TEST(test_split_grad_compiled),
        TU_TEST(test_split_grad_peak),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
