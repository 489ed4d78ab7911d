/* Dynamic sizes through custom functions: the seed program (MyFn with k in
 * two slots, the backward returning different per-slot gradients) compiled
 * with automatic dynamic and with JG_DYNAMIC_ON runs batches 4, 7, 3, 9, 16
 * from one graph after the second size, outputs and both .grad bitwise
 * eager's at every size, on both backends, and on the c backend from one
 * object per graph; a backward that reads a size its forward kept in the
 * ctx is fitted like any other integer (a wrong size would fail or give
 * other gradients); an opaque call (its forward reads values) keeps only
 * its own dims static, and the log says why when the batch reaches it; a
 * whole training step (backward and SGD inside the program) through MyFn
 * trains like the eager loop from two traces; a call whose result is
 * dropped is fitted from the ctx its entry keeps. */
#include "testutil.h"
#include "testutil_fns.h"
#include "backend/cache.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *backends[] = {"interp", "c"};
static const int64_t batches[] = {4, 7, 3, 9, 16};
enum { N_BATCH = 5 };

/* the seed program, reduced to a loss: MyFn(q, k, k, mask).sum() */
static int p_seed(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)n;
    jg_tensor *y = tf_apply1(&tf_myfn, 3, (jg_tensor *[]){in[0], in[1], in[1]}, args, sizeof(bool));
    return y && (out[0] = jg_sum(y)) ? 1 : -1;
}

/* q, k of shape [b, 5] (requires grad); one call eagerly, one compiled,
 * outputs and .grad compared bit for bit. */
static void seed_step(jg_compiled *c, bool mask, int64_t b) {
    jg_scope_push();
    jg_tensor *q = jg_randn(JG_F32, 2, TU_SHAPE(b, 5)), *k = jg_randn(JG_F32, 2, TU_SHAPE(b, 5));
    jg_set_requires_grad(q, true);
    jg_set_requires_grad(k, true);
    jg_tensor *in[2] = {q, k}, *oe[1] = {0}, *oc[1] = {0};
    assert_int_equal(p_seed(NULL, &mask, 2, in, oe), 1);
    assert_int_equal(jg_backward(oe[0], NULL, 0), 0);
    jg_tensor *gq = jg_retain(jg_grad(q)), *gk = jg_retain(jg_grad(k));
    assert_non_null(gk); /* k.grad = dk + dv: neither slot dropped */
    jg_clear_grad(q), jg_clear_grad(k);
    assert_int_equal(jg_compiled_call(c, &mask, sizeof mask, 2, in, oc), 1);
    TU_SAME(oe[0], oc[0]);
    assert_int_equal(jg_backward(oc[0], NULL, 0), 0);
    TU_SAME(gq, jg_grad(q));
    TU_SAME(gk, jg_grad(k));
    jg_release(gq), jg_release(gk);
    jg_scope_pop();
}

static void test_dynamic_custom_seed(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        for (int mode = JG_DYNAMIC_AUTO; mode <= JG_DYNAMIC_ON; mode++)
            for (int m = 0; m < 2; m++) {
                jg_compiled *c =
                    jg_compile(p_seed, NULL, &(jg_compile_options){.backend = backends[b]});
                assert_non_null(c);
                assert_int_equal(jg_compiled_set_dynamic(c, mode), 0);
                jg_manual_seed(7);
                for (int i = 0; i < N_BATCH; i++) {
                    seed_step(c, m == 1, batches[i]);
                    /* automatic: traced at 4 and at 7, then none; on: one entry */
                    int want = mode == JG_DYNAMIC_ON ? 1 : i == 0 ? 1 : 2;
                    assert_int_equal(jg_compiled_entries(c), want);
                }
                assert_int_equal(jg_compiled_fallbacks(c), 0);
                jg_compiled_free(c);
            }
    }
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[1024];
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* The generated C of the dynamic entry (the custom call's forward inlined,
 * its backward replayed at each size) takes the sizes as parameters: after
 * the second size, no size compiles anything. */
static void test_dynamic_custom_one_object(void **state) {
    (void)state;
    if (!jg_compile_backend_available("c"))
        return;
    char dir[] = "/tmp/jg-dyncf-cache-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *saved = getenv("JITGRAD_CACHE_DIR") ? strdup(getenv("JITGRAD_CACHE_DIR")) : NULL;
    setenv("JITGRAD_CACHE_DIR", dir, 1);
    jg_compiled *c = jg_compile(p_seed, NULL, &(jg_compile_options){.backend = "c"});
    assert_int_equal(jg_compiled_set_dynamic(c, JG_DYNAMIC_AUTO), 0);
    jg_manual_seed(8);
    long after = 0;
    for (int i = 0; i < N_BATCH; i++) {
        seed_step(c, true, batches[i]);
        if (i == 1)
            after = jg_cache_compiles();
    }
    assert_int_equal(jg_cache_compiles(), after);
    assert_int_equal(jg_compiled_entries(c), 2);
    jg_compiled_free(c);
    if (saved)
        setenv("JITGRAD_CACHE_DIR", saved, 1);
    else
        unsetenv("JITGRAD_CACHE_DIR");
    free(saved);
    remove_dir(dir);
}

/* A mean written as a custom function whose backward reads the count from
 * the ctx (jg_ctx_set_state), not from its tensors: expand(g, [n]) / n.
 * The count is the base trace's at every instance unless the backward is
 * fitted from both traces. */
static int cmean_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    int64_t *count = malloc(sizeof *count);
    if (!count)
        return -1;
    *count = jg_numel(in[0]);
    jg_ctx_set_state(ctx, count, free);
    out[0] = jg_div(jg_sum(in[0]), jg_full(JG_F32, 0, NULL, (double)*count));
    return out[0] ? 1 : -1;
}

static int cmean_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out, (void)n_in;
    const int64_t *count = jg_ctx_state(ctx);
    jg_tensor *e = jg_expand(g[0], 1, count);
    din[0] = jg_div(e, jg_full(JG_F32, 0, NULL, (double)*count));
    return din[0] ? 1 : -1;
}

static const jg_function cmean = {"CountMean", cmean_forward, cmean_backward, NULL};

/* loss = CountMean(flatten(x * w)) */
static int p_cmean(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *f = jg_reshape(jg_mul(in[0], in[1]), 1, TU_SHAPE(-1));
    out[0] = f ? tf_apply1(&cmean, 1, &f, NULL, 0) : NULL;
    return out[0] ? 1 : -1;
}

static void test_dynamic_custom_ctx_size(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        jg_compiled *c = jg_compile(p_cmean, NULL, &(jg_compile_options){.backend = backends[b]});
        assert_int_equal(jg_compiled_set_dynamic(c, JG_DYNAMIC_AUTO), 0);
        jg_manual_seed(9);
        jg_tensor *w = jg_keep(jg_randn(JG_F32, 1, TU_SHAPE(3)));
        jg_set_requires_grad(w, true);
        for (int i = 0; i < N_BATCH; i++) {
            jg_scope_push();
            jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(batches[i], 3));
            jg_set_requires_grad(x, true);
            jg_tensor *in[2] = {x, w}, *oe[1] = {0}, *oc[1] = {0};
            assert_int_equal(p_cmean(NULL, NULL, 2, in, oe), 1);
            assert_int_equal(jg_backward(oe[0], NULL, 0), 0);
            jg_tensor *gx = jg_retain(jg_grad(x)), *gw = jg_retain(jg_grad(w));
            jg_clear_grad(x), jg_clear_grad(w);
            assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, oc), 1);
            TU_SAME(oe[0], oc[0]);
            assert_int_equal(jg_backward(oc[0], NULL, 0), 0);
            TU_SAME(gx, jg_grad(x));
            TU_SAME(gw, jg_grad(w));
            jg_clear_grad(w);
            jg_release(gx), jg_release(gw);
            jg_scope_pop();
        }
        assert_int_equal(jg_compiled_entries(c), 2);
        jg_compiled_free(c);
        jg_release(w);
    }
}

/* Regression (fuzz seed 2500030): a custom call whose result the program
 * drops.  The pipeline removes the dead call from the traced graph and
 * frees its ctx, while the entry's copy kept for dynamic sizes still
 * traces the call's backward from that ctx when the second size arrives
 * (a use after free: a crash, or garbage read as the count).  The copy
 * holds its own reference to the ctx. */
static int p_cmean_dead(void *user, const void *args, int n, jg_tensor *const *in,
                        jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *xw = jg_mul(in[0], in[1]);
    jg_tensor *f = xw ? jg_reshape(xw, 1, TU_SHAPE(-1)) : NULL;
    if (!f || !tf_apply1(&cmean, 1, &f, NULL, 0)) /* (dropped) */
        return -1;
    out[0] = jg_sum(jg_tanh(xw));
    return out[0] ? 1 : -1;
}

static void test_dynamic_custom_dead_call(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        jg_compiled *c =
            jg_compile(p_cmean_dead, NULL, &(jg_compile_options){.backend = backends[b]});
        assert_int_equal(jg_compiled_set_dynamic(c, JG_DYNAMIC_AUTO), 0);
        jg_manual_seed(13);
        jg_tensor *w = jg_keep(jg_randn(JG_F32, 1, TU_SHAPE(3)));
        jg_set_requires_grad(w, true);
        for (int i = 0; i < N_BATCH; i++) {
            jg_scope_push();
            jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(batches[i], 3));
            jg_tensor *in[2] = {x, w}, *oe[1] = {0}, *oc[1] = {0};
            assert_int_equal(p_cmean_dead(NULL, NULL, 2, in, oe), 1);
            assert_int_equal(jg_backward(oe[0], NULL, 0), 0);
            jg_tensor *gw = jg_retain(jg_grad(w));
            jg_clear_grad(w);
            assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, oc), 1);
            TU_SAME(oe[0], oc[0]);
            assert_int_equal(jg_backward(oc[0], NULL, 0), 0);
            TU_SAME(gw, jg_grad(w));
            jg_clear_grad(w);
            jg_release(gw);
            jg_scope_pop();
        }
        /* traced at 4 and 7 (the dead call fitted), every later size from
         * the second */
        assert_int_equal(jg_compiled_entries(c), 2);
        jg_compiled_free(c);
        jg_release(w);
    }
}

/* An opaque custom function: its forward reads a value (the sign of its
 * input's sum), so it runs at run time on real tensors.  y = x @ Flip(w)
 * with w fixed: the batch never reaches it and the entry goes dynamic;
 * Flip(x) itself keeps the dims static, the log saying why. */
static int flip_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx, (void)n;
    double s = jg_item(jg_sum(in[0]));
    out[0] = jg_mul_scalar(in[0], s > 0 ? 2.0 : -3.0);
    return out[0] ? 1 : -1;
}

static int flip_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)ctx, (void)n_out, (void)n_in;
    din[0] = jg_mul_scalar(g[0], 0.5);
    return din[0] ? 1 : -1;
}

static const jg_function flip = {"Flip", flip_forward, flip_backward, NULL};

static int p_flip_w(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *fw = tf_apply1(&flip, 1, &in[1], NULL, 0);
    out[0] = fw ? jg_sum(jg_tanh(jg_matmul(in[0], fw))) : NULL;
    return out[0] ? 1 : -1;
}

static int p_flip_x(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *fx = tf_apply1(&flip, 1, &in[0], NULL, 0);
    out[0] = fx ? jg_sum(jg_tanh(jg_matmul(fx, in[1]))) : NULL;
    return out[0] ? 1 : -1;
}

static jg_program_fn flip_prog;
static int flip_entries;

static void run_flip(void) {
    jg_compiled *c = jg_compile(flip_prog, NULL, NULL);
    assert_int_equal(jg_compiled_set_dynamic(c, JG_DYNAMIC_AUTO), 0);
    jg_manual_seed(10);
    jg_tensor *w = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(4, 3)));
    jg_set_requires_grad(w, true);
    for (int i = 0; i < N_BATCH; i++) {
        jg_scope_push();
        jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(batches[i], 4));
        jg_tensor *in[2] = {x, w}, *oe[1] = {0}, *oc[1] = {0};
        assert_int_equal(flip_prog(NULL, NULL, 2, in, oe), 1);
        assert_int_equal(jg_backward(oe[0], NULL, 0), 0);
        jg_tensor *gw = jg_retain(jg_grad(w));
        jg_clear_grad(w);
        assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, oc), 1);
        TU_SAME(oe[0], oc[0]);
        assert_int_equal(jg_backward(oc[0], NULL, 0), 0);
        TU_SAME(gw, jg_grad(w));
        jg_clear_grad(w);
        jg_release(gw);
        jg_scope_pop();
    }
    flip_entries = jg_compiled_entries(c);
    jg_compiled_free(c);
    jg_release(w);
}

static void test_dynamic_custom_opaque(void **state) {
    (void)state;
    setenv("JITGRAD_LOG", "recompiles", 1);
    flip_prog = p_flip_w;
    char *err = tu_capture_stderr(run_flip);
    assert_int_equal(flip_entries, 2);
    assert_non_null(strstr(err, "went dynamic"));
    free(err);
    flip_prog = p_flip_x;
    err = tu_capture_stderr(run_flip);
    unsetenv("JITGRAD_LOG");
    assert_int_equal(flip_entries, N_BATCH);
    assert_non_null(strstr(err, "stay static: the program calls the custom function Flip, which "
                                "cannot be traced (its callbacks read tensor values): the dims it "
                                "sees stay static"));
    free(err);
}

/* A whole training step through the seed function: k = x * w in both
 * slots of MyFn(q = x, k, k), loss = sum, backward, SGD and zero_grad
 * inside the program; w.grad gets both slots' gradients. */
typedef struct {
    jg_tensor *w;
    jg_optim *opt;
    bool mask;
} seed_model;

static void seed_model_init(seed_model *m, bool mask) {
    jg_manual_seed(11);
    m->w = jg_keep(jg_randn(JG_F32, 1, TU_SHAPE(5)));
    jg_set_requires_grad(m->w, true);
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_SGD);
    h.lr = 0.05;
    m->opt = jg_optim_new(JG_OPTIM_SGD, &m->w, 1, &h);
    m->mask = mask;
    assert_non_null(m->opt);
}

static int p_seed_step(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    seed_model *m = user;
    jg_tensor *k = jg_mul(in[0], m->w);
    jg_tensor *y =
        k ? tf_apply1(&tf_myfn, 3, (jg_tensor *[]){in[0], k, k}, &m->mask, sizeof m->mask) : NULL;
    jg_tensor *loss = y ? jg_sum(jg_tanh(y)) : NULL;
    if (!loss || jg_backward(loss, NULL, 0) < 0 || jg_optim_step(m->opt) < 0 ||
        jg_optim_zero_grad(m->opt, true) < 0)
        return -1;
    out[0] = loss;
    return 1;
}

static void test_dynamic_custom_train_step(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        for (int m = 0; m < 2; m++) {
            seed_model e, k;
            seed_model_init(&e, m == 1);
            seed_model_init(&k, m == 1);
            jg_compiled *c =
                jg_compile(p_seed_step, &k, &(jg_compile_options){.backend = backends[b]});
            assert_int_equal(jg_compiled_set_dynamic(c, JG_DYNAMIC_AUTO), 0);
            jg_manual_seed(12);
            for (int r = 0; r < 2; r++)
                for (int i = 0; i < N_BATCH; i++) {
                    jg_scope_push();
                    jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(batches[i], 5));
                    jg_tensor *le = NULL, *lc[1] = {0};
                    assert_int_equal(p_seed_step(&e, NULL, 1, &x, &le), 1);
                    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, lc), 1);
                    TU_SAME(le, lc[0]);
                    TU_SAME(e.w, k.w);
                    jg_scope_pop();
                }
            /* traced at 4 and 7, every later size from the second */
            assert_int_equal(jg_compiled_entries(c), 2);
            assert_int_equal(jg_compiled_fallbacks(c), 0);
            jg_compiled_free(c);
            jg_optim_free(e.opt), jg_optim_free(k.opt);
            jg_release(e.w), jg_release(k.w);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_dynamic_custom_seed),       TU_TEST(test_dynamic_custom_one_object),
        TU_TEST(test_dynamic_custom_ctx_size),   TU_TEST(test_dynamic_custom_opaque),
        TU_TEST(test_dynamic_custom_train_step), TU_TEST(test_dynamic_custom_dead_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
