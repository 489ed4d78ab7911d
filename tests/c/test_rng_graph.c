/* Random draws inside a compiled program: graph ops of the generator's state
 * (read at every call, written back after it), so compiled calls draw what
 * eager calls draw and leave the generator where eager leaves it; a program
 * traced with a generator that is freed later keeps running on the state
 * tensor it holds (no read of freed memory). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

/* x * rand(x.shape) + randn(3) + dropout(x, 0.5) */
static int p_rand(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *u = jg_rand(JG_F32, jg_ndim(in[0]), jg_shape(in[0]));
    jg_tensor *z = jg_randn(JG_F32, 1, TU_SHAPE(3));
    out[0] = jg_add(jg_add(jg_mul(in[0], u), z), jg_dropout(in[0], 0.5, true));
    return out[0] ? 1 : -1;
}

static void run_backend(const char *backend) {
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    jg_tensor *want[3], *got[3];
    jg_manual_seed(9);
    for (int i = 0; i < 3; i++) {
        jg_tensor *o[1];
        assert_int_equal(p_rand(NULL, NULL, 1, &x, o), 1);
        want[i] = jg_keep(o[0]);
    }
    jg_tensor *after = jg_keep(jg_rand(JG_F64, 1, TU_SHAPE(2))); /* the generator's next draws */
    jg_manual_seed(9);
    jg_compile_options opts = {.backend = backend, .fullgraph = true};
    jg_compiled *c = jg_compile(p_rand, NULL, &opts);
    assert_non_null(c);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, got + i), 1);
        TU_SAME(got[i], want[i]);
    }
    jg_tensor *next = jg_keep(jg_rand(JG_F64, 1, TU_SHAPE(2)));
    TU_SAME(next, after);
    jg_release(next);
    jg_release(after);
    char *g = jg_compiled_graph(c, 0);
    assert_non_null(g);
    assert_non_null(strstr(g, "rng_uniform"));
    assert_non_null(strstr(g, "rng_normal"));
    free(g);
    assert_int_equal(jg_compiled_fallbacks(c), 0);
    for (int i = 0; i < 3; i++) /* (got[]: the scope's, as call outputs are) */
        jg_release(want[i]);
    jg_compiled_free(c);
}

static void test_interp(void **state) {
    (void)state;
    run_backend("interp");
}

static void test_c(void **state) {
    (void)state;
    if (!jg_compile_backend_available("c"))
        skip();
    run_backend("c");
}

/* traced while a generator of its own was installed, called after that
 * generator was freed: it reads the state tensor it holds */
static void test_generator_freed(void **state) {
    (void)state;
    jg_generator *g = jg_generator_new(3);
    jg_generator *prev = jg_generator_use(g);
    jg_compiled *c = jg_compile(p_rand, NULL, &(jg_compile_options){.fullgraph = true});
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3)), *o[1];
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, o), 1);
    jg_generator_use(prev);
    jg_generator_free(g);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, o), 1);
    jg_compiled_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_interp),
        TU_TEST(test_c),
        TU_TEST(test_generator_freed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
