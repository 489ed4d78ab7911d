/* Tensors a compiled program captures from its scope (here: through the
 * user pointer) instead of receiving them as inputs: ops on them are traced,
 * they are graph inputs read at every call, guarded, and their gradients
 * flow exactly as in eager mode on both backends. */
#include "testutil.h"
#include "testutil_fns.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    jg_tensor *k, *w; /* captured */
} model;

/* sum(tanh(k) * x) + sum(w * w): every op on k and w has only captured
 * operands until the product with x */
static int p_model(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    model *m = user;
    jg_tensor *a = jg_sum(jg_mul(jg_tanh(m->k), in[0]));
    jg_tensor *b = jg_sum(jg_mul(m->w, m->w));
    out[0] = jg_add(a, b);
    return out[0] ? 1 : -1;
}

/* the captured tensor, transformed, is the only output */
static int p_only_captured(void *user, const void *args, int n, jg_tensor *const *in,
                           jg_tensor **out) {
    (void)args, (void)n, (void)in;
    model *m = user;
    out[0] = jg_sum(jg_exp(jg_tanh(m->k)));
    return out[0] ? 1 : -1;
}

/* a custom function applied to captured tensors only, times the input */
static int p_custom(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    model *m = user;
    tf_mul_cfg cfg = {0};
    jg_tensor *p = tf_apply1(&tf_mul, 2, (jg_tensor *[]){m->k, m->w}, &cfg, sizeof cfg);
    out[0] = p ? jg_sum(jg_mul(p, in[0])) : NULL;
    return out[0] ? 1 : -1;
}

/* a tensor made by the program: a constant of the graph */
static int p_created(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *c = jg_full(JG_F32, 1, (const int64_t[]){3}, 2.0);
    out[0] = jg_sum(jg_mul(jg_exp(c), in[0]));
    return out[0] ? 1 : -1;
}

/* writes into a tensor it made after using it */
static int p_created_modified(void *user, const void *args, int n, jg_tensor *const *in,
                              jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *z = jg_full(JG_F32, 1, (const int64_t[]){3}, 2.0);
    jg_tensor *a = jg_add(in[0], z);
    if (jg_mul_scalar_(z, 3.0) < 0)
        return -1;
    out[0] = jg_sum(jg_mul(a, jg_add(in[0], z)));
    return out[0] ? 1 : -1;
}

/* reads a captured tensor's value */
static int p_item(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    model *m = user;
    double s = jg_item(m->w);
    out[0] = jg_sum(jg_mul_scalar(in[0], s));
    return out[0] ? 1 : -1;
}

/* writes into a captured tensor */
static int p_inplace(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    model *m = user;
    if (jg_mul_scalar_(m->k, 2.0) < 0)
        return -1;
    out[0] = jg_sum(jg_mul(m->k, in[0]));
    return out[0] ? 1 : -1;
}

/* draws random numbers */
static int p_random(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sum(jg_mul(jg_randn(JG_F32, 1, (const int64_t[]){3}), in[0]));
    return out[0] ? 1 : -1;
}

/* a compiled program called on a captured tensor inside another one */
static jg_compiled *inner;
static int p_outer(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    model *m = user;
    jg_tensor *o;
    if (jg_compiled_call(inner, NULL, 0, 1, &m->k, &o) != 1)
        return -1;
    out[0] = jg_sum(jg_mul(o, in[0]));
    return out[0] ? 1 : -1;
}

/* a custom function whose callbacks read a static tensor (not a slot):
 * tanh(x) * exp(scale), backward g * (1 - tanh(x)^2) * exp(scale) */
static jg_tensor *scale;
static int scaled_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_ctx_save_for_backward(ctx, 1, in);
    out[0] = jg_mul(jg_tanh(in[0]), jg_exp(scale));
    return out[0] ? 1 : -1;
}
static int scaled_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out, (void)n_in;
    jg_tensor *t = jg_tanh(jg_ctx_saved(ctx, 0));
    din[0] =
        jg_mul(jg_mul(g[0], jg_add_scalar(jg_mul_scalar(jg_mul(t, t), -1.0), 1.0)), jg_exp(scale));
    return din[0] ? 1 : -1;
}
static const jg_function scaled = {"Scaled", scaled_forward, scaled_backward, NULL};
static int p_scaled(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *x2 = jg_mul_scalar(in[0], 2.0);
    jg_tensor *y = x2 ? tf_apply1(&scaled, 1, &x2, NULL, 0) : NULL;
    out[0] = y ? jg_sum(y) : NULL;
    return out[0] ? 1 : -1;
}

/* ------------------------------------------------------------ helpers */

static jg_tensor *randn(int64_t n, bool rg) {
    jg_tensor *t = jg_randn(JG_F32, 1, (const int64_t[]){n});
    jg_set_requires_grad(t, rg);
    return t;
}

static jg_tensor *grad_copy(jg_tensor *t) {
    jg_tensor *g = jg_grad(t);
    return g ? jg_clone(g) : NULL;
}

static void same_grad(jg_tensor *t, jg_tensor *want) {
    if (!want)
        assert_null(jg_grad(t));
    else
        TU_SAME(jg_grad(t), want);
}

/* One call of prog on x, eagerly and through c, then backward: outputs and
 * the gradients of x, m->k and m->w must be bitwise equal (None included). */
static void check_call(jg_compiled *c, jg_program_fn prog, model *m, jg_tensor *x) {
    jg_tensor *t[3] = {x, m->k, m->w}, *want[3], *eo, *co;
    for (int i = 0; i < 3; i++)
        jg_clear_grad(t[i]);
    assert_int_equal(prog(m, NULL, 1, &x, &eo), 1);
    if (jg_requires_grad(eo))
        assert_int_equal(jg_backward(eo, NULL, 0), 0);
    for (int i = 0; i < 3; i++)
        want[i] = grad_copy(t[i]);
    for (int i = 0; i < 3; i++)
        jg_clear_grad(t[i]);
    if (jg_compiled_call(c, NULL, 0, 1, &x, &co) != 1)
        fail_msg("%s", jg_last_error());
    TU_SAME(co, eo);
    assert_int_equal(jg_requires_grad(co), jg_requires_grad(eo));
    if (jg_requires_grad(co) && jg_backward(co, NULL, 0) < 0)
        fail_msg("%s", jg_last_error());
    for (int i = 0; i < 3; i++)
        same_grad(t[i], want[i]);
}

/* an optimizer step on a captured parameter: p -= 0.1 * p.grad, no history */
static void sgd_step(jg_tensor *p) {
    bool prev = jg_set_grad_enabled(false);
    jg_tensor *g = jg_grad(p);
    assert_non_null(g);
    assert_int_equal(jg_sub_(p, jg_mul_scalar(g, 0.1)), 0);
    jg_set_grad_enabled(prev);
}

static const char *const backends[] = {"interp", "c"};

static jg_compiled *compile_on(jg_program_fn prog, model *m, int b) {
    if (!jg_compile_backend_available(backends[b]))
        return NULL;
    jg_compile_options o = {.backend = backends[b]};
    jg_compiled *c = jg_compile(prog, m, &o);
    assert_non_null(c);
    return c;
}

/* ------------------------------------------------------------ tests */

/* An in-place update of a captured tensor between calls is seen (it was
 * baked into the graph as tanh(k) before). */
static void test_captured_inplace_update_seen(void **state) {
    (void)state;
    jg_manual_seed(1);
    model m = {randn(4, false), randn(4, false)};
    jg_tensor *x = randn(4, true);
    for (int b = 0; b < 2; b++) {
        jg_compiled *c = compile_on(p_model, &m, b);
        if (!c)
            continue;
        check_call(c, p_model, &m, x);
        assert_int_equal(jg_mul_scalar_(m.k, 3.0), 0);
        assert_int_equal(jg_add_(m.w, m.w), 0);
        check_call(c, p_model, &m, x);
        assert_int_equal(jg_compiled_entries(c), 1);
        jg_compiled_free(c);
    }
}

/* Captured parameters that require grad: repeated calls and backwards, with
 * optimizer steps in between, give eager's gradients bitwise (the second
 * backward failed with "second time" before). */
static void test_captured_param_grad_repeated(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        jg_manual_seed(2);
        model m = {randn(5, true), randn(5, true)};
        jg_tensor *x = randn(5, true);
        jg_compiled *c = compile_on(p_model, &m, b);
        if (!c)
            continue;
        for (int step = 0; step < 3; step++) {
            check_call(c, p_model, &m, x);
            sgd_step(m.k);
            sgd_step(m.w);
        }
        assert_int_equal(jg_compiled_entries(c), 1);
        char *s = jg_compiled_graph(c, 0);
        assert_non_null(strstr(s, "lifted0: f32[5]"));
        assert_non_null(strstr(s, "lifted1: f32[5]"));
        assert_null(strstr(s, "constant"));
        free(s);
        jg_compiled_free(c);
    }
}

/* A program whose ops all have captured operands only. */
static void test_captured_only_operands(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        jg_manual_seed(3);
        model m = {randn(3, true), randn(3, false)};
        jg_tensor *x = randn(3, false);
        jg_compiled *c = compile_on(p_only_captured, &m, b);
        if (!c)
            continue;
        check_call(c, p_only_captured, &m, x);
        sgd_step(m.k);
        check_call(c, p_only_captured, &m, x);
        assert_int_equal(jg_compiled_entries(c), 1);
        jg_compiled_free(c);
    }
}

/* requires_grad of a captured tensor flips: a guard miss each way, and its
 * .grad is filled (it stayed NULL before). */
static void test_captured_requires_grad_flip(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        jg_manual_seed(4);
        model m = {randn(4, false), randn(4, false)};
        jg_tensor *x = randn(4, true);
        jg_compiled *c = compile_on(p_model, &m, b);
        if (!c)
            continue;
        check_call(c, p_model, &m, x);
        jg_set_requires_grad(m.k, true);
        check_call(c, p_model, &m, x);
        assert_non_null(jg_grad(m.k));
        assert_int_equal(jg_compiled_entries(c), 2);
        jg_set_requires_grad(m.k, false);
        check_call(c, p_model, &m, x);
        assert_null(jg_grad(m.k));
        assert_int_equal(jg_compiled_entries(c), 2); /* entry 0 again */
        jg_compiled_free(c);
    }
}

/* A custom function applied to captured tensors only is traced as a node. */
static void test_captured_custom_function(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        jg_manual_seed(5);
        model m = {randn(3, true), randn(3, true)};
        jg_tensor *x = randn(3, true);
        jg_compiled *c = compile_on(p_custom, &m, b);
        if (!c)
            continue;
        for (int step = 0; step < 2; step++) {
            check_call(c, p_custom, &m, x);
            sgd_step(m.k);
        }
        assert_int_equal(jg_compiled_entries(c), 1);
        char *s = jg_compiled_graph(c, 0);
        assert_non_null(strstr(s, "custom"));
        free(s);
        jg_compiled_free(c);
    }
}

/* The same tensor captured and passed as the input is one graph value; a
 * call passing another tensor there retraces. */
static void test_captured_also_input(void **state) {
    (void)state;
    jg_manual_seed(6);
    model m = {randn(4, true), randn(4, true)};
    jg_tensor *x = randn(4, true);
    jg_compiled *c = compile_on(p_model, &m, 0);
    check_call(c, p_model, &m, m.k); /* k is input 0 and captured */
    char *s = jg_compiled_graph(c, 0);
    assert_null(strstr(s, "lifted1"));
    free(s);
    check_call(c, p_model, &m, x);
    assert_int_equal(jg_compiled_entries(c), 2);
    check_call(c, p_model, &m, m.w); /* w, captured separately in entry 1 */
    assert_int_equal(jg_compiled_entries(c), 3);
    check_call(c, p_model, &m, m.k);
    check_call(c, p_model, &m, x);
    assert_int_equal(jg_compiled_entries(c), 3);
    jg_compiled_free(c);
}

static void flip_run(void) {
    model m = {randn(4, false), randn(4, false)};
    jg_tensor *x = randn(4, false), *o;
    setenv("JITGRAD_LOG", "recompiles", 1);
    jg_compiled *c = jg_compile(p_model, &m, NULL);
    unsetenv("JITGRAD_LOG");
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
    jg_set_requires_grad(m.k, true);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
    jg_compiled_free(c);
    setenv("JITGRAD_LOG", "recompiles", 1);
    c = jg_compile(p_model, &m, NULL);
    unsetenv("JITGRAD_LOG");
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &m.w, &o), 1);
    jg_compiled_free(c);
    setenv("JITGRAD_LOG", "recompiles", 1);
    c = jg_compile(p_model, &m, NULL);
    unsetenv("JITGRAD_LOG");
    jg_tensor *view = jg_reshape(m.w, 1, (const int64_t[]){4});
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &view, &o), 1);
    jg_compiled_free(c);
}

/* The recompile line names the captured tensor and the guard. */
static void test_captured_recompile_log(void **state) {
    (void)state;
    char *s = tu_capture_stderr(flip_run);
    assert_non_null(strstr(s, "jitgrad: recompiling (entry 1): captured tensor lifted0 f32[4] "
                              "requires_grad true != false\n"));
    assert_non_null(strstr(s, "jitgrad: recompiling (entry 1): captured tensor lifted1 f32[4] is "
                              "now also input 0\n"));
    assert_non_null(strstr(s, "jitgrad: recompiling (entry 1): captured tensor lifted1 f32[4] "
                              "storage aliasing: shares with input 0 != its own storage\n"));
    free(s);
}

/* A tensor the program makes stays a constant of the graph. */
static void test_captured_created_is_constant(void **state) {
    (void)state;
    model m = {0};
    jg_tensor *x = randn(3, true);
    jg_compiled *c = compile_on(p_created, &m, 0);
    jg_tensor *t[1] = {x}, *eo, *co;
    assert_int_equal(p_created(&m, NULL, 1, t, &eo), 1);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, t, &co), 1);
    TU_SAME(co, eo);
    char *s = jg_compiled_graph(c, 0);
    assert_non_null(strstr(s, "c0 : f32[3] = constant(")); /* exp(2), computed once */
    assert_non_null(strstr(s, "mul(c0, x0)"));
    assert_null(strstr(s, "exp("));
    assert_null(strstr(s, "lifted"));
    free(s);
    jg_compiled_free(c);
}

/* A tensor the program made, used, then changed in place, then used again:
 * each use is a constant with the value it had then (both read its final
 * value before). */
static void test_captured_created_modified_after_use(void **state) {
    (void)state;
    model m = {0};
    jg_tensor *x = randn(3, true);
    for (int b = 0; b < 2; b++) {
        jg_compiled *c = compile_on(p_created_modified, &m, b);
        if (!c)
            continue;
        check_call(c, p_created_modified, &m, x);
        check_call(c, p_created_modified, &m, x);
        jg_compiled_free(c);
    }
}

/* Reading a captured tensor's values is a graph break (the value is not
 * baked into the graph); with fullgraph, an error naming the read. */
static void test_captured_item_breaks(void **state) {
    (void)state;
    model m = {randn(3, false), jg_scalar(JG_F32, 2.0)};
    jg_tensor *x = randn(3, true), *o;
    jg_compile_options fo = {.fullgraph = true};
    jg_compiled *c = jg_compile(p_item, &m, &fo);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), -1);
    TU_ERROR("the program cannot be captured in one graph: jg_item() read the values of captured "
             "tensor f32[]; they are read again at every call");
    jg_compiled_free(c);
}

/* Writing into a captured tensor while traced is a graph break (it would
 * happen once, at trace time): the eager run writes, once per call. */
static void test_captured_inplace_written_back(void **state) {
    (void)state;
    model m = {randn(3, false), NULL};
    jg_tensor *x = randn(3, false), *o = NULL, *e = NULL;
    jg_tensor *k0 = jg_clone(m.k);
    uint64_t v0 = jg_version(m.k);
    jg_compile_options fo = {.fullgraph = true};
    jg_compiled *c = jg_compile(p_inplace, &m, &fo);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
        jg_tensor *k1 = jg_clone(m.k);
        assert_int_equal(jg_copy_(m.k, k0), 0);
        assert_int_equal(p_inplace(&m, NULL, 1, &x, &e), 1);
        TU_SAME(o, e);
        TU_SAME(m.k, k1);
        k0 = jg_clone(m.k);
    }
    assert_int_equal(jg_version(m.k), v0 + 6); /* 2 calls, 2 copies, 2 eager runs */
    assert_int_equal(jg_compiled_entries(c), 1);
    assert_int_equal(jg_compiled_fallbacks(c), 0);
    jg_compiled_free(c);
    /* a write eager would record history for stays a graph break */
    jg_set_requires_grad(m.k, true);
    c = jg_compile(p_inplace, &m, &fo);
    k0 = jg_clone(m.k);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), -1);
    TU_ERROR("the program cannot be captured in one graph: jg_mul_scalar_() on a tensor captured "
             "from outside the program");
    TU_SAME(m.k, k0);
    jg_compiled_free(c);
}

/* Random numbers drawn by the program are a graph break (a constant before:
 * the same "random" values at every call); the eager run draws what eager
 * mode draws. */
/* random draws are graph ops of the generator's state: compiled calls draw
 * what eager calls draw, with no eager fallback, fullgraph included */
static void test_captured_random_is_traced(void **state) {
    (void)state;
    jg_tensor *x = randn(3, true), *e[2], *o;
    jg_manual_seed(7);
    for (int i = 0; i < 2; i++)
        assert_int_equal(p_random(NULL, NULL, 1, &x, &e[i]), 1);
    jg_manual_seed(7);
    jg_compile_options fo = {.fullgraph = true};
    jg_compiled *c = jg_compile(p_random, NULL, &fo);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
        TU_SAME(o, e[i]);
    }
    assert_int_equal(jg_compiled_fallbacks(c), 0);
    jg_compiled_free(c);
}

/* A compiled program called inside another one's trace on a captured tensor
 * is inlined there (it ran once at trace time before). */
static void test_captured_nested_compiled(void **state) {
    (void)state;
    jg_manual_seed(8);
    model m = {randn(3, true), NULL};
    m.w = m.k;
    jg_tensor *x = randn(3, true);
    inner = jg_compile(p_only_captured, &m, NULL);
    jg_compiled *c = jg_compile(p_outer, &m, NULL);
    for (int step = 0; step < 2; step++) {
        check_call(c, p_outer, &m, x);
        sgd_step(m.k);
    }
    assert_int_equal(jg_compiled_entries(c), 1);
    jg_compiled_free(c);
    jg_compiled_free(inner);
}

/* A custom function's forward and backward reading a tensor from outside:
 * traced on it (it was computed once at trace time), the tensor read at
 * every call, so its in-place updates are seen by both. */
static void test_captured_inside_custom_callbacks(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        jg_manual_seed(9);
        model m = {0};
        scale = randn(3, false);
        jg_tensor *x = randn(3, true);
        jg_compiled *c = compile_on(p_scaled, &m, b);
        if (!c)
            continue;
        check_call(c, p_scaled, &m, x);
        assert_int_equal(jg_add_(scale, scale), 0);
        check_call(c, p_scaled, &m, x);
        assert_int_equal(jg_compiled_entries(c), 1);
        jg_compiled_free(c);
    }
}

/* w used first under no_grad (a running statistic updated from it), then
 * with grad on: its value in the graph must still require grad */
static int p_no_grad_first(void *user, const void *args, int n, jg_tensor *const *in,
                           jg_tensor **out) {
    (void)args, (void)n;
    model *m = user;
    bool gm = jg_set_grad_enabled(false);
    int rc = jg_add_(m->k, m->w);
    jg_set_grad_enabled(gm);
    out[0] = rc < 0 ? NULL : jg_sum(jg_mul(jg_tanh(m->w), in[0]));
    return out[0] ? 1 : -1;
}

/* Regression: a captured tensor lifted at a use under no_grad was an input
 * without requires_grad, so a later use with grad on gave it no gradient. */
static void test_captured_first_used_under_no_grad(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        model m = {jg_full(JG_F32, 1, TU_SHAPE(3), 0.0), jg_randn(JG_F32, 1, TU_SHAPE(3))};
        jg_set_requires_grad(m.w, true);
        jg_tensor *x = jg_randn(JG_F32, 1, TU_SHAPE(3)), *o;
        assert_int_equal(p_no_grad_first(&m, NULL, 1, &x, &o), 1);
        assert_int_equal(jg_backward(o, NULL, 0), 0);
        jg_tensor *eg = jg_clone(jg_grad(m.w));
        jg_clear_grad(m.w);
        jg_compiled *c =
            jg_compile(p_no_grad_first, &m,
                       &(jg_compile_options){.backend = b ? "c" : "interp", .fullgraph = true});
        for (int call = 0; call < 2; call++) {
            if (jg_compiled_call(c, NULL, 0, 1, &x, &o) != 1)
                fail_msg("%s", jg_last_error());
            assert_int_equal(jg_backward(o, NULL, 0), 0);
            TU_SAME(jg_grad(m.w), eg);
            jg_clear_grad(m.w);
        }
        jg_compiled_free(c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_captured_inplace_update_seen),
        TU_TEST(test_captured_param_grad_repeated),
        TU_TEST(test_captured_only_operands),
        TU_TEST(test_captured_requires_grad_flip),
        TU_TEST(test_captured_custom_function),
        TU_TEST(test_captured_also_input),
        TU_TEST(test_captured_recompile_log),
        TU_TEST(test_captured_created_is_constant),
        TU_TEST(test_captured_item_breaks),
        TU_TEST(test_captured_inplace_written_back),
        TU_TEST(test_captured_random_is_traced),
        TU_TEST(test_captured_nested_compiled),
        TU_TEST(test_captured_inside_custom_callbacks),
        TU_TEST(test_captured_created_modified_after_use),
        TU_TEST(test_captured_first_used_under_no_grad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
