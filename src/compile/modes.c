/* Compile modes (PyTorch's mode=, docs/compiler.md "Modes") as backends
 * over the two real ones:
 *
 *   "default"                     the backend itself
 *   "reduce-overhead"             its plans keep a buffer per intermediate
 *                                 value across calls (backend/static_plan.h):
 *                                 a replay allocates only its outputs
 *   "max-autotune-no-cudagraphs"  per graph, the first run times the
 *                                 variants below on the real inputs and
 *                                 keeps the fastest
 *   "max-autotune"                both
 *
 * The variants differ only in how the same operations are scheduled, never
 * in their order, so every one gives bitwise the same results: the c
 * backend's fused loops or the interpreter's one kernel per op (BLAS and
 * the library's kernels for everything), each with the thread pool or on
 * the calling thread alone (results do not depend on the thread count,
 * core/parallel.h), and on the c backend also its loops with the ops that
 * call exp, log, tanh or erf left to the library's vectorised kernels
 * (backend/cgen.h, jg_cgen_split_math).  A graph with custom function calls is not tuned (their
 * callbacks would run once per trial): it runs as "default". */
#include "compile/compile.h"

#include "backend/cgen.h"
#include "backend/interp.h"
#include "core/parallel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- reduce-overhead ---- */

static void *interp_static_new(const jg_graph *g) {
    jg_interp_plan *p = jg_interp_plan_new(g);
    if (p && jg_interp_plan_make_static(p) < 0) {
        jg_interp_plan_free(p);
        return NULL;
    }
    return p;
}
static void *cgen_static_new(const jg_graph *g) {
    jg_cgen_plan *p = jg_cgen_plan_new(g);
    if (p && jg_cgen_plan_make_static(p) < 0) {
        jg_cgen_plan_free(p);
        return NULL;
    }
    return p;
}

/* ---- max-autotune ---- */

int jg_modes_debug_force = -1;

/* Whether g has an elementwise op that calls exp, log, tanh or erf (one the
 * split variant leaves to its kernel). */
static bool has_math(const jg_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const jg_gnode *n = &g->nodes[i];
        const char *e = n->kind == JG_GN_OP ? jg_ops[n->op].cexpr : NULL;
        if (e && (strstr(e, "jg_ew_exp") || strstr(e, "jg_ew_log") || strstr(e, "jg_ew_tanh") ||
                  strstr(e, "jg_ew_erf")))
            return true;
    }
    return false;
}

enum { MAX_VARIANTS = 6, TRIALS = 3, MAX_TRIALS = 10 };
#define TUNE_BUDGET_S 0.02

/* A variant: a backend's plan (made with or without split math loops), run
 * with or without the thread pool.  A serial variant shares the plan of the
 * variant before it. */
typedef struct tune_plan {
    const jg_graph *g;
    int n;
    const jg_backend *be[MAX_VARIANTS];
    void *plan[MAX_VARIANTS];
    bool split[MAX_VARIANTS];
    bool serial[MAX_VARIANTS];
    int chosen; /* -1 until the first run */
} tune_plan;

static void tune_free(void *vp) {
    tune_plan *tp = vp;
    if (!tp)
        return;
    for (int i = 0; i < tp->n; i++)
        if (tp->plan[i])
            tp->be[i]->plan_free(tp->plan[i]);
    free(tp);
}

static tune_plan *tune_new(const jg_graph *g, const jg_backend *base) {
    tune_plan *tp = calloc(1, sizeof *tp);
    if (!tp)
        return jg_errorf_null("out of memory planning a graph");
    tp->g = g;
    tp->chosen = -1;
    /* the generated loops; with the math ops split out; the library's kernels */
    const jg_backend *kinds[3] = {base, NULL, NULL};
    bool split[3] = {false, false, false};
    int n_kinds = 1;
    if (!strcmp(base->name, "c")) {
        kinds[1] = base;
        split[1] = true;
        kinds[2] = base == &jg_backend_c_ro ? &jg_backend_interp_ro : &jg_backend_interp;
        n_kinds = 3;
    }
    for (int k = 0; k < n_kinds; k++) {
        if (split[k] && !has_math(g))
            continue; /* the same code as the plain loops */
        for (int serial = 0; serial < 2; serial++) {
            int i = tp->n++;
            tp->be[i] = kinds[k];
            tp->split[i] = split[k];
            tp->serial[i] = serial;
            if (serial) /* the same plan, run without the pool */
                continue;
            bool prev = jg_cgen_split_math;
            jg_cgen_split_math = split[k];
            tp->plan[i] = kinds[k]->plan_new(g);
            jg_cgen_split_math = prev;
            if (!tp->plan[i]) {
                tp->n--;
                tune_free(tp);
                return NULL;
            }
        }
    }
    return tp;
}

static void *plan_of(const tune_plan *tp, int i) {
    return tp->plan[tp->serial[i] ? i - 1 : i];
}

static int run_variant(const tune_plan *tp, int i, jg_tensor *const *in, jg_tensor **out) {
    bool prev = tp->serial[i] ? jg_parallel_set_inline(true) : false;
    int rc = tp->be[i]->run(plan_of(tp, i), in, out);
    if (tp->serial[i])
        jg_parallel_set_inline(prev);
    return rc;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void variant_name(const tune_plan *tp, int i, char *buf, size_t n) {
    snprintf(buf, n, "%s%s",
             strcmp(tp->be[i]->name, "c") ? "interp kernels"
             : tp->split[i]               ? "c loops, math split out"
                                          : "c loops",
             tp->serial[i] ? " on 1 thread" : "");
}

static void release_all(jg_tensor **t, int n) {
    for (int k = 0; k < n; k++) {
        jg_release(t[k]);
        t[k] = NULL;
    }
}

/* The first run: every variant a few times (its best wall time counts);
 * the outputs returned are the last trial's (any variant's are the same). */
static int tune(tune_plan *tp, jg_tensor *const *in, jg_tensor **out) {
    const jg_graph *g = tp->g;
    bool custom = false;
    for (int i = 0; i < g->n_nodes && !custom; i++)
        custom = g->nodes[i].kind == JG_GN_CUSTOM;
    int threads = jg_get_num_threads();
    bool log = jg_log_topic("autotune");
    if (custom || tp->n == 1) {
        tp->chosen = 0;
        if (log)
            fprintf(stderr, "jitgrad: max-autotune: %s (%d nodes) runs as default (%s)\n", g->name,
                    g->n_nodes, custom ? "it calls custom functions" : "one variant");
        return run_variant(tp, 0, in, out);
    }
    double best[MAX_VARIANTS];
    int no = g->n_outputs;
    jg_tensor **tmp = calloc((size_t)(no ? no : 1), sizeof *tmp);
    if (!tmp)
        return jg_errorf("out of memory tuning a graph");
    int rc = 0;
    /* (a trial must not update the caller's tensors in place: it runs again) */
    bool prev_inplace = jg_cgen_inplace_run;
    jg_cgen_inplace_run = false;
    for (int i = 0; i < tp->n; i++) {
        best[i] = -1;
        if (tp->serial[i] && threads == 1)
            continue; /* the same as the variant before it */
        /* the best of TRIALS runs, more (up to MAX_TRIALS) while they take
         * under TUNE_BUDGET_S in all: the best of a few resists a run
         * another process preempted */
        double spent = 0;
        for (int r = 0; rc == 0 && (r < TRIALS || (r < MAX_TRIALS && spent < TUNE_BUDGET_S)); r++) {
            release_all(tmp, no);
            double t0 = now_s();
            rc = run_variant(tp, i, in, tmp);
            double dt = now_s() - t0;
            spent += dt;
            if (rc == 0 && (best[i] < 0 || dt < best[i]))
                best[i] = dt;
        }
        if (rc < 0)
            break;
    }
    jg_cgen_inplace_run = prev_inplace;
    if (rc < 0) {
        free(tmp);
        return -1;
    }
    tp->chosen = 0;
    for (int i = 1; i < tp->n; i++)
        if (best[i] >= 0 && best[i] < best[tp->chosen])
            tp->chosen = i;
    if (jg_modes_debug_force >= 0 && jg_modes_debug_force < tp->n &&
        best[jg_modes_debug_force] >= 0)
        tp->chosen = jg_modes_debug_force;
    if (log) {
        char name[64], line[1024];
        size_t len = 0;
        for (int i = 0; i < tp->n && len < sizeof line; i++) {
            if (best[i] < 0)
                continue;
            variant_name(tp, i, name, sizeof name);
            len += (size_t)snprintf(line + len, sizeof line - len, "%s%s %.3f ms", len ? ", " : "",
                                    name, best[i] * 1e3);
        }
        variant_name(tp, tp->chosen, name, sizeof name);
        fprintf(stderr, "jitgrad: max-autotune: %s (%d nodes) runs with %s (%s)\n", g->name,
                g->n_nodes, name, line);
    }
    memcpy(out, tmp, sizeof *out * (size_t)no);
    free(tmp);
    return 0;
}

static int tune_run(void *vp, jg_tensor *const *in, jg_tensor **out) {
    tune_plan *tp = vp;
    if (tp->chosen < 0)
        return tune(tp, in, out);
    return run_variant(tp, tp->chosen, in, out);
}

static void *tune_interp_new(const jg_graph *g) {
    return tune_new(g, &jg_backend_interp);
}
static void *tune_c_new(const jg_graph *g) {
    return tune_new(g, &jg_backend_c);
}
static void *tune_interp_ro_new(const jg_graph *g) {
    return tune_new(g, &jg_backend_interp_ro);
}
static void *tune_c_ro_new(const jg_graph *g) {
    return tune_new(g, &jg_backend_c_ro);
}

static int interp_run(void *p, jg_tensor *const *in, jg_tensor **out) {
    return jg_interp_run(p, in, out);
}
static void interp_free(void *p) {
    jg_interp_plan_free(p);
}
static int cgen_run(void *p, jg_tensor *const *in, jg_tensor **out) {
    return jg_cgen_run(p, in, out);
}
static void cgen_free(void *p) {
    jg_cgen_plan_free(p);
}

const jg_backend jg_backend_interp_ro = {"interp", interp_static_new, interp_run, interp_free,
                                         "reduce-overhead"};
const jg_backend jg_backend_c_ro = {"c", cgen_static_new, cgen_run, cgen_free, "reduce-overhead"};
static const jg_backend interp_tune = {"interp", tune_interp_new, tune_run, tune_free,
                                       "max-autotune-no-cudagraphs"};
static const jg_backend c_tune = {"c", tune_c_new, tune_run, tune_free,
                                  "max-autotune-no-cudagraphs"};
static const jg_backend interp_tune_ro = {"interp", tune_interp_ro_new, tune_run, tune_free,
                                          "max-autotune"};
static const jg_backend c_tune_ro = {"c", tune_c_ro_new, tune_run, tune_free, "max-autotune"};

const char *const jg_compile_modes[] = {"default", "reduce-overhead", "max-autotune-no-cudagraphs",
                                        "max-autotune", NULL};

const jg_backend *jg_mode_backend(const jg_backend *base, const char *mode) {
    bool c = !strcmp(base->name, "c");
    if (!mode || !strcmp(mode, "default"))
        return c ? &jg_backend_c : &jg_backend_interp;
    if (!strcmp(mode, "reduce-overhead"))
        return c ? &jg_backend_c_ro : &jg_backend_interp_ro;
    if (!strcmp(mode, "max-autotune-no-cudagraphs"))
        return c ? &c_tune : &interp_tune;
    if (!strcmp(mode, "max-autotune"))
        return c ? &c_tune_ro : &interp_tune_ro;
    return jg_errorf_null("Unrecognized mode=%s, should be one of: default, reduce-overhead, "
                          "max-autotune-no-cudagraphs, max-autotune",
                          mode);
}
