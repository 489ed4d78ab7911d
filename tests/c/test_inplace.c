/* In-place ops on views and their bases, eager (values and gradients checked
 * against PyTorch 1.13), and in-place ops inside compiled programs (compiled
 * == eager bitwise on both backends). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static jg_tensor *leaf(int n, const double *v) {
    jg_tensor *t = tu_tensor(JG_F32, 1, (int64_t[]){n}, v);
    jg_set_requires_grad(t, true);
    return t;
}

/* A view taken before an in-place op on its base sees the base's new
 * history: v = (p*1)[0:2]; base *= q; v.sum().backward() -> p.grad = q[0:2],
 * q.grad = p[0:2] (torch: [3, 4, 0], [1, 2, 0]). */
static void test_view_rebased_after_base_inplace(void **state) {
    (void)state;
    jg_tensor *p = leaf(3, TU_VALS(1, 2, 3)), *q = leaf(3, TU_VALS(3, 4, 5));
    jg_tensor *base = jg_mul_scalar(p, 1.0);
    jg_tensor *v = jg_slice(base, 0, 0, 2);
    assert_int_equal(jg_mul_(base, q), 0);
    TU_CHECK(v, 1, TU_SHAPE(2), TU_VALS(3, 8), 0);
    assert_int_equal(jg_backward(jg_sum(v), NULL, 0), 0);
    TU_CHECK(jg_grad(p), 1, TU_SHAPE(3), TU_VALS(3, 4, 0), 0);
    assert_non_null(jg_grad(q));
    TU_CHECK(jg_grad(q), 1, TU_SHAPE(3), TU_VALS(1, 2, 0), 0);
}

/* A view of a base without grad starts requiring grad when the base is
 * written with a value that does (torch: v.requires_grad becomes True). */
static void test_view_requires_grad_after_base_write(void **state) {
    (void)state;
    jg_tensor *b = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0, 0, 0));
    jg_tensor *v = jg_slice(b, 0, 0, 2);
    assert_int_equal(jg_mul_scalar_(b, 1.0), 0);
    assert_false(jg_requires_grad(v));
    jg_tensor *o = leaf(3, TU_VALS(1, 1, 1));
    assert_int_equal(jg_add_(b, o), 0);
    assert_true(jg_requires_grad(v));
    assert_int_equal(jg_backward(jg_sum(v), NULL, 0), 0);
    TU_CHECK(jg_grad(o), 1, TU_SHAPE(3), TU_VALS(1, 1, 0), 0);
}

/* Writing into a view rebases the base's history (CopySlices):
 * base = p*1; base[0:2] *= q; (base * [1, 10, 100]).sum().backward() ->
 * p.grad [3, 40, 100], q.grad [1, 20]. */
static void test_inplace_on_view_copyslices(void **state) {
    (void)state;
    jg_tensor *p = leaf(3, TU_VALS(1, 2, 3)), *q = leaf(2, TU_VALS(3, 4));
    jg_tensor *base = jg_mul_scalar(p, 1.0);
    jg_tensor *v = jg_slice(base, 0, 0, 2);
    assert_int_equal(jg_mul_(v, q), 0);
    TU_CHECK(base, 1, TU_SHAPE(3), TU_VALS(3, 8, 3), 0);
    jg_tensor *w = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 10, 100));
    assert_int_equal(jg_backward(jg_sum(jg_mul(base, w)), NULL, 0), 0);
    TU_CHECK(jg_grad(p), 1, TU_SHAPE(3), TU_VALS(3, 40, 100), 0);
    TU_CHECK(jg_grad(q), 1, TU_SHAPE(2), TU_VALS(1, 20), 0);
}

/* Through a chain of views (reshape, transpose, row): base = p*1;
 * base.view(2,2).t()[0] *= [5, 7]; base.backward([1, 2, 3, 4]) ->
 * p.grad [5, 2, 21, 4]. */
static void test_inplace_on_view_chain(void **state) {
    (void)state;
    jg_tensor *p = leaf(4, TU_VALS(1, 2, 3, 4));
    jg_tensor *base = jg_mul_scalar(p, 1.0);
    jg_tensor *t = jg_transpose(jg_reshape(base, 2, TU_SHAPE(2, 2)), 0, 1);
    jg_tensor *row = jg_reshape(jg_slice(t, 0, 0, 1), 1, TU_SHAPE(2));
    jg_tensor *c = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(5, 7));
    assert_int_equal(jg_mul_(row, c), 0);
    TU_CHECK(base, 1, TU_SHAPE(4), TU_VALS(5, 2, 21, 4), 0);
    jg_tensor *g = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1, 2, 3, 4));
    assert_int_equal(jg_backward(base, g, 0), 0);
    TU_CHECK(jg_grad(p), 1, TU_SHAPE(4), TU_VALS(5, 2, 21, 4), 0);
}

/* copy_ and zero_ into a view: the region's old history gets no gradient. */
static void test_copy_into_view(void **state) {
    (void)state;
    jg_tensor *p = leaf(3, TU_VALS(1, 2, 3)), *q = leaf(1, TU_VALS(9));
    jg_tensor *base = jg_mul_scalar(p, 2.0);
    assert_int_equal(jg_copy_(jg_slice(base, 0, 1, 2), q), 0);
    assert_int_equal(jg_zero_(jg_slice(base, 0, 2, 3)), 0);
    TU_CHECK(base, 1, TU_SHAPE(3), TU_VALS(2, 9, 0), 0);
    jg_tensor *w = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 10, 100));
    assert_int_equal(jg_backward(jg_sum(jg_mul(base, w)), NULL, 0), 0);
    TU_CHECK(jg_grad(p), 1, TU_SHAPE(3), TU_VALS(2, 0, 0), 0);
    TU_CHECK(jg_grad(q), 1, TU_SHAPE(1), TU_VALS(10), 0);
}

/* copy_ / zero_ of a constant onto a tensor that requires grad: it keeps
 * requiring grad and its old history gets zeros (torch: p.grad [0, 0, 0],
 * not None). */
static void test_zero_keeps_requires_grad(void **state) {
    (void)state;
    for (int use_copy = 0; use_copy < 2; use_copy++) {
        jg_tensor *p = leaf(3, TU_VALS(1, 2, 3));
        jg_tensor *b = jg_mul_scalar(p, 1.0);
        jg_tensor *z = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0, 0, 0));
        assert_int_equal(use_copy ? jg_copy_(b, z) : jg_zero_(b), 0);
        assert_true(jg_requires_grad(b));
        assert_int_equal(jg_backward(jg_sum(b), NULL, 0), 0);
        assert_non_null(jg_grad(p));
        TU_CHECK(jg_grad(p), 1, TU_SHAPE(3), TU_VALS(0, 0, 0), 0);
    }
    /* a source that requires grad too: dst's old history still gets zeros
     * (torch: p.grad [0, 0, 0], q.grad [1, 1, 1]) */
    jg_tensor *p3 = leaf(3, TU_VALS(1, 2, 3)), *q3 = leaf(3, TU_VALS(4, 5, 6));
    jg_tensor *b3 = jg_mul_scalar(p3, 1.0);
    assert_int_equal(jg_copy_(b3, q3), 0);
    assert_int_equal(jg_backward(jg_sum(b3), NULL, 0), 0);
    assert_non_null(jg_grad(p3));
    TU_CHECK(jg_grad(p3), 1, TU_SHAPE(3), TU_VALS(0, 0, 0), 0);
    TU_CHECK(jg_grad(q3), 1, TU_SHAPE(3), TU_VALS(1, 1, 1), 0);
    /* 0-d */
    jg_tensor *p = leaf(1, TU_VALS(5));
    jg_tensor *b = jg_sum(p);
    assert_int_equal(jg_zero_(b), 0);
    assert_true(jg_requires_grad(b));
    assert_int_equal(jg_backward(b, NULL, 0), 0);
    TU_CHECK(jg_grad(p), 1, TU_SHAPE(1), TU_VALS(0), 0);
}

/* One view written with another view of the same base (x[0:2] *= x[2:4]):
 * the saved operand must not keep the base alive through the base's own
 * history (a leak the ASan build reports).  The saved operand shares the
 * written storage, so backward fails as PyTorch's does. */
static void test_view_times_sibling_view(void **state) {
    (void)state;
    jg_tensor *p = leaf(4, TU_VALS(1, 2, 3, 4));
    jg_tensor *x = jg_mul_scalar(p, 1.0);
    assert_int_equal(jg_mul_(jg_slice(x, 0, 0, 2), jg_slice(x, 0, 2, 4)), 0);
    TU_CHECK(x, 1, TU_SHAPE(4), TU_VALS(3, 8, 3, 4), 0);
    assert_int_equal(jg_backward(jg_sum(x), NULL, 0), -1);
    TU_ERROR("one of the variables needed for gradient computation has been modified by an "
             "inplace operation");
}

static void test_inplace_on_view_of_leaf_refused(void **state) {
    (void)state;
    jg_tensor *p = leaf(3, TU_VALS(1, 2, 3));
    assert_int_equal(jg_mul_scalar_(jg_slice(p, 0, 0, 2), 2.0), -1);
    TU_ERROR("a view of a leaf Variable that requires grad is being used in an in-place "
             "operation.");
    TU_CHECK(p, 1, TU_SHAPE(3), TU_VALS(1, 2, 3), 0);
    bool prev = jg_set_grad_enabled(false); /* allowed without grad mode */
    assert_int_equal(jg_mul_scalar_(jg_slice(p, 0, 0, 2), 2.0), 0);
    jg_set_grad_enabled(prev);
    TU_CHECK(p, 1, TU_SHAPE(3), TU_VALS(2, 4, 3), 0);
}

/* A view made without grad mode of a tensor that requires grad, written in
 * grad mode: PyTorch's error; inside no_grad it is fine.  A view of a
 * detached tensor is written as a tensor of its own: it takes the history,
 * its base keeps its own (torch: x [1, 4, 9] with x's history unchanged). */
static void test_inplace_on_no_grad_view_and_detached(void **state) {
    (void)state;
    jg_tensor *p = leaf(3, TU_VALS(1, 2, 3));
    jg_tensor *x = jg_mul_scalar(p, 1.0);
    bool prev = jg_set_grad_enabled(false);
    jg_tensor *v = jg_slice(x, 0, 0, 2);
    jg_set_grad_enabled(prev);
    assert_int_equal(jg_mul_scalar_(v, 2.0), -1);
    TU_ERROR("A view was created in no_grad mode and is being modified inplace with grad mode "
             "enabled.");
    TU_CHECK(x, 1, TU_SHAPE(3), TU_VALS(1, 2, 3), 0);
    jg_set_grad_enabled(false);
    assert_int_equal(jg_mul_scalar_(v, 2.0), 0);
    jg_set_grad_enabled(prev);
    TU_CHECK(x, 1, TU_SHAPE(3), TU_VALS(2, 4, 3), 0);

    jg_tensor *q = leaf(3, TU_VALS(1, 2, 3));
    jg_tensor *y = jg_mul_scalar(p, 1.0), *d = jg_detach(y);
    assert_int_equal(jg_mul_(d, q), 0);
    TU_CHECK(y, 1, TU_SHAPE(3), TU_VALS(1, 4, 9), 0);
    assert_string_equal(jg_grad_fn_name(y), "MulBackward1"); /* (mul by a scalar) unchanged */
    assert_true(jg_requires_grad(d));
    assert_int_equal(jg_backward(jg_sum(d), NULL, 0), 0);
    TU_CHECK(jg_grad(q), 1, TU_SHAPE(3), TU_VALS(1, 2, 3), 0);
}

#define MSG_INTERNAL                                                                               \
    "unsupported operation: more than one element of the written-to tensor refers to a single "    \
    "memory location. Please clone() the tensor before performing the operation."

/* Writing into an expanded view is refused with PyTorch's message, data and
 * version untouched. */
static void test_inplace_into_expand_refused(void **state) {
    (void)state;
    jg_tensor *z = tu_tensor(JG_F32, 1, TU_SHAPE(1), TU_VALS(0));
    jg_tensor *e = jg_expand(z, 1, TU_SHAPE(3));
    jg_tensor *one = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 1, 1));
    uint64_t ver = jg_version(z);
    assert_int_equal(jg_add_(e, one), -1);
    TU_ERROR(MSG_INTERNAL);
    assert_int_equal(jg_mul_scalar_(e, 2.0), -1);
    TU_ERROR(MSG_INTERNAL);
    assert_int_equal(jg_copy_(e, one), -1);
    TU_ERROR(MSG_INTERNAL);
    assert_int_equal(jg_zero_(e), -1);
    TU_ERROR(MSG_INTERNAL);
    assert_true(jg_version(z) == ver);
    TU_CHECK(z, 1, TU_SHAPE(1), TU_VALS(0), 0);
    /* with autograd too */
    jg_tensor *p = leaf(1, TU_VALS(1));
    jg_tensor *b = jg_mul_scalar(p, 1.0);
    assert_int_equal(jg_add_(jg_expand(b, 1, TU_SHAPE(3)), one), -1);
    TU_ERROR(MSG_INTERNAL);
}

/* copy_ between overlapping views: dense ones partly overlapping are refused
 * as PyTorch does; strided ones are copied through a temporary, never with
 * overlapping memcpy (ASan memcpy-param-overlap). */
static void test_copy_overlapping_views(void **state) {
    (void)state;
    double v[64];
    for (int i = 0; i < 64; i++)
        v[i] = i;
    jg_tensor *x = tu_tensor(JG_F64, 1, TU_SHAPE(64), v);
    assert_int_equal(jg_copy_(jg_slice(x, 0, 1, 64), jg_slice(x, 0, 0, 63)), -1);
    TU_ERROR("some elements of the input tensor and the written-to tensor refer to a single "
             "memory location");
    TU_CHECK(x, 1, TU_SHAPE(64), v, 0);
    /* the same region: a no-op */
    assert_int_equal(jg_copy_(jg_slice(x, 0, 0, 63), jg_slice(x, 0, 0, 63)), 0);
    TU_CHECK(x, 1, TU_SHAPE(64), v, 0);
    /* columns 1..2 of an [8, 8] matrix from columns 0..1 (strided: copied) */
    jg_tensor *m = jg_reshape(x, 2, TU_SHAPE(8, 8));
    assert_int_equal(jg_copy_(jg_slice(m, 1, 1, 3), jg_slice(m, 1, 0, 2)), 0);
    double want[64];
    memcpy(want, v, sizeof want);
    for (int r = 0; r < 8; r++) {
        want[r * 8 + 1] = v[r * 8 + 0];
        want[r * 8 + 2] = v[r * 8 + 1];
    }
    TU_CHECK(x, 1, TU_SHAPE(64), want, 0);
}

/* ---------------------------------------------------------- compiled */

#define MAXV 8
#define MAXR 32

typedef struct {
    int n;
    int len[MAXR];
    bool none[MAXR];
    double v[MAXR][MAXV];
} result;

static void collect(result *r, const jg_tensor *t) {
    int k = r->n++;
    assert_true(k < MAXR);
    r->none[k] = !t;
    r->len[k] = t ? (int)jg_numel(t) : 0;
    assert_true(r->len[k] <= MAXV);
    if (t)
        tu_values(t, r->v[k]);
}

static void assert_same_result(const result *a, const result *b) {
    assert_int_equal(a->n, b->n);
    for (int k = 0; k < a->n; k++) {
        assert_int_equal(a->none[k], b->none[k]);
        assert_int_equal(a->len[k], b->len[k]);
        if (memcmp(a->v[k], b->v[k], sizeof(double) * (size_t)a->len[k]))
            fail_msg("result %d differs: %g vs %g ...", k, a->v[k][0], b->v[k][0]);
    }
}

enum { AS_LEAF, AS_NONLEAF, AS_VIEW }; /* how input k is made from its leaf p[k] */

typedef struct {
    jg_program_fn fn;
    int n_in;
    int len[3];
    int kind[3];
    bool rg[3];
    bool no_grad; /* calls (and the loss) without grad mode */
} prog_case;

static const double SEED[3][MAXV] = {
    {1.5, -2, 0.25, 3, -1, 2.5}, {0.5, 3, -1.5, 2, 4, -0.75}, {2, -1, 0.5, 1.25, -3, 1}};

/* Calls the program twice (eagerly when backend is NULL) on inputs made from
 * fresh leaves and backpropagates through the outputs and the inputs (their
 * histories are what in-place ops change), collecting outputs, input values
 * and leaf gradients. */
static void run_case(const prog_case *pc, const char *backend, result *r) {
    jg_scope_push();
    r->n = 0;
    jg_tensor *p[3], *in[3], *base[3] = {0};
    for (int k = 0; k < pc->n_in; k++) {
        p[k] = tu_tensor(JG_F32, 1, (int64_t[]){pc->len[k]}, SEED[k]);
        jg_set_requires_grad(p[k], pc->rg[k]);
        if (pc->kind[k] == AS_LEAF)
            in[k] = p[k];
        else if (pc->kind[k] == AS_NONLEAF)
            in[k] = jg_mul_scalar(p[k], 1.0);
        else
            in[k] = jg_slice(base[k] = jg_mul_scalar(p[k], 1.0), 0, 1, pc->len[k] - 1);
    }
    jg_compile_options o = {.backend = backend, .fullgraph = true};
    jg_compiled *c = backend ? jg_compile(pc->fn, NULL, &o) : NULL;
    assert_true(!backend || c);
    bool prev = jg_set_grad_enabled(!pc->no_grad);
    for (int call = 0; call < 2; call++) {
        jg_tensor *outs[JG_MAX_OUTPUTS] = {0};
        int n = c ? jg_compiled_call(c, NULL, 0, pc->n_in, in, outs)
                  : pc->fn(NULL, NULL, pc->n_in, in, outs);
        if (n < 0)
            fail_msg("%s: %s", backend ? backend : "eager", jg_last_error());
        jg_tensor *loss = NULL;
        for (int j = 0; j < n; j++) {
            collect(r, outs[j]);
            jg_tensor *s = jg_sum(jg_mul_scalar(outs[j], j + 1.0));
            loss = loss ? jg_add(loss, s) : s;
        }
        for (int k = 0; k < pc->n_in; k++) {
            collect(r, in[k]);
            int v = r->n++; /* the version: eager bumps it once per in-place write */
            r->len[v] = 1;
            r->none[v] = false;
            r->v[v][0] = (double)jg_version(in[k]);
            if (base[k])
                collect(r, base[k]);
            jg_tensor *t = base[k] ? base[k] : in[k];
            loss = jg_add(loss, jg_sum(jg_mul_scalar(t, 0.25 * (k + 1))));
        }
        if (jg_requires_grad(loss))
            assert_int_equal(jg_backward(loss, NULL, JG_RETAIN_GRAPH), 0);
    }
    jg_set_grad_enabled(prev);
    for (int k = 0; k < pc->n_in; k++) {
        collect(r, jg_grad(p[k]));
        collect(r, p[k]);
    }
    jg_compiled_free(c);
    jg_scope_pop();
}

static void check_case(const prog_case *pc) {
    result eager, comp;
    run_case(pc, NULL, &eager);
    run_case(pc, "interp", &comp);
    assert_same_result(&eager, &comp);
    if (jg_compile_backend_available("c")) {
        run_case(pc, "c", &comp);
        assert_same_result(&eager, &comp);
    }
}

/* In-place ops on intermediates and on views of them: functionalized. */
static int prog_intermediates(void *u, const void *a, int n, jg_tensor *const *in,
                              jg_tensor **out) {
    (void)u, (void)a, (void)n;
    jg_tensor *x = in[0], *w = in[1];
    jg_tensor *t = jg_mul(x, w);
    jg_tensor *v = jg_slice(t, 0, 1, 3); /* taken before the base is written */
    if (jg_mul_(t, w) < 0 || jg_add_(v, jg_slice(w, 0, 0, 2)) < 0)
        return -1;
    jg_tensor *z = jg_clone(t);
    if (jg_zero_(jg_slice(z, 0, 0, 1)) < 0 || jg_copy_(jg_slice(z, 0, 3, 4), jg_slice(x, 0, 0, 1)))
        return -1;
    out[0] = jg_sum(jg_mul(v, jg_slice(t, 0, 2, 4)));
    out[1] = z;
    return 2;
}

static void test_compiled_inplace_intermediates(void **state) {
    (void)state;
    prog_case pc = {prog_intermediates, 2, {4, 4}, {AS_LEAF, AS_LEAF}, {true, true}, false};
    check_case(&pc);
    pc.rg[0] = false;
    check_case(&pc);
}

/* In-place ops on an input and on a view of it: written back after the call,
 * the input's history moves onto the compiled call. */
static int prog_writes_input(void *u, const void *a, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)a, (void)n;
    jg_tensor *x = in[0], *w = in[1];
    jg_tensor *v = jg_slice(x, 0, 0, 2);
    if (jg_mul_(x, w) < 0 || jg_sub_(v, jg_slice(w, 0, 2, 4)) < 0 || jg_mul_scalar_(x, 0.5) < 0)
        return -1;
    out[0] = jg_sum(jg_mul(x, w));
    out[1] = x;
    out[2] = v;
    return 3;
}

static void test_compiled_inplace_on_input(void **state) {
    (void)state;
    prog_case pc = {prog_writes_input, 2, {4, 4}, {AS_NONLEAF, AS_LEAF}, {true, true}, false};
    check_case(&pc);
    pc.rg[1] = false; /* only the written input needs grad */
    check_case(&pc);
    /* only the other one: x takes history from x.mul_(w), so the view v,
     * made before and not used since, is taken for a leaf when written, as
     * by PyTorch (its check reads v's own grad_fn): eager and compiled fail
     * alike, after the same first write */
    for (int b = 0; b < 3; b++) {
        const char *backend = b == 0 ? NULL : b == 1 ? "interp" : "c";
        if (backend && !jg_compile_backend_available(backend))
            continue;
        jg_tensor *x = jg_mul_scalar(tu_tensor(JG_F32, 1, TU_SHAPE(4), SEED[0]), 1.0);
        jg_tensor *w = tu_tensor(JG_F32, 1, TU_SHAPE(4), SEED[1]);
        jg_set_requires_grad(w, true);
        jg_compile_options o = {.backend = backend};
        jg_compiled *c = backend ? jg_compile(prog_writes_input, NULL, &o) : NULL;
        jg_tensor *in[2] = {x, w}, *outs[JG_MAX_OUTPUTS] = {0};
        int n = c ? jg_compiled_call(c, NULL, 0, 2, in, outs)
                  : prog_writes_input(NULL, NULL, 2, in, outs);
        assert_int_equal(n, -1);
        TU_ERROR("a leaf Variable that requires grad is being used in an in-place operation.");
        TU_CHECK(x, 1, TU_SHAPE(4), TU_VALS(0.75, -6, -0.375, 6), 0);
        if (c)
            jg_compiled_free(c);
    }
    pc.rg[1] = true;
    pc.kind[0] = AS_VIEW, pc.len[0] = 6; /* a view of a base the program never sees */
    pc.rg[0] = true;
    check_case(&pc);
}

/* Eager reshape copies when the layout allows no view (a transpose made
 * flat), and a write into the copy does not reach the base; a reshape that
 * is a view passes writes through.  The trace must tell them apart. */
static int prog_reshape_copy_or_view(void *u, const void *a, int n, jg_tensor *const *in,
                                     jg_tensor **out) {
    (void)u, (void)a, (void)n;
    jg_tensor *x = jg_mul_scalar(in[0], 1.0);
    jg_tensor *m = jg_reshape(x, 2, TU_SHAPE(2, 3));
    jg_tensor *flat_copy = jg_reshape(jg_transpose(m, 0, 1), 1, TU_SHAPE(6));
    jg_tensor *flat_view = jg_reshape(m, 1, TU_SHAPE(6));
    if (jg_add_(flat_copy, in[1]) < 0 || jg_mul_(flat_view, in[1]) < 0)
        return -1;
    out[0] = x;
    out[1] = flat_copy;
    return 2;
}

static void test_compiled_inplace_reshape_copy_or_view(void **state) {
    (void)state;
    prog_case pc = {prog_reshape_copy_or_view, 2, {6, 6}, {AS_LEAF, AS_LEAF}, {true, true}, false};
    check_case(&pc);
}

/* Writes eager refuses for overlap are refused when traced too (the traced
 * views' geometry in the base's memory is replayed): into an expand, and
 * from a partly overlapping slice. */
static int prog_write_expand(void *u, const void *a, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)a, (void)n;
    jg_tensor *x = jg_mul_scalar(jg_slice(in[0], 0, 0, 1), 1.0);
    if (jg_add_(jg_expand(x, 1, TU_SHAPE(4)), in[0]) < 0)
        return -1;
    out[0] = x;
    return 1;
}

static int prog_write_shifted(void *u, const void *a, int n, jg_tensor *const *in,
                              jg_tensor **out) {
    (void)u, (void)a, (void)n;
    jg_tensor *x = jg_mul_scalar(in[0], 1.0);
    if (jg_copy_(jg_slice(x, 0, 1, 4), jg_slice(x, 0, 0, 3)) < 0)
        return -1;
    out[0] = x;
    return 1;
}

static void test_compiled_inplace_overlap_refused(void **state) {
    (void)state;
    jg_program_fn progs[2] = {prog_write_expand, prog_write_shifted};
    const char *msgs[2] = {"more than one element of the written-to tensor refers to a single "
                           "memory location",
                           "some elements of the input tensor and the written-to tensor refer to "
                           "a single memory location"};
    for (int k = 0; k < 2; k++) {
        jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(4), SEED[0]), *outs[JG_MAX_OUTPUTS];
        assert_int_equal(progs[k](NULL, NULL, 1, &x, outs), -1); /* eagerly */
        TU_ERROR(msgs[k]);
        jg_compile_options o = {.fullgraph = true};
        jg_compiled *c = jg_compile(progs[k], NULL, &o);
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, outs), -1);
        TU_ERROR(msgs[k]);
        jg_compiled_free(c);
    }
}

/* An optimizer-style step without grad mode writes a leaf that requires
 * grad: allowed, as eagerly. */
static int prog_sgd(void *u, const void *a, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)a, (void)n;
    if (jg_sub_(in[0], jg_mul_scalar(in[1], 0.1)) < 0)
        return -1;
    out[0] = jg_sum(in[0]);
    return 1;
}

static void test_compiled_inplace_no_grad_step(void **state) {
    (void)state;
    prog_case pc = {prog_sgd, 2, {4, 4}, {AS_LEAF, AS_LEAF}, {true, false}, true};
    check_case(&pc);
}

/* A leaf that requires grad written in grad mode: eager's error, nothing
 * written. */
static void test_compiled_inplace_leaf_refused(void **state) {
    (void)state;
    const char *backends[] = {"interp", "c"};
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        jg_tensor *p = leaf(4, SEED[0]), *w = tu_tensor(JG_F32, 1, TU_SHAPE(4), SEED[1]);
        jg_tensor *in[2] = {p, w}, *outs[JG_MAX_OUTPUTS];
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *c = jg_compile(prog_sgd, NULL, &o);
        assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, outs), -1);
        TU_ERROR("a leaf Variable that requires grad is being used in an in-place operation.");
        TU_CHECK(p, 1, TU_SHAPE(4), SEED[0], 0);
        assert_true(jg_version(p) == 0);
        jg_compiled_free(c);
    }
}

/* Writing an input that shares storage with another input: the graph could
 * not see the write through the other one, so the call runs eagerly (and
 * fullgraph refuses it). */
static int prog_write_first_read_second(void *u, const void *a, int n, jg_tensor *const *in,
                                        jg_tensor **out) {
    (void)u, (void)a, (void)n;
    if (jg_mul_scalar_(in[0], 2.0) < 0)
        return -1;
    out[0] = jg_clone(in[1]);
    return 1;
}

static void test_compiled_inplace_aliased_inputs(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(4), SEED[0]);
    jg_tensor *in[2] = {x, jg_slice(x, 0, 1, 3)}, *outs[JG_MAX_OUTPUTS];
    jg_compiled *c = jg_compile(prog_write_first_read_second, NULL, NULL);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, outs), 1);
    assert_int_equal(jg_compiled_fallbacks(c), 1);
    TU_CHECK(outs[0], 1, TU_SHAPE(2), TU_VALS(-4, 0.5), 0);
    jg_compiled_free(c);
    jg_compile_options o = {.fullgraph = true};
    c = jg_compile(prog_write_first_read_second, NULL, &o);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, outs), -1);
    TU_ERROR("an in-place op writes input 0, which shares storage with input 1");
    jg_compiled_free(c);
}

/* ---------------------------------------------------------- mark_dirty */

static int dbl_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_ctx_mark_dirty(ctx, in[0]);
    if (jg_mul_scalar_(in[0], 2.0) < 0)
        return -1;
    out[0] = in[0];
    return 1;
}

static int dbl_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **gin) {
    (void)ctx, (void)n_out, (void)n_in;
    gin[0] = jg_mul_scalar(g[0], 2.0);
    return 1;
}

static const jg_function DOUBLE = {"Double", dbl_forward, dbl_backward, NULL};

/* ctx.mark_dirty: the input comes back as itself, with the call's history
 * (through the base for a view); torch: b = p*1; Double(b[0:2]);
 * (b * [1, 10, 100]).sum().backward() -> b [2, 4, 3], p.grad [2, 20, 100]. */
static void test_mark_dirty_returns_input_with_history(void **state) {
    (void)state;
    for (int as_view = 0; as_view < 2; as_view++) {
        jg_tensor *p = leaf(3, TU_VALS(1, 2, 3));
        jg_tensor *b = jg_mul_scalar(p, 1.0);
        jg_tensor *x = as_view ? jg_slice(b, 0, 0, 2) : b, *o;
        assert_int_equal(jg_apply(&DOUBLE, 1, &x, NULL, 0, &o), 1);
        assert_ptr_equal(o, x);
        if (!as_view)
            assert_string_equal(jg_grad_fn_name(x), "DoubleBackward");
        TU_CHECK(b, 1, TU_SHAPE(3), as_view ? TU_VALS(2, 4, 3) : TU_VALS(2, 4, 6), 0);
        jg_tensor *w = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 10, 100));
        assert_int_equal(jg_backward(jg_sum(jg_mul(b, w)), NULL, 0), 0);
        TU_CHECK(jg_grad(p), 1, TU_SHAPE(3), as_view ? TU_VALS(2, 20, 100) : TU_VALS(2, 20, 200),
                 0);
    }
    jg_tensor *p = leaf(2, TU_VALS(1, 2)), *o;
    assert_int_equal(jg_apply(&DOUBLE, 1, &p, NULL, 0, &o), -1);
    TU_ERROR("a leaf Variable that requires grad has been used in an in-place operation.");
}

static int prog_dirty(void *u, const void *a, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)a, (void)n;
    jg_tensor *x = jg_mul_scalar(in[0], 1.0);
    if (jg_apply(&DOUBLE, 1, &x, NULL, 0, &out[0]) < 0)
        return -1;
    return 1;
}

/* Under compile a dirty custom call is not captured: the program runs
 * eagerly (fullgraph: an error naming it). */
static void test_mark_dirty_compiled_runs_eagerly(void **state) {
    (void)state;
    jg_tensor *p = leaf(2, TU_VALS(1, 2)), *outs[JG_MAX_OUTPUTS];
    jg_compiled *c = jg_compile(prog_dirty, NULL, NULL);
    if (jg_compiled_call(c, NULL, 0, 1, &p, outs) != 1)
        fail_msg("%s", jg_last_error());
    assert_int_equal(jg_compiled_fallbacks(c), 1);
    TU_CHECK(outs[0], 1, TU_SHAPE(2), TU_VALS(2, 4), 0);
    jg_compiled_free(c);
    jg_compile_options o = {.fullgraph = true};
    c = jg_compile(prog_dirty, NULL, &o);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &p, outs), -1);
    TU_ERROR("ctx.mark_dirty");
    jg_compiled_free(c);
}

/* A forward that writes its input without mark_dirty (the write lands in
 * the caller's tensor eagerly, as in PyTorch): compiled, the call is not
 * captured either, so the input is written as eagerly. */
static int scale_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx, (void)n;
    if (jg_mul_scalar_(in[0], 3.0) < 0)
        return -1;
    out[0] = jg_mul_scalar(in[0], 1.0);
    return 1;
}

static const jg_function SCALE = {"Scale", scale_forward, dbl_backward, NULL};

static int prog_scale(void *u, const void *a, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)a, (void)n;
    jg_tensor *o;
    if (jg_apply(&SCALE, 1, &in[0], NULL, 0, &o) < 0)
        return -1;
    out[0] = jg_add(o, in[0]);
    return 1;
}

static void test_forward_writing_input_compiled_runs_eagerly(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2)), *outs[JG_MAX_OUTPUTS];
    jg_compiled *c = jg_compile(prog_scale, NULL, NULL);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, outs), 1);
    assert_int_equal(jg_compiled_fallbacks(c), 1);
    TU_CHECK(x, 1, TU_SHAPE(2), TU_VALS(3, 6), 0);
    TU_CHECK(outs[0], 1, TU_SHAPE(2), TU_VALS(6, 12), 0);
    jg_compiled_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_view_rebased_after_base_inplace),
        TU_TEST(test_view_requires_grad_after_base_write),
        TU_TEST(test_inplace_on_view_copyslices),
        TU_TEST(test_inplace_on_view_chain),
        TU_TEST(test_copy_into_view),
        TU_TEST(test_zero_keeps_requires_grad),
        TU_TEST(test_inplace_on_no_grad_view_and_detached),
        TU_TEST(test_view_times_sibling_view),
        TU_TEST(test_inplace_on_view_of_leaf_refused),
        TU_TEST(test_inplace_into_expand_refused),
        TU_TEST(test_copy_overlapping_views),
        TU_TEST(test_compiled_inplace_intermediates),
        TU_TEST(test_compiled_inplace_on_input),
        TU_TEST(test_compiled_inplace_reshape_copy_or_view),
        TU_TEST(test_compiled_inplace_overlap_refused),
        TU_TEST(test_compiled_inplace_no_grad_step),
        TU_TEST(test_compiled_inplace_leaf_refused),
        TU_TEST(test_compiled_inplace_aliased_inputs),
        TU_TEST(test_mark_dirty_returns_input_with_history),
        TU_TEST(test_mark_dirty_compiled_runs_eagerly),
        TU_TEST(test_forward_writing_input_compiled_runs_eagerly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
