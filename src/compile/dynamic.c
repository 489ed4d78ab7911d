/* Dynamic sizes: templates made from two traces, instances per size (see
 * dynamic.h and docs/compiler.md, "Dynamic shapes"). */
#include "compile/dynamic.h"

#include "core/strbuf.h"
#include "trace/trace.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Instances kept per template: each holds its graphs and plans (and, on
 * the c backend, a loaded object); a loop over an epoch needs two. */
enum { DYN_INSTANCES = 8 };

struct jg_dyn {
    jg_entry *base; /* retained; its trace state is what instances copy */
    int64_t n_base, n_other;
    bool probed; /* n_other was traced by dynamic=True's probe, not called */
    int n_dims;
    int *dim_in, *dim_d; /* the (call input, dim) pairs of the symbol */
    /* per slot of base->traced: the value is k * s (k != 0) or fixed (0) */
    int64_t *shape_k;  /* n_vals * JG_MAX_DIMS */
    int64_t *attr_k;   /* n_nodes * (JG_MAX_DIMS + 4) */
    int64_t *s_k;      /* n_nodes */
    int64_t *const_k;  /* n_consts (one-element constants) */
    bool *const_fill;  /* n_consts: a constant of one value whose shape is k * s */
    int64_t *lifted_k; /* n_lifted: a one-element tensor made while traced (a VJP's count) */
    jg_entry *inst[DYN_INSTANCES];
    int64_t inst_s[DYN_INSTANCES];
    uint64_t inst_used[DYN_INSTANCES];
    int n_inst;
    uint64_t clock;
};

enum { N_ATTR = JG_MAX_DIMS + 4 };

#define WHY(...) (snprintf(why, why_size, __VA_ARGS__), -1)

/* v1 at size n1, v2 at n2: fixed (*k = 0) or k * n with one integer k. */
static bool fit_i64(int64_t v1, int64_t v2, int64_t n1, int64_t n2, int64_t *k) {
    *k = 0;
    if (v1 == v2)
        return true;
    if (v1 % n1 || v2 % n2 || v1 / n1 != v2 / n2)
        return false;
    *k = v1 / n1;
    return true;
}

static bool fit_f64(double v1, double v2, int64_t n1, int64_t n2, int64_t *k) {
    *k = 0;
    if (!memcmp(&v1, &v2, sizeof v1))
        return true;
    if (!isfinite(v1) || !isfinite(v2) || fabs(v2) > 9e15)
        return false;
    double q = v2 / (double)n2;
    if (q != nearbyint(q) || q == 0)
        return false;
    *k = (int64_t)q;
    return (double)(*k * n2) == v2 && (double)(*k * n1) == v1;
}

/* ------------------------------------------------------ size comparisons */

static _Thread_local jg_sizes_record *recording;

jg_sizes_record *jg_sizes_record_begin(jg_sizes_record *r) {
    jg_sizes_record *prev = recording;
    recording = r;
    return prev;
}

void jg_sizes_record_end(jg_sizes_record *prev) {
    recording = prev;
}

void jg_sizes_note(int op, int64_t a, int64_t b) {
    jg_sizes_record *r = recording;
    if (!r || !jg_tracing())
        return;
    if (op < JG_SIZES_EQ || op > JG_SIZES_OPAQUE)
        op = JG_SIZES_OPAQUE;
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 8;
        struct jg_size_use *u = realloc(r->use, sizeof *u * (size_t)cap);
        if (!u) {
            r->n = -1; /* (marks the record unusable) */
            return;
        }
        r->use = u;
        r->cap = cap;
    }
    if (r->n >= 0)
        r->use[r->n++] = (struct jg_size_use){op, a, b};
}

/* Value v1 at n1, v2 at n2 as k * s + c (one of them 0). */
static bool fit_affine(int64_t v1, int64_t v2, int64_t n1, int64_t n2, int64_t *k, int64_t *c) {
    *c = 0;
    if (!fit_i64(v1, v2, n1, n2, k))
        return false;
    if (!*k)
        *c = v2;
    return true;
}

static const char *const cmp_name[] = {"==", "!=", "<", "<=", ">", ">="};

/* Whether (lhs - rhs) = d satisfies op (an ordering; d's sign is enough). */
static bool holds(int op, int64_t d) {
    switch (op) {
    case JG_SIZES_LT:
        return d < 0;
    case JG_SIZES_LE:
        return d <= 0;
    case JG_SIZES_GT:
        return d > 0;
    default:
        return d >= 0;
    }
}

/* Every comparison of sizes the program made has one result for every size
 * s >= 2: its two sides, fitted as k * s or fixed, differ by f(s) = a * s
 * + b; with a != 0, f is monotonic, so an ordering holds alike at s = 2 and
 * for large s (f's sign there is a's), and an equality never holds as long
 * as f(2) already has a's sign. */
static int check_sizes(const jg_dyn *d, const jg_sizes_record *ra, const jg_sizes_record *rb,
                       char *why, size_t why_size) {
    if (ra->n < 0 || rb->n < 0)
        return WHY("out of memory");
    if (ra->n != rb->n)
        return WHY("the program compared sizes a different number of times");
    for (int i = 0; i < rb->n; i++) {
        const struct jg_size_use *x = &ra->use[i], *y = &rb->use[i];
        if (x->op != y->op)
            return WHY("the program compared sizes differently");
        if (y->op == JG_SIZES_OPAQUE) {
            if (x->a != y->a)
                return WHY("the program used a size that changed (%" PRId64 " -> %" PRId64
                           ") in a way the library cannot follow (len(), float(), /)",
                           x->a, y->a);
            continue;
        }
        int64_t ka, ca, kb, cb;
        if (!fit_affine(x->a, y->a, d->n_other, d->n_base, &ka, &ca) ||
            !fit_affine(x->b, y->b, d->n_other, d->n_base, &kb, &cb))
            return WHY("the program compared sizes that are not proportional to the dims (%" PRId64
                       " %s %" PRId64 ", then %" PRId64 " %s %" PRId64 ")",
                       x->a, cmp_name[x->op], x->b, y->a, cmp_name[y->op], y->b);
        int64_t a = ka - kb, at2 = 2 * a + (ca - cb);
        bool fixed = a == 0 || (y->op <= JG_SIZES_NE ? at2 != 0 && (at2 > 0) == (a > 0)
                                                     : holds(y->op, at2) == holds(y->op, a));
        if (!fixed)
            return WHY("the program compared sizes with a result that depends on the size (%" PRId64
                       " %s %" PRId64 ", then %" PRId64 " %s %" PRId64 ")",
                       x->a, cmp_name[x->op], x->b, y->a, cmp_name[y->op], y->b);
    }
    return 0;
}

static bool contiguous_key(const jg_in_key *in) {
    int64_t st[JG_MAX_DIMS] = {0};
    jg_contiguous_strides(in->meta.ndim, in->meta.shape, st);
    return !memcmp(st, in->stride, sizeof st);
}

static bool same_ints(const int *a, const int *b, int n) {
    return n <= 0 || (a && b && !memcmp(a, b, sizeof(int) * (size_t)n));
}
static bool same_u64(const uint64_t *a, const uint64_t *b, int n) {
    return n <= 0 || (a && b && !memcmp(a, b, sizeof(uint64_t) * (size_t)n));
}
static bool same_ptrs(jg_tensor *const *a, jg_tensor *const *b, int n) {
    return n <= 0 || (a && b && !memcmp(a, b, sizeof(jg_tensor *) * (size_t)n));
}

static bool same_values(jg_tensor *x, jg_tensor *y) {
    if (x->dtype != y->dtype || x->ndim != y->ndim ||
        memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim))
        return false;
    size_t bytes = (size_t)jg_numel(x) * jg_dtype_size(x->dtype);
    void *bx = malloc(bytes ? bytes : 1), *by = malloc(bytes ? bytes : 1);
    bool same = bx && by && jg_copy_to(x, bx, bytes) == 0 && jg_copy_to(y, by, bytes) == 0 &&
                !memcmp(bx, by, bytes);
    free(bx);
    free(by);
    jg_clear_error();
    return same;
}

/* Whether every element of t has one value (as double: *v). */
static bool uniform(jg_tensor *t, double *v) {
    int64_t n = jg_numel(t);
    size_t es = jg_dtype_size(t->dtype), bytes = (size_t)n * es;
    unsigned char *b = n ? malloc(bytes) : NULL;
    bool ok = b && jg_copy_to(t, b, bytes) == 0;
    for (int64_t i = 1; ok && i < n; i++)
        ok = !memcmp(b, b + (size_t)i * es, es);
    if (ok) { /* (exact in double for every dtype a fill is made in) */
        switch (t->dtype) {
        case JG_F32:
            *v = *(const float *)b;
            break;
        case JG_F64:
            *v = *(const double *)b;
            break;
        case JG_I64:
            *v = (double)*(const int64_t *)b;
            ok = *(const int64_t *)b == (int64_t)*v;
            break;
        case JG_I32:
            *v = *(const int32_t *)b;
            break;
        default:
            *v = *(const bool *)b;
        }
    }
    free(b);
    jg_clear_error();
    return ok;
}

/* Number of program outputs (the traced graph's outputs before the
 * mutations' new values). */
static int prog_outputs(const jg_entry *e) {
    return e->traced->n_outputs - e->n_mut - e->n_lmut - e->n_gset_out;
}

/* The trace state instances copy must be the same in both traces. */
static bool same_trace_state(const jg_entry *a, const jg_entry *b) {
    int n = a->key.n_inputs, n_out = prog_outputs(a);
    if (a->n_distinct != b->n_distinct || !same_ints(a->graph_input_of, b->graph_input_of, n) ||
        !same_ints(a->call_input_of, b->call_input_of, a->n_distinct))
        return false;
    if (a->n_lifted != b->n_lifted)
        return false;
    for (int i = 0; i < a->n_lifted; i++) {
        const jg_capture_key *x = &a->lifted_key[i], *y = &b->lifted_key[i];
        if (!jg_meta_equal(&x->meta, &y->meta) || memcmp(x->stride, y->stride, sizeof x->stride) ||
            x->requires_grad != y->requires_grad || x->storage_as != y->storage_as)
            return false;
    }
    if (a->n_gr != b->n_gr || !same_ptrs(a->gr_owner, b->gr_owner, a->n_gr) ||
        (a->n_gr && memcmp(a->gr_had, b->gr_had, sizeof(bool) * (size_t)a->n_gr)) ||
        !a->lifted_grad_of != !b->lifted_grad_of ||
        (a->lifted_grad_of && !same_ints(a->lifted_grad_of, b->lifted_grad_of, a->n_lifted)))
        return false;
    /* value guards: the same tensors with the same bytes (an lr baked in) */
    if (a->n_vg != b->n_vg || !same_ptrs(a->vg_t, b->vg_t, a->n_vg))
        return false;
    for (int i = 0; i < a->n_vg; i++)
        if (memcmp(a->vg_bytes[i], b->vg_bytes[i],
                   (size_t)a->vg_t[i]->numel * jg_dtype_size(a->vg_t[i]->dtype)))
            return false;
    if (a->n_pinned != b->n_pinned || !same_ptrs(a->pinned, b->pinned, a->n_pinned) ||
        !same_ints(a->pinned_input, b->pinned_input, a->n_pinned))
        return false;
    if (a->n_mut != b->n_mut || !same_ints(a->mut_input, b->mut_input, a->n_mut) ||
        !same_u64(a->mut_writes, b->mut_writes, a->n_mut) || !a->out_input != !b->out_input ||
        (a->out_input && !same_ints(a->out_input, b->out_input, n_out)))
        return false;
    if (a->n_lmut != b->n_lmut || !same_ints(a->lmut_lifted, b->lmut_lifted, a->n_lmut) ||
        !same_u64(a->lmut_writes, b->lmut_writes, a->n_lmut))
        return false;
    if (a->n_gset != b->n_gset || a->n_gset_out != b->n_gset_out ||
        !same_ptrs(a->gset_owner, b->gset_owner, a->n_gset) ||
        !same_ints(a->gset_out, b->gset_out, a->n_gset))
        return false;
    return true;
}

/* Captured tensors that are other tensors in the two traces: ones the
 * library made while tracing (backward's seed, mean's count in a traced
 * backward).  Same values: the base keeps reading its own, and so do its
 * instances; one element k * s: each instance gets its own. */
static int fit_lifted(jg_dyn *d, const jg_entry *a, const jg_entry *b, char *why, size_t why_size) {
    if (!(d->lifted_k = calloc((size_t)(b->n_lifted ? b->n_lifted : 1), sizeof(int64_t))))
        return WHY("out of memory");
    for (int i = 0; i < b->n_lifted; i++) {
        jg_tensor *x = a->lifted[i], *y = b->lifted[i];
        if (x == y || same_values(x, y))
            continue;
        if (jg_numel(y) != 1 || y->dtype == JG_BOOL || x->dtype != y->dtype ||
            !fit_f64(jg_item(x), jg_item(y), d->n_other, d->n_base, &d->lifted_k[i]) ||
            !d->lifted_k[i])
            return WHY("the two traces captured different tensors (lifted%d)", i);
    }
    return 0;
}

/* Fits every integer of b's traced graph (at n2) against a's (at n1). */
static int fit_graphs(jg_dyn *d, const jg_graph *ga, const jg_graph *gb, char *why,
                      size_t why_size) {
    int64_t n1 = d->n_other, n2 = d->n_base;
    if (ga->n_vals != gb->n_vals || ga->n_nodes != gb->n_nodes || ga->n_inputs != gb->n_inputs ||
        ga->n_consts != gb->n_consts || ga->n_outputs != gb->n_outputs || ga->n_children ||
        gb->n_children || !same_ints(ga->inputs, gb->inputs, ga->n_inputs) ||
        !same_ints(ga->const_vals, gb->const_vals, ga->n_consts) ||
        !same_ints(ga->outputs, gb->outputs, ga->n_outputs))
        return WHY("the two traces made different graphs (the program depends on the size)");
    d->shape_k = calloc((size_t)(gb->n_vals ? gb->n_vals : 1) * JG_MAX_DIMS, sizeof(int64_t));
    d->attr_k = calloc((size_t)(gb->n_nodes ? gb->n_nodes : 1) * N_ATTR, sizeof(int64_t));
    d->s_k = calloc((size_t)(gb->n_nodes ? gb->n_nodes : 1), sizeof(int64_t));
    d->const_k = calloc((size_t)(gb->n_consts ? gb->n_consts : 1), sizeof(int64_t));
    d->const_fill = calloc((size_t)(gb->n_consts ? gb->n_consts : 1), sizeof(bool));
    if (!d->shape_k || !d->attr_k || !d->s_k || !d->const_k || !d->const_fill)
        return WHY("out of memory");
    for (int v = 0; v < gb->n_vals; v++) {
        const jg_value *x = &ga->vals[v], *y = &gb->vals[v];
        if (x->kind != y->kind || x->node != y->node || x->index != y->index ||
            x->meta.dtype != y->meta.dtype || x->meta.ndim != y->meta.ndim ||
            x->requires_grad != y->requires_grad || x->uses != y->uses)
            return WHY("the two traces made different graphs (the program depends on the size)");
        for (int i = 0; i < y->meta.ndim; i++)
            if (!fit_i64(x->meta.shape[i], y->meta.shape[i], n1, n2,
                         &d->shape_k[(size_t)v * JG_MAX_DIMS + (size_t)i]))
                return WHY("a size in the graph is not proportional to the dims (%" PRId64
                           " -> %" PRId64 ")",
                           x->meta.shape[i], y->meta.shape[i]);
    }
    for (int i = 0; i < gb->n_nodes; i++) {
        const jg_gnode *x = &ga->nodes[i], *y = &gb->nodes[i];
        if (x->kind != JG_GN_OP || y->kind != JG_GN_OP)
            return WHY("the program calls custom functions (not supported with dynamic sizes)");
        const jg_attrs *p = &x->attrs, *q = &y->attrs;
        if (x->op != y->op || x->n_in != y->n_in || x->n_out != y->n_out ||
            !same_ints(x->in, y->in, x->n_in) || !same_ints(x->out, y->out, x->n_out) ||
            p->n != q->n || p->whole != q->whole || p->keepdim != q->keepdim ||
            p->dtype != q->dtype)
            return WHY("the two traces made different graphs (the program depends on the size)");
        for (int j = 0; j < N_ATTR; j++)
            if (!fit_i64(p->i[j], q->i[j], n1, n2, &d->attr_k[(size_t)i * N_ATTR + (size_t)j]))
                return WHY("an argument of %s is not proportional to the dims (%" PRId64
                           " -> %" PRId64 ")",
                           jg_ops[y->op].name, p->i[j], q->i[j]);
        if (!fit_f64(p->s, q->s, n1, n2, &d->s_k[i]))
            return WHY("the scalar argument of %s is not proportional to the dims (%.17g -> "
                       "%.17g)",
                       jg_ops[y->op].name, p->s, q->s);
    }
    for (int i = 0; i < gb->n_consts; i++) {
        jg_tensor *x = ga->consts[i], *y = gb->consts[i];
        if (x == y)
            continue;
        if (x->dtype != y->dtype || x->ndim != y->ndim)
            return WHY("the two traces made different constants");
        if (memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim)) {
            /* (its shape is its value's, fitted above) a fill such as a
             * VJP's zeros: each instance makes its own */
            double vx, vy;
            if (!uniform(x, &vx) || !uniform(y, &vy) || memcmp(&vx, &vy, sizeof vx))
                return WHY("a tensor the program made has a shape that depends on the dims");
            d->const_fill[i] = true;
            continue;
        }
        int64_t numel = jg_numel(x);
        if (numel == 1 && x->dtype != JG_BOOL) {
            if (!fit_f64(jg_item(x), jg_item(y), n1, n2, &d->const_k[i]))
                return WHY("a constant the program made is not proportional to the dims (%.17g "
                           "-> %.17g)",
                           jg_item(x), jg_item(y));
            continue;
        }
        if (!same_values(x, y))
            return WHY("a tensor the program made has values that depend on the dims");
    }
    return 0;
}

int jg_dyn_make(jg_entry *older, jg_entry *newer, jg_dyn **out, char *why, size_t why_size) {
    *out = NULL;
    const jg_call_key *ka = &older->key, *kb = &newer->key;
    if (older->eager || newer->eager || ka->grad_mode != kb->grad_mode ||
        ka->n_inputs != kb->n_inputs || ka->args_size != kb->args_size ||
        (ka->args_size && memcmp(ka->args, kb->args, ka->args_size)))
        return 0;
    int64_t n1 = 0, n2 = 0;
    int n_dims = 0;
    for (int i = 0; i < ka->n_inputs; i++) {
        const jg_in_key *a = &ka->in[i], *b = &kb->in[i];
        if (a->meta.dtype != b->meta.dtype || a->meta.ndim != b->meta.ndim ||
            a->requires_grad != b->requires_grad || a->same_as != b->same_as ||
            a->storage_as != b->storage_as)
            return 0;
        bool changed = false;
        for (int d = 0; d < a->meta.ndim; d++) {
            if (a->meta.shape[d] == b->meta.shape[d])
                continue;
            if (n_dims && (a->meta.shape[d] != n1 || b->meta.shape[d] != n2))
                return 0; /* two different changes: not one symbol */
            n1 = a->meta.shape[d], n2 = b->meta.shape[d];
            n_dims++;
            changed = true;
        }
        if (!changed && memcmp(a->stride, b->stride, sizeof a->stride))
            return 0;
        if (changed && (!contiguous_key(a) || !contiguous_key(b)))
            return 0;
    }
    if (!n_dims)
        return 0;
    if (n1 < 2 || n2 < 2)
        return WHY("sizes 0 and 1 are specialized");
    if (!older->traced || !newer->traced)
        return WHY("the program calls custom functions (not supported with dynamic sizes)");
    jg_dyn probe = {.n_base = n2, .n_other = n1};
    if (check_sizes(&probe, &older->sizes, &newer->sizes, why, why_size) < 0)
        return -1;
    if (!same_trace_state(older, newer))
        return WHY("the two traces captured or wrote different tensors");
    for (int j = 0; j < prog_outputs(newer); j++)
        if (older->out_relayout[j] || newer->out_relayout[j])
            return WHY("an output has a layout other than row-major");
    if (older->out_view_in || newer->out_view_in)
        return WHY("an output is a view of an input");
    jg_dyn *d = calloc(1, sizeof *d);
    if (!d)
        return WHY("out of memory");
    d->n_base = n2, d->n_other = n1;
    d->dim_in = malloc(sizeof(int) * (size_t)n_dims);
    d->dim_d = malloc(sizeof(int) * (size_t)n_dims);
    if (!d->dim_in || !d->dim_d) {
        jg_dyn_free(d);
        return WHY("out of memory");
    }
    for (int i = 0; i < ka->n_inputs; i++)
        for (int k = 0; k < ka->in[i].meta.ndim; k++)
            if (ka->in[i].meta.shape[k] != kb->in[i].meta.shape[k]) {
                d->dim_in[d->n_dims] = i;
                d->dim_d[d->n_dims++] = k;
            }
    if (fit_lifted(d, older, newer, why, why_size) < 0 ||
        fit_graphs(d, older->traced, newer->traced, why, why_size) < 0) {
        jg_dyn_free(d);
        return -1;
    }
    newer->refcount++;
    d->base = newer;
    *out = d;
    return 1;
}

void jg_dyn_describe(const jg_dyn *d, jg_input_name_fn name, void *user, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < d->n_dims && len < n; i++) {
        char in[128];
        if (!name || name(user, d->dim_in[i], in, sizeof in) < 0)
            snprintf(in, sizeof in, "input %d", d->dim_in[i]);
        len +=
            (size_t)snprintf(buf + len, n - len, "%sdim %d of %s", i ? ", " : "", d->dim_d[i], in);
    }
    if (len < n && d->probed)
        snprintf(buf + len, n - len, " went dynamic (%" PRId64 ", traced again at %" PRId64 ")",
                 d->n_base, d->n_other);
    else if (len < n)
        snprintf(buf + len, n - len, " went dynamic (%" PRId64 " -> %" PRId64 ")", d->n_other,
                 d->n_base);
}

void jg_dyn_set_probed(jg_dyn *d) {
    d->probed = true;
}

jg_entry *jg_dyn_base(const jg_dyn *d) {
    return d->base;
}

bool jg_dyn_rekey(const jg_dyn *d, const jg_call_key *k, jg_in_key *base_in, int64_t *s) {
    const jg_call_key *b = &d->base->key;
    if (k->n_inputs != b->n_inputs)
        return false;
    int64_t v = -1;
    for (int i = 0; i < d->n_dims; i++) {
        const jg_in_key *in = &k->in[d->dim_in[i]];
        if (in->meta.ndim != b->in[d->dim_in[i]].meta.ndim)
            return false;
        int64_t x = in->meta.shape[d->dim_d[i]];
        if ((v >= 0 && x != v) || x < 2)
            return false;
        v = x;
    }
    memcpy(base_in, k->in, sizeof *base_in * (size_t)k->n_inputs);
    for (int i = 0; i < d->n_dims; i++) {
        jg_in_key *in = &base_in[d->dim_in[i]];
        if (!contiguous_key(&k->in[d->dim_in[i]]))
            return false;
        in->meta.shape[d->dim_d[i]] = d->n_base;
        memcpy(in->stride, b->in[d->dim_in[i]].stride, sizeof in->stride);
    }
    *s = v;
    return true;
}

/* --------------------------------------------------------------- instances */

static void *dup(const void *p, size_t n) {
    if (!p)
        return NULL;
    void *q = malloc(n ? n : 1);
    if (q)
        memcpy(q, p, n);
    return q;
}

static jg_tensor **dup_retained(jg_tensor *const *p, int n) {
    jg_tensor **q = dup(p, sizeof *q * (size_t)n);
    for (int i = 0; q && i < n; i++)
        jg_retain(q[i]);
    return q;
}

/* An entry with b's trace state (what trace_entry_once sets before the
 * pipeline runs) and call key k. */
static jg_entry *copy_trace_state(const jg_entry *b, const jg_call_key *k) {
    jg_entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    int n = k->n_inputs;
    e->refcount = 1;
    e->index = b->index;
    e->backend = b->backend;
    e->key = *k;
    e->key.in = dup(k->in, sizeof *k->in * (size_t)(n ? n : 1));
    e->key.args = dup(k->args, k->args_size);
    e->n_distinct = b->n_distinct;
    e->graph_input_of = dup(b->graph_input_of, sizeof(int) * (size_t)n);
    e->call_input_of = dup(b->call_input_of, sizeof(int) * (size_t)n);
    e->n_lifted = b->n_lifted;
    e->lifted = dup_retained(b->lifted, b->n_lifted);
    e->lifted_key = dup(b->lifted_key, sizeof *b->lifted_key * (size_t)b->n_lifted);
    e->n_gr = b->n_gr;
    e->gr_owner = dup_retained(b->gr_owner, b->n_gr);
    e->gr_had = dup(b->gr_had, sizeof(bool) * (size_t)b->n_gr);
    e->lifted_grad_of = dup(b->lifted_grad_of, sizeof(int) * (size_t)b->n_lifted);
    e->n_pinned = b->n_pinned;
    e->pinned = dup_retained(b->pinned, b->n_pinned);
    e->pinned_input = dup(b->pinned_input, sizeof(int) * (size_t)b->n_pinned);
    int n_out = prog_outputs(b);
    e->out_relayout = dup(b->out_relayout, sizeof *b->out_relayout * (size_t)(n_out + 1));
    e->out_stride = dup(b->out_stride, sizeof *b->out_stride * (size_t)(n_out + 1));
    e->n_vg = b->n_vg;
    e->vg_t = dup_retained(b->vg_t, b->n_vg);
    e->vg_bytes = b->n_vg ? calloc((size_t)b->n_vg, sizeof *e->vg_bytes) : NULL;
    bool vg_ok = !b->n_vg || (e->vg_t && e->vg_bytes);
    if (!vg_ok) { /* out of memory: nothing for the entry's free to walk */
        for (int i = 0; e->vg_t && i < b->n_vg; i++)
            jg_release(e->vg_t[i]);
        free(e->vg_t);
        free(e->vg_bytes);
        e->vg_t = NULL;
        e->vg_bytes = NULL;
        e->n_vg = 0;
    }
    for (int i = 0; i < b->n_vg && vg_ok; i++)
        vg_ok =
            (e->vg_bytes[i] = dup(b->vg_bytes[i], (size_t)b->vg_t[i]->numel *
                                                      jg_dtype_size(b->vg_t[i]->dtype))) != NULL;
    e->n_mut = b->n_mut;
    e->mut_input = dup(b->mut_input, sizeof(int) * (size_t)b->n_mut);
    e->mut_writes = dup(b->mut_writes, sizeof(uint64_t) * (size_t)b->n_mut);
    e->out_input = dup(b->out_input, sizeof(int) * (size_t)(n_out ? n_out : 1));
    e->n_lmut = b->n_lmut;
    e->lmut_lifted = dup(b->lmut_lifted, sizeof(int) * (size_t)b->n_lmut);
    e->lmut_writes = dup(b->lmut_writes, sizeof(uint64_t) * (size_t)b->n_lmut);
    e->n_gset = b->n_gset;
    e->n_gset_out = b->n_gset_out;
    e->gset_owner = dup_retained(b->gset_owner, b->n_gset);
    e->gset_out = dup(b->gset_out, sizeof(int) * (size_t)b->n_gset);
    if (!vg_ok || (b->out_relayout && !e->out_relayout) || (b->out_stride && !e->out_stride) ||
        !e->key.in || (k->args_size && !e->key.args) || (n && !e->graph_input_of) ||
        (n && !e->call_input_of) || (b->lifted && !e->lifted) ||
        (b->lifted_key && !e->lifted_key) || (b->gr_owner && !e->gr_owner) ||
        (b->gr_had && !e->gr_had) || (b->lifted_grad_of && !e->lifted_grad_of) ||
        (b->pinned && !e->pinned) || (b->pinned_input && !e->pinned_input) ||
        (b->mut_input && !e->mut_input) || (b->mut_writes && !e->mut_writes) ||
        (b->out_input && !e->out_input) || (b->lmut_lifted && !e->lmut_lifted) ||
        (b->lmut_writes && !e->lmut_writes) || (b->gset_owner && !e->gset_owner) ||
        (b->gset_out && !e->gset_out)) {
        /* (the counts say how many of each to release; a failed copy is NULL) */
        if (!e->lifted)
            e->n_lifted = 0;
        if (!e->gr_owner)
            e->n_gr = 0;
        if (!e->pinned)
            e->n_pinned = 0;
        if (!e->gset_owner)
            e->n_gset = 0;
        jg_entry_release(e);
        return NULL;
    }
    return e;
}

/* The base graph with the sizes of s (k * s in every proportional slot);
 * one-element constants k * s are made as the program made them
 * (jg_full of the value converted to double). */
static jg_graph *substitute(const jg_dyn *d, int64_t s, bool consts) {
    jg_graph *g = jg_graph_clone(d->base->traced);
    if (!g)
        return NULL;
    for (int v = 0; v < g->n_vals; v++)
        for (int i = 0; i < g->vals[v].meta.ndim; i++) {
            int64_t k = d->shape_k[(size_t)v * JG_MAX_DIMS + (size_t)i];
            if (k)
                g->vals[v].meta.shape[i] = k * s;
        }
    for (int i = 0; i < g->n_nodes; i++) {
        jg_attrs *a = &g->nodes[i].attrs;
        for (int j = 0; j < N_ATTR; j++)
            if (d->attr_k[(size_t)i * N_ATTR + (size_t)j])
                a->i[j] = d->attr_k[(size_t)i * N_ATTR + (size_t)j] * s;
        if (d->s_k[i])
            a->s = (double)(d->s_k[i] * s);
    }
    int rc = 0;
    jg_scope_push();
    for (int i = 0; i < g->n_consts && rc == 0 && consts; i++) {
        if (!d->const_k[i] && !d->const_fill[i])
            continue;
        jg_tensor *old = g->consts[i];
        const jg_meta *m = &g->vals[g->const_vals[i]].meta; /* (substituted above) */
        double fill;
        jg_tensor *t =
            d->const_fill[i] && uniform(old, &fill) ? jg_full(old->dtype, m->ndim, m->shape, fill)
            : d->const_fill[i]
                ? NULL
                : jg_full(old->dtype, old->ndim, old->shape, (double)(d->const_k[i] * s));
        if (!t)
            rc = -1;
        else {
            g->consts[i] = jg_retain(t);
            jg_release(old);
        }
    }
    jg_scope_pop();
    if (rc < 0) {
        jg_graph_free(g);
        return NULL;
    }
    return g;
}

jg_entry *jg_dyn_instance(jg_dyn *d, int64_t s, const jg_call_key *k, jg_dyn_build_fn build,
                          void *ctx, char *why, size_t why_size) {
    d->clock++;
    for (int i = 0; i < d->n_inst; i++)
        if (d->inst_s[i] == s) {
            d->inst_used[i] = d->clock;
            return d->inst[i];
        }
    jg_graph *g = substitute(d, s, true);
    if (!g || jg_graph_verify(g) < 0) {
        snprintf(why, why_size, "the graph for size %" PRId64 " is not valid: %s", s,
                 jg_last_error());
        jg_clear_error();
        jg_graph_free(g);
        return NULL;
    }
    jg_entry *e = copy_trace_state(d->base, k);
    for (int i = 0; e && i < e->n_lifted; i++) {
        if (!d->lifted_k[i])
            continue;
        jg_tensor *old = e->lifted[i];
        jg_scope_push();
        jg_tensor *t = jg_full(old->dtype, old->ndim, old->shape, (double)(d->lifted_k[i] * s));
        if (t) {
            e->lifted[i] = jg_retain(t);
            jg_release(old);
        }
        jg_scope_pop();
        if (!t) {
            jg_entry_release(e);
            e = NULL;
        }
    }
    if (!e) {
        jg_graph_free(g);
        snprintf(why, why_size, "out of memory");
        jg_clear_error();
        return NULL;
    }
    if (build(ctx, e, g) < 0) { /* (build took g) */
        snprintf(why, why_size, "the graph for size %" PRId64 " failed to build: %s", s,
                 jg_last_error());
        jg_clear_error();
        jg_entry_release(e);
        return NULL;
    }
    int slot = d->n_inst;
    if (slot == DYN_INSTANCES) { /* the least recently used goes (live nodes keep theirs) */
        slot = 0;
        for (int i = 1; i < d->n_inst; i++)
            if (d->inst_used[i] < d->inst_used[slot])
                slot = i;
        jg_entry_release(d->inst[slot]);
    } else {
        d->n_inst++;
    }
    d->inst[slot] = e;
    d->inst_s[slot] = s;
    d->inst_used[slot] = d->clock;
    return e;
}

static int appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = jg_vappendf(buf, len, cap, fmt, ap);
    va_end(ap);
    return rc;
}

/* Printing: the base graph at a sentinel size (never built or run; its
 * one-element constants keep the base values), every multiple of the
 * sentinel then printed as k*s0. */
#define SENTINEL ((int64_t)1 << 40)

static void symbolize(const char *src, char **buf, size_t *len, size_t *cap, int *err) {
    for (const char *p = src; *p && !*err;) {
        bool starts = isdigit((unsigned char)*p) &&
                      (p == src || !(isalnum((unsigned char)p[-1]) || p[-1] == '%' ||
                                     p[-1] == '.' || p[-1] == '_'));
        if (starts) {
            char *end;
            long long v = strtoll(p, &end, 10);
            if (*end != '.' && *end != 'e' && v && v % SENTINEL == 0) {
                long long k = v / SENTINEL;
                *err |= k == 1 ? appendf(buf, len, cap, "s0") < 0
                               : appendf(buf, len, cap, "%lld*s0", k) < 0;
                p = end;
                continue;
            }
            *err |= appendf(buf, len, cap, "%.*s", (int)(end - p), p) < 0;
            p = end;
            continue;
        }
        *err |= appendf(buf, len, cap, "%c", *p) < 0;
        p++;
    }
}

char *jg_dyn_graph(const jg_dyn *d) {
    jg_graph *g = substitute(d, SENTINEL, false);
    char *text = NULL, *buf = NULL;
    size_t len = 0, cap = 0, tl = 0, tc = 0;
    int err = !g;
    if (g) {
        err = jg_graph_print_to(g, &text, &tl, &tc) < 0;
        jg_graph_free(g);
    }
    if (!err)
        symbolize(text, &buf, &len, &cap, &err);
    free(text);
    if (err || !buf) {
        free(buf);
        jg_clear_error();
        return jg_errorf_null("out of memory printing a graph");
    }
    return buf;
}

void jg_dyn_free(jg_dyn *d) {
    if (!d)
        return;
    for (int i = 0; i < d->n_inst; i++)
        jg_entry_release(d->inst[i]);
    jg_entry_release(d->base);
    free(d->dim_in);
    free(d->dim_d);
    free(d->shape_k);
    free(d->attr_k);
    free(d->s_k);
    free(d->const_k);
    free(d->const_fill);
    free(d->lifted_k);
    free(d);
}
