/* The "c" backend of jg_compile: generated C must give results bitwise equal
 * to the interpreter and to eager mode, for every elementwise op, fused
 * chains, broadcast scalars, the MLP / cross-entropy programs and custom
 * functions; plus the compiler cache, compiler failures and logging. */
#include "testutil.h"
#include "testutil_fns.h"

#include "backend/cgen.h"
#include "ops/optable.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXIN 6

/* Skips the test (reported as skipped, not passed) without a c backend. */
#define REQUIRE_C()                                                                                \
    do {                                                                                           \
        if (!jg_compile_backend_available("c")) {                                                  \
            print_message("skipping: the c backend is not available here: %s\n", jg_last_error()); \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* Runs prog eagerly, then compiled with "interp" and with "c" (two calls
 * each: the trace, then a cache hit); every output and every input gradient
 * must be bitwise equal to eager's.  Backward runs through sum(output 0)
 * when it requires grad. */
static void check3(jg_program_fn prog, void *user, const void *args, size_t args_size, int n,
                   jg_tensor *const *in) {
    jg_tensor *eout[JG_MAX_OUTPUTS], *cout[JG_MAX_OUTPUTS], *eg[MAXIN];
    for (int i = 0; i < n; i++)
        jg_clear_grad(in[i]);
    int ne = prog(user, args, n, in, eout);
    if (ne < 1)
        fail_msg("eager: %s", jg_last_error());
    bool rg = jg_requires_grad(eout[0]);
    if (rg)
        assert_int_equal(jg_backward(jg_sum(eout[0]), NULL, 0), 0);
    for (int i = 0; i < n; i++) {
        eg[i] = jg_grad(in[i]) ? jg_clone(jg_grad(in[i])) : NULL;
        jg_clear_grad(in[i]);
    }
    const char *modes[2] = {"interp", "c"};
    for (int m = 0; m < 2; m++) {
        jg_compile_options o = {.backend = modes[m], .fullgraph = true};
        jg_compiled *c = jg_compile(prog, user, &o);
        if (!c)
            fail_msg("jg_compile(%s): %s", modes[m], jg_last_error());
        for (int rep = 0; rep < 2; rep++) {
            int nc = jg_compiled_call(c, args, args_size, n, in, cout);
            if (nc < 0)
                fail_msg("%s: %s", modes[m], jg_last_error());
            assert_int_equal(nc, ne);
            for (int j = 0; j < ne; j++)
                TU_SAME(cout[j], eout[j]);
            if (rg && jg_backward(jg_sum(cout[0]), NULL, 0) < 0)
                fail_msg("%s backward: %s", modes[m], jg_last_error());
            for (int i = 0; i < n; i++) {
                if (!eg[i]) {
                    assert_null(jg_grad(in[i]));
                    continue;
                }
                assert_non_null(jg_grad(in[i]));
                TU_SAME(jg_grad(in[i]), eg[i]);
                jg_clear_grad(in[i]);
            }
        }
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        jg_compiled_free(c);
    }
}

/* ------------------------------------------------------------ every elementwise op */

typedef struct {
    jg_opcode op;
    jg_attrs at;
    int chain; /* 0: op(a, b); 1: op(op(a, b), b) (two nodes in one loop) */
    jg_dtype dt;
} op_case;

static int p_op(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    const op_case *c = user;
    int ar = jg_ops[c->op].n_in;
    jg_tensor *y = jg_op1(c->op, &c->at, in[0], ar > 1 ? in[1] : NULL);
    if (y && c->chain)
        y = jg_op1(c->op, &c->at, c->op == JG_OP_TO_DTYPE ? jg_to_dtype(y, c->dt) : y,
                   ar > 1 ? in[1] : NULL);
    out[0] = y;
    return y ? 1 : -1;
}

/* 37 values: special ones, then random */
static jg_tensor *values(jg_dtype dt, int64_t n, int seed, bool grad) {
    static const double special[] = {0.0,   -0.0,     1.0,       -1.0, 0.5,  2.0,   1e-3, 30.0,
                                     -30.0, INFINITY, -INFINITY, NAN,  3.25, -0.75, 100.0};
    jg_manual_seed((uint64_t)seed);
    jg_tensor *r = jg_randn(JG_F64, 1, (int64_t[]){n});
    double *v = malloc(sizeof(double) * (size_t)n);
    tu_values(r, v);
    for (int64_t i = 0; i < n && i < (int64_t)(sizeof special / sizeof *special); i++)
        v[(i + seed) % n] = special[i];
    if (dt == JG_I64)
        for (int64_t i = 0; i < n; i++)
            v[i] = isfinite(v[i]) ? floor(v[i] * 10) : (double)i;
    jg_tensor *t = tu_tensor(dt, 1, (int64_t[]){n}, v);
    free(v);
    if (grad)
        jg_set_requires_grad(t, true);
    return t;
}

/* The ops with a scalar attribute, as the op table marks them. */
static bool scalar_op(const jg_op_info *info) {
    return info->flags & JG_OPF_SCALAR;
}

/* Under valgrind (scripts/memcheck.sh sets JITGRAD_MEMCHECK) each op runs
 * its first scalar, unchained, in every operand shape: the other cases
 * take the same code paths on other values, and each case compiles its
 * own program (this test was the memcheck phase's longest, 174 s). */
static void run_op_cases(jg_dtype dt) {
    bool memcheck = getenv("JITGRAD_MEMCHECK") != NULL;
    for (int op = 0; op < JG_OP_COUNT; op++) {
        const jg_op_info *info = &jg_ops[op];
        if (!(info->flags & JG_OPF_ELEMENTWISE))
            continue;
        if (dt == JG_I64 && (info->flags & JG_OPF_FLOAT))
            continue; /* promoted to f32: covered by the f32 cases */
        /* hardsigmoid_backward's input gradient and floor_divide's backward
         * are refused, as PyTorch's */
        bool grad = dt != JG_I64 && !(info->flags & JG_OPF_NONDIFF) &&
                    op != JG_OP_HARDSIGMOID_GRAD && op != JG_OP_FLOOR_DIVIDE;
        double scalars[] = {0.3, -2.5, INFINITY, NAN};
        int n_s = scalar_op(info) ? 4 : 1;
        if (dt == JG_I64 && n_s > 2)
            n_s = 2; /* (int64_t)INFINITY is undefined, eagerly too */
        if (memcheck)
            n_s = 1;
        for (int si = 0; si < n_s; si++)
            for (int chain = 0; chain < (memcheck ? 1 : 2); chain++)
                for (int shape = 0; shape < 3; shape++) {
                    if (shape && info->n_in < 2)
                        break;
                    op_case c = {.op = (jg_opcode)op, .chain = chain, .dt = dt};
                    c.at.s = scalars[si];
                    if (op == JG_OP_POW_SCALAR && si == 1)
                        c.at.s = 2.0;
                    c.at.dtype = dt == JG_F32 ? JG_F64 : JG_F32;
                    jg_tensor *in[2] = {values(dt, 37, 1, grad), values(dt, 37, 2, grad)};
                    /* broadcast scalars: b 0-d, or a a [1] */
                    if (shape == 1)
                        in[1] = jg_sum(values(dt, 1, 3, false));
                    if (shape == 2)
                        in[0] = values(dt, 1, 4, grad);
                    if (shape == 1 && grad)
                        jg_set_requires_grad(in[1] = jg_clone(jg_detach(in[1])), true);
                    if (op == JG_OP_MASKED_FILL) /* its second operand is a bool mask */
                        in[1] = jg_gt_scalar(jg_detach(in[1]), 0);
                    if (dt == JG_I64 && (op == JG_OP_REMAINDER || op == JG_OP_FMOD ||
                                         op == JG_OP_FLOOR_DIVIDE)) /* 0: ZeroDivisionError */
                        in[1] = jg_where(jg_eq_scalar(in[1], 0), jg_scalar(JG_I64, 1), in[1]);
                    check3(p_op, &c, NULL, 0, info->n_in, in);
                }
    }
}

static void test_every_op_f32(void **state) {
    (void)state;
    REQUIRE_C();
    run_op_cases(JG_F32);
}

static void test_every_op_f64(void **state) {
    (void)state;
    REQUIRE_C();
    run_op_cases(JG_F64);
}

static void test_every_op_i64(void **state) {
    (void)state;
    REQUIRE_C();
    run_op_cases(JG_I64);
}

/* ------------------------------------------------------------ fused chains */

/* 12 elementwise ops on x [n] and y [n]: one loop forward */
static int p_chain(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *x = in[0], *y = in[1];
    jg_tensor *t = jg_mul(x, y);
    t = jg_add(t, x);
    t = jg_tanh(t);
    t = jg_mul_scalar(t, 1.7);
    t = jg_sub(t, y);
    t = jg_exp(jg_neg(t));
    t = jg_add_scalar(t, 1.0);
    t = jg_log(t);
    t = jg_sigmoid(jg_mul(t, x));
    t = jg_sqrt(jg_add_scalar(t, 0.5));
    t = jg_relu(jg_sub(t, jg_div(x, jg_add_scalar(jg_mul(y, y), 1.0))));
    out[0] = jg_pow_scalar(t, 1.5);
    return out[0] ? 1 : -1;
}

/* The arithmetic of p_chain without its transcendental functions:
 * 12 nodes, tanh included (jitgrad's own, ops/ew_math.h). */
static int p_arith(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *x = in[0], *y = in[1];
    jg_tensor *t = jg_tanh(jg_add(jg_mul(x, y), x));
    t = jg_neg(jg_sub(jg_mul_scalar(t, 1.7), y));
    t = jg_sqrt(jg_add_scalar(jg_relu(t), 0.5));
    out[0] = jg_div(t, jg_add_scalar(jg_mul(y, y), 1.0));
    return out[0] ? 1 : -1;
}

/* Loops and fused nodes of a call of p without grad, on the c backend. */
static void fusion_stats(jg_program_fn p, jg_tensor **in, int *loops, int *fused) {
    bool prev = jg_set_grad_enabled(false);
    jg_compiled *c = jg_compile(p, NULL, &(jg_compile_options){.backend = "c"});
    jg_tensor *o;
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &o), 1);
    jg_cgen_last_stats(loops, fused, NULL);
    jg_set_grad_enabled(prev);
    jg_compiled_free(c);
}

static void test_long_chain(void **state) {
    (void)state;
    REQUIRE_C();
    for (int dt = 0; dt < 2; dt++) {
        jg_dtype d = dt ? JG_F64 : JG_F32;
        jg_tensor *in[2] = {values(d, 1001, 5, true), values(d, 1001, 6, true)};
        check3(p_chain, NULL, NULL, 0, 2, in);
        check3(p_arith, NULL, NULL, 0, 2, in);
        int loops, fused;
        /* without grad, arithmetic is one loop of all 12 nodes */
        fusion_stats(p_arith, in, &loops, &fused);
        assert_int_equal(loops, 1);
        assert_int_equal(fused, 12);
        /* exp, log and sigmoid are jitgrad's own (ops/ew_math.h) and fuse;
         * pow (libm's for f64) runs as its own kernel after the one loop of
         * the 18 other nodes */
        fusion_stats(p_chain, in, &loops, &fused);
        assert_int_equal(loops, 1);
        assert_int_equal(fused, 18);
    }
}

/* the same chain on a transposed (non-contiguous) input and a [1, 1] scalar */
static int p_strided(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *t = jg_add(jg_mul(in[0], in[1]), in[2]);
    out[0] = jg_exp(jg_mul(jg_tanh(t), in[2]));
    out[1] = jg_sub(t, in[0]);
    return out[0] && out[1] ? 2 : -1;
}

static void test_strided_and_scalar_inputs(void **state) {
    (void)state;
    REQUIRE_C();
    jg_manual_seed(9);
    jg_tensor *base = jg_randn(JG_F32, 2, TU_SHAPE(5, 7));
    jg_tensor *in[3] = {jg_transpose(base, 0, 1), jg_randn(JG_F32, 2, TU_SHAPE(7, 5)),
                        jg_randn(JG_F32, 2, TU_SHAPE(1, 1))};
    jg_set_requires_grad(in[1], true);
    jg_set_requires_grad(in[2], true);
    check3(p_strided, NULL, NULL, 0, 3, in);
}

/* clone of a permuted view (the attention's head merge): the clone runs its
 * eager kernel, one strided copy, not a loop over a contiguous copy; then
 * an op of its own loop reads the clone */
static int p_clone_permute(void *user, const void *args, int n, jg_tensor *const *in,
                           jg_tensor **out) {
    (void)user, (void)args, (void)n;
    int perm[4] = {0, 2, 1, 3};
    jg_tensor *y = jg_clone(jg_permute(jg_mul(in[0], in[1]), perm));
    out[0] = jg_mul(jg_reshape(y, 3, TU_SHAPE(2, 5, 12)), in[2]);
    out[1] = y;
    return out[0] && out[1] ? 2 : -1;
}

static void test_clone_of_permute(void **state) {
    (void)state;
    REQUIRE_C();
    jg_manual_seed(11);
    for (int d = 0; d < 2; d++) {
        jg_dtype dt = d ? JG_F64 : JG_F32;
        jg_tensor *in[3] = {jg_randn(dt, 4, TU_SHAPE(2, 3, 5, 4)),
                            jg_randn(dt, 4, TU_SHAPE(2, 3, 5, 4)), jg_randn(dt, 1, TU_SHAPE(12))};
        jg_set_requires_grad(in[0], true);
        jg_set_requires_grad(in[2], true);
        check3(p_clone_permute, NULL, NULL, 0, 3, in);
    }
}

static jg_tensor *leaf_ln(jg_dtype dt, int ndim, const int64_t *shape) {
    jg_tensor *t = jg_randn(dt, ndim, shape);
    jg_set_requires_grad(t, true);
    return t;
}

/* LayerNorm written out in elementwise ops over x [..., D]: x - mean and
 * / std read a [..., 1] operand once per row, * w and + b a [D] operand per
 * column; out[1] adds a [3, 1, D] operand to x [3, R, D] (a broadcast in the
 * middle dim, which stays the eager kernel's). */
static int p_layer_norm(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    int last = jg_ndim(in[0]) - 1;
    jg_tensor *xc = jg_sub(in[0], jg_mean_dims(in[0], 1, &last, true));
    jg_tensor *var = jg_mean_dims(jg_mul(xc, xc), 1, &last, true);
    jg_tensor *y = jg_div(xc, jg_sqrt(jg_add_scalar(var, 1e-5)));
    out[0] = jg_add(jg_mul(y, in[1]), in[2]);
    out[1] = jg_ndim(in[0]) == 3 ? jg_mul(jg_add(in[0], in[3]), in[2]) : NULL;
    return out[0] ? (out[1] ? 2 : 1) : -1;
}

static void ln_stats(jg_tensor **in, int n, int *loops, int *fused) {
    bool prev = jg_set_grad_enabled(false);
    jg_compiled *c = jg_compile(p_layer_norm, NULL, &(jg_compile_options){.backend = "c"});
    jg_tensor *o[2];
    assert_true(jg_compiled_call(c, NULL, 0, n, in, o) >= 1);
    jg_cgen_last_stats(loops, fused, NULL);
    jg_set_grad_enabled(prev);
    jg_compiled_free(c);
}

/* Elementwise nodes with outer ([N, 1]) and inner ([D]) broadcast operands
 * fuse; the loops run row by row (a parallel chunk may start mid-row). */
static void test_broadcast_operands(void **state) {
    (void)state;
    REQUIRE_C();
    jg_manual_seed(3);
    jg_tensor *a[3] = {leaf_ln(JG_F32, 2, TU_SHAPE(6, 5)), leaf_ln(JG_F32, 1, TU_SHAPE(5)),
                       leaf_ln(JG_F32, 1, TU_SHAPE(5))};
    check3(p_layer_norm, NULL, NULL, 0, 3, a);
    int loops, fused;
    /* sub + mul; add_scalar + sqrt ([6, 1]); div + mul + add (without
     * broadcast operands: mul, then add_scalar + sqrt) */
    ln_stats(a, 3, &loops, &fused);
    assert_int_equal(fused, 7);
    assert_int_equal(loops, 3);
    /* [260, 260]: past 2 * JG_PARALLEL_GRAIN elements, chunks of 32768 split
     * rows; f64 */
    jg_tensor *b[3] = {leaf_ln(JG_F64, 2, TU_SHAPE(260, 260)), leaf_ln(JG_F64, 1, TU_SHAPE(260)),
                       leaf_ln(JG_F64, 1, TU_SHAPE(260))};
    int before = jg_get_num_threads();
    assert_int_equal(jg_set_num_threads(3), 0);
    check3(p_layer_norm, NULL, NULL, 0, 3, b);
    assert_int_equal(jg_set_num_threads(before), 0);
    /* 3-d: [3, 4, 7] with [3, 4, 1], [7] and [4, 7]-free middle broadcast */
    jg_tensor *c[4] = {leaf_ln(JG_F32, 3, TU_SHAPE(3, 4, 7)), leaf_ln(JG_F32, 2, TU_SHAPE(4, 7)),
                       leaf_ln(JG_F32, 1, TU_SHAPE(7)), leaf_ln(JG_F32, 3, TU_SHAPE(3, 1, 7))};
    check3(p_layer_norm, NULL, NULL, 0, 4, c);
}

/* ------------------------------------------------------------ programs of test_compile */

static jg_tensor *leaf(jg_dtype dt, int ndim, const int64_t *shape) {
    jg_tensor *t = jg_randn(dt, ndim, shape);
    jg_set_requires_grad(t, true);
    return t;
}

/* per-row cross entropy with ignored rows, squared and weighted: the loss
 * with reduction none, its backward op and the ignore_index through a graph */
static int p_ce_rows(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    jg_tensor *l = jg_cross_entropy_ex(jg_mul(in[0], in[1]), in[2], JG_REDUCTION_NONE, 1);
    jg_tensor *m = jg_cross_entropy_ex(in[0], in[2], JG_REDUCTION_SUM, -100);
    out[0] = l && m ? jg_add(jg_sum(jg_mul(l, l)), m) : NULL;
    return out[0] ? 1 : -1;
}

static void test_programs(void **state) {
    (void)state;
    REQUIRE_C();
    jg_manual_seed(1);
    jg_tensor *qk[2] = {leaf(JG_F32, 1, TU_SHAPE(16)), leaf(JG_F32, 1, TU_SHAPE(16))};
    check3(tf_qk, NULL, NULL, 0, 2, qk);
    jg_tensor *mlp[4] = {jg_randn(JG_F32, 2, TU_SHAPE(8, 5)), leaf(JG_F32, 2, TU_SHAPE(5, 16)),
                         leaf(JG_F32, 1, TU_SHAPE(16)), leaf(JG_F32, 2, TU_SHAPE(16, 3))};
    check3(tf_mlp, NULL, NULL, 0, 4, mlp);
    jg_set_requires_grad(mlp[0], true);
    check3(tf_mlp, NULL, NULL, 0, 4, mlp);
    jg_tensor *ce[3] = {leaf(JG_F32, 2, TU_SHAPE(4, 3)), leaf(JG_F32, 1, TU_SHAPE(3)),
                        tu_tensor(JG_I64, 1, TU_SHAPE(4), TU_VALS(0, 2, 1, 2))};
    check3(tf_ce, NULL, NULL, 0, 3, ce);
    jg_tensor *rows[3] = {leaf(JG_F32, 2, TU_SHAPE(5, 3)), leaf(JG_F32, 1, TU_SHAPE(3)),
                          tu_tensor(JG_I64, 1, TU_SHAPE(5), TU_VALS(0, 1, 2, 1, 0))};
    check3(p_ce_rows, NULL, NULL, 0, 3, rows);
    jg_tensor *bc[3] = {leaf(JG_F32, 2, TU_SHAPE(3, 1)), leaf(JG_F32, 1, TU_SHAPE(4)),
                        leaf(JG_F32, 0, NULL)};
    check3(tf_bcast, NULL, NULL, 0, 3, bc);
    jg_tensor *bc2[3] = {leaf(JG_F64, 2, TU_SHAPE(3, 1)), leaf(JG_F32, 1, TU_SHAPE(4)),
                         leaf(JG_F32, 0, NULL)};
    check3(tf_bcast, NULL, NULL, 0, 3, bc2);
}

/* ------------------------------------------------------------ custom functions */

/* elementwise code around two custom calls: exp(MyFn(q*2, k, k)) * tf_mul(q, k) */
static int p_mixed(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)n;
    jg_tensor *q2 = jg_mul_scalar(in[0], 2.0);
    jg_tensor *y = tf_apply1(&tf_myfn, 3, (jg_tensor *[]){q2, in[1], in[1]}, args, sizeof(bool));
    tf_mul_cfg cfg = {false, false, 0};
    jg_tensor *z = tf_apply1(&tf_mul, 2, (jg_tensor *[]){in[0], in[1]}, &cfg, sizeof cfg);
    out[0] = y && z ? jg_mul(jg_exp(jg_mul_scalar(y, 0.1)), jg_add(z, in[0])) : NULL;
    return out[0] ? 1 : -1;
}

static void test_custom_functions(void **state) {
    (void)state;
    REQUIRE_C();
    for (int dt = 0; dt < 2; dt++)
        for (int m = 0; m < 2; m++) {
            bool mask = m;
            jg_tensor *l[2] = {values(dt ? JG_F64 : JG_F32, 16, 7, true),
                               values(dt ? JG_F64 : JG_F32, 16, 8, true)};
            check3(tf_seed, NULL, &mask, sizeof mask, 2, l);
            check3(tf_all_slots, NULL, &mask, sizeof mask, 1, l);
            check3(p_mixed, NULL, &mask, sizeof mask, 2, l);
        }
}

/* ------------------------------------------------------------ cache, errors, log */

static int count_files(const char *dir, const char *suffix, bool *tmp_left) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name), ls = strlen(suffix);
        if (strstr(e->d_name, ".tmp") && tmp_left)
            *tmp_left = true;
        if (l > ls && !strcmp(e->d_name + l - ls, suffix) && !strstr(e->d_name, ".tmp"))
            n++;
    }
    closedir(d);
    return n;
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char p[1024];
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

static int compile_chain_once(void) {
    jg_tensor *in[2] = {values(JG_F32, 64, 5, true), values(JG_F32, 64, 6, true)}, *o;
    jg_compiled *c = jg_compile(p_chain, NULL, &(jg_compile_options){.backend = "c"});
    int rc = c && jg_compiled_call(c, NULL, 0, 2, in, &o) == 1 ? 0 : -1;
    if (rc == 0)
        rc = jg_backward(jg_sum(o), NULL, 0);
    jg_compiled_free(c);
    return rc;
}

/* Compiles p_arith without grad for inputs of rank n (shape [4, 1, ...];
 * the code holds no size, but its comments name the rank: one new object
 * per n) and runs it; whether the plan came from the cache. */
static bool compile_arith(int n) {
    jg_scope_push();
    bool prev = jg_set_grad_enabled(false);
    const int64_t shape[8] = {4, 1, 1, 1, 1, 1, 1, 1};
    jg_tensor *in[2] = {jg_reshape(values(JG_F32, 4, 5, false), n, shape),
                        jg_reshape(values(JG_F32, 4, 6, false), n, shape)},
              *o;
    jg_compiled *c = jg_compile(p_arith, NULL, &(jg_compile_options){.backend = "c"});
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &o), 1);
    bool hit = false;
    jg_cgen_last_stats(NULL, NULL, &hit);
    jg_compiled_free(c);
    jg_set_grad_enabled(prev);
    jg_scope_pop();
    return hit;
}

/* JITGRAD_CACHE_MAX bounds the cache, least recently used out first.  The
 * backend's probe object is used by every jg_compile, so it stays: a limit
 * of 3 keeps it and the 2 most recently used graphs. */
static void check_cache_limit(const char *dir) {
    int before = count_files(dir, ".so", NULL);
    setenv("JITGRAD_CACHE_MAX", "0", 1); /* no limit */
    assert_false(compile_arith(5));
    assert_int_equal(count_files(dir, ".so", NULL), before + 1);
    setenv("JITGRAD_CACHE_MAX", "3", 1);
    assert_false(compile_arith(6)); /* keeps 6, the probe and 5 */
    assert_int_equal(count_files(dir, ".so", NULL), 3);
    assert_int_equal(count_files(dir, ".c", NULL), 3);
    assert_true(compile_arith(5));  /* a hit: 5 becomes the most recently used */
    assert_false(compile_arith(7)); /* so 6 goes */
    assert_int_equal(count_files(dir, ".so", NULL), 3);
    assert_true(compile_arith(5));
    assert_true(compile_arith(7));
    assert_false(compile_arith(6)); /* pruned: compiled again, and it works */
    assert_int_equal(count_files(dir, ".so", NULL), 3);
    unsetenv("JITGRAD_CACHE_MAX");
}

static void test_cache(void **state) {
    (void)state;
    REQUIRE_C();
    const char *old = getenv("JITGRAD_CACHE_DIR");
    char *saved = old ? strdup(old) : NULL;
    char dir[] = "/tmp/jg_cgen_cache_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[600];
    snprintf(sub, sizeof sub, "%s/a/b", dir); /* created on demand */
    setenv("JITGRAD_CACHE_DIR", sub, 1);
    /* two processes compile the same sources at once */
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0) {
            jg_scope_push();
            int rc = compile_chain_once();
            jg_scope_pop();
            _exit(rc == 0 ? 0 : 1);
        }
    }
    for (int k = 0; k < 2; k++) {
        int st;
        assert_int_equal(waitpid(kids[k], &st, 0), kids[k]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    bool tmp_left = false;
    int n_so = count_files(sub, ".so", &tmp_left);
    assert_false(tmp_left);
    assert_int_equal(n_so, 3); /* probe, forward, backward */
    assert_int_equal(count_files(sub, ".c", NULL), 3);
    /* this process finds them: no new file, the last plan was a cache hit */
    assert_int_equal(compile_chain_once(), 0);
    bool hit = false;
    jg_cgen_last_stats(NULL, NULL, &hit);
    assert_true(hit);
    assert_int_equal(count_files(sub, ".so", NULL), 3);
    check_cache_limit(sub);
    if (saved)
        setenv("JITGRAD_CACHE_DIR", saved, 1);
    else
        unsetenv("JITGRAD_CACHE_DIR");
    free(saved);
    remove_dir(sub);
    snprintf(sub, sizeof sub, "%s/a", dir);
    rmdir(sub);
    rmdir(dir);
}

static void test_compiler_errors(void **state) {
    (void)state;
    REQUIRE_C();
    /* a failing compile: the call fails with the compiler's message */
    jg_cgen_debug_extra_source = "#error jitgrad test: injected failure";
    jg_tensor *in[2] = {values(JG_F32, 8, 5, false), values(JG_F32, 8, 6, false)}, *o;
    jg_compiled *c = jg_compile(p_chain, NULL, &(jg_compile_options){.backend = "c"});
    assert_non_null(c);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &o), -1);
    TU_ERROR("failed (exit status 1) on the code of the forward graph");
    TU_ERROR("jitgrad test: injected failure");
    jg_cgen_debug_extra_source = NULL;
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &o), 1); /* nothing was cached */
    jg_compiled_free(c);
    /* no compiler */
    const char *old = getenv("JITGRAD_CC");
    char *saved = old ? strdup(old) : NULL;
    setenv("JITGRAD_CC", "/nonexistent/cc", 1);
    assert_false(jg_compile_backend_available("c"));
    assert_true(jg_compile_backend_available("interp"));
    assert_false(jg_compile_backend_available("gpu"));
    assert_null(jg_compile(p_chain, NULL, &(jg_compile_options){.backend = "c"}));
    TU_ERROR("backend \"c\" is not available: C compiler '/nonexistent/cc' not found");
    setenv("JITGRAD_CC", "no-such-compiler-jg", 1);
    assert_null(jg_compile(p_chain, NULL, &(jg_compile_options){.backend = "c"}));
    TU_ERROR("no C compiler found: 'no-such-compiler-jg' is not on PATH");
    setenv("JITGRAD_CC", "/bin/false", 1); /* found, but compiles nothing */
    assert_null(jg_compile(p_chain, NULL, &(jg_compile_options){.backend = "c"}));
    TU_ERROR("failed (exit status 1) on the code of the probe graph");
    if (saved)
        setenv("JITGRAD_CC", saved, 1);
    else
        unsetenv("JITGRAD_CC");
    free(saved);
    assert_true(jg_compile_backend_available("c"));
}

static void log_run(void) {
    setenv("JITGRAD_LOG", "code", 1);
    jg_tensor *in[2] = {leaf(JG_F32, 1, TU_SHAPE(16)), leaf(JG_F32, 1, TU_SHAPE(16))}, *o;
    jg_compiled *c = jg_compile(tf_qk, NULL, &(jg_compile_options){.backend = "c"});
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &o), 1);
    unsetenv("JITGRAD_LOG");
    jg_compiled_free(c);
}

static void test_log_code(void **state) {
    (void)state;
    REQUIRE_C();
    char *s = tu_capture_stderr(log_run);
    assert_non_null(strstr(s, "jitgrad: generated C for the forward graph ("));
    assert_non_null(strstr(s, "jitgrad: generated C for the backward graph ("));
    assert_non_null(strstr(s, "int jg_gen_run(const jg_gen_rt *rt, void *ctx) {"));
    /* (q * (k + k)).sum(): add, mul and the sum in one loop; the product
     * goes to the sum's block buffer, not to memory */
    assert_non_null(strstr(s, "        const float v2 = (float)(v1 + v1);\n"
                              "        const float v3 = (float)(v0 * v2);\n"
                              "        o2[jg_i] = v2;\n"
                              "        jg_sv[jg_i - jg_lo] = v3;\n"));
    assert_non_null(strstr(s, "jg_part[jg_b0 / 4096] = jg_sum_block_float(jg_sv, jg_m);"));
    assert_null(strstr(s, "if (rt->node(ctx, 2) < 0)"));
    assert_null(strstr(s, "o3[jg_i]"));
    /* backward: both products in one loop, reading the expanded gradient once
     * (passed by value), and k's two contributions summed in it */
    assert_non_null(strstr(s, "const int64_t jg_hi, const float v2, const float *restrict x"));
    assert_non_null(strstr(s, "(0, jg_N, *x2, x"));
    /* sizes are read at run time, never written into the code */
    assert_non_null(strstr(s, "const int64_t jg_N = rt->numel(ctx, "));
    assert_null(strstr(s, "16LL"));
    assert_non_null(strstr(s, "        const float v5 = (float)(v2 * v4);\n"
                              "        const float v7 = (float)(v2 * v3);\n"
                              "        const float v9 = (float)(v7 + v7);\n"));
    assert_null(strstr(s, "probe"));
    free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_every_op_f32),
        TU_TEST(test_every_op_f64),
        TU_TEST(test_every_op_i64),
        TU_TEST(test_long_chain),
        TU_TEST(test_strided_and_scalar_inputs),
        TU_TEST(test_clone_of_permute),
        TU_TEST(test_broadcast_operands),
        TU_TEST(test_programs),
        TU_TEST(test_custom_functions),
        TU_TEST(test_cache),
        TU_TEST(test_compiler_errors),
        TU_TEST(test_log_code),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
