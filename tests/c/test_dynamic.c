/* Dynamic sizes: a batch dim that changes between calls is traced twice
 * (the second distinct size makes it dynamic), then every size runs from
 * one template, bitwise equal to eager (forward, gradients, a whole
 * training step over an epoch with a partial last batch), on both
 * backends; JG_DYNAMIC_OFF traces per size, JG_DYNAMIC_ON once; sizes 0
 * and 1 are specialized; a program whose graph depends on the size
 * otherwise stays static and correct. */
#include "testutil.h"
#include "testutil_fns.h"
#include "backend/cache.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *backends[] = {"interp", "c"};

typedef struct {
    jg_tensor *w1, *b1, *w2, *b2;
    jg_optim *opt;
} mlp;

static void mlp_init(mlp *m) {
    jg_manual_seed(5);
    jg_tensor **p[4] = {&m->w1, &m->b1, &m->w2, &m->b2};
    const int64_t shapes[4][2] = {{6, 16}, {16, 0}, {16, 3}, {3, 0}};
    for (int i = 0; i < 4; i++) {
        *p[i] = jg_keep(jg_randn(JG_F32, shapes[i][1] ? 2 : 1, shapes[i]));
        jg_set_requires_grad(*p[i], true);
    }
    jg_tensor *ps[4] = {m->w1, m->b1, m->w2, m->b2};
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_SGD);
    h.lr = 0.1;
    m->opt = jg_optim_new(JG_OPTIM_SGD, ps, 4, &h);
    assert_non_null(m->opt);
}

static void mlp_free(mlp *m) {
    jg_optim_free(m->opt);
    jg_release(m->w1), jg_release(m->b1), jg_release(m->w2), jg_release(m->b2);
}

static jg_tensor *forward(mlp *m, jg_tensor *x) {
    jg_tensor *h = jg_relu(jg_add(jg_matmul(x, m->w1), m->b1));
    return jg_add(jg_matmul(h, m->w2), m->b2);
}

/* loss of a batch: mean over the batch (its count is a constant of the
 * graph, proportional to the size) */
static int p_loss(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    out[0] = jg_mse_loss(forward(user, in[0]), in[1], JG_REDUCTION_MEAN);
    return out[0] ? 1 : -1;
}

static int p_step(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    mlp *m = user;
    jg_tensor *loss = jg_mse_loss(forward(m, in[0]), in[1], JG_REDUCTION_MEAN);
    if (!loss || jg_backward(loss, NULL, 0) < 0 || jg_optim_step(m->opt) < 0 ||
        jg_optim_zero_grad(m->opt, true) < 0)
        return -1;
    out[0] = loss;
    return 1;
}

static void batch(int64_t b, jg_tensor **x, jg_tensor **y) {
    *x = jg_randn(JG_F32, 2, TU_SHAPE(b, 6));
    *y = jg_randn(JG_F32, 2, TU_SHAPE(b, 3));
}

static void check_same_params(mlp *a, mlp *b) {
    jg_tensor *pa[4] = {a->w1, a->b1, a->w2, a->b2}, *pb[4] = {b->w1, b->b1, b->w2, b->b2};
    for (int i = 0; i < 4; i++) {
        TU_SAME(pa[i], pb[i]);
        assert_true((jg_grad(pa[i]) == NULL) == (jg_grad(pb[i]) == NULL));
        if (jg_grad(pa[i]))
            TU_SAME(jg_grad(pa[i]), jg_grad(pb[i]));
    }
}

static void zero_grads(mlp *m) {
    assert_int_equal(jg_optim_zero_grad(m->opt, true), 0);
}

/* 64, 64, 17, 64, 33, 5: two traces; loss and gradients bitwise eager's */
static void run_sizes(const char *backend, int mode, int want_entries) {
    static const int64_t sizes[] = {64, 64, 17, 64, 33, 5, 17};
    mlp e = {0}, k = {0};
    mlp_init(&e);
    mlp_init(&k);
    jg_compiled *c = jg_compile(p_loss, &k, &(jg_compile_options){.backend = backend});
    assert_non_null(c);
    assert_int_equal(jg_compiled_set_dynamic(c, mode), 0);
    jg_manual_seed(9);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        jg_scope_push();
        jg_tensor *x, *y, *in[2], *out[1];
        batch(sizes[i], &x, &y);
        in[0] = x, in[1] = y;
        jg_tensor *le = NULL;
        assert_int_equal(p_loss(&e, NULL, 2, in, &le), 1);
        assert_int_equal(jg_backward(le, NULL, 0), 0);
        assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, out), 1);
        TU_SAME(le, out[0]);
        assert_int_equal(jg_backward(out[0], NULL, 0), 0);
        check_same_params(&e, &k);
        zero_grads(&e), zero_grads(&k);
        jg_scope_pop();
    }
    assert_int_equal(jg_compiled_entries(c), want_entries);
    assert_int_equal(jg_compiled_fallbacks(c), 0);
    jg_compiled_free(c);
    mlp_free(&e), mlp_free(&k);
}

static void test_dynamic_auto(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++)
        if (jg_compile_backend_available(backends[b]))
            run_sizes(backends[b], JG_DYNAMIC_AUTO, 2);
}

/* more sizes than a dynamic entry keeps built (8): the least recently used
 * are dropped and rebuilt from the template, never traced again */
static void test_dynamic_many_sizes(void **state) {
    (void)state;
    mlp m = {0};
    mlp_init(&m);
    jg_compiled *c = jg_compile(p_loss, &m, NULL);
    assert_int_equal(jg_compiled_set_dynamic(c, JG_DYNAMIC_AUTO), 0);
    jg_manual_seed(8);
    for (int i = 0; i < 30; i++) {
        jg_scope_push();
        jg_tensor *x, *y, *in[2], *out[1], *le = NULL;
        batch(2 + (i * 7) % 13, &x, &y); /* 2, 9, 3, 10, ... 14, then again */
        in[0] = x, in[1] = y;
        assert_int_equal(p_loss(&m, NULL, 2, in, &le), 1);
        assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, out), 1);
        TU_SAME(le, out[0]);
        jg_scope_pop();
    }
    assert_int_equal(jg_compiled_entries(c), 2);
    jg_compiled_free(c);
    mlp_free(&m);
}

static void test_dynamic_off_and_on(void **state) {
    (void)state;
    run_sizes("interp", JG_DYNAMIC_OFF, 4); /* 64, 17, 33, 5 (OFF: the default in C) */
    run_sizes("interp", JG_DYNAMIC_ON, 1);
}

/* The whole training step over epochs of 100, 90 and 75 samples in
 * batches of 32 (the last ones 4, 26, 11): traced for 32 and 4, then no
 * more; losses and parameters bitwise the eager loop's. */
static void test_dynamic_epoch(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        mlp e = {0}, k = {0};
        mlp_init(&e);
        mlp_init(&k);
        jg_compiled *c = jg_compile(p_step, &k, &(jg_compile_options){.backend = backends[b]});
        assert_non_null(c);
        assert_int_equal(jg_compiled_set_dynamic(c, JG_DYNAMIC_AUTO), 0);
        jg_manual_seed(4);
        jg_tensor *X = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(100, 6)));
        jg_tensor *Y = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(100, 3)));
        const int64_t n[3] = {100, 90, 75}; /* last batches 4, 26, 11 */
        for (int epoch = 0; epoch < 3; epoch++)
            for (int64_t at = 0; at < n[epoch]; at += 32) {
                jg_scope_push();
                int64_t end = at + 32 < n[epoch] ? at + 32 : n[epoch];
                jg_tensor *in[2] = {jg_contiguous(jg_slice(X, 0, at, end)),
                                    jg_contiguous(jg_slice(Y, 0, at, end))};
                jg_tensor *le = NULL, *out[1];
                assert_int_equal(p_step(&e, NULL, 2, in, &le), 1);
                assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, out), 1);
                TU_SAME(le, out[0]);
                check_same_params(&e, &k);
                jg_scope_pop();
            }
        assert_int_equal(jg_compiled_entries(c), 2);
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        jg_compiled_free(c);
        jg_release(X), jg_release(Y);
        mlp_free(&e), mlp_free(&k);
    }
}

/* sizes computed from the batch: a reshape to [B * 4, 3] and back, a
 * scalar B (x * B, proportional), a sum over the batch */
static int p_reshape(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *x = in[0];
    int64_t b = jg_shape(x)[0];
    jg_tensor *r = jg_reshape(x, 2, TU_SHAPE(-1, 3));
    jg_tensor *m = jg_mul_scalar(jg_tanh(r), (double)b);
    out[0] = jg_reshape(m, 2, TU_SHAPE(b, 12));
    out[1] = jg_sum_dims(out[0], 1, (const int[]){1}, false);
    return out[0] && out[1] ? 2 : -1;
}

/* a branch on the size, reported: sizes on one side of it (64, 33) give
 * the same graph, but the comparison's result depends on the size, so no
 * template is made from them (5 would run the wrong arm) */
static int p_branch(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *x = in[0];
    jg_sizes_note(JG_SIZES_GT, jg_shape(x)[0], 20);
    out[0] = jg_shape(x)[0] > 20 ? jg_mul_scalar(x, 2.0) : jg_add_scalar(jg_exp(x), 1.0);
    return out[0] ? 1 : -1;
}

/* comparisons whose result is the same for every size keep the dims
 * dynamic: B == B (two inputs), 3 * B > B, B >= 2 */
static int p_cmp_fixed(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    int64_t b = jg_shape(in[0])[0];
    jg_sizes_note(JG_SIZES_EQ, b, jg_shape(in[1])[0]);
    jg_sizes_note(JG_SIZES_GT, 3 * b, b);
    jg_sizes_note(JG_SIZES_GE, b, 2);
    out[0] = jg_add(in[0], in[1]);
    return out[0] ? 1 : -1;
}

/* ... and one that is not proportional: x * (B / 2) */
static int p_half(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_mul_scalar(in[0], (double)(jg_shape(in[0])[0] / 2));
    return out[0] ? 1 : -1;
}

static void run_prog(jg_program_fn fn, int n_out, const int64_t *sizes, int n_sizes,
                     int want_entries) {
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        jg_compiled *c = jg_compile(fn, NULL, &(jg_compile_options){.backend = backends[b]});
        assert_non_null(c);
        assert_int_equal(jg_compiled_set_dynamic(c, JG_DYNAMIC_AUTO), 0);
        jg_manual_seed(2);
        for (int i = 0; i < n_sizes; i++) {
            jg_scope_push();
            jg_tensor *x[2] = {jg_randn(JG_F32, 3, TU_SHAPE(sizes[i], 4, 3)),
                               jg_randn(JG_F32, 3, TU_SHAPE(sizes[i], 4, 3))};
            jg_tensor *oe[2], *oc[2];
            assert_int_equal(fn(NULL, NULL, 2, x, oe), n_out);
            assert_int_equal(jg_compiled_call(c, NULL, 0, 2, x, oc), n_out);
            for (int j = 0; j < n_out; j++)
                TU_SAME(oe[j], oc[j]);
            jg_scope_pop();
        }
        assert_int_equal(jg_compiled_entries(c), want_entries);
        jg_compiled_free(c);
    }
}

static void test_dynamic_reshape_scalar(void **state) {
    (void)state;
    run_prog(p_reshape, 2, TU_SHAPE(8, 3, 11, 8, 40, 2), 6, 2);
}

static void test_dynamic_branch_stays_static(void **state) {
    (void)state;
    run_prog(p_branch, 1, TU_SHAPE(64, 17, 33, 5, 64, 17, 10), 7, 5);
    run_prog(p_half, 1, TU_SHAPE(64, 17, 33, 5, 64), 5, 4);
    run_prog(p_cmp_fixed, 1, TU_SHAPE(64, 17, 33, 5, 64), 5, 2);
}

/* sizes 0 and 1 are specialized: a size-1 batch broadcasts differently */
static int p_bcast(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_add(in[0], in[1]);
    return out[0] ? 1 : -1;
}

static void test_dynamic_size_one(void **state) {
    (void)state;
    jg_compiled *c = jg_compile(p_bcast, NULL, NULL);
    assert_int_equal(jg_compiled_set_dynamic(c, JG_DYNAMIC_AUTO), 0);
    const int64_t sizes[] = {8, 5, 1, 7, 1, 9};
    jg_manual_seed(1);
    for (int i = 0; i < 6; i++) {
        jg_scope_push();
        jg_tensor *in[2] = {jg_randn(JG_F32, 2, TU_SHAPE(sizes[i], 4)),
                            jg_randn(JG_F32, 2, TU_SHAPE(1, 4))};
        jg_tensor *oe[1], *oc[1];
        int re = p_bcast(NULL, NULL, 2, in, oe);
        int rc = jg_compiled_call(c, NULL, 0, 2, in, oc);
        assert_int_equal(rc, re);
        TU_SAME(oe[0], oc[0]);
        jg_scope_pop();
    }
    assert_int_equal(jg_compiled_entries(c), 3); /* 8, 5 (dynamic from here), 1 (specialized) */
    jg_compiled_free(c);
}

/* A sum over the whole batch, fused with the elementwise ops before it:
 * [B, 3000] holds 2 blocks of 4096 at B = 2, more than 64 (the partials
 * then live in a scratch buffer) and over the threads' threshold at 100. */
static int p_fused_sum(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *x = in[0];
    out[0] = jg_sum(jg_mul_scalar(jg_add(jg_mul(x, in[1]), x), 0.5));
    return out[0] ? 1 : -1;
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

/* Generated C takes its sizes as parameters: once the entry is dynamic,
 * every size runs the objects compiled for the first trace, in a fresh
 * cache directory (no compilation after the first call), bitwise eager's
 * results (the fused sum's blocks and the thread split follow each size),
 * forward and backward. */
static void test_dynamic_one_object(void **state) {
    (void)state;
    if (!jg_compile_backend_available("c"))
        return;
    char dir[] = "/tmp/jg-dyn-cache-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *saved = getenv("JITGRAD_CACHE_DIR") ? strdup(getenv("JITGRAD_CACHE_DIR")) : NULL;
    setenv("JITGRAD_CACHE_DIR", dir, 1);
    static const int64_t sizes[] = {7, 12, 2, 100, 33, 5, 12};
    jg_compiled *c = jg_compile(p_fused_sum, NULL, &(jg_compile_options){.backend = "c"});
    assert_non_null(c);
    assert_int_equal(jg_compiled_set_dynamic(c, JG_DYNAMIC_AUTO), 0);
    jg_manual_seed(3);
    jg_tensor *w = jg_keep(jg_randn(JG_F32, 1, TU_SHAPE(3000)));
    jg_set_requires_grad(w, true);
    long first = 0;
    for (int i = 0; i < 7; i++) {
        jg_scope_push();
        jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(sizes[i], 3000));
        jg_set_requires_grad(x, true);
        jg_tensor *in[2] = {x, w}, *oe[1], *oc[1];
        assert_int_equal(p_fused_sum(NULL, NULL, 2, in, oe), 1);
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
        if (i == 0)
            first = jg_cache_compiles();
        jg_scope_pop();
    }
    assert_true(first >= 2); /* the forward and the backward graph */
    assert_int_equal(jg_cache_compiles(), first);
    assert_int_equal(jg_compiled_entries(c), 2);
    jg_compiled_free(c);
    jg_release(w);
    if (saved)
        setenv("JITGRAD_CACHE_DIR", saved, 1);
    else
        unsetenv("JITGRAD_CACHE_DIR");
    free(saved);
    remove_dir(dir);
}

/* Two symbols: x is [B, T, 4]; the program views it as [B * T, 4] (a size
 * that is a product of both), and reduces over T and over everything. */
static int p_bt(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    jg_tensor *x = in[0], *w = user;
    int64_t b = jg_shape(x)[0], t = jg_shape(x)[1];
    jg_tensor *m = jg_matmul(jg_reshape(x, 2, TU_SHAPE(b * t, 4)), w);
    jg_tensor *y = jg_reshape(jg_tanh(m), 3, TU_SHAPE(b, t, 3));
    out[0] = jg_sum_dims(y, 1, (const int[]){1}, false);
    out[1] = jg_mean(jg_mul(y, y));
    return out[0] && out[1] ? 2 : -1;
}

/* sizes[i] = {B, T}; forward and x's gradient bitwise eager's at each;
 * want_entries traces in all, on both backends */
static void run_bt(const int64_t (*sizes)[2], int n_sizes, int want_entries) {
    for (int be = 0; be < 2; be++) {
        if (!jg_compile_backend_available(backends[be]))
            continue;
        jg_manual_seed(6);
        jg_tensor *w = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(4, 3)));
        jg_compiled *c = jg_compile(p_bt, w, &(jg_compile_options){.backend = backends[be]});
        assert_non_null(c);
        assert_int_equal(jg_compiled_set_dynamic(c, JG_DYNAMIC_AUTO), 0);
        for (int i = 0; i < n_sizes; i++) {
            jg_scope_push();
            jg_tensor *x = jg_randn(JG_F32, 3, TU_SHAPE(sizes[i][0], sizes[i][1], 4));
            jg_set_requires_grad(x, true);
            jg_tensor *oe[2], *oc[2];
            assert_int_equal(p_bt(w, NULL, 1, &x, oe), 2);
            assert_int_equal(jg_backward(oe[1], NULL, 0), 0);
            jg_tensor *gx = jg_retain(jg_grad(x));
            jg_clear_grad(x);
            assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, oc), 2);
            TU_SAME(oe[0], oc[0]);
            TU_SAME(oe[1], oc[1]);
            assert_int_equal(jg_backward(oc[1], NULL, 0), 0);
            TU_SAME(gx, jg_grad(x));
            jg_release(gx);
            jg_scope_pop();
        }
        assert_int_equal(jg_compiled_entries(c), want_entries);
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        jg_compiled_free(c);
        jg_release(w);
    }
}

/* T changes (a template in T), then B (the template gets a second
 * symbol): three traces, then every (B, T) without tracing, B == T
 * included */
static void test_dynamic_two_symbols(void **state) {
    (void)state;
    static const int64_t sizes[][2] = {{4, 6}, {4, 9}, {3, 6}, {5, 7}, {2, 11}, {3, 3}, {4, 6}};
    run_bt(sizes, 7, 3);
}

/* B and T change together at the second call: one more trace at the sizes
 * between (B from the second call, T from the first) tells them apart; it
 * is no entry of its own */
static void test_dynamic_two_symbols_together(void **state) {
    (void)state;
    static const int64_t sizes[][2] = {{4, 6}, {3, 9}, {5, 7}, {2, 2}, {4, 6}, {7, 3}};
    run_bt(sizes, 6, 2);
}

/* Comparisons of sizes with two symbols: B * T > T and T >= 2 have one
 * result for every size, B < T does not (the program branches on it) */
static int p_bt_cmp(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    int64_t b = jg_shape(in[0])[0], t = jg_shape(in[0])[1];
    jg_sizes_note(JG_SIZES_GT, b * t, t);
    jg_sizes_note(JG_SIZES_GE, t, 2);
    return p_bt(user, args, n, in, out);
}

static int p_bt_lt(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    int64_t b = jg_shape(in[0])[0], t = jg_shape(in[0])[1];
    jg_sizes_note(JG_SIZES_LT, b, t);
    int rc = p_bt(user, args, n, in, out);
    if (rc == 2 && b < t)
        out[1] = jg_mul_scalar(out[1], 2.0);
    return rc;
}

static void test_dynamic_two_symbols_compare(void **state) {
    (void)state;
    static const int64_t sizes[][2] = {{4, 6}, {4, 9}, {3, 6}, {5, 7}, {8, 3}, {4, 6}};
    jg_manual_seed(6);
    jg_tensor *w = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(4, 3)));
    jg_program_fn fns[2] = {p_bt_cmp, p_bt_lt};
    const int want[2] = {3, 5}; /* B < T: every size its own trace */
    for (int f = 0; f < 2; f++) {
        jg_compiled *c = jg_compile(fns[f], w, NULL);
        assert_int_equal(jg_compiled_set_dynamic(c, JG_DYNAMIC_AUTO), 0);
        for (int i = 0; i < 6; i++) {
            jg_scope_push();
            jg_tensor *x = jg_randn(JG_F32, 3, TU_SHAPE(sizes[i][0], sizes[i][1], 4));
            jg_tensor *oe[2], *oc[2];
            assert_int_equal(fns[f](w, NULL, 1, &x, oe), 2);
            assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, oc), 2);
            TU_SAME(oe[0], oc[0]);
            TU_SAME(oe[1], oc[1]);
            jg_scope_pop();
        }
        assert_int_equal(jg_compiled_entries(c), want[f]);
        jg_compiled_free(c);
    }
    jg_release(w);
}

/* A program calling a custom function goes dynamic like any other (more in
 * test_dynamic_custom.c); results stay eager's at every size */
static int p_custom(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    tf_mul_cfg cfg = {0};
    out[0] = tf_apply1(&tf_mul, 2, in, &cfg, sizeof cfg);
    return out[0] ? 1 : -1;
}

static void run_custom(void) {
    jg_compiled *c = jg_compile(p_custom, NULL, NULL);
    assert_int_equal(jg_compiled_set_dynamic(c, JG_DYNAMIC_AUTO), 0);
    jg_manual_seed(3);
    const int64_t sizes[] = {4, 6, 9};
    for (int i = 0; i < 3; i++) {
        jg_scope_push();
        jg_tensor *x[2] = {jg_randn(JG_F32, 1, &sizes[i]), jg_randn(JG_F32, 1, &sizes[i])};
        jg_tensor *oe[1], *oc[1];
        assert_int_equal(p_custom(NULL, NULL, 2, x, oe), 1);
        assert_int_equal(jg_compiled_call(c, NULL, 0, 2, x, oc), 1);
        TU_SAME(oe[0], oc[0]);
        jg_scope_pop();
    }
    assert_int_equal(jg_compiled_entries(c), 2);
    jg_compiled_free(c);
}

static void test_dynamic_custom_function(void **state) {
    (void)state;
    setenv("JITGRAD_LOG", "recompiles", 1);
    char *err = tu_capture_stderr(run_custom);
    unsetenv("JITGRAD_LOG");
    assert_non_null(strstr(err, "dim 0 of input 0, dim 0 of input 1 went dynamic (4 -> 6)"));
    free(err);
}

static void test_dynamic_bad_input(void **state) {
    (void)state;
    assert_int_equal(jg_compiled_set_dynamic(NULL, 0), -1);
    TU_ERROR("compiled function is NULL");
    assert_int_equal(jg_compiled_set_input_namer(NULL, NULL, NULL), -1);
    TU_ERROR("jg_compiled_set_input_namer: compiled function is NULL");
    jg_compiled *c = jg_compile(p_bcast, NULL, NULL);
    assert_int_equal(jg_compiled_set_dynamic(c, 3), -1);
    TU_ERROR("mode 3 is not JG_DYNAMIC_OFF (0), JG_DYNAMIC_AUTO (1) or JG_DYNAMIC_ON (2)");
    jg_tensor *in[2] = {jg_full(JG_F32, 1, TU_SHAPE(3), 1.0), jg_full(JG_F32, 1, TU_SHAPE(3), 1.0)},
              *o[1];
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, o), 1);
    assert_int_equal(jg_compiled_set_dynamic(c, 1), -1);
    TU_ERROR("set it before the first call");
    jg_compiled_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_dynamic_auto),
        TU_TEST(test_dynamic_off_and_on),
        TU_TEST(test_dynamic_many_sizes),
        TU_TEST(test_dynamic_epoch),
        TU_TEST(test_dynamic_reshape_scalar),
        TU_TEST(test_dynamic_branch_stays_static),
        TU_TEST(test_dynamic_size_one),
        TU_TEST(test_dynamic_bad_input),
        TU_TEST(test_dynamic_one_object),
        TU_TEST(test_dynamic_two_symbols),
        TU_TEST(test_dynamic_two_symbols_together),
        TU_TEST(test_dynamic_two_symbols_compare),
        TU_TEST(test_dynamic_custom_function),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
