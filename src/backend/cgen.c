/* The "c" backend (see cgen.h and docs/compiler.md, "The c backend"). */
#include "backend/cgen.h"
#include "backend/cache.h"
#include "backend/pool.h"
#include "core/strbuf.h"
#include "backend/interp.h"
#include "core/iter.h"
#include "core/parallel.h"
#include "optim/adam_fused.h"
#include "ops/sum_order.h"
#include "passes/passes.h"
#include "ew_math_text.h" /* JG_EW_MATH_TEXT: src/ops/ew_math.h, verbatim */

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

const char *jg_cgen_debug_extra_source = NULL;

/* ------------------------------------------------------------ runtime table */

/* The table the generated code calls.  The generated source declares the
 * same struct (RT_DECL below): keep the two in sync. */
typedef struct jg_gen_rt {
    int (*node)(void *ctx, int node);          /* runs a node with its kernel */
    const void *(*in)(void *ctx, int value);   /* data of a value, made contiguous */
    const void *(*elem)(void *ctx, int value); /* a value's first element */
    void *(*out)(void *ctx, int value);        /* allocates a value's buffer */
    void (*done)(void *ctx, int step);         /* releases what dies after step */
    /* jg_parallel_for: fn(arg, lo, hi) over the chunks of [0, n) */
    void (*par)(int64_t n, int64_t grain, void (*fn)(void *arg, int64_t lo, int64_t hi), void *arg);
    /* Sizes and scalars are read at run time, never written into the code,
     * so one object serves every size of a dynamic entry (and every value
     * of a scalar): */
    int64_t (*numel)(void *ctx, int value);        /* a value's element count */
    double (*scalar)(void *ctx, int node);         /* a node's scalar attribute */
    void *(*tmp)(void *ctx, int value, int64_t n); /* n elements of value's dtype, until done */
    /* the buffer value is computed in, holding input's elements: input's
     * own or a copy (jg_cgen_inout) */
    void *(*inout)(void *ctx, int value, int input);
} jg_gen_rt;

static const char RT_DECL[] =
    "typedef struct jg_gen_rt {\n"
    "    int (*node)(void *ctx, int node);         /* runs a node with its kernel */\n"
    "    const void *(*in)(void *ctx, int value);  /* data of a value, made contiguous */\n"
    "    const void *(*elem)(void *ctx, int value); /* a value's first element */\n"
    "    void *(*out)(void *ctx, int value);       /* allocates a value's buffer */\n"
    "    void (*done)(void *ctx, int step);        /* releases what dies after step */\n"
    "    void (*par)(int64_t n, int64_t grain, void (*fn)(void *arg, int64_t lo, int64_t hi),\n"
    "                void *arg);                   /* jg_parallel_for */\n"
    "    int64_t (*numel)(void *ctx, int value);   /* a value's element count */\n"
    "    double (*scalar)(void *ctx, int node);    /* a node's scalar attribute */\n"
    "    void *(*tmp)(void *ctx, int value, int64_t n); /* scratch until done */\n"
    "    void *(*inout)(void *ctx, int value, int input); /* input's elements, to update */\n"
    "} jg_gen_rt;\n";

typedef int (*gen_fn)(const jg_gen_rt *rt, void *ctx);

/* ------------------------------------------------------------ string buffer */

typedef struct {
    char *s;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...) {
    if (b->oom)
        return;
    va_list ap;
    va_start(ap, fmt);
    b->oom = jg_vappendf(&b->s, &b->len, &b->cap, fmt, ap) < 0;
    va_end(ap);
}

static void sb_putn(sbuf *b, const char *s, size_t n) {
    sb_add(b, "%.*s", (int)n, s);
}

/* ------------------------------------------------------------ grouping */

/* A step of the generated function: one fused loop or one node run through
 * the runtime table. */
typedef struct {
    int group; /* >= 0: fused group id; -1: node `node` */
    int node;  /* the last node of the step (its position in the run order) */
} step;

typedef struct {
    const jg_graph *g;
    int *group;  /* per node: group id (fused), or -1 */
    int *last;   /* per group: its last node */
    int *sum;    /* per group: the sum node that ends it, or -1 */
    bool *ext;   /* per value: read by a node of another step (or an output) */
    step *steps; /* in run order */
    int n_steps, n_groups, n_fused, n_loops;
    int *step_of_node;
    int *inout; /* per value: the graph input whose buffer it is computed in, or -1 */
    int tail;   /* the first step of the run of sum-free loops and tail kernels (tail_kernel)
                   that ends the graph */
} layout;

static bool same_shape(const jg_meta *a, const jg_meta *b) {
    return a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

static int64_t meta_numel(const jg_meta *m) {
    return jg_shape_numel(m->ndim, m->shape);
}

/* Is constant t one value repeated (its elements all the same bits)?  A
 * backward traced into the program starts from such a constant: the seed
 * of the sum, expanded to the summand's shape, is folded at trace time
 * into a full-size copy.  The code depends on the answer, so a constant
 * of other values makes other code; constants never change. */
static bool uniform_const(const jg_tensor *t) {
    if (t->numel <= 1 || !jg_is_contiguous(t) || !t->storage->data)
        return false;
    const char *d = jg_tensor_ptr(t);
    size_t es = jg_dtype_size(t->dtype);
    for (int64_t i = 1; i < t->numel; i++)
        if (memcmp(d, d + (size_t)i * es, es))
            return false;
    return true;
}

/* Is value u one element repeated: expand() of a single element (what the
 * backward of a sum starts from), or a constant of one value?  The loops
 * then read that element once instead of a materialized copy. */
static bool repeated_scalar(const jg_graph *g, int u) {
    const jg_value *v = &g->vals[u];
    if (v->kind == JG_VAL_CONST)
        return uniform_const(g->consts[v->index]);
    if (v->kind != JG_VAL_NODE)
        return false;
    const jg_gnode *n = &g->nodes[v->node];
    return n->kind == JG_GN_OP && n->op == JG_OP_EXPAND && meta_numel(&g->vals[n->in[0]].meta) == 1;
}

/* Can node n be computed inside a loop over its output's elements?  Its
 * operands must have its shape (read at the same index) or one element
 * (read once), and its row must not be JG_OPF_NOFUSE (a libm call would
 * keep gcc from vectorizing the whole loop; such an op runs its eager
 * kernel between the fused loops, with the same results). */
_Thread_local bool jg_cgen_split_math;

/* Whether an op's expression calls exp, log, tanh or erf (jg_cgen_split_math). */
static bool calls_math(const char *cexpr) {
    return strstr(cexpr, "jg_ew_exp") || strstr(cexpr, "jg_ew_log") ||
           strstr(cexpr, "jg_ew_tanh") || strstr(cexpr, "jg_ew_erf");
}

/* How operand shape m is read in a loop over shape o, operands aligned on
 * their last dims: 0 at the same index or as one element; 1 (outer) m is o's
 * leading dims then 1s (LayerNorm's mean), one element per row of
 * numel(o) / numel(m); 2 (inner) m is 1s then o's trailing dims (a bias),
 * read again every numel(m) elements; -1 any other broadcast (read through a
 * materialized copy by the eager kernel). */
static int bcast_kind(const jg_meta *m, const jg_meta *o) {
    if (same_shape(m, o) || meta_numel(m) == 1)
        return 0;
    if (m->ndim > o->ndim)
        return -1;
    int nd = o->ndim, pad = o->ndim - m->ndim;
    int64_t pm[JG_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        pm[d] = d < pad ? 1 : m->shape[d - pad];
    int k = 0; /* outer: equal dims, then 1s */
    while (k < nd && pm[k] == o->shape[k])
        k++;
    bool ok = true;
    for (int d = k; d < nd; d++)
        ok &= pm[d] == 1;
    if (ok)
        return 1;
    k = 0; /* inner: 1s, then equal dims */
    while (k < nd && pm[k] == 1)
        k++;
    for (int d = k; d < nd; d++)
        if (pm[d] != o->shape[d])
            return -1;
    return 2;
}

static bool fusable(const jg_graph *g, const jg_gnode *n) {
    if (n->kind != JG_GN_OP)
        return false;
    const jg_op_info *info = &jg_ops[n->op];
    if (!(info->flags & JG_OPF_ELEMENTWISE) || !info->cexpr || n->n_out != 1 || n->n_in < 1 ||
        n->n_in > 2 || (info->flags & JG_OPF_NOFUSE) ||
        (jg_cgen_split_math && calls_math(info->cexpr)))
        return false;
    /* a clone of a view (a permute's output, say) runs its eager kernel:
     * one strided copy, where the loop would read a contiguous copy rt_in
     * made first */
    const jg_value *x = &g->vals[n->in[0]];
    if (n->op == JG_OP_CLONE && x->kind == JG_VAL_NODE && g->nodes[x->node].kind == JG_GN_OP &&
        (jg_ops[g->nodes[x->node].op].flags & JG_OPF_VIEW))
        return false;
    const jg_meta *o = &g->vals[n->out[0]].meta;
    for (int k = 0; k < n->n_in; k++) {
        const jg_meta *m = &g->vals[n->in[k]].meta;
        if (bcast_kind(m, o) < 0)
            return false;
    }
    return true;
}

/* The sum node that ends a loop: in f32 / f64 with the ordering of
 * src/ops/sum_order.h (block partials of JG_SUM_BLOCK elements, added in
 * block order), which is what the eager kernel does for a full reduction of
 * a dense input.  The loop then keeps the summand in a block buffer instead
 * of storing it and reading it back.  A mean over all dims ends a loop the
 * same way: the eager kernel is that sum, then one division by the count
 * in the dtype (jg_k_mean). */
#define SUM_BLOCK 4096      /* JG_SUM_BLOCK */
#define SUM_STACK_BLOCKS 64 /* partials on the stack of jg_gen_run; more: rt->tmp */
_Static_assert(SUM_BLOCK == JG_SUM_BLOCK && JG_SUM_LANES_F32 == 32 && JG_SUM_LANES_F64 == 16 &&
                   JG_PARALLEL_GRAIN % SUM_BLOCK == 0,
               "the generated sum follows src/ops/sum_order.h");

static bool heavy(const jg_gnode *n);

/* The open group node n (a sum or mean) can end, or -1. */
static int sum_target(const jg_graph *g, const layout *L, const bool *sealed, const jg_gnode *n) {
    if (n->kind != JG_GN_OP || (n->op != JG_OP_SUM && n->op != JG_OP_MEAN) || n->n_in != 1 ||
        n->n_out != 1)
        return -1;
    const jg_value *v = &g->vals[n->in[0]];
    const jg_meta *o = &g->vals[n->out[0]].meta;
    if (v->kind != JG_VAL_NODE || (v->meta.dtype != JG_F32 && v->meta.dtype != JG_F64) ||
        o->dtype != v->meta.dtype || (n->attrs.n != 0 && n->attrs.n != v->meta.ndim))
        return -1;
    if (meta_numel(&v->meta) < 1)
        return -1;
    int h = L->group[v->node];
    if (h < 0 || sealed[h] || heavy(&g->nodes[v->node]))
        return -1;
    /* a loop with broadcast operands runs row by row, while the sum's
     * blocks are fixed on the flat index: the sum stays a node of its own */
    for (int j = 0; j < (int)(n - g->nodes); j++) {
        if (L->group[j] != h)
            continue;
        const jg_gnode *m = &g->nodes[j];
        for (int k = 0; k < m->n_in; k++)
            if (bcast_kind(&g->vals[m->in[k]].meta, &g->vals[m->out[0]].meta) > 0)
                return -1;
    }
    return h;
}

/* Is node i computed element by element in the loop of group gi (the sum
 * that ends a group is not)? */
static bool in_loop(const layout *L, int gi, int i) {
    return L->group[i] == gi && L->sum[gi] != i;
}

static void layout_free(layout *L) {
    free(L->sum);
    free(L->group);
    free(L->last);
    free(L->ext);
    free(L->steps);
    free(L->step_of_node);
    free(L->inout);
}

/* Can group e, whose last node comes before group h's, run in h's loop, at
 * h's place?  Both loop over the same elements (shape: the output of one
 * of their nodes that is not a sum, rep); at most one ends in a sum (the
 * loop keeps one block buffer); no node between e's last node and h's
 * last one, outside e and h, reads a value of e (it would run before e
 * now does); and h does not read e's sum (a loop cannot read a result its
 * own blocks are still adding up).  Everything e reads exists before its
 * last node, so it exists at h's place too. */
static bool fusable_groups(const jg_graph *g, const layout *L, const int *rep, int e, int h) {
    if ((L->sum[e] >= 0 && L->sum[h] >= 0) || rep[e] < 0 || rep[h] < 0 ||
        !same_shape(&g->vals[g->nodes[rep[e]].out[0]].meta, &g->vals[g->nodes[rep[h]].out[0]].meta))
        return false;
    int sum_out = L->sum[e] >= 0 ? g->nodes[L->sum[e]].out[0] : -1;
    for (int j = L->last[e] + 1; j <= L->last[h]; j++) {
        const jg_gnode *n = &g->nodes[j];
        if (L->group[j] == e)
            continue;
        for (int k = 0; k < n->n_in; k++) {
            const jg_value *v = &g->vals[n->in[k]];
            if (v->kind != JG_VAL_NODE || L->group[v->node] != e)
                continue;
            if (L->group[j] != h || n->in[k] == sum_out)
                return false;
        }
    }
    return true;
}

/* Same-shape earlier groups fuse_groups tries per group at most (each try
 * scans the nodes between the two; this bounds the time on large graphs). */
#define FUSE_TRIES 8

/* Loop fusion across a sum: the greedy grouping seals a group at a sum
 * (or at any outside reader), but a later group over the same elements
 * that does not depend on the sum can still take the earlier group into
 * its loop (fusable_groups).  Each element goes through the same
 * operations, and the sum keeps its blocks and their order, so no bit
 * changes.  A forward and its backward traced into one program
 * (loss.backward() inside it) become one pass over memory this way: the
 * backward of a sum starts from its seed broadcast, not from its value,
 * so the forward's loop and the backward's run as one, and what the
 * backward reads of the forward (relu's output) stays in registers. */
static int fuse_groups(const jg_graph *g, layout *L) {
    int nn = g->n_nodes;
    int *rep = malloc(sizeof(int) * (size_t)(L->n_groups ? L->n_groups : 1));
    if (!rep)
        return jg_errorf("out of memory generating code");
    for (int k = 0; k < L->n_groups; k++)
        rep[k] = -1;
    for (int i = 0; i < nn; i++) {
        int gi = L->group[i];
        if (gi < 0)
            continue;
        L->last[gi] = i;
        if (rep[gi] < 0 && in_loop(L, gi, i))
            rep[gi] = i;
    }
    for (int i = 0; i < nn; i++) {
        int h = L->group[i];
        if (h < 0 || L->last[h] != i)
            continue;
        /* earlier groups, latest first */
        for (int j = i - 1, tries = 0; j >= 0 && tries < FUSE_TRIES; j--) {
            int e = L->group[j];
            if (e < 0 || e == h || L->last[e] != j || rep[e] < 0 ||
                !same_shape(&g->vals[g->nodes[rep[e]].out[0]].meta,
                            &g->vals[g->nodes[rep[h]].out[0]].meta))
                continue;
            tries++;
            if (!fusable_groups(g, L, rep, e, h))
                continue;
            for (int m = 0; m <= j; m++)
                if (L->group[m] == e)
                    L->group[m] = h;
            if (L->sum[e] >= 0)
                L->sum[h] = L->sum[e];
        }
    }
    free(rep);
    /* what is read across steps, again */
    memset(L->ext, 0, sizeof *L->ext * (size_t)(g->n_vals ? g->n_vals : 1));
    for (int i = 0; i < nn; i++) {
        const jg_gnode *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            const jg_value *v = &g->vals[n->in[k]];
            if (v->kind == JG_VAL_NODE &&
                (L->group[v->node] < 0 || L->group[v->node] != L->group[i]))
                L->ext[n->in[k]] = true;
        }
    }
    return 0;
}

/* Greedy grouping in node order.  A fusable node joins (and merges) the open
 * groups of its same-shape operands; a group is sealed as soon as a node
 * outside it reads one of its values, so every group can run at the place of
 * its last node: whatever it reads is computed by then, and nothing reads it
 * earlier. */
static int layout_make(const jg_graph *g, layout *L) {
    int nn = g->n_nodes, nv = g->n_vals ? g->n_vals : 1;
    memset(L, 0, sizeof *L);
    L->g = g;
    L->group = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    L->last = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    L->sum = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    bool *sealed = calloc((size_t)(nn ? nn : 1), sizeof *sealed);
    L->ext = calloc((size_t)nv, sizeof *L->ext);
    L->steps = malloc(sizeof *L->steps * (size_t)(nn ? nn : 1));
    L->step_of_node = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    if (!L->group || !L->last || !L->sum || !sealed || !L->ext || !L->steps || !L->step_of_node) {
        free(sealed);
        layout_free(L);
        return jg_errorf("out of memory generating code");
    }
    for (int i = 0; i < nn; i++) {
        const jg_gnode *n = &g->nodes[i];
        int gi = sum_target(g, L, sealed, n);
        if (gi >= 0) {
            L->sum[gi] = i; /* the group's last node: nothing joins it after the sum */
            sealed[gi] = true;
        } else if (fusable(g, n)) {
            const jg_meta *o = &g->vals[n->out[0]].meta;
            gi = L->n_groups++;
            L->last[gi] = i;
            L->sum[gi] = -1;
            for (int k = 0; k < n->n_in; k++) {
                const jg_value *v = &g->vals[n->in[k]];
                if (v->kind != JG_VAL_NODE || !same_shape(&v->meta, o))
                    continue;
                int h = L->group[v->node];
                if (h < 0 || h == gi || sealed[h])
                    continue;
                for (int j = 0; j < i; j++) /* merge h into gi */
                    if (L->group[j] == h)
                        L->group[j] = gi;
            }
            /* and the latest open group of the same shape (siblings reading
             * the same operands share one pass over memory) */
            for (int j = i - 1; j >= 0; j--) {
                int h = L->group[j];
                if (h < 0 || h == gi || sealed[h] ||
                    !same_shape(&g->vals[g->nodes[j].out[0]].meta, o))
                    continue;
                for (int m = 0; m < i; m++)
                    if (L->group[m] == h)
                        L->group[m] = gi;
                break;
            }
        }
        L->group[i] = gi;
        /* operands from other steps seal their groups */
        for (int k = 0; k < n->n_in; k++) {
            const jg_value *v = &g->vals[n->in[k]];
            if (v->kind != JG_VAL_NODE)
                continue;
            int h = L->group[v->node];
            if (h < 0 || h != gi) {
                L->ext[n->in[k]] = true;
                if (h >= 0)
                    sealed[h] = true;
            }
        }
    }
    free(sealed);
    if (fuse_groups(g, L) < 0) {
        layout_free(L);
        return -1;
    }
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k] >= 0)
            L->ext[g->outputs[k]] = true;
    /* steps in the order of their last node */
    for (int i = 0; i < nn; i++)
        if (L->group[i] >= 0)
            L->last[L->group[i]] = i;
    for (int i = 0; i < nn; i++) {
        int gi = L->group[i];
        if (gi >= 0 && L->last[gi] != i)
            continue;
        L->steps[L->n_steps] = (step){gi, i};
        if (gi >= 0)
            for (int j = 0; j <= i; j++)
                if (L->group[j] == gi) {
                    L->step_of_node[j] = L->n_steps;
                    L->n_fused++;
                }
        if (gi < 0)
            L->step_of_node[i] = L->n_steps;
        L->n_loops += gi >= 0;
        L->n_steps++;
    }
    return 0;
}

/* ------------------------------------------------------------ emission */

static const char *ctype(jg_dtype d) {
    switch (d) {
    case JG_F32:
        return "float";
    case JG_F64:
        return "double";
    case JG_I64:
        return "int64_t";
    case JG_BOOL:
        return "_Bool";
    case JG_I32:
        return "int32_t";
    }
    return "?";
}

/* Writes expr with the identifiers a, b, s, T (the result's C type) and A
 * (operand a's C type) replaced (numbers are copied whole, so the b of 0x1b
 * is not an operand).  fast (f32 nodes of a guarded loop, see exp_guard):
 * jg_ew_exp(x) becomes jg_ew_expf_track(&jg_big, x). */
static int emit_expr(sbuf *b, const char *expr, const char *ra, const char *rb, const char *rs,
                     const char *rt, const char *rta, const char *opname, bool fast) {
    const char *p = expr;
    while (*p) {
        if (isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1]))) {
            const char *q = p + 1; /* a preprocessing number */
            while (isalnum((unsigned char)*q) || *q == '_' || *q == '.' ||
                   ((*q == '+' || *q == '-') && strchr("eEpP", q[-1])))
                q++;
            sb_putn(b, p, (size_t)(q - p));
            p = q;
        } else if (isalpha((unsigned char)*p) || *p == '_') {
            const char *q = p + 1;
            while (isalnum((unsigned char)*q) || *q == '_')
                q++;
            size_t n = (size_t)(q - p);
            const char *r = NULL;
            if (n == 1)
                r = *p == 'a'   ? ra
                    : *p == 'b' ? rb
                    : *p == 's' ? rs
                    : *p == 'T' ? rt
                    : *p == 'A' ? rta
                                : NULL;
            if (n == 1 && strchr("absTA", *p) && !r)
                return jg_errorf("cgen: the expression of %s uses '%c', which it has no value for",
                                 opname, *p);
            if (r) {
                sb_add(b, "%s", r);
            } else if (fast && n == 9 && !memcmp(p, "jg_ew_exp", 9) && *q == '(') {
                sb_add(b, "jg_ew_expf_track(&jg_big, ");
                q++;
            } else {
                sb_putn(b, p, n);
            }
            p = q;
        } else {
            sb_putn(b, p, 1);
            p++;
        }
    }
    return 0;
}

/* The type and rank only: the code holds no size (they are read at run
 * time), so graphs that differ only in sizes share one object. */
static void emit_shape(sbuf *b, const jg_meta *m) {
    sb_add(b, "%s %d-d", jg_dtype_name(m->dtype), m->ndim);
}

static void emit_node_comment(sbuf *b, const jg_graph *g, int i) {
    const jg_gnode *n = &g->nodes[i];
    sb_add(b, "    /* node %d: ", i);
    for (int k = 0; k < n->n_out; k++)
        sb_add(b, "%sv%d", k ? ", " : "", n->out[k]);
    sb_add(b, " : ");
    emit_shape(b, &g->vals[n->out[0]].meta);
    sb_add(b, " = %s(", n->kind == JG_GN_CUSTOM ? "custom" : jg_ops[n->op].name);
    for (int k = 0; k < n->n_in; k++)
        sb_add(b, "%sv%d", k ? ", " : "", n->in[k]);
    sb_add(b, ") */\n");
}

/* A long-latency node (jitgrad's f32 tanh: a chain of some 30 dependent
 * operations and a division; libm's f64 tanh; sqrt, whose errno check keeps gcc
 * from vectorizing its loop) gets a pass over the block of its own. */
static bool heavy(const jg_gnode *n) {
    return n->op == JG_OP_TANH || n->op == JG_OP_SQRT;
}

#define BLOCK 256 /* elements per block of a segmented loop */
/* Arrays one pass reads or writes at most.  Buffers from the allocator share
 * their address modulo 4096, so every stream of a pass falls into the same
 * L1 set (8 ways): past that, lines are evicted before they are filled and
 * a loop with 16 saved outputs ran slower than the 32 eager kernels. */
#define MAX_STREAMS 6

/* The loop of group gi.  Cheap nodes are computed element by element in
 * registers.  When the group holds a heavy node, whose chain of dependent
 * operations would make each element wait for the previous node's result,
 * or touches more than MAX_STREAMS arrays, the loop runs over blocks of
 * BLOCK elements, and within a block over segments (runs of cheap nodes
 * touching at most MAX_STREAMS arrays, each heavy node alone), one pass each:
 * a pass computes many independent elements of one node, and a value read
 * by a later segment waits in a block-sized stack array (L1 resident),
 * reused once its last reader has run.  Each element still goes through
 * the same operations, so the results are those of one pass. */
/* Row function jg_row_<op>_<type> for heavy unary node n (written to rows once
 * per file, row_done marking it): o[i] = (T)(expr(a[i])) over n elements.
 * gcc inlines jitgrad's tanh into one loop and vectorizes it, where 64 uses
 * in one loop made it give up inlining (a scalar call per element). */
static int emit_row(sbuf *rows, bool *row_done, const jg_graph *g, const jg_gnode *n) {
    jg_dtype dt = g->vals[n->out[0]].meta.dtype, da = g->vals[n->in[0]].meta.dtype;
    int key = (n->op == JG_OP_TANH ? 0 : 1) * 64 + (int)dt * 8 + (int)da;
    if (row_done[key])
        return 0;
    row_done[key] = true;
    const char *T = ctype(dt), *A = ctype(da);
    const jg_op_info *info = &jg_ops[n->op];
    sb_add(
        rows,
        "static JG_LOOP void jg_row_%s_%s_%s(int64_t n, const %s *restrict a, %s *restrict o) {\n"
        "    for (int64_t i = 0; i < n; i++) {\n        const %s v = a[i];\n        o[i] = (%s)(",
        info->name, T, A, A, T, A, T);
    int rc = emit_expr(rows, info->cexpr, "v", NULL, NULL, T, A, info->name, false);
    sb_add(rows, ");\n    }\n}\n\n");
    return rc;
}

/* jg_sum_block_<T>(x, n): the sum of one block of n <= JG_SUM_BLOCK
 * elements in the order of src/ops/sum_order.h, the same arithmetic as
 * sum_block_f32 / _f64 in src/ops/reduce.c (lanes in 8 vectors of 16 bytes,
 * folded by halving). */
static int emit_sum_block(sbuf *rows, bool *row_done, jg_dtype dt) {
    int key = 120 + (dt == JG_F64);
    if (row_done[key])
        return 0;
    row_done[key] = true;
    const char *T = ctype(dt);
    int vl = dt == JG_F64 ? 2 : 4;
    sb_add(rows,
           "typedef %s jg_v_%s __attribute__((vector_size(16)));\n"
           "typedef %s jg_vu_%s __attribute__((vector_size(16), aligned(%d), may_alias));\n"
           "static %s jg_sum_block_%s(const %s *x, int64_t n) {\n"
           "    jg_v_%s a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, "
           "a7 = {0};\n"
           "    int64_t i = 0;\n"
           "    for (; i + %d <= n; i += %d) {\n"
           "        const jg_vu_%s *v = (const jg_vu_%s *)(x + i);\n"
           "        a0 += v[0], a1 += v[1], a2 += v[2], a3 += v[3];\n"
           "        a4 += v[4], a5 += v[5], a6 += v[6], a7 += v[7];\n"
           "    }\n"
           "    if (i < n) {\n"
           "        %s t[%d] = {0};\n"
           "        memcpy(t, x + i, sizeof(%s) * (size_t)(n - i));\n"
           "        const jg_vu_%s *v = (const jg_vu_%s *)t;\n"
           "        a0 += v[0], a1 += v[1], a2 += v[2], a3 += v[3];\n"
           "        a4 += v[4], a5 += v[5], a6 += v[6], a7 += v[7];\n"
           "    }\n"
           "    a0 += a4, a1 += a5, a2 += a6, a3 += a7;\n"
           "    a0 += a2, a1 += a3;\n"
           "    a0 += a1;\n"
           "    %s l[%d];\n"
           "    memcpy(l, &a0, sizeof l);\n"
           "    for (int w = %d; w >= 1; w /= 2)\n"
           "        for (int j = 0; j < w; j++)\n"
           "            l[j] += l[j + w];\n"
           "    return l[0];\n}\n\n",
           T, T, T, T, (int)(dt == JG_F64 ? 8 : 4), T, T, T, T, 8 * vl, 8 * vl, T, T, T, 8 * vl, T,
           T, T, T, vl, vl / 2);
    return 0;
}

/* Whether node n computes f32 exp (exp, sigmoid, silu and the backward of
 * silu and gelu) from f32 operands.  A loop holding one runs over blocks
 * of BLOCK elements, as the eager exp / sigmoid / silu loops do
 * (ops/elementwise.c): first with jg_ew_expf_normal for each such exp
 * (jg_ew_expf_track, which also keeps the largest |x| of the block in
 * jg_big), then, only if some |x| was over JG_EW_EXPF_NORMAL_MAX, again
 * with jg_ew_expf.  jg_ew_expf_normal gives jg_ew_expf's bits where it is
 * used, so every element gets the expression's bits either way.  Redoing a
 * block is safe: a loop's outputs are fresh buffers (rt_out), never its
 * inputs, and its block arrays are rewritten before they are read. */
static bool exp_guard(const jg_graph *g, const jg_gnode *n) {
    if (n->kind == JG_GN_CUSTOM || !jg_ops[n->op].cexpr ||
        !strstr(jg_ops[n->op].cexpr, "jg_ew_exp(") || g->vals[n->out[0]].meta.dtype != JG_F32)
        return false;
    for (int k = 0; k < n->n_in; k++)
        if (g->vals[n->in[k]].meta.dtype != JG_F32)
            return false;
    return true;
}

static int emit_segments(sbuf *f, sbuf *rows, bool *row_done, const layout *L, const int *mem,
                         int n_mem, int *ops, int n_seg, const int *seg, const int *def,
                         const int *slot, const char *seen, const char *ind, bool blocked,
                         bool guard, int pass);

_Thread_local const int *jg_cgen_inout;
_Thread_local bool jg_cgen_inplace_run;
static _Atomic int64_t total_in_place, total_copied;

void jg_cgen_inout_totals(int64_t *in_place, int64_t *copied) {
    *in_place = atomic_load(&total_in_place);
    *copied = atomic_load(&total_copied);
}

/* A node run through the runtime table that the tail may hold: adam_moments
 * and adam_update, whose kernels allocate nothing and cannot fail once their
 * operands are dense (the gradient may be column-major: jg_adam_grad_banded)
 * and their outputs allocated, and which may write their outputs over the
 * operands they replace (kernel_inout_operand). */
static bool tail_kernel(const jg_graph *g, int i) {
    const jg_gnode *n = &g->nodes[i];
    return n->kind == JG_GN_OP && (n->op == JG_OP_ADAM_MOMENTS || n->op == JG_OP_ADAM_UPDATE);
}

/* The operand whose elements tail kernel n's output k replaces, or -1:
 * adam_moments' exp_avg and exp_avg_sq, adam_update's param. */
static int kernel_inout_operand(const jg_gnode *n, int k) {
    if (n->op == JG_OP_ADAM_MOMENTS)
        return n->in[2 + k];
    return k == 0 ? n->in[0] : -1;
}

/* Whether tail kernel i may compute its output v in input u's buffer: u is
 * the operand v replaces, of v's dtype and shape, and no other operand. */
static bool kernel_inout_ok(const jg_graph *g, int i, int v, int u) {
    const jg_gnode *n = &g->nodes[i];
    if (!tail_kernel(g, i) || kernel_inout_operand(n, g->vals[v].index) != u)
        return false;
    const jg_meta *mu = &g->vals[u].meta, *mv = &g->vals[v].meta;
    int uses = 0;
    for (int q = 0; q < n->n_in; q++)
        uses += n->in[q] == u;
    return mu->dtype == mv->dtype && same_shape(mu, mv) && meta_numel(mv) >= 1 && uses == 1;
}

/* Whether the loop of group gi may compute output v (node i's) in input u's
 * buffer; reads: whether the loop reads u. */
static bool loop_inout_ok(const jg_graph *g, const layout *L, int gi, int i, int u, int v,
                          bool *reads) {
    *reads = false;
    if (L->sum[gi] >= 0)
        return false;
    int st = L->step_of_node[i], lastn = L->steps[st].node;
    const jg_meta *S = &g->vals[g->nodes[lastn].out[0]].meta;
    const jg_meta *mu = &g->vals[u].meta, *mv = &g->vals[v].meta;
    bool ok =
        mu->dtype == mv->dtype && same_shape(mu, S) && same_shape(mv, S) && meta_numel(S) >= 2;
    /* the loop: no operand read by rows (broadcast), no guarded exp (a
     * block done twice), and u read by no node after v's */
    for (int j = 0; j <= lastn && ok; j++) {
        if (!in_loop(L, gi, j))
            continue;
        const jg_gnode *n = &g->nodes[j];
        ok = !exp_guard(g, n);
        for (int q = 0; q < n->n_in && ok; q++) {
            int w = n->in[q];
            const jg_value *wv = &g->vals[w];
            if (!(wv->kind == JG_VAL_NODE && L->group[wv->node] == gi) && !repeated_scalar(g, w) &&
                bcast_kind(&wv->meta, S) != 0)
                ok = false;
            if (w == u) {
                *reads = true;
                ok = ok && j <= i;
            }
        }
    }
    return ok;
}

/* Which outputs are computed in their input's buffer (jg_cgen_inout; the
 * conditions in cgen.h).  A loop then reads and writes the input through
 * one restrict pointer, so gcc keeps each element's reads before its
 * write and still vectorizes; a tail kernel (tail_kernel) is handed the
 * input as its output. */
static int layout_inout(const jg_graph *g, layout *L) {
    int nv = g->n_vals;
    L->inout = malloc(sizeof(int) * (size_t)(nv ? nv : 1));
    if (!L->inout)
        return jg_errorf("out of memory generating code");
    for (int v = 0; v < nv; v++)
        L->inout[v] = -1;
    L->tail = L->n_steps;
    while (L->tail > 0) {
        const step *s = &L->steps[L->tail - 1];
        if (s->group >= 0 ? L->sum[s->group] >= 0 : !tail_kernel(g, s->node))
            break;
        L->tail--;
    }
    const int *hint = jg_cgen_inout;
    if (!hint || L->tail == L->n_steps)
        return 0;
    char *alias = malloc((size_t)(nv ? nv : 1));
    if (!alias)
        return jg_errorf("out of memory generating code");
    for (int k = 0; k < g->n_outputs; k++) {
        int v = g->outputs[k], in = hint[k];
        if (v < 0 || in < 0 || in >= g->n_inputs || g->vals[v].kind != JG_VAL_NODE)
            continue;
        int u = g->inputs[in], i = g->vals[v].node, gi = L->group[i];
        if (L->step_of_node[i] < L->tail || g->vals[u].kind != JG_VAL_INPUT)
            continue;
        int st = L->step_of_node[i];
        bool reads = true;
        bool ok = gi < 0 ? kernel_inout_ok(g, i, v, u) : loop_inout_ok(g, L, gi, i, u, v, &reads);
        for (int j = 0; j < g->n_outputs && ok; j++) /* (returned once) */
            ok = j == k || g->outputs[j] != v;
        for (int w = 0; w < nv && ok; w++) /* (one output per input) */
            ok = L->inout[w] != u;
        if (!ok || !reads)
            continue;
        /* u's memory as other values see it (u, views of it: 2, what a
         * custom call makes of it: 1): read by no later step */
        memset(alias, 0, (size_t)nv);
        alias[u] = 1;
        for (int j = 0; j < g->n_nodes && ok; j++) {
            const jg_gnode *n = &g->nodes[j];
            bool any = false;
            for (int q = 0; q < n->n_in && ok; q++)
                if (alias[n->in[q]]) {
                    any = true;
                    ok = L->step_of_node[j] < st || (L->step_of_node[j] == st && n->in[q] == u);
                }
            if (!any || !ok)
                continue;
            if (n->kind == JG_GN_CUSTOM)
                for (int q = 0; q < n->n_out; q++)
                    alias[n->out[q]] = 1;
            else if ((jg_ops[n->op].flags & JG_OPF_VIEW) && alias[n->in[0]])
                /* (a view of u or of a view of it: 2; of a custom call's output: 1) */
                alias[n->out[0]] = alias[n->in[0]] == 1 && n->in[0] != u ? 1 : 2;
        }
        /* A view of u may be returned (an output the graph makes for the
         * returned loss's backward: a Linear's weight transposed): made before the
         * write, it shares u's memory, so after the call it shows the new
         * value whether the value was computed there or copied there by the
         * write-back (which cannot swap memory that a view shares), as the
         * view of an eager in-place update does.  Not u itself, nor what a
         * custom call made of it. */
        for (int j = 0; j < g->n_outputs && ok; j++)
            ok = g->outputs[j] < 0 || !alias[g->outputs[j]] ||
                 (alias[g->outputs[j]] == 2 && g->outputs[j] != u);
        if (ok)
            L->inout[v] = u;
    }
    /* adam_moments' kernel updates both moments where they are, or neither */
    for (int i = 0; i < g->n_nodes; i++) {
        const jg_gnode *n = &g->nodes[i];
        if (n->kind == JG_GN_OP && n->op == JG_OP_ADAM_MOMENTS &&
            (L->inout[n->out[0]] < 0) != (L->inout[n->out[1]] < 0))
            L->inout[n->out[0]] = L->inout[n->out[1]] = -1;
    }
    free(alias);
    return 0;
}

static int emit_loop(sbuf *f, sbuf *rows, bool *row_done, const layout *L, int gi, int lastn,
                     const char *seen) {
    const jg_graph *g = L->g;
    int nv = g->n_vals, n_seg = 0, n_mem = 0, n_opnd = 0;
    for (int i = 0; i <= lastn; i++)
        if (in_loop(L, gi, i)) {
            n_mem++;
            n_opnd += g->nodes[i].n_in;
        }
    int *mem = malloc(sizeof(int) * (size_t)(n_mem ? n_mem : 1)); /* the loop's nodes */
    int *ops = malloc(sizeof(int) * (size_t)(n_opnd ? n_opnd : 1));
    int *seg = malloc(sizeof(int) * (size_t)(lastn + 1));   /* node -> segment */
    int *def = malloc(sizeof(int) * (size_t)(nv ? nv : 1)); /* value -> segment, -1 */
    int *lastuse = malloc(sizeof(int) * (size_t)(nv ? nv : 1));
    int *slot = malloc(sizeof(int) * (size_t)(nv ? nv : 1));
    int *slot_free = malloc(sizeof(int) * (size_t)(n_mem ? n_mem : 1)); /* segment it frees at */
    jg_dtype *slot_dt = malloc(sizeof(jg_dtype) * (size_t)(n_mem ? n_mem : 1));
    /* arrays touched by the current segment (seen[u] == 1), and their list */
    char *in_seg = calloc((size_t)(nv ? nv : 1), 1);
    int *touched = malloc(sizeof(int) * (size_t)(n_opnd ? n_opnd : 1));
    int rc = 0;
    if (!mem || !ops || !seg || !def || !lastuse || !slot || !slot_free || !slot_dt || !in_seg ||
        !touched) {
        rc = jg_errorf("out of memory generating code");
        goto out;
    }
    n_mem = 0;
    for (int i = 0; i <= lastn; i++)
        if (in_loop(L, gi, i))
            mem[n_mem++] = i;
    /* segments: a heavy node alone; otherwise nodes in order while they
     * touch at most MAX_STREAMS arrays in memory (inputs read, outputs
     * stored) */
    bool prev_heavy = false, split = false;
    int streams = 0, n_touched = 0;
    for (int m = 0; m < n_mem; m++) {
        int i = mem[m];
        const jg_gnode *n = &g->nodes[i];
        bool h = heavy(n);
        int add = L->ext[n->out[0]];
        for (int k = 0; k < n->n_in; k++)
            add += seen[n->in[k]] == 1 && !in_seg[n->in[k]] && (k == 0 || n->in[k] != n->in[0]);
        if (n_seg == 0 || h || prev_heavy || streams + add > MAX_STREAMS) {
            split |= n_seg > 0;
            n_seg++;
            streams = 0;
            while (n_touched > 0)
                in_seg[touched[--n_touched]] = 0;
            add = L->ext[n->out[0]];
            for (int k = 0; k < n->n_in; k++)
                add += seen[n->in[k]] == 1 && (k == 0 || n->in[k] != n->in[0]);
        }
        for (int k = 0; k < n->n_in; k++)
            if (seen[n->in[k]] == 1 && !in_seg[n->in[k]]) {
                in_seg[n->in[k]] = 1;
                touched[n_touched++] = n->in[k];
            }
        streams += add;
        seg[i] = n_seg - 1;
        prev_heavy = h;
    }
    if (!split)
        n_seg = 1;
    /* def, lastuse and slot are read for the loop's operands and results
     * only */
    for (int m = 0; m < n_mem; m++) {
        const jg_gnode *n = &g->nodes[mem[m]];
        def[n->out[0]] = lastuse[n->out[0]] = slot[n->out[0]] = -1;
        for (int k = 0; k < n->n_in; k++)
            def[n->in[k]] = lastuse[n->in[k]] = slot[n->in[k]] = -1;
    }
    for (int m = 0; m < n_mem; m++) {
        int i = mem[m];
        if (n_seg == 1)
            seg[i] = 0;
        const jg_gnode *n = &g->nodes[i];
        def[n->out[0]] = seg[i];
        for (int k = 0; k < n->n_in; k++)
            if (lastuse[n->in[k]] < seg[i])
                lastuse[n->in[k]] = seg[i];
    }
    /* block arrays for values read by a later segment (and not stored to
     * an output buffer, which serves as well), reused after their last use;
     * mem is in segment order */
    int n_slots = 0;
    for (int m = 0; m < n_mem; m++) {
        int i = mem[m], s = seg[i];
        int v = g->nodes[i].out[0];
        if (lastuse[v] <= s || L->ext[v])
            continue;
        jg_dtype dt = g->vals[v].meta.dtype;
        int k = 0;
        while (k < n_slots && (slot_dt[k] != dt || slot_free[k] >= s))
            k++;
        if (k == n_slots) {
            slot_dt[n_slots++] = dt;
            sb_add(f, "    %s jg_t%d[%d];\n", ctype(dt), k, BLOCK);
        }
        slot[v] = k;
        slot_free[k] = lastuse[v];
    }
    bool guard = false;
    for (int m = 0; m < n_mem; m++)
        guard |= exp_guard(g, &g->nodes[mem[m]]);
    const bool blocked = n_seg > 1 || guard;
    const char *ind = blocked ? "        " : "    ";
    if (blocked) {
        sb_add(f,
               "    for (int64_t jg_b = jg_lo; jg_b < jg_hi; jg_b += %d) {\n"
               "        const int64_t jg_n = jg_hi - jg_b < %d ? jg_hi - jg_b : %d;\n",
               BLOCK, BLOCK, BLOCK);
        if (guard)
            sb_add(f, "        uint32_t jg_big = 0;\n");
    }
    for (int pass = 0; pass < (guard ? 2 : 1) && rc == 0; pass++) {
        if (pass == 1)
            sb_add(f, "%sif (jg_big > JG_EW_EXPF_NORMAL_MAX) {\n", ind);
        rc = emit_segments(f, rows, row_done, L, mem, n_mem, ops, n_seg, seg, def, slot, seen, ind,
                           blocked, guard, pass);
        if (pass == 1)
            sb_add(f, "%s}\n", ind);
    }
    if (blocked)
        sb_add(f, "    }\n");
out:
    free(mem);
    free(ops);
    free(seg);
    free(def);
    free(lastuse);
    free(slot);
    free(slot_free);
    free(slot_dt);
    free(in_seg);
    free(touched);
    return rc;
}

/* The passes of one block of emit_loop's loop (the whole loop when it is not
 * blocked): segment by segment, pass 1 being a guarded loop's redo. */
static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* mem: the nodes computed in the loop (in_loop), in order; ops: room for
 * their operands (the sum of their n_in).  Each segment goes over mem, not
 * over the whole graph: generating a large program (a whole training step)
 * was cubic, every segment of every loop testing every value against every
 * node. */
static int emit_segments(sbuf *f, sbuf *rows, bool *row_done, const layout *L, const int *mem,
                         int n_mem, int *ops, int n_seg, const int *seg, const int *def,
                         const int *slot, const char *seen, const char *ind, bool blocked,
                         bool guard, int pass) {
    const jg_graph *g = L->g;
    int rc = 0;
    for (int s = 0; s < n_seg && rc == 0; s++) {
        int hn = -1; /* a heavy node alone in this segment, read from an array */
        for (int m = 0; m < n_mem && n_seg > 1; m++) {
            int i = mem[m];
            if (seg[i] == s)
                hn = heavy(&g->nodes[i]) && seen[g->nodes[i].in[0]] != 2 ? i : -1;
        }
        if (hn >= 0) {
            const jg_gnode *n = &g->nodes[hn];
            int u = n->in[0], v = n->out[0];
            char src[48], dst[48];
            if (seen[u] == 1 || (slot[u] < 0 && def[u] >= 0))
                snprintf(src, sizeof src, "%s%d + jg_b", seen[u] == 1 ? "x" : "o", u);
            else
                snprintf(src, sizeof src, "jg_t%d", slot[u]);
            if (L->ext[v])
                snprintf(dst, sizeof dst, "o%d + jg_b", v);
            else
                snprintf(dst, sizeof dst, "jg_t%d", slot[v]);
            if ((rc = emit_row(rows, row_done, g, n)) < 0)
                break;
            sb_add(f, "%sjg_row_%s_%s_%s(jg_n, %s, %s);\n", ind, jg_ops[n->op].name,
                   ctype(g->vals[v].meta.dtype), ctype(g->vals[u].meta.dtype), src, dst);
            continue;
        }
        if (blocked)
            sb_add(f,
                   "%sfor (int64_t jg_j = 0; jg_j < jg_n; jg_j++) {\n"
                   "%s    const int64_t jg_i = jg_b + jg_j;\n",
                   ind, ind);
        else
            sb_add(f, "    for (int64_t jg_i = jg_lo; jg_i < jg_hi; jg_i++) {\n");
        /* operands: the group's inputs, and values of earlier segments, in
         * the order of their value numbers */
        int n_ops = 0;
        for (int m = 0; m < n_mem; m++)
            if (seg[mem[m]] == s)
                for (int k = 0; k < g->nodes[mem[m]].n_in; k++)
                    ops[n_ops++] = g->nodes[mem[m]].in[k];
        qsort(ops, (size_t)n_ops, sizeof *ops, cmp_int);
        for (int o = 0; o < n_ops; o++) {
            int u = ops[o];
            if (o > 0 && ops[o - 1] == u)
                continue;
            const char *T = ctype(g->vals[u].meta.dtype);
            /* a bool is read as its byte: gcc vectorizes no loop that loads
             * a _Bool (it finds no vector type for the other operands) */
            char src[48];
            if (seen[u] == 1)
                snprintf(src, sizeof src, "x%d", u);
            else if (def[u] >= 0 && def[u] < s && slot[u] >= 0)
                snprintf(src, sizeof src, "jg_t%d", slot[u]);
            else if (def[u] >= 0 && def[u] < s)
                snprintf(src, sizeof src, "o%d", u);
            else
                continue;
            const char *ix = seen[u] != 1 && slot[u] >= 0 ? "jg_j" : "jg_i";
            if (g->vals[u].meta.dtype == JG_BOOL)
                sb_add(f, "%s    const _Bool v%d = ((const uint8_t *)%s)[%s] != 0;\n", ind, u, src,
                       ix);
            else
                sb_add(f, "%s    const %s v%d = %s[%s];\n", ind, T, u, src, ix);
        }
        for (int m = 0; m < n_mem && rc == 0; m++) {
            int i = mem[m];
            if (seg[i] != s)
                continue;
            const jg_gnode *n = &g->nodes[i];
            const jg_op_info *info = &jg_ops[n->op];
            int v = n->out[0];
            const char *T = ctype(g->vals[v].meta.dtype);
            char ra[24], rb[24], rs[64] = "";
            snprintf(ra, sizeof ra, "v%d", n->in[0]);
            snprintf(rb, sizeof rb, "v%d", n->n_in > 1 ? n->in[1] : -1);
            if (info->flags & JG_OPF_SCALAR)
                snprintf(rs, sizeof rs, "s%d", i);
            sb_add(f, "%s    const %s v%d = (%s)(", ind, T, v, T);
            rc = emit_expr(f, info->cexpr, ra, n->n_in > 1 ? rb : NULL, rs[0] ? rs : NULL, T,
                           ctype(g->vals[n->in[0]].meta.dtype), info->name,
                           pass == 0 && guard && exp_guard(g, n));
            sb_add(f, ");\n");
        }
        for (int m = 0; m < n_mem && rc == 0; m++) {
            int i = mem[m];
            if (seg[i] != s)
                continue;
            int v = g->nodes[i].out[0];
            if (L->sum[L->group[i]] >= 0 && v == g->nodes[L->sum[L->group[i]]].in[0] && !L->ext[v])
                sb_add(f, "%s    jg_sv[jg_i - jg_lo] = v%d;\n", ind, v);
            if (L->ext[v])
                sb_add(f, "%s    o%d[jg_i] = v%d;\n", ind, v, v);
            else if (slot[v] >= 0)
                sb_add(f, "%s    jg_t%d[jg_j] = v%d;\n", ind, slot[v], v);
        }
        sb_add(f, "%s}\n", ind);
    }
    return rc;
}

/* A fused group becomes a function of its own, called from jg_gen_run with
 * its buffers and scalars: gcc trusts restrict on parameters (not on local
 * pointers loaded from rt's results, where it would version the loop with
 * run-time alias checks and give up past 10 of them), so a loop with many
 * inputs and outputs still vectorizes.  b gets the call, f the function. */
static int emit_group(sbuf *b, sbuf *f, sbuf *rows, bool *row_done, const layout *L, int st) {
    const jg_graph *g = L->g;
    int gi = L->steps[st].group, lastn = L->steps[st].node;
    int sn = L->sum[gi]; /* the sum that ends the loop, or -1 */
    int su = sn >= 0 ? g->nodes[sn].in[0] : g->nodes[lastn].out[0]; /* the loop's shape */
    const jg_meta *S = &g->vals[su].meta;
    sb_add(b, "    /* step %d: fused loop over the elements of v%d (", st, su);
    emit_shape(b, S);
    sb_add(b, ") */\n");
    for (int i = 0; i <= lastn; i++)
        if (L->group[i] == gi)
            emit_node_comment(b, g, i);
    sb_add(b, "    {\n        const int64_t jg_N = rt->numel(ctx, %d);\n", su);
    /* pointers: external operands (array or single element), then stores */
    int nv = g->n_vals;
    /* 1 array input, 2 scalar input, 3 / 4 outer / inner broadcast input
     * (bcast_kind); lseen: how the loop function reads them (3 -> 2, 4 -> 1) */
    char *seen = calloc((size_t)(nv ? nv : 1), 1);
    char *lseen = calloc((size_t)(nv ? nv : 1), 1);
    if (!seen || !lseen) {
        free(seen);
        free(lseen);
        return jg_errorf("out of memory generating code");
    }
    /* par: the entry's parameters; arg: the call's arguments; fld / farg: the
     * same as the fields of the struct a parallel loop's chunks read.  With
     * broadcast operands the entry (jg_rowsN) cuts its range at rows of
     * jg_L elements, where every broadcast operand is one element (outer) or
     * a contiguous run (inner), and calls the loop on each piece: lpar the
     * loop's parameters, lcall that call's arguments. */
    sbuf chk = {0}, par = {0}, arg = {0}, fld = {0}, farg = {0}, pnm = {0}, lpar = {0}, lcall = {0},
         rlen = {0};
    bool bc = false;
    /* scalar attributes: read at run time (no constant for gcc to fold),
     * then converted to T in the loop exactly as the eager kernels convert
     * theirs */
    for (int i = 0; i <= lastn; i++)
        if (in_loop(L, gi, i) && (jg_ops[g->nodes[i].op].flags & JG_OPF_SCALAR)) {
            sb_add(b, "        const double s%d = rt->scalar(ctx, %d);\n", i, i);
            sb_add(&par, ", const double s%d", i);
            sb_add(&arg, ", s%d", i);
            sb_add(&fld, " double s%d;", i);
            sb_add(&farg, ", a->s%d", i);
            sb_add(&pnm, ", s%d", i);
            sb_add(&lpar, ", const double s%d", i);
            sb_add(&lcall, ", s%d", i);
        }
    for (int i = 0; i <= lastn; i++) {
        if (!in_loop(L, gi, i))
            continue;
        const jg_gnode *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            int u = n->in[k];
            const jg_value *v = &g->vals[u];
            if ((v->kind == JG_VAL_NODE && L->group[v->node] == gi) || seen[u])
                continue;
            const char *T = ctype(v->meta.dtype);
            int bk = repeated_scalar(g, u) ? 0 : bcast_kind(&v->meta, S);
            seen[u] = bk > 0 ? 2 + bk : same_shape(&v->meta, S) && !repeated_scalar(g, u) ? 1 : 2;
            lseen[u] = seen[u] == 3 ? 2 : seen[u] == 4 ? 1 : seen[u];
            sb_add(&chk, "%s!x%d", chk.len ? " || " : "", u);
            int pv = -1; /* the output computed in u's buffer (layout_inout) */
            for (int j = 0; j <= lastn && pv < 0; j++)
                if (in_loop(L, gi, j) && L->inout[g->nodes[j].out[0]] == u)
                    pv = g->nodes[j].out[0];
            if (pv >= 0) {
                sb_add(b, "        %s *x%d = rt->inout(ctx, %d, %d);\n", T, u, pv, u);
                sb_add(&par, ", %s *restrict x%d", T, u);
                sb_add(&fld, " %s *x%d;", T, u);
                sb_add(&farg, ", a->x%d", u);
                sb_add(&pnm, ", x%d", u);
                sb_add(&lpar, ", %s *restrict x%d", T, u);
                sb_add(&lcall, ", x%d + jg_a", u);
                sb_add(&arg, ", x%d", u);
                continue;
            }
            sb_add(b, "        const %s *x%d = rt->%s(ctx, %d);\n", T, u,
                   seen[u] != 2 ? "in" : "elem", u);
            if (seen[u] >= 3) {
                /* per row one element of an outer operand, jg_rN elements
                 * apart; an inner one wraps every jg_mN elements */
                char c = seen[u] == 3 ? 'r' : 'm';
                bc = true;
                if (seen[u] == 3)
                    sb_add(b,
                           "        const int64_t jg_r%d = jg_N ? jg_N / rt->numel(ctx, %d) : 1;\n",
                           u, u);
                else
                    sb_add(b, "        const int64_t jg_m%d = jg_N ? rt->numel(ctx, %d) : 1;\n", u,
                           u);
                sb_add(&rlen, "        if (jg_%c%d < jg_L)\n            jg_L = jg_%c%d;\n", c, u, c,
                       u);
                sb_add(&par, ", const %s *restrict x%d, const int64_t jg_%c%d", T, u, c, u);
                sb_add(&fld, " const %s *x%d; int64_t jg_%c%d;", T, u, c, u);
                sb_add(&farg, ", a->x%d, a->jg_%c%d", u, c, u);
                sb_add(&pnm, ", x%d, jg_%c%d", u, c, u);
                sb_add(&arg, ", x%d, jg_%c%d", u, c, u);
                if (seen[u] == 3) {
                    sb_add(&lpar, ", const %s v%d", T, u);
                    sb_add(&lcall, ", x%d[jg_a / jg_r%d]", u, u);
                } else {
                    sb_add(&lpar, ", const %s *restrict x%d", T, u);
                    sb_add(&lcall, ", x%d + jg_a %% jg_m%d", u, u);
                }
                continue;
            }
            if (seen[u] == 1) {
                sb_add(&par, ", const %s *restrict x%d", T, u);
                sb_add(&fld, " const %s *x%d;", T, u);
                sb_add(&farg, ", a->x%d", u);
                sb_add(&pnm, ", x%d", u);
                sb_add(&lpar, ", const %s *restrict x%d", T, u);
                sb_add(&lcall, ", x%d + jg_a", u);
            } else {
                sb_add(&par, ", const %s v%d", T, u);
                sb_add(&fld, " %s v%d;", T, u);
                sb_add(&farg, ", a->v%d", u);
                sb_add(&pnm, ", v%d", u);
                sb_add(&lpar, ", const %s v%d", T, u);
                sb_add(&lcall, ", v%d", u);
            }
            sb_add(&arg, ", %s%d", seen[u] == 1 ? "x" : "*x", u);
        }
    }
    for (int i = 0; i <= lastn; i++) {
        if (!in_loop(L, gi, i) || !L->ext[g->nodes[i].out[0]] || L->inout[g->nodes[i].out[0]] >= 0)
            continue;
        int v = g->nodes[i].out[0];
        const char *T = ctype(g->vals[v].meta.dtype);
        sb_add(b, "        %s *o%d = rt->out(ctx, %d);\n", T, v, v);
        sb_add(&chk, "%s!o%d", chk.len ? " || " : "", v);
        sb_add(&par, ", %s *restrict o%d", T, v);
        sb_add(&arg, ", o%d", v);
        sb_add(&fld, " %s *o%d;", T, v);
        sb_add(&farg, ", a->o%d", v);
        sb_add(&pnm, ", o%d", v);
        sb_add(&lpar, ", %s *restrict o%d", T, v);
        sb_add(&lcall, ", o%d + jg_a", v);
    }
    if (bc) {
        sb_add(b, "        int64_t jg_L = jg_N ? jg_N : 1;\n%s", rlen.s);
        sb_add(&par, ", const int64_t jg_L");
        sb_add(&fld, " int64_t jg_L;");
        sb_add(&farg, ", a->jg_L");
        sb_add(&arg, ", jg_L");
    }
    /* a sum ending the loop: its chunks compute the partials of their blocks
     * (jg_part), added in block order once every chunk is done */
    int sv = sn >= 0 ? g->nodes[sn].out[0] : -1;
    const char *ST = sn >= 0 ? ctype(S->dtype) : "";
    if (sn >= 0) {
        sb_add(b,
               "        %s *o%d = rt->out(ctx, %d);\n"
               "        const int64_t jg_nb = (jg_N + %d) / %d;\n"
               "        %s jg_ps[%d];\n"
               "        %s *jg_part = jg_nb <= %d ? jg_ps : rt->tmp(ctx, %d, jg_nb);\n",
               ST, sv, sv, SUM_BLOCK - 1, SUM_BLOCK, ST, SUM_STACK_BLOCKS, ST, SUM_STACK_BLOCKS,
               sv);
        sb_add(&chk, "%s!o%d || !jg_part", chk.len ? " || " : "", sv);
        sb_add(&fld, " %s *jg_part;", ST);
        sb_add(&farg, ", a->jg_part");
    }
    int rc = chk.oom || par.oom || arg.oom || fld.oom || farg.oom || pnm.oom || lpar.oom ||
                     lcall.oom || rlen.oom
                 ? jg_errorf("out of memory generating code")
                 : 0;
    /* A large loop runs on the thread pool in chunks of JG_PARALLEL_GRAIN
     * elements (a multiple of BLOCK, so blocks do not depend on the split):
     * every element is computed by the same operations wherever it runs, so
     * the results do not depend on the number of threads.  The choice is
     * made at run time, from the size. */
    if (rc == 0) {
        if (chk.len)
            sb_add(b, "        if (%s)\n            return -1;\n", chk.s);
        const char *entry = sn >= 0 ? "jg_blocks" : bc ? "jg_rows" : "jg_loop";
        sb_add(b,
               "        if (jg_N >= %dLL) {\n"
               "            struct jg_args%d jg_a = {%s%s};\n"
               "            rt->par(jg_N, %d, jg_chunk%d, &jg_a);\n"
               "        } else {\n",
               2 * JG_PARALLEL_GRAIN, st,
               arg.len   ? arg.s + 2
               : sn >= 0 ? ""
                         : "0",
               sn < 0    ? ""
               : arg.len ? ", jg_part"
                         : "jg_part",
               JG_PARALLEL_GRAIN, st);
        sb_add(b, "            %s%d(0, jg_N%s%s);\n        }\n", entry, st, arg.len ? arg.s : "",
               sn >= 0 ? ", jg_part" : "");
        /* a mean divides the sum by the count, in the dtype, as jg_k_mean */
        if (sn >= 0)
            sb_add(b,
                   "        %s jg_s = jg_part[0];\n"
                   "        for (int64_t jg_k = 1; jg_k < jg_nb; jg_k++)\n"
                   "            jg_s += jg_part[jg_k];\n"
                   "        *o%d = jg_s%s%s%s;\n",
                   ST, sv, g->nodes[sn].op == JG_OP_MEAN ? " / (" : "",
                   g->nodes[sn].op == JG_OP_MEAN ? ST : "",
                   g->nodes[sn].op == JG_OP_MEAN ? ")jg_N" : "");
        sb_add(b, "    }\n");
        sb_add(
            f,
            "static JG_LOOP void jg_loop%d(const int64_t jg_lo, const int64_t jg_hi%s%s%s%s) {\n",
            st,
            bc        ? (lpar.len ? lpar.s : "")
            : par.len ? par.s
                      : "",
            sn >= 0 ? ", " : "", ST, sn >= 0 ? " *restrict jg_sv" : "");
        for (int i = 0; i <= lastn; i++) /* (one restrict pointer: reads stay before writes) */
            if (in_loop(L, gi, i) && L->inout[g->nodes[i].out[0]] >= 0)
                sb_add(f, "    %s *const o%d = x%d;\n",
                       ctype(g->vals[g->nodes[i].out[0]].meta.dtype), g->nodes[i].out[0],
                       L->inout[g->nodes[i].out[0]]);
        rc = emit_loop(f, rows, row_done, L, gi, lastn, lseen);
        sb_add(f, "}\n\n");
        if (bc)
            sb_add(f,
                   "static void jg_rows%d(const int64_t jg_lo, const int64_t jg_hi%s) {\n"
                   "    for (int64_t jg_a = jg_lo; jg_a < jg_hi;) {\n"
                   "        const int64_t jg_z = (jg_a / jg_L + 1) * jg_L;\n"
                   "        const int64_t jg_e = jg_z < jg_hi ? jg_z : jg_hi;\n"
                   "        jg_loop%d(0, jg_e - jg_a%s);\n"
                   "        jg_a = jg_e;\n"
                   "    }\n}\n\n",
                   st, par.s, st, lcall.len ? lcall.s : "");
        if (sn >= 0 && rc == 0) {
            /* the summand's block: in its output buffer when it has one */
            char su_name[24];
            snprintf(su_name, sizeof su_name, "o%d", su);
            rc = emit_sum_block(rows, row_done, S->dtype);
            sb_add(f,
                   "static void jg_blocks%d(const int64_t jg_lo, const int64_t jg_hi%s, %s "
                   "*jg_part) {\n"
                   "    %s jg_sv[%d];\n"
                   "    for (int64_t jg_b0 = jg_lo; jg_b0 < jg_hi; jg_b0 += %d) {\n"
                   "        const int64_t jg_m = jg_hi - jg_b0 < %d ? jg_hi - jg_b0 : %d;\n"
                   "        jg_loop%d(jg_b0, jg_b0 + jg_m%s, jg_sv);\n"
                   "        jg_part[jg_b0 / %d] = jg_sum_block_%s(%s%s, jg_m);\n"
                   "    }\n}\n\n",
                   st, par.len ? par.s : "", ST, ST, SUM_BLOCK, SUM_BLOCK, SUM_BLOCK, SUM_BLOCK, st,
                   pnm.len ? pnm.s : "", SUM_BLOCK, ST, L->ext[su] ? su_name : "jg_sv",
                   L->ext[su] ? " + jg_b0" : "");
        }
        sb_add(f,
               "struct jg_args%d {%s };\n"
               "static void jg_chunk%d(void *p, int64_t lo, int64_t hi) {\n"
               "    const struct jg_args%d *a = p;\n"
               "    %s%d(lo, hi%s);\n}\n\n",
               st, fld.len ? fld.s : " int jg_none;", st, st, entry, st, farg.len ? farg.s : "");
    }
    free(chk.s);
    free(par.s);
    free(arg.s);
    free(fld.s);
    free(farg.s);
    free(pnm.s);
    free(lpar.s);
    free(lcall.s);
    free(rlen.s);
    free(seen);
    free(lseen);
    return rc;
}

static char *generate(const jg_graph *g, const layout *L) {
    sbuf b = {0};
    sb_add(&b,
           "/* jitgrad generated code: %s graph, %d nodes, %d steps, %d fused loops (%d nodes).\n"
           " * vN is value N of the graph, xN / oN its input / output buffer. */\n",
           g->name ? g->name : "graph", g->n_nodes, L->n_steps, L->n_loops, L->n_fused);
    /* ew_math.h: the functions the expressions use besides <tgmath.h>'s,
     * the same text the eager kernels were compiled from. */
    sb_add(&b, "#include <stdint.h>\n#include <tgmath.h>\n\n%s\n%s\n", JG_EW_MATH_TEXT, RT_DECL);
    /* Vectorizing an elementwise loop changes no result (same operations per
     * element, no reassociation or contraction); gcc's -O2 cost model would
     * skip most of these loops, as for the eager kernels. */
    /* PRE would move arithmetic between the arms of a select (relu's
     * backward), where if-conversion refuses operations that could trap, and
     * the loop would stay scalar; a loop body has nothing for PRE to gain. */
    sb_add(&b, "#if defined(__GNUC__) && !defined(__clang__)\n"
               "#define JG_LOOP __attribute__((noinline, optimize(\"tree-vectorize\", "
               "\"vect-cost-model=dynamic\", \"no-tree-pre\")))\n"
               "#else\n#define JG_LOOP __attribute__((noinline))\n#endif\n\n");
    sb_add(&b, "#pragma GCC diagnostic ignored \"-Wtautological-compare\"\n\n");
    sbuf body = {0}, loops = {0}, rows = {0};
    bool row_done[128] = {0};
    sb_add(&body, "int jg_gen_run(const jg_gen_rt *rt, void *ctx) {\n");
    for (int st = 0; st < L->n_steps; st++) {
        if (L->steps[st].group >= 0) {
            if (emit_group(&body, &loops, &rows, row_done, L, st) < 0) {
                free(b.s);
                free(body.s);
                free(loops.s);
                free(rows.s);
                return NULL;
            }
        } else {
            int i = L->steps[st].node;
            sb_add(&body, "    /* step %d */\n", st);
            emit_node_comment(&body, g, i);
            sb_add(&body, "    if (rt->node(ctx, %d) < 0)\n        return -1;\n", i);
        }
        sb_add(&body, "    rt->done(ctx, %d);\n", st);
    }
    sb_add(&body, "    return 0;\n}\n");
    if (body.oom || loops.oom || rows.oom)
        b.oom = true;
    else
        sb_add(&b, "%s%s%s", rows.s ? rows.s : "", loops.s ? loops.s : "", body.s);
    free(body.s);
    free(loops.s);
    free(rows.s);
    if (jg_cgen_debug_extra_source)
        sb_add(&b, "%s\n", jg_cgen_debug_extra_source);
    if (b.oom) {
        free(b.s);
        return jg_errorf_null("out of memory generating code");
    }
    return b.s;
}

static int inline_customs(const jg_graph *g, jg_graph **out);

char *jg_cgen_source(const jg_graph *g, int *n_loops, int *n_fused) {
    layout L;
    jg_graph *own;
    if (inline_customs(g, &own) < 0)
        return NULL;
    if (layout_make(own ? own : g, &L) < 0) {
        jg_graph_free(own);
        return NULL;
    }
    if (layout_inout(own ? own : g, &L) < 0) {
        layout_free(&L);
        jg_graph_free(own);
        return NULL;
    }
    char *s = generate(own ? own : g, &L);
    jg_graph_free(own);
    if (n_loops)
        *n_loops = L.n_loops;
    if (n_fused)
        *n_fused = L.n_fused;
    layout_free(&L);
    return s;
}

/* ------------------------------------------------------------ compiler + cache */

static _Thread_local int last_loops, last_fused;
static _Thread_local bool last_hit;

/* Loads src through the cache.  A failure the interpreter absorbs (see
 * jg_cache_load) is said once per process on stderr; *fallback tells. */
static void *load_source(const char *src, const char *label, bool quiet, bool *fallback) {
    void *dl = jg_cache_load(src, label, quiet, &last_hit, fallback);
    if (!dl && *fallback) {
        static atomic_bool said;
        if (!atomic_exchange(&said, true))
            fprintf(stderr, "jitgrad: %s; the interpreter runs instead\n", jg_last_error());
    }
    return dl;
}

static const char PROBE[] = "/* jitgrad: does the c backend work here? */\n"
                            "#include <stdint.h>\n#include <tgmath.h>\n"
                            "double jg_probe(double x) { return exp(x) + (double)(int64_t)x; }\n";

bool jg_cgen_available(char *why, size_t why_size) {
    bool fallback;
    void *dl = load_source(PROBE, "probe", true, &fallback);
    if (!dl && fallback)
        return true; /* plans run the interpreter, said on stderr */
    if (!dl) {
        if (why && why_size)
            snprintf(why, why_size, "%s", jg_last_error());
        return false;
    }
    bool ok = dlsym(dl, "jg_probe") != NULL;
    dlclose(dl);
    if (!ok && why && why_size)
        snprintf(why, why_size, "the probe library has no symbol jg_probe");
    return ok;
}

void jg_cgen_last_stats(int *n_loops, int *n_fused, bool *cache_hit) {
    if (n_loops)
        *n_loops = last_loops;
    if (n_fused)
        *n_fused = last_fused;
    if (cache_hit)
        *cache_hit = last_hit;
}

/* ------------------------------------------------------------ plan + run */

struct jg_cgen_plan {
    const jg_graph *g;
    void *dl;
    gen_fn fn;
    int *free_start; /* step s releases free_list[free_start[s] .. free_start[s+1]) */
    int *free_list;
    jg_buffer_pool pool;
    jg_tensor **vals;    /* one tensor per value during a run */
    jg_tensor **scratch; /* contiguous copies of this step's operands, rt_tmp's buffer */
    int n_scratch;
    jg_graph **cgraph;      /* per node: a one-node graph running a custom call */
    jg_interp_plan **cplan; /* ... and its interpreter plan */
    jg_interp_plan *interp; /* runs the whole graph when no object could be made */
    jg_graph *own;          /* g with custom calls inlined (inline_customs), or NULL */
    /* outputs computed in an input's buffer (layout_inout, cgen.h) */
    int *inout;     /* per value: that input's value, or -1 (NULL: none) */
    int *inout_v;   /* the values that have one */
    int *tail_vals; /* the other values the loops and kernels of the tail store */
    int *tail_ops;  /* operands of those steps made before the tail */
    int n_inout, n_tail_vals, n_tail_ops;
    bool *tail_banded; /* per tail_ops entry: read only as adam_moments' gradient */
    int *pair; /* per node: the adam_update run with this adam_moments in one pass, and back */
    jg_tensor **pre; /* per value: its buffer, allocated before the tail's first write */
    bool *grant;     /* per value: computed in its input's own buffer in this run */
    bool prepared;   /* this run has reached the tail (tail_prepare) */
};

/* Whether adam_moments node i and the adam_update node of the next step
 * may run as one pass (jg_adam_step_inplace_) where the three new values
 * are computed in place: the update takes this node's moments and
 * parameter, with the same attributes, and its count is made by an earlier
 * step (the pass writes the parameter one step early: nothing runs
 * between). */
static int adam_pair(const jg_graph *g, const layout *L, int i) {
    const jg_gnode *n = &g->nodes[i];
    int st = L->step_of_node[i];
    if (n->kind != JG_GN_OP || n->op != JG_OP_ADAM_MOMENTS || L->inout[n->out[0]] < 0 ||
        L->inout[n->out[1]] < 0 || st + 1 >= L->n_steps || L->steps[st + 1].group >= 0)
        return -1;
    int j = L->steps[st + 1].node;
    const jg_gnode *u = &g->nodes[j];
    if (u->kind != JG_GN_OP || u->op != JG_OP_ADAM_UPDATE || u->in[0] != n->in[0] ||
        u->in[1] != n->out[0] || u->in[2] != n->out[1] || L->inout[u->out[0]] < 0 ||
        u->attrs.n != n->attrs.n || u->attrs.keepdim != n->attrs.keepdim ||
        memcmp(u->attrs.i, n->attrs.i, sizeof(int64_t) * (size_t)n->attrs.n) != 0)
        return -1;
    const jg_value *c = &g->vals[u->in[3]];
    if (c->kind == JG_VAL_NODE && L->step_of_node[c->node] >= st)
        return -1;
    return j;
}

/* What a run needs to write outputs into inputs' buffers (tail_prepare). */
static int plan_tail(jg_cgen_plan *p, const layout *L) {
    const jg_graph *g = p->g;
    int nv = g->n_vals ? g->n_vals : 1, n = 0;
    for (int v = 0; v < g->n_vals; v++)
        n += L->inout[v] >= 0;
    if (!n)
        return 0;
    char *mark = calloc((size_t)nv, 1);
    int *op_at = malloc(sizeof(int) * (size_t)nv); /* value -> its tail_ops entry */
    p->inout = malloc(sizeof(int) * (size_t)nv);
    p->inout_v = malloc(sizeof(int) * (size_t)n);
    p->tail_vals = malloc(sizeof(int) * (size_t)nv);
    p->tail_ops = malloc(sizeof(int) * (size_t)nv);
    p->tail_banded = malloc(sizeof(bool) * (size_t)nv);
    p->pair = malloc(sizeof(int) * (size_t)(g->n_nodes ? g->n_nodes : 1));
    p->pre = calloc((size_t)nv, sizeof *p->pre);
    p->grant = calloc((size_t)nv, sizeof *p->grant);
    if (!mark || !op_at || !p->inout || !p->inout_v || !p->tail_vals || !p->tail_ops ||
        !p->tail_banded || !p->pair || !p->pre || !p->grant) {
        free(mark);
        free(op_at);
        return jg_errorf("out of memory planning generated code");
    }
    memcpy(p->inout, L->inout, sizeof(int) * (size_t)g->n_vals);
    for (int v = 0; v < g->n_vals; v++)
        if (L->inout[v] >= 0)
            p->inout_v[p->n_inout++] = v;
    for (int i = 0; i < g->n_nodes; i++)
        p->pair[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        if (L->step_of_node[i] < L->tail)
            continue;
        const jg_gnode *n = &g->nodes[i];    /* (a loop's node or a tail kernel) */
        for (int k = 0; k < n->n_out; k++) { /* (a kernel stores every output) */
            int v = n->out[k];
            if ((L->ext[v] || L->group[i] < 0) && L->inout[v] < 0)
                p->tail_vals[p->n_tail_vals++] = v;
        }
        for (int k = 0; k < n->n_in; k++) {
            int w = n->in[k];
            const jg_value *wv = &g->vals[w];
            if (wv->kind == JG_VAL_NODE && L->step_of_node[wv->node] >= L->tail)
                continue;
            bool banded = n->kind == JG_GN_OP && n->op == JG_OP_ADAM_MOMENTS && k == 1;
            if (!mark[w]) {
                mark[w] = 1;
                op_at[w] = p->n_tail_ops;
                p->tail_banded[p->n_tail_ops] = banded;
                p->tail_ops[p->n_tail_ops++] = w;
            } else if (!banded) {
                p->tail_banded[op_at[w]] = false;
            }
        }
        int j = adam_pair(g, L, i);
        if (j >= 0) {
            p->pair[i] = j;
            p->pair[j] = i;
        }
    }
    free(mark);
    free(op_at);
    return 0;
}

void jg_cgen_plan_free(jg_cgen_plan *p) {
    if (!p)
        return;
    jg_pool_clear(&p->pool);
    if (p->cgraph)
        for (int i = 0; i < p->g->n_nodes; i++) {
            jg_interp_plan_free(p->cplan[i]);
            jg_graph_free(p->cgraph[i]);
        }
    free(p->cgraph);
    free(p->cplan);
    free(p->free_start);
    free(p->free_list);
    free(p->vals);
    free(p->scratch);
    free(p->inout);
    free(p->inout_v);
    free(p->tail_vals);
    free(p->tail_ops);
    free(p->tail_banded);
    free(p->pair);
    free(p->pre);
    free(p->grant);
    jg_interp_plan_free(p->interp);
    if (p->dl)
        dlclose(p->dl);
    jg_graph_free(p->own);
    free(p);
}

/* A graph holding only custom node i, one input per operand: the
 * interpreter runs it exactly as it runs the node inside a graph. */
static int wrap_custom(jg_cgen_plan *p, int i) {
    const jg_graph *g = p->g;
    const jg_gnode *n = &g->nodes[i];
    jg_graph *w = jg_graph_new();
    int in[64], outs[64];
    jg_meta metas[64];
    bool rg[64];
    if (!w)
        return -1;
    if (n->n_in > 64 || n->n_out > 64) {
        jg_graph_free(w);
        return jg_errorf("cgen: custom call with %d inputs / %d outputs (at most 64)", n->n_in,
                         n->n_out);
    }
    w->name = "custom";
    for (int k = 0; k < n->n_in; k++) {
        const jg_value *v = &g->vals[n->in[k]];
        if ((in[k] = jg_graph_add_input(w, &v->meta, v->requires_grad, NULL)) < 0) {
            jg_graph_free(w);
            return -1;
        }
    }
    for (int k = 0; k < n->n_out; k++) {
        metas[k] = g->vals[n->out[k]].meta;
        rg[k] = g->vals[n->out[k]].requires_grad;
    }
    int idx = jg_graph_add_custom(w, n->custom, n->n_in, in, n->n_out, metas, rg, outs);
    if (idx >= 0) /* the call's state stays with the graph that recorded it */
        w->nodes[idx].custom->owner = n->custom->owner;
    if (idx < 0 || jg_graph_set_outputs(w, n->n_out, outs) < 0 ||
        !(p->cplan[i] = jg_interp_plan_new(w))) {
        jg_graph_free(w);
        return -1;
    }
    p->cgraph[i] = w;
    return 0;
}

/* Can custom node n be replaced by the nodes of its forward subgraph?  The
 * interpreter runs such a call as exactly that subgraph (run_custom), except
 * that an output of the call which is no node value of it (a slot or
 * constant returned as is) or repeats another becomes a new alias: those
 * calls stay nodes, as do opaque calls and subgraphs holding calls
 * themselves.  (The values saved for backward, outputs past n_call_out,
 * reach only the compiled node's saved slots, where the tensor serves as
 * well as an alias of it.) */
static bool inlinable(const jg_gnode *n) {
    const jg_gcustom *c = n->custom;
    if (n->kind != JG_GN_CUSTOM || c->opaque || c->opaque_backward || !c->fwd ||
        c->fwd->n_outputs != n->n_out || c->n_slots != c->fwd->n_inputs)
        return false;
    for (int i = 0; i < c->fwd->n_nodes; i++)
        if (c->fwd->nodes[i].kind != JG_GN_OP)
            return false;
    int n_call = c->n_call_out ? c->n_call_out : n->n_out;
    for (int k = 0; k < n->n_out; k++) {
        int v = c->fwd->outputs[k];
        if (v < 0)
            return false;
        if (k >= n_call)
            continue; /* a value saved for backward: only the node's backward reads it */
        if (c->fwd->vals[v].kind != JG_VAL_NODE)
            return false;
        for (int j = 0; j < k; j++)
            if (c->fwd->outputs[j] == v)
                return false;
    }
    return true;
}

/* Appends the op node n of graph src to h, operands through map. */
static int copy_op(jg_graph *h, const jg_graph *src, const jg_gnode *n, int *map) {
    int in[8], out[4];
    jg_meta metas[4];
    if (n->n_in > 8 || n->n_out > 4)
        return jg_errorf("internal error: cgen: op node with %d operands", n->n_in);
    bool rg = false; /* derived again: a custom body's values had none */
    for (int k = 0; k < n->n_in; k++) {
        in[k] = map[n->in[k]];
        rg |= h->vals[in[k]].requires_grad;
    }
    for (int k = 0; k < n->n_out; k++)
        metas[k] = src->vals[n->out[k]].meta;
    if (jg_graph_add_op(h, n->op, &n->attrs, n->n_in, in, metas, rg, out) < 0)
        return -1;
    for (int k = 0; k < n->n_out; k++)
        map[n->out[k]] = out[k];
    return 0;
}

/* One attempt of inline_customs, leaving the calls marked in veto as nodes.
 * 1 (and veto[i] set) when inlining call i would make one of its outputs
 * lose requires_grad: a body value derived from constants only (an
 * object's tensor read in forward) is still a differentiable output of the
 * call, and an opaque call reading it needs the slot's gradient as traced. */
static int inline_try(const jg_graph *g, bool *veto, jg_graph **out) {
    jg_graph *h = jg_graph_new();
    int *map = malloc(sizeof(int) * (size_t)(g->n_vals ? g->n_vals : 1));
    int *sub = NULL, rc = h && map ? 0 : jg_errorf("out of memory generating code");
    if (rc == 0)
        h->name = g->name;
    for (int k = 0; k < g->n_inputs && rc == 0; k++) {
        const jg_value *v = &g->vals[g->inputs[k]];
        if ((map[g->inputs[k]] =
                 jg_graph_add_input(h, &v->meta, v->requires_grad, g->input_names[k])) < 0)
            rc = -1;
    }
    for (int c = 0; c < g->n_consts && rc == 0; c++)
        if ((map[g->const_vals[c]] = jg_graph_add_const(h, g->consts[c])) < 0)
            rc = -1;
    for (int i = 0; i < g->n_nodes && rc == 0; i++) {
        const jg_gnode *n = &g->nodes[i];
        if (n->kind == JG_GN_OP) {
            rc = copy_op(h, g, n, map);
        } else if (veto[i] || !inlinable(n)) {
            int in[64], outs[64];
            jg_meta metas[64];
            bool rg[64];
            if (n->n_in > 64 || n->n_out > 64) {
                rc = jg_errorf("cgen: custom call with %d inputs / %d outputs (at most 64)",
                               n->n_in, n->n_out);
                break;
            }
            bool any = false;
            for (int k = 0; k < n->n_in; k++) {
                in[k] = map[n->in[k]];
                any |= h->vals[in[k]].requires_grad;
            }
            for (int k = 0; k < n->n_out; k++) {
                metas[k] = g->vals[n->out[k]].meta;
                rg[k] = any && g->vals[n->out[k]].requires_grad;
            }
            int idx = jg_graph_add_custom(h, n->custom, n->n_in, in, n->n_out, metas, rg, outs);
            if (idx < 0) {
                rc = -1;
                break;
            }
            h->nodes[idx].custom->owner = n->custom->owner; /* the state stays there */
            for (int k = 0; k < n->n_out; k++)
                map[n->out[k]] = outs[k];
        } else {
            const jg_graph *f = n->custom->fwd;
            free(sub);
            if (!(sub = malloc(sizeof(int) * (size_t)(f->n_vals ? f->n_vals : 1)))) {
                rc = jg_errorf("out of memory generating code");
                break;
            }
            for (int s = 0; s < f->n_inputs; s++)
                sub[f->inputs[s]] = map[jg_gnode_slot_value(n, s)];
            for (int c = 0; c < f->n_consts && rc == 0; c++)
                if ((sub[f->const_vals[c]] = jg_graph_add_const(h, f->consts[c])) < 0)
                    rc = -1;
            for (int j = 0; j < f->n_nodes && rc == 0; j++)
                rc = copy_op(h, f, &f->nodes[j], sub);
            int n_call = n->custom->n_call_out ? n->custom->n_call_out : n->n_out;
            for (int k = 0; k < n->n_out && rc == 0; k++) {
                map[n->out[k]] = sub[f->outputs[k]];
                if (k < n_call && g->vals[n->out[k]].requires_grad &&
                    !h->vals[map[n->out[k]]].requires_grad) {
                    veto[i] = true;
                    rc = 1;
                }
            }
        }
    }
    if (rc == 0) {
        int *outs = malloc(sizeof(int) * (size_t)(g->n_outputs ? g->n_outputs : 1));
        if (!outs)
            rc = jg_errorf("out of memory generating code");
        for (int k = 0; k < g->n_outputs && rc == 0; k++)
            outs[k] = g->outputs[k] < 0 ? -1 : map[g->outputs[k]];
        if (rc == 0)
            rc = jg_graph_set_outputs(h, g->n_outputs, outs);
        free(outs);
    }
    if (rc == 0)
        rc = jg_pass_dce(h) < 0 || jg_graph_verify(h) < 0 ? -1 : 0;
    free(sub);
    free(map);
    if (rc != 0) {
        jg_graph_free(h);
        return rc;
    }
    *out = h;
    return 0;
}

/* *out: g with every inlinable custom call replaced by its forward's nodes,
 * so custom-function bodies are fused like the rest; NULL when there is
 * none (g is used as is).  0 or -1. */
static int inline_customs(const jg_graph *g, jg_graph **out) {
    bool any = false;
    *out = NULL;
    for (int i = 0; i < g->n_nodes && !any; i++)
        any = g->nodes[i].kind == JG_GN_CUSTOM && inlinable(&g->nodes[i]);
    if (!any)
        return 0;
    bool *veto = calloc((size_t)g->n_nodes, sizeof *veto);
    if (!veto)
        return jg_errorf("out of memory generating code");
    int rc;
    while ((rc = inline_try(g, veto, out)) == 1) /* each retry vetoes one more call */
        ;
    free(veto);
    return rc;
}

jg_cgen_plan *jg_cgen_plan_new(const jg_graph *g) {
    layout L;
    jg_graph *own;
    if (inline_customs(g, &own) < 0)
        return NULL;
    if (own)
        g = own;
    if (layout_make(g, &L) < 0) {
        jg_graph_free(own);
        return NULL;
    }
    if (layout_inout(g, &L) < 0) {
        layout_free(&L);
        jg_graph_free(own);
        return NULL;
    }
    last_loops = L.n_loops;
    last_fused = L.n_fused;
    char *src = generate(g, &L);
    jg_cgen_plan *p = src ? calloc(1, sizeof *p) : NULL;
    int nv = g->n_vals ? g->n_vals : 1, nn = g->n_nodes ? g->n_nodes : 1;
    if (p) {
        p->g = g;
        p->own = own;
        own = NULL;
        p->free_start = calloc((size_t)L.n_steps + 1, sizeof *p->free_start);
        p->free_list = malloc((size_t)nv * sizeof *p->free_list);
        p->vals = calloc((size_t)nv, sizeof *p->vals);
        p->scratch = calloc((size_t)nv + 1, sizeof *p->scratch); /* + a sum's partials */
        p->cgraph = calloc((size_t)nn, sizeof *p->cgraph);
        p->cplan = calloc((size_t)nn, sizeof *p->cplan);
    }
    int *dies = malloc(sizeof(int) * (size_t)nv);
    if (!p || !p->free_start || !p->free_list || !p->vals || !p->scratch || !p->cgraph ||
        !p->cplan || !dies) {
        if (src)
            jg_errorf("out of memory planning generated code");
        goto fail;
    }
    /* each node value dies after the last step reading it (outputs never) */
    for (int v = 0; v < g->n_vals; v++)
        dies[v] = g->vals[v].kind == JG_VAL_NODE ? L.step_of_node[g->vals[v].node] : -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (g->vals[v].kind == JG_VAL_NODE && dies[v] < L.step_of_node[i])
                dies[v] = L.step_of_node[i];
        }
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k] >= 0)
            dies[g->outputs[k]] = -1;
    for (int v = 0; v < g->n_vals; v++)
        if (g->vals[v].kind == JG_VAL_NODE && dies[v] >= 0)
            p->free_start[dies[v] + 1]++;
    for (int s = 0; s < L.n_steps; s++)
        p->free_start[s + 1] += p->free_start[s];
    int *fill = calloc((size_t)L.n_steps + 1, sizeof *fill);
    if (!fill) {
        jg_errorf("out of memory planning generated code");
        goto fail;
    }
    for (int v = 0; v < g->n_vals; v++)
        if (g->vals[v].kind == JG_VAL_NODE && dies[v] >= 0)
            p->free_list[p->free_start[dies[v]] + fill[dies[v]]++] = v;
    free(fill);
    if (plan_tail(p, &L) < 0)
        goto fail;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].kind == JG_GN_CUSTOM && wrap_custom(p, i) < 0)
            goto fail;
    bool fallback;
    if (!(p->dl = load_source(src, g->name ? g->name : "graph", false, &fallback))) {
        if (!fallback || !(p->interp = jg_interp_plan_new(g)))
            goto fail;
        jg_clear_error();
        goto done;
    }
    void *sym = dlsym(p->dl, "jg_gen_run");
    memcpy(&p->fn, &sym, sizeof sym);
    if (!p->fn) {
        jg_errorf("jg_compile(c): the generated library has no jg_gen_run: %s", dlerror());
        goto fail;
    }
done:
    free(dies);
    free(src);
    layout_free(&L);
    return p;
fail:
    free(dies);
    free(src);
    layout_free(&L);
    jg_cgen_plan_free(p);
    jg_graph_free(own);
    return NULL;
}

/* ---- the runtime table ---- */

static void drop(jg_cgen_plan *p, jg_tensor *t) {
    jg_pool_drop(&p->pool, t);
}

static jg_tensor *alloc_out(jg_cgen_plan *p, int v, const jg_meta *m) {
    if (p->pre && p->pre[v]) {
        jg_tensor *t = p->pre[v];
        p->pre[v] = NULL;
        return t;
    }
    return jg_pool_alloc_value(&p->pool, v, m);
}

int jg_cgen_plan_make_static(jg_cgen_plan *p) {
    if (p->interp) /* no object could be made: the interpreter runs it */
        return jg_interp_plan_make_static(p->interp);
    return jg_pool_make_static(&p->pool, p->g);
}

static int64_t dummy_elem[2];

static void *data_of(jg_tensor *t) {
    if (t->numel == 0 || !t->storage->data)
        return dummy_elem;
    return jg_tensor_ptr(t);
}

static int run_tail_kernel(jg_cgen_plan *p, int i);

static int rt_node(void *ctx, int i) {
    jg_cgen_plan *p = ctx;
    const jg_graph *g = p->g;
    const jg_gnode *n = &g->nodes[i];
    jg_tensor **vals = p->vals;
    if (p->inout && tail_kernel(g, i))
        return run_tail_kernel(p, i);
    if (n->kind == JG_GN_CUSTOM) {
        jg_tensor *in[64], *out[64];
        for (int k = 0; k < n->n_in; k++)
            in[k] = vals[n->in[k]];
        if (jg_interp_run(p->cplan[i], in, out) < 0)
            return -1;
        for (int k = 0; k < n->n_out; k++)
            vals[n->out[k]] = out[k];
        return 0;
    }
    return jg_interp_run_op(&p->pool, g, n, vals);
}

static const void *rt_in(void *ctx, int v) {
    jg_cgen_plan *p = ctx;
    jg_tensor *t = p->vals[v];
    if (t->numel <= 1 || jg_is_contiguous(t))
        return data_of(t);
    jg_tensor *c = jg_tensor_alloc(t->dtype, t->ndim, t->shape);
    if (!c)
        return NULL;
    jg_copy_data(c, t);
    p->scratch[p->n_scratch++] = c;
    return data_of(c);
}

static const void *rt_elem(void *ctx, int v) {
    jg_cgen_plan *p = ctx;
    return data_of(p->vals[v]);
}

static void *rt_out(void *ctx, int v) {
    jg_cgen_plan *p = ctx;
    jg_tensor *t = alloc_out(p, v, &p->g->vals[v].meta);
    if (!t)
        return NULL;
    p->vals[v] = t;
    return data_of(t);
}

static void rt_done(void *ctx, int s) {
    jg_cgen_plan *p = ctx;
    for (int j = p->free_start[s]; j < p->free_start[s + 1]; j++) {
        drop(p, p->vals[p->free_list[j]]);
        p->vals[p->free_list[j]] = NULL;
    }
    for (int k = 0; k < p->n_scratch; k++)
        jg_release(p->scratch[k]);
    p->n_scratch = 0;
}

static int64_t rt_numel(void *ctx, int v) {
    jg_cgen_plan *p = ctx;
    return meta_numel(&p->g->vals[v].meta);
}

static double rt_scalar(void *ctx, int i) {
    jg_cgen_plan *p = ctx;
    return p->g->nodes[i].attrs.s;
}

static void *rt_tmp(void *ctx, int v, int64_t n) {
    jg_cgen_plan *p = ctx;
    jg_tensor *t = jg_tensor_alloc(p->g->vals[v].meta.dtype, 1, &n);
    if (!t)
        return NULL;
    p->scratch[p->n_scratch++] = t;
    return data_of(t);
}

/* At the first write of an output into an input's buffer: whether each such
 * output may be (jg_cgen_inplace_run, the input dense and sharing its
 * storage with no other input, every operand of the tail dense so that no
 * later rt_in copies), and every buffer the rest of the run stores into,
 * allocated now: past this point nothing the run does can fail. */
typedef struct {
    const void *storage;
    int v;
} storage_ref;

static int cmp_storage_ref(const void *pa, const void *pb) {
    uintptr_t a = (uintptr_t)((const storage_ref *)pa)->storage;
    uintptr_t b = (uintptr_t)((const storage_ref *)pb)->storage;
    return (a > b) - (a < b);
}

/* the first of refs[0, n) (sorted) whose storage is s, or n */
static int first_ref(const storage_ref *refs, int n, const void *s) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if ((uintptr_t)refs[mid].storage < (uintptr_t)s)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int tail_prepare(jg_cgen_plan *p) {
    const jg_graph *g = p->g;
    p->prepared = true;
    bool ok = jg_cgen_inplace_run;
    for (int k = 0; k < p->n_tail_ops && ok; k++) {
        const jg_tensor *t = p->vals[p->tail_ops[k]];
        ok = !t || t->numel <= 1 || jg_is_contiguous(t) ||
             (p->tail_banded[k] && jg_adam_grad_banded(t));
    }
    /* the inputs by storage, so that each in-out value's test is a search
     * (a whole training step has hundreds of both) */
    storage_ref *refs = malloc(((size_t)g->n_inputs + 1) * sizeof *refs);
    if (!refs)
        return jg_errorf("out of memory preparing the in-place tail");
    int n_refs = 0;
    for (int k = 0; k < g->n_inputs; k++) {
        const jg_tensor *o = p->vals[g->inputs[k]];
        if (o && o->storage)
            refs[n_refs++] = (storage_ref){o->storage, g->inputs[k]};
    }
    qsort(refs, (size_t)n_refs, sizeof *refs, cmp_storage_ref);
    for (int m = 0; m < p->n_inout; m++) {
        int v = p->inout_v[m], u = p->inout[v];
        const jg_tensor *t = p->vals[u];
        const jg_meta *mv = &g->vals[v].meta;
        bool gr = ok && t && t->dtype == mv->dtype && t->numel == meta_numel(mv) && t->numel > 0 &&
                  jg_is_contiguous(t) && t->storage->data;
        /* granted only when no other input shares t's storage */
        for (int k = gr ? first_ref(refs, n_refs, t->storage) : n_refs;
             k < n_refs && refs[k].storage == t->storage && gr; k++)
            gr = refs[k].v == u;
        p->grant[v] = gr;
    }
    free(refs);
    for (int m = 0; m < p->n_inout; m++) { /* (adam_moments: both moments or neither) */
        int v = p->inout_v[m];
        const jg_gnode *n = &g->nodes[g->vals[v].node];
        if (n->kind == JG_GN_OP && n->op == JG_OP_ADAM_MOMENTS &&
            !p->grant[n->out[0]] + !p->grant[n->out[1]] == 1)
            p->grant[n->out[0]] = p->grant[n->out[1]] = false;
    }
    for (int k = 0; k < p->n_tail_vals + p->n_inout; k++) {
        int v = k < p->n_tail_vals ? p->tail_vals[k] : p->inout_v[k - p->n_tail_vals];
        if (p->vals[v] || p->pre[v] || (k >= p->n_tail_vals && p->grant[v]))
            continue;
        if (!(p->pre[v] = jg_pool_alloc_value(&p->pool, v, &g->vals[v].meta)))
            return -1; /* (jg_cgen_run releases the others) */
    }
    return 0;
}

static void *rt_inout(void *ctx, int v, int u) {
    jg_cgen_plan *p = ctx;
    if (!p->prepared && tail_prepare(p) < 0)
        return NULL;
    jg_tensor *in = p->vals[u];
    if (p->grant[v]) {
        atomic_fetch_add_explicit(&total_in_place, 1, memory_order_relaxed);
        p->vals[v] = jg_retain(in);
        return data_of(in);
    }
    atomic_fetch_add_explicit(&total_copied, 1, memory_order_relaxed);
    jg_tensor *t = alloc_out(p, v, &p->g->vals[v].meta);
    if (!t)
        return NULL;
    jg_copy_data(t, in);
    p->vals[v] = t;
    return data_of(t);
}

/* A tail kernel (tail_kernel): its outputs in their inputs' memory where
 * granted, else in buffers allocated before the tail's first write; an
 * adam_moments node paired with the next step's adam_update (adam_pair)
 * runs the two as one pass when the three values are granted, and the
 * update then has nothing left to do. */
static int run_tail_kernel(jg_cgen_plan *p, int i) {
    const jg_graph *g = p->g;
    const jg_gnode *n = &g->nodes[i];
    jg_tensor **vals = p->vals;
    bool any = false;
    for (int k = 0; k < n->n_out; k++)
        any = any || p->inout[n->out[k]] >= 0;
    if (any && !p->prepared && tail_prepare(p) < 0)
        return -1;
    int j = p->pair[i];
    if (j >= 0 && n->op == JG_OP_ADAM_UPDATE && vals[n->out[0]])
        return 0; /* (computed by the pair's pass) */
    if (j >= 0 && n->op == JG_OP_ADAM_MOMENTS) {
        const jg_gnode *u = &g->nodes[j];
        if (p->grant[n->out[0]] && p->grant[n->out[1]] && p->grant[u->out[0]]) {
            if (jg_adam_step_inplace_(&u->attrs, vals[n->in[0]], vals[n->in[1]], vals[n->in[2]],
                                      vals[n->in[3]], vals[u->in[3]]) < 0)
                return -1;
            atomic_fetch_add_explicit(&total_in_place, 3, memory_order_relaxed);
            vals[n->out[0]] = jg_retain(vals[n->in[2]]);
            vals[n->out[1]] = jg_retain(vals[n->in[3]]);
            vals[u->out[0]] = jg_retain(vals[n->in[0]]);
            return 0;
        }
    }
    jg_tensor *in[4], *out[2] = {0};
    int rc = 0;
    for (int k = 0; k < n->n_in; k++)
        in[k] = vals[n->in[k]];
    for (int k = 0; k < n->n_out && rc == 0; k++) {
        int v = n->out[k];
        if (p->inout[v] >= 0)
            atomic_fetch_add_explicit(p->grant[v] ? &total_in_place : &total_copied, 1,
                                      memory_order_relaxed);
        if (p->inout[v] >= 0 && p->grant[v])
            out[k] = jg_retain(vals[p->inout[v]]);
        else if (!(out[k] = alloc_out(p, v, &g->vals[v].meta)))
            rc = -1;
    }
    if (rc == 0)
        rc = jg_ops[n->op].kernel(&n->attrs, in, out);
    if (rc < 0) {
        for (int k = 0; k < n->n_out; k++)
            jg_release(out[k]);
        return -1;
    }
    for (int k = 0; k < n->n_out; k++)
        vals[n->out[k]] = out[k];
    return 0;
}

static const jg_gen_rt RT = {rt_node,         rt_in,    rt_elem,   rt_out, rt_done,
                             jg_parallel_for, rt_numel, rt_scalar, rt_tmp, rt_inout};

int jg_cgen_run(jg_cgen_plan *p, jg_tensor *const *inputs, jg_tensor **outputs) {
    if (p->interp)
        return jg_interp_run(p->interp, inputs, outputs);
    const jg_graph *g = p->g;
    jg_tensor **vals = p->vals;
    for (int k = 0; k < g->n_inputs; k++)
        vals[g->inputs[k]] = inputs[k];
    for (int c = 0; c < g->n_consts; c++)
        vals[g->const_vals[c]] = g->consts[c];
    bool prev = jg_set_grad_enabled(false);
    int rc = p->fn(&RT, p);
    jg_set_grad_enabled(prev);
    if (rc == 0)
        for (int k = 0; k < g->n_outputs; k++)
            outputs[k] = g->outputs[k] >= 0 ? jg_retain(vals[g->outputs[k]]) : NULL;
    for (int k = 0; k < p->n_scratch; k++)
        jg_release(p->scratch[k]);
    p->n_scratch = 0;
    for (int v = 0; v < g->n_vals; v++) {
        if (g->vals[v].kind == JG_VAL_NODE && vals[v])
            jg_release(vals[v]);
        vals[v] = NULL;
        if (p->pre && p->pre[v]) { /* (a run that failed in tail_prepare) */
            jg_release(p->pre[v]);
            p->pre[v] = NULL;
        }
    }
    p->prepared = false;
    return rc < 0 ? -1 : 0;
}
