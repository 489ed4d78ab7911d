/* The write-back of a compiled whole training step (compile/mutation.c):
 * the new values of the parameters, the momentum buffers and .grad, and of
 * an input the program writes, reach the real tensors after the call.  The
 * c backend computes them in the tensors' own memory when the update loops
 * end the program (backend/cgen.h, jg_cgen_inout).  Otherwise a tensor
 * that is the one owner of its memory takes the new value's memory (a
 * swap, jg_tensor_take_memory); one whose memory is shared (a view, an
 * alias) or whose address was handed out (jg_data) is copied into.  Every
 * way: bitwise the eager loop, versions as eager, views see the new
 * values, an address from jg_data stays valid, a call that fails writes
 * nothing. */
#include "testutil.h"

#include "backend/cgen.h"
#include "compile/compile.h"
#include "core/tensor.h"

#include <stdlib.h>
#include <string.h>

enum { IN = 12, HID = 16, OUT = 3, BATCH = 8, STEPS = 6 };

typedef struct {
    jg_tensor *p[4]; /* w1, b1, w2, b2 */
    jg_optim *opt;
} net;

/* w2 stored [OUT, HID] and used transposed, as F.linear's x @ w.t() */
static bool linear_w2;

static void net_init(net *m) {
    jg_manual_seed(5);
    const int64_t shapes[4][2] = {
        {IN, HID}, {HID, 0}, {linear_w2 ? OUT : HID, linear_w2 ? HID : OUT}, {OUT, 0}};
    for (int i = 0; i < 4; i++) {
        m->p[i] = jg_keep(jg_randn(JG_F32, shapes[i][1] ? 2 : 1, shapes[i]));
        jg_set_requires_grad(m->p[i], true);
    }
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_SGD);
    h.lr = 0.05;
    h.momentum = 0.9;
    m->opt = jg_optim_new(JG_OPTIM_SGD, m->p, 4, &h);
    assert_non_null(m->opt);
}

static void net_free(net *m) {
    jg_optim_free(m->opt);
    for (int i = 0; i < 4; i++)
        jg_release(m->p[i]);
}

/* forward, backward, SGD with momentum, zero_grad in place: the step a
 * user compiles whole */
static int p_step(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    net *m = user;
    jg_tensor *h = jg_relu(jg_add(jg_matmul(in[0], m->p[0]), m->p[1]));
    jg_tensor *w2 = linear_w2 ? jg_transpose(m->p[2], 0, 1) : m->p[2];
    jg_tensor *loss = jg_mse_loss(jg_add(jg_matmul(h, w2), m->p[3]), in[1], JG_REDUCTION_MEAN);
    if (!loss || jg_backward(loss, NULL, 0) < 0 || jg_optim_step(m->opt) < 0 ||
        jg_optim_zero_grad(m->opt, false) < 0)
        return -1;
    out[0] = loss;
    return 1;
}

static jg_tensor *momentum(net *m, int i) {
    return jg_optim_state(m->opt, 0, i, "momentum_buffer");
}

static void check_same(net *e, net *k) {
    for (int i = 0; i < 4; i++) {
        TU_SAME(e->p[i], k->p[i]);
        TU_SAME(jg_grad(e->p[i]), jg_grad(k->p[i]));
        TU_SAME(momentum(e, i), momentum(k, i));
        assert_int_equal(jg_version(e->p[i]), jg_version(k->p[i]));
        assert_int_equal(jg_version(jg_grad(e->p[i])), jg_version(jg_grad(k->p[i])));
        assert_int_equal(jg_version(momentum(e, i)), jg_version(momentum(k, i)));
    }
}

/* Runs STEPS eager steps on e and compiled steps on k (backend, mode),
 * comparing after each; before each compiled call, hook(k, step) may take
 * addresses or views, after it check(k, step) looks at them. */
typedef void (*hook_fn)(net *k, int step, void *ctx);

static void run(const char *backend, const char *mode, hook_fn before, hook_fn after, void *ctx) {
    net e = {0}, k = {0};
    net_init(&e);
    net_init(&k);
    jg_compiled *c = jg_compile(p_step, &k, &(jg_compile_options){.backend = backend});
    assert_non_null(c);
    assert_int_equal(jg_compiled_set_mode(c, mode), 0);
    jg_manual_seed(7);
    jg_tensor *x = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(BATCH, IN)));
    jg_tensor *y = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(BATCH, OUT)));
    jg_tensor *in[2] = {x, y};
    for (int s = 0; s < STEPS; s++) {
        jg_scope_push();
        jg_tensor *le = NULL, *lk = NULL;
        assert_int_equal(p_step(&e, NULL, 2, in, &le), 1);
        if (before)
            before(&k, s, ctx);
        assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &lk), 1);
        TU_SAME(le, lk);
        check_same(&e, &k);
        if (after)
            after(&k, s, ctx);
        jg_scope_pop();
    }
    /* the first call creates the momentum buffers (eager), the second
     * traces the whole step (the .grad it finds is zeroed, not None) */
    assert_int_equal(jg_compiled_fallbacks(c), 1);
    jg_compiled_free(c);
    jg_release(x), jg_release(y);
    net_free(&e);
    net_free(&k);
}

static const char *backends[] = {"interp", "c"};
static const char *modes[] = {"default", "reduce-overhead"};

/* The memory each written tensor held before the call; the swap gives it
 * another (the new value's), a copy or an update in place keeps it. */
typedef struct {
    jg_storage *before[3][4]; /* parameter, .grad, momentum buffer */
    int swapped;              /* calls after which every block-sized tensor moved */
    int kept;                 /* ... after which none did */
} moved_ctx;

static jg_tensor *written(net *k, int what, int i) {
    return what == 0 ? k->p[i] : what == 1 ? jg_grad(k->p[i]) : momentum(k, i);
}

static void note_storage(net *k, int step, void *vctx) {
    (void)step;
    moved_ctx *m = vctx;
    for (int what = 0; what < 3; what++)
        for (int i = 0; i < 4; i++) {
            jg_tensor *t = written(k, what, i);
            m->before[what][i] = t ? t->storage : NULL;
        }
}

static void check_moved(net *k, int step, void *vctx) {
    moved_ctx *m = vctx;
    if (step < 2)
        return; /* the eager first call and the traced second */
    int moved = 0, blocks = 0;
    for (int what = 0; what < 3; what++)
        for (int i = 0; i < 4; i++) {
            jg_tensor *t = written(k, what, i);
            if (t->storage->kind != JG_STORAGE_BLOCK)
                continue; /* small: inside the tensor struct, copied */
            blocks++;
            moved += t->storage != m->before[what][i];
            assert_false(t->storage->pinned);
            assert_int_equal(t->storage->refcount, 1);
        }
    assert_true(blocks >= 6); /* w1, w2 (x3) at least */
    m->swapped += moved == blocks;
    m->kept += moved == 0;
}

/* Nothing else holds the memory: every block-sized tensor the step writes
 * takes the new value's memory instead of a copy (the perf point of the
 * swap: 3 x the parameters' bytes per step not copied) -- or, on the c
 * backend, where the update loops end the program, is updated in its own
 * memory as eager's optimizer does: all 12 tensors (4 parameters, their
 * .grad and momentum buffers) at every compiled call, none copied. */
static void test_writeback_swaps_sole_owners(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        for (int md = 0; md < 2; md++) {
            moved_ctx m = {0};
            int64_t in0, cp0, in1, cp1;
            jg_cgen_inout_totals(&in0, &cp0);
            run(backends[b], modes[md], note_storage, check_moved, &m);
            jg_cgen_inout_totals(&in1, &cp1);
            if (b == 0) {
                assert_int_equal(m.swapped, STEPS - 2);
                assert_int_equal(in1 - in0, 0);
            } else {
                assert_int_equal(m.kept, STEPS - 2);
                assert_int_equal(in1 - in0, 12 * (STEPS - 1));
                assert_int_equal(cp1 - cp0, 0);
            }
        }
    }
}

/* Nothing shares a parameter's memory after the call. */
static void check_unshared(net *k, int step, void *vctx) {
    int *checked = vctx;
    if (step < 2)
        return; /* the eager first call and the traced second */
    for (int i = 0; i < 4; i++)
        if (k->p[i]->storage->kind == JG_STORAGE_BLOCK) {
            assert_int_equal(k->p[i]->storage->refcount, 1);
            (*checked)++;
        }
}

/* Regression (the GPT step copied 3 MB per call): with w2 used transposed,
 * the returned loss's compiled node saved that view of w2, which shared
 * w2's memory, so the write-back copied every such weight.  The step's own
 * backward (no retain_graph) freed all a later backward from the loss goes
 * through (it fails: test_compile_backward_again_after_in_program_backward
 * in test_compile_autograd_grad.c), so the node saves nothing and the
 * weight is swapped or updated in place like the others; same bits. */
static void test_writeback_loss_node_saves_nothing(void **state) {
    (void)state;
    linear_w2 = true;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        for (int md = 0; md < 2; md++) {
            int checked = 0;
            run(backends[b], modes[md], NULL, check_unshared, &checked);
            assert_true(checked >= 2 * (STEPS - 2)); /* w1, w2 */
        }
    }
    linear_w2 = false;
}

/* An address handed out by jg_data stays the tensor's: the new values are
 * copied there, and the pointer reads them. */
typedef struct {
    void *addr[3][4];
} pinned_ctx;

static void take_addresses(net *k, int step, void *vctx) {
    pinned_ctx *p = vctx;
    for (int what = 0; what < 3; what++)
        for (int i = 0; i < 4; i++) {
            jg_tensor *t = written(k, what, i);
            if (step == 1) /* (after the first call: the buffers exist) */
                p->addr[what][i] = jg_data(t);
        }
}

static void check_addresses(net *k, int step, void *vctx) {
    pinned_ctx *p = vctx;
    if (step < 1)
        return;
    for (int what = 0; what < 3; what++)
        for (int i = 0; i < 4; i++) {
            jg_tensor *t = written(k, what, i);
            assert_ptr_equal(jg_data(t), p->addr[what][i]);
            int64_t n = jg_numel(t);
            float *want = malloc(sizeof(float) * (size_t)n);
            assert_int_equal(jg_copy_to(t, want, sizeof(float) * (size_t)n), 0);
            assert_memory_equal(p->addr[what][i], want, sizeof(float) * (size_t)n);
            free(want);
        }
}

static void test_writeback_keeps_handed_out_addresses(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        for (int md = 0; md < 2; md++) {
            pinned_ctx p = {0};
            run(backends[b], modes[md], take_addresses, check_addresses, &p);
        }
    }
}

/* A view of a parameter and an alias of a momentum buffer share their
 * memory: both are written in place and see the new values. */
typedef struct {
    jg_tensor *view, *alias;
} view_ctx;

static void take_views(net *k, int step, void *vctx) {
    view_ctx *v = vctx;
    if (step != 1)
        return;
    v->view = jg_keep(jg_view(k->p[0], 1, TU_SHAPE(IN * HID)));
    v->alias = jg_keep(jg_detach(momentum(k, 0)));
    assert_non_null(v->view);
    assert_non_null(v->alias);
}

static void check_views(net *k, int step, void *vctx) {
    view_ctx *v = vctx;
    if (step < 1)
        return;
    assert_true(jg_same_storage(v->view, k->p[0]));
    assert_true(jg_same_storage(v->alias, momentum(k, 0)));
    TU_SAME(v->alias, momentum(k, 0));
    jg_tensor *flat = jg_reshape(k->p[0], 1, TU_SHAPE(IN * HID));
    TU_SAME(v->view, flat);
    if (step == STEPS - 1) {
        jg_release(v->view);
        jg_release(v->alias);
    }
}

static void test_writeback_views_see_new_values(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        view_ctx v = {0};
        run(backends[b], "default", take_views, check_views, &v);
    }
}

/* An input the program writes in place (no history): swapped when its
 * memory is its own, copied into when an alias shares it; the alias and
 * the version counter follow eager. */
static int p_scale_input(void *user, const void *args, int n, jg_tensor *const *in,
                         jg_tensor **out) {
    (void)user, (void)args, (void)n;
    if (jg_mul_scalar_(in[0], 1.5) < 0 || jg_add_(in[0], in[1]) < 0)
        return -1;
    out[0] = jg_sum(in[1]);
    return out[0] ? 1 : -1;
}

static void test_writeback_written_input(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        for (int shared = 0; shared < 2; shared++) {
            jg_compiled *c =
                jg_compile(p_scale_input, NULL, &(jg_compile_options){.backend = backends[b]});
            jg_manual_seed(9);
            jg_tensor *xe = jg_randn(JG_F32, 1, TU_SHAPE(64)), *xk = jg_clone(xe);
            jg_tensor *d = jg_randn(JG_F32, 1, TU_SHAPE(64));
            jg_tensor *alias = shared ? jg_detach(xk) : NULL;
            for (int s = 0; s < 3; s++) {
                jg_storage *st = xk->storage;
                jg_tensor *ie[2] = {xe, d}, *ik[2] = {xk, d}, *oe, *ok;
                assert_int_equal(p_scale_input(NULL, NULL, 2, ie, &oe), 1);
                assert_int_equal(jg_compiled_call(c, NULL, 0, 2, ik, &ok), 1);
                TU_SAME(xe, xk);
                assert_int_equal(jg_version(xe), jg_version(xk));
                if (shared) {
                    assert_ptr_equal(xk->storage, st);
                    TU_SAME(alias, xk);
                } else {
                    assert_ptr_not_equal(xk->storage, st);
                }
            }
            jg_compiled_free(c);
        }
    }
}

/* A call that fails at run time (a target out of range: nll_loss checks
 * its targets as it runs, after the forward's first matmuls) writes
 * nothing: parameters, .grad, momentum buffers keep their values, their
 * memory and their versions; the next good call goes on as eager. */
static int p_step_ce(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    net *m = user;
    jg_tensor *h = jg_relu(jg_add(jg_matmul(in[0], m->p[0]), m->p[1]));
    jg_tensor *loss = jg_cross_entropy(jg_add(jg_matmul(h, m->p[2]), m->p[3]), in[1]);
    if (!loss || jg_backward(loss, NULL, 0) < 0 || jg_optim_step(m->opt) < 0 ||
        jg_optim_zero_grad(m->opt, false) < 0)
        return -1;
    out[0] = loss;
    return 1;
}

static void test_writeback_failed_call_writes_nothing(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        for (int md = 0; md < 2; md++) {
            net e = {0}, k = {0};
            net_init(&e);
            net_init(&k);
            jg_compiled *c =
                jg_compile(p_step_ce, &k, &(jg_compile_options){.backend = backends[b]});
            assert_int_equal(jg_compiled_set_mode(c, modes[md]), 0);
            jg_manual_seed(7);
            jg_tensor *x = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(BATCH, IN)));
            int64_t good[BATCH], bad[BATCH];
            for (int i = 0; i < BATCH; i++)
                good[i] = bad[i] = i % OUT;
            bad[BATCH - 1] = OUT + 4;
            jg_tensor *yg = jg_keep(jg_tensor_new(JG_I64, 1, TU_SHAPE(BATCH), good));
            jg_tensor *yb = jg_keep(jg_tensor_new(JG_I64, 1, TU_SHAPE(BATCH), bad));
            for (int s = 0; s < 5; s++) {
                jg_scope_push();
                jg_tensor *in[2] = {x, yg}, *le = NULL, *lk = NULL;
                assert_int_equal(p_step_ce(&e, NULL, 2, in, &le), 1);
                assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &lk), 1);
                TU_SAME(le, lk);
                check_same(&e, &k);
                if (s == 2) { /* the entry exists and has replayed: now a bad call */
                    jg_tensor *before[3][4];
                    jg_storage *mem[3][4];
                    uint64_t ver[3][4];
                    for (int what = 0; what < 3; what++)
                        for (int i = 0; i < 4; i++) {
                            jg_tensor *t = written(&k, what, i);
                            before[what][i] = jg_clone(t);
                            mem[what][i] = t->storage;
                            ver[what][i] = jg_version(t);
                        }
                    jg_tensor *ib[2] = {x, yb}, *lb = NULL;
                    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, ib, &lb), -1);
                    TU_ERROR("Target 7 is out of bounds.");
                    jg_clear_error();
                    for (int what = 0; what < 3; what++)
                        for (int i = 0; i < 4; i++) {
                            jg_tensor *t = written(&k, what, i);
                            TU_SAME(t, before[what][i]);
                            assert_ptr_equal(t->storage, mem[what][i]);
                            assert_int_equal(jg_version(t), ver[what][i]);
                        }
                    check_same(&e, &k);
                }
                jg_scope_pop();
            }
            assert_int_equal(jg_compiled_entries(c), 1);
            jg_compiled_free(c);
            jg_release(x), jg_release(yg), jg_release(yb);
            net_free(&e);
            net_free(&k);
        }
    }
}

/* Regression for the in-place update (backend/cgen.h, jg_cgen_inout): a
 * step whose update loops are followed by an op that can fail at run time
 * (index_select checks its indices as it runs) must not update the
 * tensors in place: when that op fails, parameters, .grad and momentum
 * buffers keep their values, memory and versions, and the next good call
 * goes on as eager. */
static int p_step_then_select(void *user, const void *args, int n, jg_tensor *const *in,
                              jg_tensor **out) {
    if (p_step(user, args, n, in, out) != 1 || !(out[1] = jg_index_select(in[0], 0, in[2])))
        return -1;
    return 2;
}

static void test_writeback_late_failure_writes_nothing(void **state) {
    (void)state;
    if (!jg_compile_backend_available("c"))
        return;
    for (int md = 0; md < 2; md++) {
        net e = {0}, k = {0};
        net_init(&e);
        net_init(&k);
        jg_compiled *c = jg_compile(p_step_then_select, &k, &(jg_compile_options){.backend = "c"});
        assert_int_equal(jg_compiled_set_mode(c, modes[md]), 0);
        jg_manual_seed(7);
        jg_tensor *x = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(BATCH, IN)));
        jg_tensor *y = jg_keep(jg_randn(JG_F32, 2, TU_SHAPE(BATCH, OUT)));
        int64_t good[2] = {1, BATCH - 1}, bad[2] = {1, BATCH + 3};
        jg_tensor *ig = jg_keep(jg_tensor_new(JG_I64, 1, TU_SHAPE(2), good));
        jg_tensor *ib = jg_keep(jg_tensor_new(JG_I64, 1, TU_SHAPE(2), bad));
        int64_t in0, cp0, in1, cp1;
        jg_cgen_inout_totals(&in0, &cp0);
        for (int s = 0; s < 5; s++) {
            jg_scope_push();
            jg_tensor *in[3] = {x, y, ig}, *oe[2] = {0}, *ok[2] = {0};
            assert_int_equal(p_step_then_select(&e, NULL, 3, in, oe), 2);
            assert_int_equal(jg_compiled_call(c, NULL, 0, 3, in, ok), 2);
            TU_SAME(oe[0], ok[0]);
            TU_SAME(oe[1], ok[1]);
            check_same(&e, &k);
            if (s == 2) {
                jg_tensor *before[3][4];
                jg_storage *mem[3][4];
                uint64_t ver[3][4];
                for (int what = 0; what < 3; what++)
                    for (int i = 0; i < 4; i++) {
                        jg_tensor *t = written(&k, what, i);
                        before[what][i] = jg_clone(t);
                        mem[what][i] = t->storage;
                        ver[what][i] = jg_version(t);
                    }
                jg_tensor *inb[3] = {x, y, ib}, *ob[2] = {0};
                assert_int_equal(jg_compiled_call(c, NULL, 0, 3, inb, ob), -1);
                TU_ERROR("index 11 is out of bounds for dimension 0 with size 8");
                jg_clear_error();
                for (int what = 0; what < 3; what++)
                    for (int i = 0; i < 4; i++) {
                        jg_tensor *t = written(&k, what, i);
                        TU_SAME(t, before[what][i]);
                        assert_ptr_equal(t->storage, mem[what][i]);
                        assert_int_equal(jg_version(t), ver[what][i]);
                    }
                check_same(&e, &k);
            }
            jg_scope_pop();
        }
        jg_cgen_inout_totals(&in1, &cp1);
        assert_int_equal(in1 - in0, 0); /* (not the program's last steps) */
        assert_int_equal(jg_compiled_entries(c), 1);
        jg_compiled_free(c);
        jg_release(x), jg_release(y), jg_release(ig), jg_release(ib);
        net_free(&e);
        net_free(&k);
    }
}

/* max-autotune times its variants on the first run of a graph: those
 * trials must not update the tensors in place (each would apply the step
 * once more); afterwards the chosen variant does.  Bitwise eager's. */
static void test_writeback_autotune_trials_write_once(void **state) {
    (void)state;
    if (!jg_compile_backend_available("c"))
        return;
    int64_t in0, cp0, in1, cp1;
    jg_modes_debug_force = 0; /* (the c loops, whatever the timings) */
    jg_cgen_inout_totals(&in0, &cp0);
    run("c", "max-autotune", NULL, NULL, NULL);
    jg_cgen_inout_totals(&in1, &cp1);
    jg_modes_debug_force = -1;
    assert_true(cp1 - cp0 >= 12); /* the trials: in copies */
    assert_true(in1 - in0 >= 12 * (STEPS - 2));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_writeback_late_failure_writes_nothing),
        TU_TEST(test_writeback_autotune_trials_write_once),
        TU_TEST(test_writeback_swaps_sole_owners),
        TU_TEST(test_writeback_loss_node_saves_nothing),
        TU_TEST(test_writeback_keeps_handed_out_addresses),
        TU_TEST(test_writeback_views_see_new_values),
        TU_TEST(test_writeback_written_input),
        TU_TEST(test_writeback_failed_call_writes_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
