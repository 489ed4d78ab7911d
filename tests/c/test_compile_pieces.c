/* Partial graphs: a program that reads values while traced runs as compiled
 * pieces around each read (src/compile/segments.c), bitwise eager's values
 * and gradients on both backends. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *backends[] = {"interp", "c"};

static jg_tensor *leaf(int64_t n, double scale) {
    jg_tensor *t = jg_mul_scalar(jg_randn(JG_F32, 1, TU_SHAPE(n)), scale);
    jg_set_requires_grad(t, true);
    return t;
}

static jg_tensor *grad_copy(jg_tensor *t) {
    jg_tensor *g = jg_grad(t);
    return g ? jg_clone(g) : NULL;
}

/* user: how many reads (0..3), each scaling what follows by the value
 * read: y = tanh(x) * w; repeat: v = sum(y).item(); y = y * v + x */
static int p_reads(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    int reads = *(const int *)user;
    jg_tensor *y = jg_mul(jg_tanh(in[0]), in[1]);
    for (int k = 0; k < reads && y; k++) {
        double v = jg_item(jg_sum(y));
        if (v != v)
            return -1;
        y = jg_add(jg_mul_scalar(y, v / 4), in[0]);
    }
    out[0] = y ? jg_sum(jg_mul(y, y)) : NULL;
    out[1] = y;
    return out[0] ? 2 : -1;
}

/* a data-dependent branch: x * 2 or exp(x) by the sign of sum(x) */
static int p_branch(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *h = jg_tanh(jg_mul(in[0], in[1]));
    double v = jg_item(jg_sum(h));
    if (v != v)
        return -1;
    jg_tensor *y = v > 0 ? jg_mul_scalar(h, 2.0) : jg_exp(h);
    out[0] = jg_sum(jg_mul(y, in[1]));
    return out[0] ? 1 : -1;
}

/* a view held across the read: the view is remade from its computed base,
 * and writing the base afterwards shows through it as in eager mode */
static int p_view(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *h = jg_mul(in[0], in[1]);
    jg_tensor *s = jg_slice(h, 0, 1, 3);
    double v = jg_item(jg_sum(h));
    if (v != v)
        return -1;
    if (jg_mul_scalar_(h, 3.0) < 0)
        return -1;
    out[0] = jg_sum(jg_mul(s, jg_slice(in[0], 0, 0, 2)));
    return out[0] ? 1 : -1;
}

/* Runs prog eagerly and compiled for `calls` calls (inputs in[], backward
 * through output 0) and checks outputs and gradients bitwise; returns c. */
static jg_compiled *check_pieces(jg_program_fn prog, void *user, const char *backend, int n,
                                 jg_tensor *const *in, int calls) {
    jg_compiled *c = jg_compile(prog, user, &(jg_compile_options){.backend = backend});
    assert_non_null(c);
    for (int call = 0; call < calls; call++) {
        jg_tensor *eout[4], *cout[4], *eg[4];
        for (int i = 0; i < n; i++)
            jg_clear_grad(in[i]);
        int ne = prog(user, NULL, n, in, eout);
        assert_true(ne >= 1);
        assert_int_equal(jg_backward(eout[0], NULL, 0), 0);
        for (int i = 0; i < n; i++) {
            eg[i] = grad_copy(in[i]);
            jg_clear_grad(in[i]);
        }
        int nc = jg_compiled_call(c, NULL, 0, n, in, cout);
        if (nc < 0)
            fail_msg("%s", jg_last_error());
        assert_int_equal(nc, ne);
        for (int j = 0; j < ne; j++) {
            assert_false(jg_is_traced(cout[j]));
            TU_SAME(cout[j], eout[j]);
        }
        if (jg_backward(cout[0], NULL, 0) < 0)
            fail_msg("%s", jg_last_error());
        for (int i = 0; i < n; i++)
            TU_SAME(jg_grad(in[i]), eg[i]);
    }
    assert_int_equal(jg_compiled_fallbacks(c), 0);
    assert_int_equal(jg_compiled_entries(c), 1);
    return c;
}

static void pieces_run(void) {
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        for (int reads = 1; reads <= 3; reads++) {
            jg_tensor *in[2] = {leaf(5, 1.0), leaf(5, 0.5)};
            jg_compiled *c = check_pieces(p_reads, &reads, backends[b], 2, in, 3);
            /* N reads: N + 1 graphs per call */
            assert_int_equal(jg_compiled_graphs_run(c), 3 * (reads + 1));
            const char *const *why;
            assert_int_equal(jg_compiled_breaks(c, &why), reads);
            for (int k = 0; k < reads; k++)
                assert_non_null(strstr(why[k], "jg_item() read the values of f32[]"));
            char *g = jg_compiled_graph(c, 0);
            assert_non_null(g);
            assert_non_null(strstr(g, "entry 0 runs in pieces"));
            char piece[32];
            snprintf(piece, sizeof piece, "piece %d:\nforward(", reads);
            assert_non_null(strstr(g, piece));
            free(g);
            jg_compiled_free(c);
        }
    }
}

static void test_reads(void **state) {
    (void)state;
    char *s = tu_capture_stderr(pieces_run);
    assert_non_null(strstr(s, "jitgrad: graph break (entry 0): jg_item() read the values of "
                              "traced tensor f32[]"));
    assert_non_null(strstr(s, "run as compiled pieces around each read"));
    free(s);
}

static void branch_run(void) {
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        jg_tensor *x = leaf(4, 1.0), *w = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1, 1, 1, 1));
        jg_set_requires_grad(w, true);
        jg_compiled *c = check_pieces(p_branch, NULL, backends[b], 2, (jg_tensor *[]){x, w}, 1);
        /* both branches, each one correct, from the same entry */
        double signs[4] = {1, -1, 1, -1};
        for (int k = 0; k < 4; k++) {
            bool gm = jg_set_grad_enabled(false);
            jg_tensor *xs = jg_mul_scalar(jg_abs(x), signs[k]); /* (a leaf) */
            jg_set_grad_enabled(gm);
            jg_set_requires_grad(xs, true);
            jg_tensor *eo, *co;
            jg_clear_grad(w);
            assert_int_equal(p_branch(NULL, NULL, 2, (jg_tensor *[]){xs, w}, &eo), 1);
            assert_int_equal(jg_backward(eo, NULL, 0), 0);
            jg_tensor *egx = grad_copy(xs), *egw = grad_copy(w);
            jg_clear_grad(xs);
            jg_clear_grad(w);
            assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){xs, w}, &co), 1);
            TU_SAME(co, eo);
            if (jg_backward(co, NULL, 0) < 0)
                fail_msg("%s", jg_last_error());
            TU_SAME(jg_grad(xs), egx);
            TU_SAME(jg_grad(w), egw);
        }
        assert_int_equal(jg_compiled_graphs_run(c), 2 * 5);
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        jg_compiled_free(c);
    }
}

static void test_branch(void **state) {
    (void)state;
    free(tu_capture_stderr(branch_run));
}

static void view_run(void) {
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        jg_tensor *in[2] = {leaf(4, 1.0), leaf(4, 1.0)};
        jg_compiled *c = check_pieces(p_view, NULL, backends[b], 2, in, 2);
        jg_compiled_free(c);
    }
}

static void test_view_across_read(void **state) {
    (void)state;
    free(tu_capture_stderr(view_run));
}

/* A view of a piece's result the program returns (fuzz seed 2402013): the
 * view is a piece output of its own, so its gradient and the piece's use of
 * it (tanh) are summed at the view as in eager mode, not through its base.
 * user: nonzero also returns the base y, which the caller writes in place
 * afterwards (the view sees it, as in eager mode). */
static int p_view_out(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    double c = jg_item(jg_sum(in[1]));
    if (c != c)
        return -1;
    jg_tensor *y = jg_clone(in[0]);
    jg_tensor *v = jg_slice(y, 0, 0, 1);
    jg_tensor *z = jg_mul(y, jg_tanh(v));
    out[0] = jg_mul_scalar(jg_mse_loss(in[0], z, JG_REDUCTION_MEAN), c > 0 ? 1.0 : -2.0);
    out[1] = v;
    out[2] = y;
    return out[0] && v ? (*(const int *)user ? 3 : 2) : -1;
}

/* x's gradient (a copy) of loss * 1.5 + sum(v * w); when the base is
 * returned, then also x's gradient of sum(v) after y *= 3 (appended) */
static jg_tensor *view_out_grad(jg_tensor *x, jg_tensor *const *o, int n, jg_tensor *w) {
    jg_tensor *l = jg_add(jg_mul_scalar(o[0], 1.5), jg_sum(jg_mul(o[1], w)));
    jg_clear_grad(x);
    /* (the graph kept: a compiled y's history is the piece's node) */
    if (jg_backward(l, NULL, JG_RETAIN_GRAPH) < 0)
        fail_msg("%s", jg_last_error());
    jg_tensor *g = grad_copy(x);
    if (n == 3) {
        /* the view's history is remade from the written base: x gets 3 */
        assert_int_equal(jg_mul_scalar_(o[2], 3.0), 0);
        jg_clear_grad(x);
        if (jg_backward(jg_sum(o[1]), NULL, 0) < 0)
            fail_msg("%s", jg_last_error());
        g = jg_cat(2, (jg_tensor *[]){g, grad_copy(x)}, 0);
    }
    return g;
}

static void view_out_run(void) {
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        for (int ret_base = 0; ret_base < 2; ret_base++) {
            jg_compiled *c =
                jg_compile(p_view_out, &ret_base, &(jg_compile_options){.backend = backends[b]});
            assert_non_null(c);
            for (uint64_t seed = 0; seed < 48; seed++) {
                jg_manual_seed(seed);
                jg_tensor *x = leaf(3, 1.0), *cin = leaf(4, 1.0);
                jg_tensor *w = jg_randn(JG_F32, 1, TU_SHAPE(1));
                jg_tensor *in[2] = {x, cin}, *eo[3], *co[3];
                int ne = p_view_out(&ret_base, NULL, 2, in, eo);
                assert_int_equal(ne, 2 + ret_base);
                jg_tensor *eg = view_out_grad(x, eo, ne, w);
                int nc = jg_compiled_call(c, NULL, 0, 2, in, co);
                if (nc < 0)
                    fail_msg("%s", jg_last_error());
                assert_int_equal(nc, ne);
                /* the view is one of its base's memory, tracked as in eager */
                if (ret_base)
                    assert_ptr_equal(jg_data(co[1]), jg_data(co[2]));
                jg_tensor *cg = view_out_grad(x, co, nc, w);
                for (int j = 0; j < ne; j++)
                    TU_SAME(co[j], eo[j]);
                TU_SAME(cg, eg);
            }
            assert_int_equal(jg_compiled_fallbacks(c), 0);
            assert_int_equal(jg_compiled_graphs_run(c), 2 * 48);
            jg_compiled_free(c);
        }
    }
}

static void test_view_output_grad_order(void **state) {
    (void)state;
    free(tu_capture_stderr(view_out_run));
}

/* A training step that logs its loss before backward(): the read splits
 * the forward from the rest, backward() of the computed loss runs eagerly
 * between the pieces, and the optimizer step (Adam: its first step makes
 * the state, eagerly too) is the second graph. */
typedef struct {
    jg_tensor *w1, *w2, *x, *y;
    jg_optim *opt;
    double logged;
} mlp;

static int p_step(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n, (void)in;
    mlp *m = user;
    jg_tensor *h = jg_tanh(jg_matmul(m->x, m->w1));
    jg_tensor *loss = jg_mse_loss(jg_matmul(h, m->w2), m->y, JG_REDUCTION_MEAN);
    if (!loss)
        return -1;
    m->logged = jg_item(loss);
    if (m->logged != m->logged || jg_backward(loss, NULL, 0) < 0 || jg_optim_step(m->opt) < 0 ||
        jg_optim_zero_grad(m->opt, true) < 0)
        return -1;
    out[0] = loss;
    return 1;
}

static void train(mlp *m, const char *backend, double *losses, long *graphs) {
    jg_manual_seed(3);
    m->w1 = jg_mul_scalar(jg_randn(JG_F32, 2, TU_SHAPE(4, 8)), 0.5);
    m->w2 = jg_mul_scalar(jg_randn(JG_F32, 2, TU_SHAPE(8, 2)), 0.5);
    m->x = jg_randn(JG_F32, 2, TU_SHAPE(16, 4));
    m->y = jg_randn(JG_F32, 2, TU_SHAPE(16, 2));
    jg_set_requires_grad(m->w1, true);
    jg_set_requires_grad(m->w2, true);
    m->opt = jg_optim_adam((jg_tensor *[]){m->w1, m->w2}, 2, 0.01, 0.9, 0.999, 1e-8, 0.0);
    jg_compiled *c =
        backend ? jg_compile(p_step, m, &(jg_compile_options){.backend = backend}) : NULL;
    for (int s = 0; s < 20; s++) {
        jg_tensor *o;
        long before = jg_compiled_graphs_run(c);
        int r = c ? jg_compiled_call(c, NULL, 0, 0, NULL, &o) : p_step(m, NULL, 0, NULL, &o);
        if (r != 1)
            fail_msg("%s", jg_last_error());
        graphs[s] = jg_compiled_graphs_run(c) - before;
        losses[s] = m->logged;
        assert_true(jg_item(o) == m->logged);
    }
    if (c) {
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        const char *const *why;
        assert_int_equal(jg_compiled_breaks(c, &why), 2);
        assert_non_null(strstr(why[0], "jg_item() read the values of f32[]"));
        assert_non_null(strstr(why[1], "backward() of a computed tensor"));
    }
    jg_compiled_free(c);
}

static void step_run(void) {
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        mlp e = {0}, m = {0};
        double le[20], lc[20];
        long ge[20], gc[20];
        train(&e, NULL, le, ge);
        train(&m, backends[b], lc, gc);
        for (int s = 0; s < 20; s++) {
            assert_true(le[s] == lc[s]);
            assert_int_equal(gc[s], 2); /* the forward, the optimizer step */
        }
        TU_SAME(m.w1, e.w1);
        TU_SAME(m.w2, e.w2);
        assert_null(jg_grad(m.w1));
        jg_optim_free(e.opt);
        jg_optim_free(m.opt);
    }
}

static void test_training_step(void **state) {
    (void)state;
    free(tu_capture_stderr(step_run));
}

/* user: whether to assign x.grad after the read (a break nothing splits:
 * it would happen once, at trace time) */
static int p_late_break(void *user, const void *args, int n, jg_tensor *const *in,
                        jg_tensor **out) {
    (void)args, (void)n;
    jg_tensor *y = jg_mul(in[0], in[0]);
    double v = jg_item(jg_sum(y));
    if (v != v)
        return -1;
    if (*(const bool *)user && jg_set_grad(in[0], jg_full(JG_F32, 1, TU_SHAPE(3), 1.0)) < 0)
        return -1;
    out[0] = jg_sum(jg_mul_scalar(y, v));
    return out[0] ? 1 : -1;
}

static void late_break_run(void) {
    bool late = false;
    jg_tensor *x = leaf(3, 1.0), *o;
    jg_compiled *c = jg_compile(p_late_break, &late, NULL);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
    /* now the program breaks after its first piece ran: the call fails
     * (the piece's effects happened), later calls run eagerly */
    late = true;
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), -1);
    TU_ERROR("jg_compiled_call: after 1 compiled pieces of the program ran, it broke where it "
             "cannot be split: ");
    jg_clear_grad(x);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
    assert_int_equal(jg_compiled_fallbacks(c), 1);
    assert_non_null(jg_grad(x)); /* (the eager run's assignment) */
    jg_compiled_free(c);
}

static void test_break_after_a_piece_ran(void **state) {
    (void)state;
    char *s = tu_capture_stderr(late_break_run);
    assert_non_null(strstr(s, "jitgrad: entry 0: jg_compiled_call: after 1 compiled pieces"));
    free(s);
}

/* fullgraph keeps failing at the read */
static void test_fullgraph(void **state) {
    (void)state;
    int reads = 1;
    jg_tensor *in[2] = {leaf(3, 1.0), leaf(3, 1.0)}, *o[2];
    jg_compiled *c = jg_compile(p_reads, &reads, &(jg_compile_options){.fullgraph = true});
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, o), -1);
    TU_ERROR("jg_compiled_call(fullgraph): the program cannot be captured in one graph: jg_item()");
    const char *const *why;
    assert_int_equal(jg_compiled_breaks(c, &why), 0);
    assert_int_equal(jg_compiled_breaks(NULL, &why), -1);
    TU_ERROR("jg_compiled_breaks: compiled function is NULL");
    jg_compiled_free(c);
}

/* An in-place write on an input leaf x, directly or through a view of it
 * (docs/compiler.md "Graph breaks"), around a read.  Eager refuses it with
 * grad mode on when x requires grad ("a leaf Variable ..." / "a view of a
 * leaf Variable ..."); the compiled call fails the same way having written
 * nothing, and otherwise gives eager's values, version and gradient.
 * Regression: in pieces, the view made before the read lost its view record
 * when the first piece ran, so the write after the read was not refused and
 * wrote the leaf; one made and written before the read did not reach x. */
typedef struct {
    int read;  /* 0 none, 1 before the view is made, 2 before the write, 3 after it */
    int depth; /* 0 x itself, 1 x[1:4], 2 x[1:4][0:2] */
    bool grad_write;
} leaf_write;

static bool read_x(jg_tensor *t) {
    double v = jg_item(jg_sum(t));
    return v == v;
}

static int p_leaf_write(void *user, const void *args, int n, jg_tensor *const *in,
                        jg_tensor **out) {
    (void)args, (void)n;
    const leaf_write *w = user;
    jg_tensor *x = in[0], *v = x;
    if (w->read == 1 && !read_x(x))
        return -1;
    if (w->depth >= 1)
        v = jg_slice(v, 0, 1, 4);
    if (w->depth >= 2)
        v = jg_slice(v, 0, 0, 2);
    if (!v || (w->read == 2 && !read_x(v)))
        return -1;
    bool gm = jg_set_grad_enabled(w->grad_write);
    int rc = jg_mul_scalar_(v, 2.0);
    jg_set_grad_enabled(gm);
    if (rc < 0 || (w->read == 3 && !read_x(x)))
        return -1;
    out[0] = jg_add(jg_sum(jg_mul_scalar(x, 3.0)), jg_add(jg_sum(v), jg_sum(in[1])));
    return out[0] ? 1 : -1;
}

typedef struct {
    int rc;
    char err[200];
    double out;
    jg_tensor *x, *grad; /* (the leaf after the call, and its gradient) */
    uint64_t version;
} leaf_write_result;

static void leaf_write_once(jg_compiled *c, leaf_write *w, bool rg, leaf_write_result *r) {
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1, 2, 3, 4));
    jg_tensor *y = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(0.5, -1));
    jg_set_requires_grad(x, rg);
    jg_set_requires_grad(y, true);
    jg_tensor *in[2] = {x, y}, *o = NULL;
    memset(r, 0, sizeof *r);
    r->rc = c ? jg_compiled_call(c, NULL, 0, 2, in, &o) : p_leaf_write(w, NULL, 2, in, &o);
    if (r->rc < 0) {
        snprintf(r->err, sizeof r->err, "%s", jg_last_error());
        jg_clear_error();
    } else {
        r->out = jg_item(o);
        if (jg_backward(o, NULL, 0) < 0)
            fail_msg("%s", jg_last_error());
    }
    r->x = x;
    r->grad = grad_copy(x);
    r->version = jg_version(x);
}

static void leaf_write_run(void) {
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        for (int k = 0; k < 4 * 3 * 2 * 2; k++) {
            /* (the c backend: the cases with a view and a read) */
            leaf_write w = {k % 4, k / 4 % 3, k / 12 % 2};
            bool rg = k / 24;
            if (b == 1 && (!w.read || !w.depth))
                continue;
            jg_compiled *c =
                jg_compile(p_leaf_write, &w, &(jg_compile_options){.backend = backends[b]});
            for (int call = 0; call < 2; call++) {
                leaf_write_result e, r;
                leaf_write_once(NULL, &w, rg, &e);
                leaf_write_once(c, &w, rg, &r);
                if (e.rc != r.rc || strcmp(e.err, r.err))
                    fail_msg("case read %d depth %d grad %d rg %d: eager %d '%s', compiled %d '%s'",
                             w.read, w.depth, w.grad_write, rg, e.rc, e.err, r.rc, r.err);
                bool refused = rg && w.grad_write;
                assert_int_equal(e.rc, refused ? -1 : 1);
                if (refused)
                    assert_string_equal(e.err, w.depth
                                                   ? "a view of a leaf Variable that requires grad "
                                                     "is being used in an in-place operation."
                                                   : "a leaf Variable that requires grad is being "
                                                     "used in an in-place operation.");
                assert_true(e.out == r.out);
                TU_SAME(r.x, e.x);
                assert_int_equal(r.version, e.version);
                if (e.grad)
                    TU_SAME(r.grad, e.grad);
                else
                    assert_null(r.grad);
            }
            jg_compiled_free(c);
        }
    }
}

static void test_leaf_view_write(void **state) {
    (void)state;
    free(tu_capture_stderr(leaf_write_run));
}

/* A captured tensor b (no grad) with views and traced writes (without
 * history, which the graph holds): a view made before a write of b and
 * used after it, one made after it, with and without a read, written
 * through or only read.  user: the case (bit 0: a read first; bit 1: the
 * view after the write; bit 2: no write through the view). */
typedef struct {
    int mode;
    jg_tensor *b;
} captured_views;

static int p_captured_views(void *user, const void *args, int n, jg_tensor *const *in,
                            jg_tensor **out) {
    (void)args, (void)n;
    captured_views *c = user;
    if ((c->mode & 1) && !read_x(in[0]))
        return -1;
    jg_tensor *v = (c->mode & 2) ? NULL : jg_slice(c->b, 0, 1, 3);
    if (jg_mul_scalar_(c->b, 2.0) < 0)
        return -1;
    if (!v)
        v = jg_slice(c->b, 0, 1, 3);
    jg_tensor *w = jg_slice(v, 0, 0, 1);
    if (!w || (!(c->mode & 4) && jg_add_(w, jg_slice(in[0], 0, 0, 1)) < 0)) /* (reaches b) */
        return -1;
    out[0] = jg_sum(jg_mul(jg_mul(v, v), jg_slice(in[0], 0, 0, 2)));
    return out[0] ? 1 : -1;
}

static void captured_views_run(void) {
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        for (int mode = 0; mode < 8; mode++) {
            /* (C programs capture tensors by identity: b's values are reset) */
            captured_views e = {mode, jg_full(JG_F32, 1, TU_SHAPE(4), 0.0)};
            captured_views c = {mode, jg_full(JG_F32, 1, TU_SHAPE(4), 0.0)};
            jg_compiled *k =
                jg_compile(p_captured_views, &c, &(jg_compile_options){.backend = backends[b]});
            for (int call = 0; call < 2; call++) {
                jg_tensor *b0 = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1, 2, 3, 4));
                assert_int_equal(jg_copy_(e.b, b0), 0);
                assert_int_equal(jg_copy_(c.b, b0), 0);
                jg_tensor *x = leaf(3, 1.0), *eo, *co;
                assert_int_equal(p_captured_views(&e, NULL, 1, &x, &eo), 1);
                assert_int_equal(jg_backward(eo, NULL, 0), 0);
                jg_tensor *eg = grad_copy(x);
                jg_clear_grad(x);
                if (jg_compiled_call(k, NULL, 0, 1, &x, &co) != 1)
                    fail_msg("mode %d: %s", mode, jg_last_error());
                assert_int_equal(jg_backward(co, NULL, 0), 0);
                TU_SAME(co, eo);
                TU_SAME(c.b, e.b);
                assert_int_equal(jg_version(c.b), jg_version(e.b));
                TU_SAME(jg_grad(x), eg);
            }
            jg_compiled_free(k);
        }
    }
}

static void test_captured_views_and_writes(void **state) {
    (void)state;
    free(tu_capture_stderr(captured_views_run));
}

/* Once its results and the compiled function are gone, a program run in
 * pieces has freed all it made.  A captured tensor written through a view
 * after a piece ran, with an operand the piece computed (mode 1: the view
 * made before a read; mode 3: made after a write of the tensor), used to
 * hold the piece's compiled node through its history while the node held
 * the tensor: through the piece's entry, which kept the call's tensors
 * (mode 1), or through the inputs the node saves for a create_graph rerun
 * (mode 3).  The cycle was never freed (LeakSanitizer, and the bytes
 * counted here). */
static void pieces_free_run(void) {
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        for (int mode = 1; mode < 4; mode += 2) {
            int64_t before = jg_memory_allocated();
            jg_scope_push();
            /* (64 elements: tensors of 64 bytes or less are not counted) */
            captured_views c = {mode, jg_full(JG_F32, 1, TU_SHAPE(64), 1.0)};
            jg_compiled *k =
                jg_compile(p_captured_views, &c, &(jg_compile_options){.backend = backends[b]});
            for (int call = 0; call < 2; call++) {
                jg_tensor *x = leaf(64, 1.0), *co;
                if (jg_compiled_call(k, NULL, 0, 1, &x, &co) != 1)
                    fail_msg("mode %d: %s", mode, jg_last_error());
                assert_int_equal(jg_backward(co, NULL, 0), 0);
                assert_non_null(jg_grad(x));
            }
            assert_true(jg_compiled_graphs_run(k) > 2); /* (it ran in pieces) */
            jg_compiled_free(k);
            jg_scope_pop();
            if (jg_memory_allocated() != before)
                fail_msg("backend %s, mode %d: %lld bytes still held", backends[b], mode,
                         (long long)(jg_memory_allocated() - before));
        }
    }
}

static void test_pieces_free_captured_views(void **state) {
    (void)state;
    free(tu_capture_stderr(pieces_free_run));
}

/* A view of captured b used after a traced write of b: one made after an
 * earlier write (mode 0), or one made with grad mode on of a view made
 * under no_grad (mode 1); eager's view shows the write (seeds 6408, 7449
 * and 12370 of python/tests/test_compile_inplace_view_fuzz.py) */
static int p_view_between_writes(void *user, const void *args, int n, jg_tensor *const *in,
                                 jg_tensor **out) {
    (void)args, (void)n;
    captured_views *c = user;
    jg_tensor *v;
    if (c->mode == 0) {
        if (jg_mul_scalar_(c->b, 1.5) < 0)
            return -1;
        v = jg_slice(c->b, 0, 1, 4);
    } else {
        bool prev = jg_set_grad_enabled(false);
        jg_tensor *u = jg_slice(c->b, 0, 1, 4);
        jg_set_grad_enabled(prev);
        v = u ? jg_slice(u, 0, 1, 3) : NULL;
    }
    if (!v || jg_mul_scalar_(c->b, 2.0) < 0)
        return -1;
    out[0] = jg_mul(jg_sum(jg_mul(v, v)), jg_sum(in[0]));
    return out[0] ? 1 : -1;
}

static void view_between_writes_run(void) {
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        for (int mode = 0; mode < 2; mode++) {
            captured_views e = {mode, jg_full(JG_F32, 1, TU_SHAPE(4), 0.0)};
            captured_views c = {mode, jg_full(JG_F32, 1, TU_SHAPE(4), 0.0)};
            jg_compiled *k = jg_compile(p_view_between_writes, &c,
                                        &(jg_compile_options){.backend = backends[b]});
            for (int call = 0; call < 2; call++) {
                jg_tensor *b0 = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1, 2, 3, 4));
                assert_int_equal(jg_copy_(e.b, b0), 0);
                assert_int_equal(jg_copy_(c.b, b0), 0);
                jg_tensor *x = leaf(3, 1.0), *eo, *co;
                assert_int_equal(p_view_between_writes(&e, NULL, 1, &x, &eo), 1);
                assert_int_equal(jg_backward(eo, NULL, 0), 0);
                jg_tensor *eg = grad_copy(x);
                jg_clear_grad(x);
                if (jg_compiled_call(k, NULL, 0, 1, &x, &co) != 1)
                    fail_msg("mode %d: %s", mode, jg_last_error());
                assert_int_equal(jg_backward(co, NULL, 0), 0);
                TU_SAME(co, eo);
                TU_SAME(c.b, e.b);
                assert_int_equal(jg_version(c.b), jg_version(e.b));
                TU_SAME(jg_grad(x), eg);
            }
            jg_compiled_free(k);
        }
    }
}

static void test_view_of_captured_between_writes(void **state) {
    (void)state;
    free(tu_capture_stderr(view_between_writes_run));
}

/* x (no grad) gets history from y, then x * x saves x, then x is written
 * again: eager's backward fails on the saved x (seeds 1352 and 1792 of
 * python/tests/test_compile_inplace_view_fuzz.py); read: a value read first
 * (pieces) */
static int p_saved_written(void *user, const void *args, int n, jg_tensor *const *in,
                           jg_tensor **out) {
    (void)args, (void)n;
    jg_tensor *x = in[0], *y = in[1];
    if ((*(const int *)user && !read_x(y)) || jg_add_(x, jg_slice(y, 0, 0, 1)) < 0 ||
        jg_mul_scalar_(x, 1.5) < 0)
        return -1;
    jg_tensor *acc = jg_sum(jg_mul(x, x));
    if (jg_mul_scalar_(x, 1.5) < 0)
        return -1;
    out[0] = jg_add(acc, jg_sum(jg_mul_scalar(x, 3.0)));
    return out[0] ? 1 : -1;
}

static void saved_written_run(void) {
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        for (int read = 0; read < 2; read++) {
            jg_compiled *c =
                jg_compile(p_saved_written, &read, &(jg_compile_options){.backend = backends[b]});
            for (int call = 0; call < 3; call++) {
                char msg[2][512];
                for (int k = 0; k < 2; k++) {
                    jg_tensor *in[2] = {tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1, 2, 3, 4)),
                                        leaf(2, 1.0)};
                    jg_tensor *out;
                    int rc = k ? jg_compiled_call(c, NULL, 0, 2, in, &out)
                               : p_saved_written(&read, NULL, 2, in, &out);
                    if (rc != 1)
                        fail_msg("%s", jg_last_error());
                    assert_int_equal(jg_backward(out, NULL, 0), -1);
                    snprintf(msg[k], sizeof msg[k], "%s", jg_last_error());
                    assert_null(jg_grad(in[1])); /* (nothing reached y) */
                    assert_int_equal(jg_version(in[0]), 3);
                }
                assert_string_equal(msg[1], msg[0]);
                assert_non_null(strstr(msg[0], "[f32 [4]], which is output 0 of MulBackward1, is "
                                               "at version 3; expected version 2 instead"));
            }
            jg_compiled_free(c);
        }
    }
}

static void test_saved_value_written_after(void **state) {
    (void)state;
    free(tu_capture_stderr(saved_written_run));
}

/* A view made under no_grad of leaf x, used in the piece after a read, and
 * a write of x under no_grad after that use: eager gives the view no edge,
 * so its backward reads nothing of it (seeds 1232 and 1985) */
static int p_no_grad_view(void *user, const void *args, int n, jg_tensor *const *in,
                          jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *x = in[0], *a = jg_slice(x, 0, 1, 4);
    bool prev = jg_set_grad_enabled(false);
    jg_tensor *v = jg_slice(x, 0, 1, 4);
    jg_set_grad_enabled(prev);
    if (!read_x(x))
        return -1;
    jg_tensor *acc = jg_add(jg_sum(in[1]), jg_sum(jg_mul(v, v)));
    prev = jg_set_grad_enabled(false);
    int rc = jg_mul_scalar_(a, 1.5);
    jg_set_grad_enabled(prev);
    out[0] = rc < 0 ? NULL : jg_add(acc, jg_sum(jg_mul_scalar(x, 3.0)));
    return out[0] ? 1 : -1;
}

static void no_grad_view_run(void) {
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        jg_compiled *c =
            jg_compile(p_no_grad_view, NULL, &(jg_compile_options){.backend = backends[b]});
        for (int call = 0; call < 3; call++) {
            jg_tensor *x[2], *y[2], *out[2];
            for (int k = 0; k < 2; k++) {
                x[k] = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1, 2, 3, 4));
                y[k] = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(0.5, -1));
                jg_set_requires_grad(x[k], true);
                jg_set_requires_grad(y[k], true);
                jg_tensor *in[2] = {x[k], y[k]};
                int rc = k ? jg_compiled_call(c, NULL, 0, 2, in, &out[k])
                           : p_no_grad_view(NULL, NULL, 2, in, &out[k]);
                if (rc != 1 || jg_backward(out[k], NULL, 0) < 0)
                    fail_msg("%s", jg_last_error());
            }
            TU_SAME(out[1], out[0]);
            TU_SAME(x[1], x[0]);
            TU_SAME(jg_grad(x[1]), jg_grad(x[0]));
            TU_SAME(jg_grad(y[1]), jg_grad(y[0]));
            assert_int_equal(jg_version(x[1]), jg_version(x[0]));
        }
        jg_compiled_free(c);
    }
}

static void test_no_grad_view_in_piece(void **state) {
    (void)state;
    free(tu_capture_stderr(no_grad_view_run));
}

/* A view made under no_grad of leaf x, x written under no_grad in the
 * piece after a read (twice: mode 1), then the view used with grad mode on:
 * eager refuses the use, after both writes.  The piece's traced write was
 * not in x's version yet, so the use was not refused (seeds 1985, 2244). */
static int p_no_grad_view_use(void *user, const void *args, int n, jg_tensor *const *in,
                              jg_tensor **out) {
    (void)args, (void)n;
    int mode = *(const int *)user;
    jg_tensor *x = in[0];
    bool prev = jg_set_grad_enabled(false);
    jg_tensor *v = jg_slice(x, 0, 1, 4);
    jg_set_grad_enabled(prev);
    if (!v || !read_x(x))
        return -1;
    prev = jg_set_grad_enabled(false);
    int rc = (mode & 1) ? jg_mul_scalar_(x, 1.5) : 0;
    if (rc == 0)
        rc = jg_mul_scalar_(x, 2.0);
    jg_set_grad_enabled(prev);
    jg_tensor *sq = rc < 0 ? NULL : jg_mul(v, v); /* (refused: its error is the last) */
    out[0] = sq ? jg_add(jg_sum(in[1]), jg_sum(sq)) : NULL;
    return out[0] ? 1 : -1;
}

static void no_grad_view_use_run(void) {
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        for (int mode = 0; mode < 2; mode++) {
            jg_compiled *c = jg_compile(p_no_grad_view_use, &mode,
                                        &(jg_compile_options){.backend = backends[b]});
            assert_non_null(c);
            for (int call = 0; call < 3; call++) {
                jg_tensor *x[2], *out[2] = {NULL, NULL};
                char msg[2][600];
                for (int k = 0; k < 2; k++) {
                    x[k] = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1, 2, 3, 4));
                    jg_tensor *y = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(0.5, -1));
                    jg_set_requires_grad(x[k], true);
                    jg_set_requires_grad(y, true);
                    jg_tensor *in[2] = {x[k], y};
                    int rc = k ? jg_compiled_call(c, NULL, 0, 2, in, &out[k])
                               : p_no_grad_view_use(&mode, NULL, 2, in, &out[k]);
                    assert_int_equal(rc, -1);
                    snprintf(msg[k], sizeof msg[k], "%s", jg_last_error());
                    assert_null(jg_grad(x[k]));
                    assert_null(jg_grad(y));
                }
                assert_non_null(strstr(msg[0], "A view was created in no_grad mode and its base "
                                               "or another view of its base has been modified "
                                               "inplace with grad mode enabled."));
                assert_string_equal(msg[1], msg[0]);
                TU_SAME(x[1], x[0]);
                assert_int_equal(jg_version(x[1]), jg_version(x[0]));
                assert_int_equal(jg_version(x[0]), mode ? 2 : 1);
            }
            jg_compiled_free(c);
        }
    }
}

static void test_no_grad_view_used_after_piece_write(void **state) {
    (void)state;
    free(tu_capture_stderr(no_grad_view_use_run));
}

/* Fuzz seeds 2501017 and 2501930: a view of a piece's own tensor (a clone),
 * the tensor then written in place, the view returned or used.  The view's
 * value (and history) is remade from the written base, in the same piece
 * or, across a read, in a later one; with its stale value the returned
 * view's gradient skipped the write.  user: the case (bit 0: a read between
 * the view and the write; bit 1: the view used afterwards, not returned;
 * bit 2: a read after the write, so the stale view crossed it). */
static int p_rebased_view(void *user, const void *args, int n, jg_tensor *const *in,
                          jg_tensor **out) {
    (void)args, (void)n;
    int mode = *(const int *)user;
    jg_tensor *h = jg_mul(in[0], in[1]);
    if (!read_x(h))
        return -1;
    jg_tensor *y = jg_clone(h);
    jg_tensor *v = jg_slice(y, 0, 0, 2);
    if (!v || ((mode & 1) && !read_x(in[1])))
        return -1;
    if (jg_sub_(y, jg_tanh(jg_div(h, jg_add_scalar(jg_mul(h, h), 1.0)))) < 0 ||
        ((mode & 4) && !read_x(in[0])))
        return -1;
    out[0] = (mode & 2) ? jg_mul(v, jg_slice(in[1], 0, 1, 3)) : v;
    return out[0] ? 1 : -1;
}

static void rebased_view_run(void) {
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        for (int mode = 0; mode < 8; mode++) {
            jg_compiled *c =
                jg_compile(p_rebased_view, &mode, &(jg_compile_options){.backend = backends[b]});
            assert_non_null(c);
            for (int call = 0; call < 3; call++) {
                jg_tensor *in[2] = {leaf(4, 1.0), leaf(4, 0.5)}, *eo, *co;
                jg_tensor *w = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(-0.625, 1.5));
                assert_int_equal(p_rebased_view(&mode, NULL, 2, in, &eo), 1);
                assert_int_equal(jg_backward(eo, w, 0), 0);
                jg_tensor *eg[2] = {grad_copy(in[0]), grad_copy(in[1])};
                jg_clear_grad(in[0]);
                jg_clear_grad(in[1]);
                if (jg_compiled_call(c, NULL, 0, 2, in, &co) != 1)
                    fail_msg("mode %d: %s", mode, jg_last_error());
                TU_SAME(co, eo);
                if (jg_backward(co, w, 0) < 0)
                    fail_msg("mode %d: %s", mode, jg_last_error());
                TU_SAME(jg_grad(in[0]), eg[0]);
                TU_SAME(jg_grad(in[1]), eg[1]);
            }
            assert_int_equal(jg_compiled_fallbacks(c), 0);
            jg_compiled_free(c);
        }
    }
}

static void test_rebased_view_of_piece_tensor(void **state) {
    (void)state;
    free(tu_capture_stderr(rebased_view_run));
}

/* Fuzz seed 2900044: a custom function that gets one tensor in two slots
 * and again through its arguments' bytes (an object holding it), saves
 * that tensor and its own output, and whose backward reads both.  The
 * read before the call splits the program: the object then holds the
 * piece's result itself, whose history is the compiled call's, so the
 * second derivative through what the rerun for create_graph saved from it
 * must meet the rerun's uses of the same value in one node (eager's
 * order), not come back through the compiled backward beside it. */
static int objslot_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_tensor *held = *(jg_tensor *const *)jg_ctx_args(ctx);
    jg_tensor *bt = jg_mul_scalar(held, 1.0);
    jg_tensor *save[6] = {in[0], in[1], in[2], in[1], bt, held};
    if (!bt || jg_ctx_save_for_backward(ctx, 6, save) < 0)
        return -1;
    out[0] = bt;
    return 1;
}

static int objslot_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in,
                            jg_tensor **din) {
    (void)n_out;
    jg_tensor *bt = jg_ctx_saved(ctx, 4), *held = jg_ctx_saved(ctx, 5);
    din[0] = jg_mul_scalar(g[0], 2.0);
    din[1] = jg_add(g[0], g[0]);
    din[2] = jg_sub(jg_add(jg_sub(g[0], held), g[0]), bt);
    for (int i = 3; i < n_in; i++) /* (the held tensor lifted into a slot when traced) */
        din[i] = NULL;
    return din[0] && din[1] && din[2] ? n_in : -1;
}

static const jg_function objslot_fn = {"ObjSlot", objslot_forward, objslot_backward, NULL};

static int p_objslot(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    double v = jg_item(jg_sum(in[0]));
    if (v != v)
        return -1;
    jg_tensor *v2 = jg_mul_scalar(in[0], v > 0 ? 1.0 : -2.0);
    jg_tensor *slots[3] = {v2, v2, in[0]};
    return v2 ? jg_apply(&objslot_fn, 3, slots, &v2, sizeof v2, out) : -1;
}

/* x.grad of sum(g * g), g = d sum(out * w) / dx with create_graph; or
 * (first) of sum(out * w) */
static jg_tensor *objslot_grad(jg_compiled *c, jg_tensor *x, bool first) {
    jg_tensor *out[1];
    int n = c ? jg_compiled_call(c, NULL, 0, 1, &x, out) : p_objslot(NULL, NULL, 1, &x, out);
    if (n != 1)
        fail_msg("%s", jg_last_error());
    jg_tensor *w = jg_tensor_new(JG_F32, 1, TU_SHAPE(2), (const float[]){0.3f, 0.9f});
    jg_tensor *loss = jg_sum(jg_mul(out[0], w)), *g[1];
    if (first ? jg_backward(loss, NULL, 0) < 0
              : jg_autograd_grad(1, &loss, NULL, 1, &x, JG_CREATE_GRAPH, g) < 0 ||
                    jg_backward(jg_sum(jg_mul(g[0], g[0])), NULL, 0) < 0)
        fail_msg("%s", jg_last_error());
    jg_tensor *r = grad_copy(x);
    jg_clear_grad(x);
    return r;
}

/* Also a leak check (LeakSanitizer, the ASan build): the compiled calls,
 * first and second order, free everything with the compiled function.  The
 * traced call's ctx held the object's tensor (the piece's result, with the
 * piece's node as its history, that node holding the piece's entry, graph
 * and so the ctx): a cycle.  The create_graph rerun reads the rerun's value
 * through the args instead (jg_custom_info.arg_ptr_off), so nothing keeps
 * the traced call's tensor for it. */
static void objslot_run(void) {
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        jg_tensor *x = jg_tensor_new(JG_F32, 1, TU_SHAPE(2), (const float[]){0.13f, -0.77f});
        jg_set_requires_grad(x, true);
        jg_tensor *eg = objslot_grad(NULL, x, false), *eg1 = objslot_grad(NULL, x, true);
        jg_compiled *c = jg_compile(p_objslot, NULL, &(jg_compile_options){.backend = backends[b]});
        assert_non_null(c);
        for (int call = 0; call < 4; call++)
            TU_SAME(objslot_grad(c, x, call % 2), call % 2 ? eg1 : eg);
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        const char *const *why;
        assert_int_equal(jg_compiled_breaks(c, &why), 1);
        /* (PyTorch's values) */
        TU_CHECK(eg, 1, TU_SHAPE(2), TU_VALS(-19.960002899169922, -138.75999450683594), 1e-4);
        jg_compiled_free(c);
    }
}

static void test_double_backward_object_slot(void **state) {
    (void)state;
    free(tu_capture_stderr(objslot_run));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_reads),
        TU_TEST(test_branch),
        TU_TEST(test_view_across_read),
        TU_TEST(test_view_output_grad_order),
        TU_TEST(test_training_step),
        TU_TEST(test_break_after_a_piece_ran),
        TU_TEST(test_fullgraph),
        TU_TEST(test_leaf_view_write),
        TU_TEST(test_captured_views_and_writes),
        TU_TEST(test_pieces_free_captured_views),
        TU_TEST(test_saved_value_written_after),
        TU_TEST(test_no_grad_view_in_piece),
        TU_TEST(test_no_grad_view_used_after_piece_write),
        TU_TEST(test_view_of_captured_between_writes),
        TU_TEST(test_rebased_view_of_piece_tensor),
        TU_TEST(test_double_backward_object_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
