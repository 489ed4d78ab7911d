/* The surface2 ops from C: min / amax / amin and std_mean / var_mean values
 * (PyTorch 1.13's, written here), gradients against finite differences in
 * f64 (first and second order) and error messages. */
#include "testutil.h"

#include <math.h>
#include <string.h>

static const double X6[] = {0.5, -1.25, 2.0, 0.75, 3.0, -0.5};

static jg_tensor *t64(int ndim, const int64_t *shape, const double *v) {
    jg_tensor *t = tu_tensor(JG_F64, ndim, shape, v);
    jg_set_requires_grad(t, true);
    return t;
}

static void test_surface2_min_values(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F64, 2, TU_SHAPE(2, 3), X6);
    TU_CHECK(jg_min(x), 0, NULL, TU_VALS(-1.25), 0);
    jg_tensor *v, *i;
    assert_int_equal(jg_min_dim(x, -1, true, &v, &i), 0);
    TU_CHECK(v, 2, TU_SHAPE(2, 1), TU_VALS(-1.25, -0.5), 0);
    TU_CHECK(i, 2, TU_SHAPE(2, 1), TU_VALS(1, 2), 0);
    TU_CHECK(jg_amax(x, 1, (int[]){0}, false), 1, TU_SHAPE(3), TU_VALS(0.75, 3.0, 2.0), 0);
    TU_CHECK(jg_amin(x, 0, NULL, true), 2, TU_SHAPE(1, 1), TU_VALS(-1.25), 0);
    jg_tensor *n = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1.0, NAN, -2.0));
    float f;
    jg_copy_to(jg_min(n), &f, sizeof f);
    assert_true(isnan(f));
    jg_copy_to(jg_amin(n, 0, NULL, false), &f, sizeof f);
    assert_true(isnan(f));
    /* std_mean: values from torch.std_mean(x, 1, correction=0) */
    jg_tensor *s, *m;
    assert_int_equal(jg_std_mean(x, 1, (int[]){1}, 0.0, false, &s, &m), 0);
    TU_CHECK(s, 1, TU_SHAPE(2), TU_VALS(1.3281147875424357, 1.4481789330818973), 1e-14);
    TU_CHECK(m, 1, TU_SHAPE(2), TU_VALS(0.41666666666666663, 1.0833333333333335), 1e-15);
}

static jg_tensor *gc_sum(jg_tensor *t) {
    return t ? jg_sum(jg_mul(t, t)) : NULL;
}
static jg_tensor *f_min(jg_tensor *x) {
    return jg_mul(jg_min(x), jg_sum(x));
}
static jg_tensor *f_min_dim(jg_tensor *x) {
    jg_tensor *v, *i;
    return jg_min_dim(x, 1, false, &v, &i) < 0 ? NULL : jg_mul(v, v);
}
static jg_tensor *f_amax(jg_tensor *x) {
    return jg_amax(x, 1, (int[]){0}, true);
}
static jg_tensor *f_std_mean(jg_tensor *x) {
    jg_tensor *s, *m;
    if (jg_std_mean(x, 1, (int[]){1}, 1.0, true, &s, &m) < 0)
        return NULL;
    return jg_mul(jg_add(s, jg_mul(m, m)), x);
}
static jg_tensor *f_var_mean(jg_tensor *x) {
    jg_tensor *v, *m;
    if (jg_var_mean(x, 0, NULL, 0.0, false, &v, &m) < 0)
        return NULL;
    return jg_mul(v, m);
}
typedef jg_tensor *(*unary_fn)(jg_tensor *);
static jg_tensor *gc_first(void *user, int n, jg_tensor *const *in) {
    (void)n;
    return gc_sum(((unary_fn)user)(in[0]));
}
static jg_tensor *gc_second(void *user, int n, jg_tensor *const *in) {
    (void)n;
    jg_tensor *y = gc_first(user, 1, in);
    jg_tensor *g[1];
    jg_tensor *x = in[0];
    if (!y || jg_autograd_grad(1, &y, NULL, 1, &x, JG_CREATE_GRAPH, g) < 0)
        return NULL;
    return jg_sum(jg_mul(g[0], g[0]));
}

static void test_surface2_gradcheck(void **state) {
    (void)state;
    struct {
        const char *name;
        unary_fn f;
    } fs[] = {{"min", f_min},
              {"min_dim", f_min_dim},
              {"amax", f_amax},
              {"std_mean", f_std_mean},
              {"var_mean", f_var_mean}};
    for (size_t k = 0; k < sizeof fs / sizeof *fs; k++) {
        jg_tensor *x = t64(2, TU_SHAPE(2, 3), X6);
        if (jg_gradcheck(gc_first, (void *)fs[k].f, 1, &x, 1e-6, 1e-6, 1e-5) < 0)
            fail_msg("%s: %s", fs[k].name, jg_last_error());
        if (jg_gradcheck(gc_second, (void *)fs[k].f, 1, &x, 1e-6, 1e-5, 1e-4) < 0)
            fail_msg("%s (second order): %s", fs[k].name, jg_last_error());
    }
}

/* ties: min() shares evenly, amin() per reduced slice */
static void test_surface2_min_ties(void **state) {
    (void)state;
    jg_tensor *x = t64(2, TU_SHAPE(2, 2), TU_VALS(1.0, 1.0, 0.0, 2.0));
    assert_int_equal(jg_backward(jg_min(jg_mul_scalar(x, 1.0)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 2, TU_SHAPE(2, 2), TU_VALS(0, 0, 1, 0), 0);
    jg_tensor *y = t64(2, TU_SHAPE(2, 2), TU_VALS(1.0, 1.0, 0.0, 2.0));
    assert_int_equal(jg_backward(jg_sum(jg_amin(y, 1, (int[]){1}, false)), NULL, 0), 0);
    TU_CHECK(jg_grad(y), 2, TU_SHAPE(2, 2), TU_VALS(0.5, 0.5, 1, 0), 0);
}

static void test_surface2_errors(void **state) {
    (void)state;
    jg_tensor *e = tu_tensor(JG_F32, 2, TU_SHAPE(0, 3), NULL);
    assert_null(jg_min(e));
    TU_ERROR("min(): Expected reduction dim to be specified for input.numel() == 0.");
    jg_tensor *v, *i;
    assert_int_equal(jg_min_dim(e, 0, false, &v, &i), -1);
    TU_ERROR("min(): Expected reduction dim 0 to have non-zero size.");
    assert_null(jg_amax(e, 2, (int[]){1, -1}, false));
    TU_ERROR("dim 1 appears multiple times in the list of dims");
    jg_tensor *n = tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(1, 2));
    assert_int_equal(jg_std_mean(n, 0, NULL, 1.0, false, &v, &i), -1);
    TU_ERROR("std_mean only support floating point and complex dtypes");
}

/* clamp_ on a tensor with history moves it onto one clamp node; on a leaf
 * that requires grad it is refused with the leaf intact */
static void test_surface2_clamp_inplace(void **state) {
    (void)state;
    jg_tensor *x = t64(1, TU_SHAPE(4), TU_VALS(-2.0, 0.25, 0.5, 3.0));
    jg_tensor *y = jg_mul_scalar(x, 1.0);
    assert_int_equal(jg_clamp_(y, true, 0.0, true, 1.0), 0);
    TU_CHECK(y, 1, TU_SHAPE(4), TU_VALS(0.0, 0.25, 0.5, 1.0), 0);
    assert_int_equal(jg_clamp_min_(y, 0.3), 0);
    assert_int_equal(jg_clamp_max_(y, 0.9), 0);
    TU_CHECK(y, 1, TU_SHAPE(4), TU_VALS(0.3, 0.3, 0.5, 0.9), 0);
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(4), TU_VALS(0, 0, 1, 0), 0);
    assert_int_equal(jg_clamp_(x, true, 0.0, false, 0.0), -1);
    TU_ERROR("a leaf Variable that requires grad is being used in an in-place operation.");
    assert_int_equal(jg_clamp_(y, false, 0.0, false, 0.0), -1);
    TU_ERROR("torch.clamp: At least one of 'min' or 'max' must not be None");
    TU_CHECK(x, 1, TU_SHAPE(4), TU_VALS(-2.0, 0.25, 0.5, 3.0), 0);
}

/* values from torch.nn.functional.cross_entropy with probability targets */
static void test_surface2_cross_entropy_probs(void **state) {
    (void)state;
    jg_tensor *x = t64(2, TU_SHAPE(2, 3), TU_VALS(0.5, -1.25, 2.0, 3.0, -0.75, 1.5));
    jg_tensor *p = tu_tensor(JG_F64, 2, TU_SHAPE(2, 3), TU_VALS(0.1, 0.2, 0.7, 0.0, 1.0, 0.0));
    jg_tensor *w = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(0.5, 2.0, 1.0));
    jg_loss_options o = {JG_REDUCTION_MEAN, -100, w, 0.2};
    TU_CHECK(jg_cross_entropy_probs(x, p, &o), 0, NULL, TU_VALS(4.427898761408933), 1e-14);
    jg_loss_options n = {JG_REDUCTION_NONE, -100, NULL, 0.0};
    TU_CHECK(jg_cross_entropy_probs(x, p, &n), 1, TU_SHAPE(2),
             TU_VALS(1.0326219831020327, 3.9704582739855576), 1e-14);
    n.ignore_index = 0;
    assert_null(jg_cross_entropy_probs(x, p, &n));
    TU_ERROR("ignore_index is not supported for floating point target");
    n.ignore_index = -100;
    jg_tensor *i = tu_tensor(JG_I64, 2, TU_SHAPE(2, 3), TU_VALS(0, 0, 0, 0, 0, 0));
    assert_null(jg_cross_entropy_probs(x, i, &n));
    TU_ERROR("Expected floating point type for target with class probabilities, got Long");
}

/* a generator's stream depends on its seed only; the global one is left as
 * it was (and the installed one restored) */
static void test_surface2_generator(void **state) {
    (void)state;
    jg_manual_seed(9);
    double want[4], got[4], g1[4], g2[4];
    jg_copy_to(jg_rand(JG_F64, 1, TU_SHAPE(4)), want, sizeof want);
    jg_manual_seed(9);
    jg_generator *g = jg_generator_new(9), *h = jg_generator_new(9);
    jg_copy_to(jg_rand(JG_F64, 1, TU_SHAPE(2)), got, sizeof(double) * 2);
    assert_null(jg_generator_use(g));
    jg_copy_to(jg_rand(JG_F64, 1, TU_SHAPE(4)), g1, sizeof g1);
    assert_ptr_equal(jg_generator_use(h), g);
    jg_copy_to(jg_rand(JG_F64, 1, TU_SHAPE(4)), g2, sizeof g2);
    assert_ptr_equal(jg_generator_use(NULL), h);
    jg_copy_to(jg_rand(JG_F64, 1, TU_SHAPE(2)), got + 2, sizeof(double) * 2);
    assert_memory_equal(got, want, sizeof want);
    assert_memory_equal(g1, want, sizeof want); /* seed 9 either way */
    assert_memory_equal(g2, want, sizeof want);
    uint64_t st = jg_generator_get_state(g);
    jg_generator_use(g);
    jg_copy_to(jg_rand(JG_F64, 1, TU_SHAPE(4)), g1, sizeof g1);
    jg_generator_set_state(g, st);
    jg_copy_to(jg_rand(JG_F64, 1, TU_SHAPE(4)), g2, sizeof g2);
    assert_memory_equal(g1, g2, sizeof g1);
    assert_int_equal(jg_generator_initial_seed(g), 9);
    jg_generator_free(g); /* the installed one: the global one is back */
    assert_null(jg_generator_use(NULL));
    jg_generator_free(h);
}

/* the global generator's seed and state read and written back replay the
 * same numbers, whichever generator is installed meanwhile */
static void test_surface2_global_rng_state(void **state) {
    (void)state;
    jg_manual_seed(21);
    uint64_t init, st;
    jg_global_rng_get(&init, &st);
    assert_int_equal(init, 21);
    double a[3], b[3];
    jg_copy_to(jg_rand(JG_F64, 1, TU_SHAPE(3)), a, sizeof a);
    jg_generator *g = jg_generator_new(5);
    jg_generator_use(g);
    jg_global_rng_set(init, st); /* the global one, not g */
    jg_generator_use(NULL);
    jg_generator_free(g);
    jg_manual_seed(1);
    jg_global_rng_set(init, st);
    jg_copy_to(jg_rand(JG_F64, 1, TU_SHAPE(3)), b, sizeof b);
    assert_memory_equal(a, b, sizeof a);
    uint64_t init2, st2;
    jg_global_rng_get(&init2, &st2);
    assert_int_equal(init2, 21);
    assert_true(st2 != st);
}

/* views of the pieces, named as PyTorch's nodes; the gradient reaches the
 * input through them */
static void test_surface2_split_unbind(void **state) {
    (void)state;
    jg_tensor *x = t64(2, TU_SHAPE(2, 3), X6), *out[4];
    assert_int_equal(jg_split(x, 1, 2, 4, out), 2);
    TU_CHECK(out[1], 2, TU_SHAPE(2, 1), TU_VALS(2.0, -0.5), 0);
    assert_string_equal(jg_grad_fn_name(out[0]), "SplitBackward0");
    assert_int_equal(jg_split_with_sizes(x, -1, 2, TU_SHAPE(1, 2), out), 2);
    TU_CHECK(out[1], 2, TU_SHAPE(2, 2), TU_VALS(-1.25, 2.0, 3.0, -0.5), 0);
    assert_string_equal(jg_grad_fn_name(out[1]), "SplitWithSizesBackward0");
    assert_int_equal(jg_unbind(x, 0, 4, out), 2);
    TU_CHECK(out[1], 1, TU_SHAPE(3), TU_VALS(0.75, 3.0, -0.5), 0);
    assert_string_equal(jg_grad_fn_name(out[1]), "UnbindBackward0");
    assert_int_equal(jg_backward(jg_sum(jg_mul_scalar(out[1], 2.0)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 2, TU_SHAPE(2, 3), TU_VALS(0, 0, 0, 2, 2, 2), 0);
    assert_int_equal(jg_split_with_sizes(x, 1, 2, TU_SHAPE(1, 1), out), -1);
    TU_ERROR("split_with_sizes expects split_sizes to sum exactly to 3 (input tensor's size at "
             "dimension 1), but got split_sizes=[1, 1]");
    assert_int_equal(jg_split(x, 1, 0, 4, out), -1);
    TU_ERROR("split_size can only be 0 if dimension size is 0, but got dimension size of 3");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_surface2_min_values),       TU_TEST(test_surface2_gradcheck),
        TU_TEST(test_surface2_min_ties),         TU_TEST(test_surface2_errors),
        TU_TEST(test_surface2_clamp_inplace),    TU_TEST(test_surface2_cross_entropy_probs),
        TU_TEST(test_surface2_generator),        TU_TEST(test_surface2_split_unbind),
        TU_TEST(test_surface2_global_rng_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
