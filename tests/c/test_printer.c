/* The IR printer shows every line whole, however long (a custom call with
 * many slots, printed inside its subgraph). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_SLOTS = 48 };

static int wide_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx;
    jg_tensor *s = in[0];
    for (int i = 1; i < n; i++)
        s = jg_add(s, in[i]);
    out[0] = s;
    return 1;
}

static int wide_backward(jg_ctx *ctx, int n_out, jg_tensor *const *dout, int n_in,
                         jg_tensor **din) {
    (void)ctx, (void)n_out;
    for (int i = 0; i < n_in; i++)
        din[i] = jg_mul_scalar(dout[0], (double)(i + 1));
    return n_in;
}

static const jg_function Wide = {"Wide", wide_forward, wide_backward, NULL};

static int p_wide(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *slots[N_SLOTS], *y;
    for (int i = 0; i < N_SLOTS; i++)
        slots[i] = in[i % 2];
    if (jg_apply(&Wide, N_SLOTS, slots, NULL, 0, &y) < 0)
        return -1;
    out[0] = jg_sum(y);
    return 1;
}

static void test_long_lines_whole(void **state) {
    (void)state;
    jg_tensor *in[2] = {jg_full(JG_F32, 1, TU_SHAPE(3), 1.0), jg_full(JG_F32, 1, TU_SHAPE(3), 2.0)};
    jg_set_requires_grad(in[0], true);
    jg_set_requires_grad(in[1], true);
    jg_compiled *c = jg_compile(p_wide, NULL, NULL);
    jg_tensor *o;
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &o), 1);
    char *ir = jg_compiled_graph(c, 0);
    assert_non_null(ir);
    /* the dedup map lists all 48 slots, the subgraph header all placeholders */
    char want[512] = "slots=(";
    for (int i = 0; i < N_SLOTS; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", i ? "," : "", i % 2);
    strcat(want, ")");
    assert_non_null(strstr(ir, want));
    char *hdr = strstr(ir, "    Wide.forward(");
    if (!hdr)
        hdr = strstr(ir, "    ");
    assert_non_null(hdr);
    char last[64];
    snprintf(last, sizeof last, "in%d: f32[3])", N_SLOTS - 1);
    char *line_end = strchr(hdr, '\n');
    assert_non_null(line_end);
    *line_end = 0;
    if (!strstr(hdr, last)) {
        fprintf(stderr, "subgraph header cut: %s\n", hdr);
        fail();
    }
    free(ir);
    jg_compiled_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_long_lines_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
