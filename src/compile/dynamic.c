/* Dynamic sizes: templates made from traces, instances per size (see
 * dynamic.h and docs/compiler.md, "Dynamic shapes"). */
#include "compile/dynamic.h"

#include "autodiff/autodiff.h"
#include "core/strbuf.h"
#include "trace/custom.h"
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
/* Degree of a monomial at most: B * T * T (a mean's count over attention
 * scores) is 3. */
enum { MAX_DEG = 3 };

/* An integer of the graph as k * s0^e0 * s1^e1 * ...; all e 0: fixed (the
 * base trace's value). */
typedef struct {
    int64_t k;
    uint8_t e[JG_DYN_MAX_SYMS];
} mono;

/* The monomials of one graph's integers (the traced program, or a custom
 * call's forward or backward subgraph), per slot of the base trace's. */
typedef struct {
    mono *shape_m;    /* n_vals * JG_MAX_DIMS */
    mono *attr_m;     /* n_nodes * (JG_MAX_DIMS + 4) */
    mono *s_m;        /* n_nodes */
    mono *const_m;    /* n_consts (one-element constants) */
    bool *const_fill; /* n_consts: a constant of one value whose shape varies */
    int *const_iota;  /* n_consts: d + 1 when each element is its index along dim d
                         (arange(T), expanded: an embedding's positions), else 0 */
} gfit;

/* A traced custom call of the program: its forward subgraph's fit, and its
 * backward's, traced from the callback of every trace with that trace's
 * ctx (the sizes a ctx keeps, ctx.n = x.numel(), are fitted like any
 * other); instances replay the base's backward at their sizes instead of
 * running the callback with the base's ctx. */
typedef struct {
    int node; /* in the traced graph */
    gfit fwd, bwd;
    jg_graph *bwd_g; /* the base trace's backward */
} cfit;

struct jg_dyn {
    /* the traces it was made from (retained), tr[0] the base: the one whose
     * other guards and trace state the instances copy */
    jg_entry *tr[JG_DYN_MAX_SYMS + 1];
    int64_t sv[JG_DYN_MAX_SYMS + 1][JG_DYN_MAX_SYMS]; /* each trace's symbol sizes */
    int n_tr, n_sym;
    int lo[JG_DYN_MAX_SYMS], hi[JG_DYN_MAX_SYMS]; /* two traces differing in symbol j only */
    bool probed; /* tr[1] was traced by dynamic=True's probe, not called */
    int n_dims;
    int *dim_in, *dim_d, *dim_sym; /* the (call input, dim) pairs and their symbols */
    gfit main;                     /* the traced program */
    cfit *cf;                      /* its traced custom calls */
    int n_cf;
    mono *lifted_m; /* n_lifted: a one-element tensor made while traced (a VJP's count) */
    jg_entry *inst[DYN_INSTANCES];
    int64_t inst_s[DYN_INSTANCES][JG_DYN_MAX_SYMS];
    uint64_t inst_used[DYN_INSTANCES];
    int n_inst;
    uint64_t clock;
};

enum { N_ATTR = JG_MAX_DIMS + 4 };

#define WHY(...) (snprintf(why, why_size, __VA_ARGS__), -1)

static bool is_fixed(const mono *m) {
    for (int j = 0; j < JG_DYN_MAX_SYMS; j++)
        if (m->e[j])
            return false;
    return true;
}

static int degree(const mono *m) {
    int n = 0;
    for (int j = 0; j < JG_DYN_MAX_SYMS; j++)
        n += m->e[j];
    return n;
}

/* k * prod s_j^e_j, or false when it does not fit in 62 bits. */
static bool mono_eval(const mono *m, const int64_t *s, int n_sym, int64_t *out) {
    __extension__ __int128 v = m->k;
    for (int j = 0; j < n_sym; j++)
        for (int e = 0; e < m->e[j]; e++) {
            v *= s[j];
            if (v > ((__int128)1 << 62) || v < -((__int128)1 << 62))
                return false;
        }
    *out = (int64_t)v;
    return true;
}

/* The monomial through v[t] (the slot's value in trace t): each exponent
 * from the pair of traces differing in that symbol only, k from the base,
 * then checked against every trace. */
static bool fit_mono(const jg_dyn *d, const int64_t *v, mono *m) {
    memset(m, 0, sizeof *m);
    bool same = true;
    for (int t = 1; t < d->n_tr; t++)
        same &= v[t] == v[0];
    if (same) {
        m->k = v[0];
        return true;
    }
    for (int j = 0; j < d->n_sym; j++) {
        __extension__ __int128 lo = v[d->lo[j]], hi = v[d->hi[j]];
        int64_t nlo = d->sv[d->lo[j]][j], nhi = d->sv[d->hi[j]][j];
        int e = 0;
        /* lo * nhi^e == hi * nlo^e */
        __extension__ __int128 a = lo, b = hi;
        while (a != b && e < MAX_DEG) {
            a *= nhi, b *= nlo, e++;
        }
        if (a != b)
            return false;
        m->e[j] = (uint8_t)e;
    }
    if (degree(m) > MAX_DEG)
        return false;
    __extension__ __int128 p = 1;
    for (int j = 0; j < d->n_sym; j++)
        for (int e = 0; e < m->e[j]; e++)
            p *= d->sv[0][j];
    if (v[0] % p)
        return false;
    m->k = (int64_t)(v[0] / p);
    for (int t = 0; t < d->n_tr; t++) {
        int64_t x;
        if (!mono_eval(m, d->sv[t], d->n_sym, &x) || x != v[t])
            return false;
    }
    return !is_fixed(m);
}

/* The same for doubles: bitwise the same in every trace (fixed), or
 * integers fitted as above. */
static bool fit_mono_f64(const jg_dyn *d, const double *v, mono *m) {
    memset(m, 0, sizeof *m);
    bool same = true;
    for (int t = 1; t < d->n_tr; t++)
        same &= !memcmp(&v[t], &v[0], sizeof v[0]);
    if (same)
        return true;
    int64_t iv[JG_DYN_MAX_SYMS + 1];
    for (int t = 0; t < d->n_tr; t++) {
        if (!isfinite(v[t]) || fabs(v[t]) > 9e15 || v[t] != nearbyint(v[t]))
            return false;
        iv[t] = (int64_t)v[t];
    }
    return fit_mono(d, iv, m) && m->k != 0;
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

/* Whether a comparison of monomials A = ka * Ma and B = kb * Mb has one
 * result for every size >= 2 of every symbol.  Equal Ma and Mb: A - B =
 * (ka - kb) * M keeps its sign.  Mb dividing Ma (B fixed, or B = T and A =
 * B * T): A - B = Mb * (ka * R - kb) with R = Ma / Mb >= 2^deg(R), linear
 * in R, so its sign at the smallest R and for large R (ka's) must agree;
 * likewise the other way round.  Neither dividing the other (B against T):
 * the result depends on the sizes. */
static bool one_result(int op, const mono *a, const mono *b) {
    bool a_div = true, b_div = true; /* Ma | Mb, Mb | Ma */
    int deg = 0;
    for (int j = 0; j < JG_DYN_MAX_SYMS; j++) {
        a_div &= a->e[j] <= b->e[j];
        b_div &= b->e[j] <= a->e[j];
        deg += a->e[j] > b->e[j] ? a->e[j] - b->e[j] : b->e[j] - a->e[j];
    }
    if (a_div && b_div)
        return true;
    int64_t slope, at_min; /* (A - B) / M_small as slope * R + ..., and at R = 2^deg */
    if (b_div) {
        slope = a->k;
        at_min = a->k * ((int64_t)1 << deg) - b->k;
    } else if (a_div) {
        slope = -b->k;
        at_min = a->k - b->k * ((int64_t)1 << deg);
    } else {
        return false;
    }
    return op <= JG_SIZES_NE ? at_min != 0 && (at_min > 0) == (slope > 0)
                             : holds(op, at_min) == holds(op, slope);
}

/* Every comparison of sizes in rec[t] (one record per trace) has one
 * result for every size >= 2 of every symbol: the traces made the same
 * comparisons, and each side fits a monomial. */
static int check_records(const jg_dyn *d, const jg_sizes_record *const *rec, char *why,
                         size_t why_size) {
    const jg_sizes_record *rb = rec[0];
    for (int t = 0; t < d->n_tr; t++) {
        const jg_sizes_record *r = rec[t];
        if (r->n < 0)
            return WHY("out of memory");
        if (r->n != rb->n)
            return WHY("the program compared sizes a different number of times");
    }
    for (int i = 0; i < rb->n; i++) {
        const struct jg_size_use *y = &rb->use[i], *x = &rec[1]->use[i];
        int64_t va[JG_DYN_MAX_SYMS + 1], vb[JG_DYN_MAX_SYMS + 1];
        for (int t = 0; t < d->n_tr; t++) {
            const struct jg_size_use *u = &rec[t]->use[i];
            if (u->op != y->op)
                return WHY("the program compared sizes differently");
            va[t] = u->a, vb[t] = u->b;
        }
        if (y->op == JG_SIZES_OPAQUE) {
            for (int t = 1; t < d->n_tr; t++)
                if (va[t] != va[0])
                    return WHY("the program used a size that changed (%" PRId64 " -> %" PRId64
                               ") in a way the library cannot follow (len(), float(), /)",
                               va[t], va[0]);
            continue;
        }
        mono ma, mb;
        if (!fit_mono(d, va, &ma) || !fit_mono(d, vb, &mb))
            return WHY("the program compared sizes that are not proportional to the dims (%" PRId64
                       " %s %" PRId64 ", then %" PRId64 " %s %" PRId64 ")",
                       x->a, cmp_name[x->op], x->b, y->a, cmp_name[y->op], y->b);
        if (!one_result(y->op, &ma, &mb))
            return WHY("the program compared sizes with a result that depends on the size (%" PRId64
                       " %s %" PRId64 ", then %" PRId64 " %s %" PRId64 ")",
                       x->a, cmp_name[x->op], x->b, y->a, cmp_name[y->op], y->b);
    }
    return 0;
}

/* The same for the comparisons the program made while traced. */
static int check_sizes(const jg_dyn *d, char *why, size_t why_size) {
    const jg_sizes_record *rec[JG_DYN_MAX_SYMS + 1];
    for (int t = 0; t < d->n_tr; t++)
        rec[t] = &d->tr[t]->sizes;
    return check_records(d, rec, why, why_size);
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

/* Each element's index along dim d of a tensor of shape m, in row-major
 * order, into v (as doubles). */
static void iota_values(const jg_meta *m, int d, double *v) {
    int64_t inner = 1, n = jg_shape_numel(m->ndim, m->shape);
    for (int k = d + 1; k < m->ndim; k++)
        inner *= m->shape[k];
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)((i / inner) % m->shape[d]);
}

/* d + 1 when every element of t is its index along dim d (arange(n), or
 * it expanded), else 0. */
static int iota(jg_tensor *t) {
    int64_t n = jg_numel(t);
    if (t->dtype == JG_BOOL || n < 2)
        return 0;
    jg_scope_push();
    jg_tensor *f = jg_to_dtype(t, JG_F64);
    double *v = malloc(sizeof(double) * (size_t)n), *w = malloc(sizeof(double) * (size_t)n);
    bool ok = f && v && w && jg_copy_to(f, v, sizeof(double) * (size_t)n) == 0;
    jg_meta m = {.dtype = t->dtype, .ndim = t->ndim};
    memcpy(m.shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    int found = 0;
    for (int d = 0; ok && d < t->ndim && !found; d++) {
        iota_values(&m, d, w);
        if (t->shape[d] > 1 && !memcmp(v, w, sizeof(double) * (size_t)n))
            found = d + 1;
    }
    free(v);
    free(w);
    jg_scope_pop();
    jg_clear_error();
    return found;
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
        !same_u64(a->mut_writes, b->mut_writes, a->n_mut) ||
        !same_ints(a->mut_check, b->mut_check, a->n_mut) || !a->out_input != !b->out_input ||
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

/* Captured tensors that are other tensors in the traces: ones the library
 * made while tracing (backward's seed, mean's count in a traced backward).
 * Same values: the base keeps reading its own, and so do its instances;
 * one element fitting a monomial: each instance gets its own. */
static int fit_lifted(jg_dyn *d, char *why, size_t why_size) {
    const jg_entry *b = d->tr[0];
    if (!(d->lifted_m = calloc((size_t)(b->n_lifted ? b->n_lifted : 1), sizeof(mono))))
        return WHY("out of memory");
    for (int i = 0; i < b->n_lifted; i++) {
        jg_tensor *y = b->lifted[i];
        bool same = true;
        for (int t = 1; t < d->n_tr && same; t++)
            same = d->tr[t]->lifted[i] == y || same_values(d->tr[t]->lifted[i], y);
        if (same)
            continue;
        double v[JG_DYN_MAX_SYMS + 1];
        bool ok = jg_numel(y) == 1 && y->dtype != JG_BOOL;
        for (int t = 0; t < d->n_tr && ok; t++) {
            jg_tensor *x = d->tr[t]->lifted[i];
            ok = jg_numel(x) == 1 && x->dtype == y->dtype;
            if (ok)
                v[t] = jg_item(x);
        }
        if (!ok || !fit_mono_f64(d, v, &d->lifted_m[i]) || is_fixed(&d->lifted_m[i]))
            return WHY("the traces captured different tensors (lifted%d)", i);
    }
    return 0;
}

static int different_graphs(char *why, size_t why_size) {
    return WHY("the traces made different graphs (the program depends on the size)");
}

static bool same_structure(const jg_graph *ga, const jg_graph *gb);

/* Whether custom call nodes x and y (of two traces) are the same call:
 * function, arguments, slots, outputs, what it saved and kept, and its
 * forward subgraph's structure. */
static bool same_call(const jg_gnode *x, const jg_gnode *y) {
    const jg_gcustom *a = x->custom, *b = y->custom;
    if (a->fn != b->fn || a->args_size != b->args_size ||
        (a->args_size && memcmp(a->args, b->args, a->args_size)) || a->n_slots != b->n_slots ||
        !same_ints(a->slot_map, b->slot_map, a->n_slots) || a->n_call_out != b->n_call_out ||
        a->opaque != b->opaque || a->opaque_backward != b->opaque_backward ||
        a->no_grads != b->no_grads || !a->fwd != !b->fwd || !a->bwd != !b->bwd ||
        !a->user != !b->user)
        return false;
    if (a->fwd && !same_structure(a->fwd, b->fwd))
        return false;
    if (!a->user)
        return true;
    if (a->opaque_backward) /* per slot asked for: whether it answers NULL */
        return !memcmp(a->user, b->user, sizeof(bool) * (size_t)(x->n_out / 2));
    const jg_custom_info *p = a->user, *q = b->user;
    return p->n_call_out == q->n_call_out && p->n_saved == q->n_saved &&
           p->materialize == q->materialize && p->n_kept == q->n_kept &&
           p->kept_out == q->kept_out && p->n_args == q->n_args &&
           !memcmp(p->diff, q->diff, sizeof(bool) * (size_t)p->n_call_out) &&
           same_ints(p->saved_out, q->saved_out, p->n_saved) &&
           same_ints(p->kept_fval, q->kept_fval, p->n_kept) && !p->none_slot == !q->none_slot &&
           (!p->none_slot ||
            !memcmp(p->none_slot, q->none_slot, sizeof(bool) * (size_t)a->n_slots));
}

/* Whether traced graph ga has gb's structure (everything but the sizes). */
static bool same_structure(const jg_graph *ga, const jg_graph *gb) {
    if (ga->n_vals != gb->n_vals || ga->n_nodes != gb->n_nodes || ga->n_inputs != gb->n_inputs ||
        ga->n_consts != gb->n_consts || ga->n_outputs != gb->n_outputs ||
        !same_ints(ga->inputs, gb->inputs, ga->n_inputs) ||
        !same_ints(ga->const_vals, gb->const_vals, ga->n_consts) ||
        !same_ints(ga->outputs, gb->outputs, ga->n_outputs))
        return false;
    for (int v = 0; v < gb->n_vals; v++) {
        const jg_value *x = &ga->vals[v], *y = &gb->vals[v];
        if (x->kind != y->kind || x->node != y->node || x->index != y->index ||
            x->meta.dtype != y->meta.dtype || x->meta.ndim != y->meta.ndim ||
            x->requires_grad != y->requires_grad || x->uses != y->uses)
            return false;
    }
    for (int i = 0; i < gb->n_nodes; i++) {
        const jg_gnode *x = &ga->nodes[i], *y = &gb->nodes[i];
        if (x->kind != y->kind || x->n_in != y->n_in || x->n_out != y->n_out ||
            !same_ints(x->in, y->in, x->n_in) || !same_ints(x->out, y->out, x->n_out))
            return false;
        if (x->kind != JG_GN_OP) {
            if (!same_call(x, y))
                return false;
            continue;
        }
        const jg_attrs *p = &x->attrs, *q = &y->attrs;
        if (x->op != y->op || p->n != q->n || p->whole != q->whole || p->keepdim != q->keepdim ||
            p->dtype != q->dtype)
            return false;
    }
    return true;
}

static void gfit_free(gfit *f) {
    free(f->shape_m);
    free(f->attr_m);
    free(f->s_m);
    free(f->const_m);
    free(f->const_fill);
    free(f->const_iota);
}

/* Fits every integer of graphs gs (one per trace, of one structure): each
 * slot a monomial in the symbols. */
static int fit_graph(const jg_dyn *d, const jg_graph *const *gs, gfit *f, char *why,
                     size_t why_size) {
    const jg_graph *gb = gs[0];
    f->shape_m = calloc((size_t)(gb->n_vals ? gb->n_vals : 1) * JG_MAX_DIMS, sizeof(mono));
    f->attr_m = calloc((size_t)(gb->n_nodes ? gb->n_nodes : 1) * N_ATTR, sizeof(mono));
    f->s_m = calloc((size_t)(gb->n_nodes ? gb->n_nodes : 1), sizeof(mono));
    f->const_m = calloc((size_t)(gb->n_consts ? gb->n_consts : 1), sizeof(mono));
    f->const_fill = calloc((size_t)(gb->n_consts ? gb->n_consts : 1), sizeof(bool));
    f->const_iota = calloc((size_t)(gb->n_consts ? gb->n_consts : 1), sizeof(int));
    if (!f->shape_m || !f->attr_m || !f->s_m || !f->const_m || !f->const_fill || !f->const_iota)
        return WHY("out of memory");
    int64_t v[JG_DYN_MAX_SYMS + 1];
    double fv[JG_DYN_MAX_SYMS + 1];
    for (int u = 0; u < gb->n_vals; u++)
        for (int i = 0; i < gb->vals[u].meta.ndim; i++) {
            for (int t = 0; t < d->n_tr; t++)
                v[t] = gs[t]->vals[u].meta.shape[i];
            mono *m = &f->shape_m[(size_t)u * JG_MAX_DIMS + (size_t)i];
            if (!fit_mono(d, v, m))
                return WHY("a size in the graph is not proportional to the dims (%" PRId64
                           " -> %" PRId64 ")",
                           v[1], v[0]);
        }
    for (int i = 0; i < gb->n_nodes; i++) {
        if (gb->nodes[i].kind != JG_GN_OP)
            continue; /* (no attributes: its subgraphs are fitted on their own) */
        for (int j = 0; j < N_ATTR; j++) {
            for (int t = 0; t < d->n_tr; t++)
                v[t] = gs[t]->nodes[i].attrs.i[j];
            if (!fit_mono(d, v, &f->attr_m[(size_t)i * N_ATTR + (size_t)j]))
                return WHY("an argument of %s is not proportional to the dims (%" PRId64
                           " -> %" PRId64 ")",
                           jg_ops[gb->nodes[i].op].name, v[1], v[0]);
        }
        for (int t = 0; t < d->n_tr; t++)
            fv[t] = gs[t]->nodes[i].attrs.s;
        if (!fit_mono_f64(d, fv, &f->s_m[i]))
            return WHY("the scalar argument of %s is not proportional to the dims (%.17g -> "
                       "%.17g)",
                       jg_ops[gb->nodes[i].op].name, fv[1], fv[0]);
    }
    for (int i = 0; i < gb->n_consts; i++) {
        jg_tensor *y = gb->consts[i];
        bool same_ptr = true, same_shape = true;
        for (int t = 1; t < d->n_tr; t++) {
            jg_tensor *x = gs[t]->consts[i];
            same_ptr &= x == y;
            if (x->dtype != y->dtype || x->ndim != y->ndim)
                return WHY("the traces made different constants");
            same_shape &= !memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim);
        }
        if (same_ptr)
            continue;
        if (!same_shape) {
            /* (its shape is its value's, fitted above) a fill such as a
             * VJP's zeros: each instance makes its own */
            double vy;
            int dim = iota(y);
            for (int t = 1; t < d->n_tr && dim; t++)
                dim = iota(gs[t]->consts[i]) == dim ? dim : 0;
            if (dim) { /* arange(T): each instance makes its own */
                f->const_iota[i] = dim;
                continue;
            }
            if (!uniform(y, &vy))
                return WHY("a tensor the program made (c%d, %s) has a shape that depends on the "
                           "dims",
                           i, jg_dtype_name(y->dtype));
            for (int t = 1; t < d->n_tr; t++) {
                double vx;
                if (!uniform(gs[t]->consts[i], &vx) || memcmp(&vx, &vy, sizeof vx))
                    return WHY("a tensor the program made (c%d, %s) has a shape that depends on "
                               "the dims",
                               i, jg_dtype_name(y->dtype));
            }
            f->const_fill[i] = true;
            continue;
        }
        if (jg_numel(y) == 1 && y->dtype != JG_BOOL) {
            for (int t = 0; t < d->n_tr; t++)
                fv[t] = jg_item(gs[t]->consts[i]);
            if (!fit_mono_f64(d, fv, &f->const_m[i]))
                return WHY("a constant the program made is not proportional to the dims (%.17g "
                           "-> %.17g)",
                           fv[1], fv[0]);
            continue;
        }
        for (int t = 1; t < d->n_tr; t++)
            if (!same_values(gs[t]->consts[i], y))
                return WHY("a tensor the program made has values that depend on the dims");
    }
    return 0;
}

static const char *call_name(const jg_gcustom *c) {
    return c->fn && c->fn->name ? c->fn->name : "(unnamed)";
}

static bool plain(const jg_graph *g) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].kind != JG_GN_OP)
            return false;
    return true;
}

/* Whether every dim of value v of the base graph is fixed. */
static bool fixed_value(const jg_dyn *d, int v) {
    const jg_graph *g = d->tr[0]->traced;
    for (int i = 0; i < g->vals[v].meta.ndim; i++)
        if (!is_fixed(&d->main.shape_m[(size_t)v * JG_MAX_DIMS + (size_t)i]))
            return false;
    return true;
}

/* The custom calls of the program (its graph fitted): a traced call's
 * forward subgraph and its backward (traced here from each trace's ctx,
 * recording the comparisons of sizes it makes) are fitted like the
 * program; an opaque call, whose callbacks run at run time on real tensors
 * of the base's sizes as far as the graph knows, must not touch a dim that
 * changes. */
static int fit_customs(jg_dyn *d, char *why, size_t why_size) {
    const jg_graph *gb = d->tr[0]->traced;
    int n = 0;
    for (int i = 0; i < gb->n_nodes; i++)
        n += gb->nodes[i].kind == JG_GN_CUSTOM;
    if (n && !(d->cf = calloc((size_t)n, sizeof *d->cf)))
        return WHY("out of memory");
    for (int i = 0; i < gb->n_nodes; i++) {
        const jg_gnode *nd = &gb->nodes[i];
        if (nd->kind != JG_GN_CUSTOM)
            continue;
        const jg_gcustom *c = nd->custom;
        if (c->opaque || c->opaque_backward || !c->fwd) {
            bool fixed = true;
            for (int k = 0; k < nd->n_in && fixed; k++)
                fixed = fixed_value(d, nd->in[k]);
            for (int k = 0; k < nd->n_out && fixed; k++)
                fixed = fixed_value(d, nd->out[k]);
            if (!fixed)
                return WHY("the program calls the custom function %s, which cannot be traced (its "
                           "callbacks read tensor values): the dims it sees stay static",
                           call_name(c));
            continue;
        }
        const jg_custom_info *info = c->user;
        if (!info->materialize)
            return WHY("the custom function %s sets materialize_grads off (its backward depends on "
                       "which gradients arrive): its dims stay static",
                       call_name(c));
        if (!plain(c->fwd))
            return WHY("the custom function %s calls another custom function: its dims stay "
                       "static",
                       call_name(c));
        cfit *f = &d->cf[d->n_cf++];
        f->node = i;
        const jg_graph *gs[JG_DYN_MAX_SYMS + 1];
        for (int t = 0; t < d->n_tr; t++)
            gs[t] = d->tr[t]->traced->nodes[i].custom->fwd;
        if (fit_graph(d, gs, &f->fwd, why, why_size) < 0)
            return -1;
        /* its backward at every trace, with that trace's ctx */
        jg_graph *bg[JG_DYN_MAX_SYMS + 1] = {0};
        jg_sizes_record rec[JG_DYN_MAX_SYMS + 1] = {0};
        const jg_sizes_record *recp[JG_DYN_MAX_SYMS + 1];
        int rc = 0;
        for (int t = 0; t < d->n_tr && rc == 0; t++) {
            const jg_graph *g = d->tr[t]->traced;
            jg_sizes_record *prev = jg_sizes_record_begin(&rec[t]);
            bg[t] = jg_custom_backward_template(g, &g->nodes[i]);
            jg_sizes_record_end(prev);
            recp[t] = &rec[t];
            if (!bg[t])
                rc = WHY("the backward of the custom function %s could not be traced: %s",
                         call_name(c), jg_last_error());
            else if (!plain(bg[t]))
                rc = WHY("the backward of the custom function %s calls a custom function: its "
                         "dims stay static",
                         call_name(c));
            else if (t && !same_structure(bg[t], bg[0]))
                rc = WHY("the traces of the backward of the custom function %s made different "
                         "graphs (it depends on the size)",
                         call_name(c));
        }
        jg_clear_error();
        if (rc == 0)
            rc = check_records(d, recp, why, why_size);
        if (rc == 0)
            rc = fit_graph(d, (const jg_graph *const *)bg, &f->bwd, why, why_size);
        for (int t = 0; t < d->n_tr; t++) {
            free(rec[t].use);
            if (t || rc < 0)
                jg_graph_free(bg[t]);
        }
        if (rc < 0)
            return -1;
        f->bwd_g = bg[0];
    }
    return 0;
}

/* Fits every integer of the traced graphs: each slot a monomial in the
 * symbols. */
static int fit_graphs(jg_dyn *d, char *why, size_t why_size) {
    const jg_graph *gs[JG_DYN_MAX_SYMS + 1];
    for (int t = 0; t < d->n_tr; t++)
        gs[t] = d->tr[t]->traced;
    for (int t = 1; t < d->n_tr; t++)
        if (!same_structure(gs[t], gs[0]))
            return different_graphs(why, why_size);
    if (fit_graph(d, gs, &d->main, why, why_size) < 0)
        return -1;
    return fit_customs(d, why, why_size);
}

/* How call keys a and b differ: 0 in nothing but sizes of some dims, each
 * changed dim going from one size to another; then *n_groups distinct
 * (from, to) pairs, grp[i * JG_MAX_DIMS + d] the group of dim d of input i
 * (-1: unchanged) and from / to its sizes.  -1: in anything else (or more
 * than JG_DYN_MAX_SYMS groups). */
static int key_diff(const jg_call_key *ka, const jg_call_key *kb, int *grp, int *n_groups,
                    int64_t *from, int64_t *to) {
    *n_groups = 0;
    if (ka->grad_mode != kb->grad_mode || ka->n_inputs != kb->n_inputs ||
        ka->args_size != kb->args_size ||
        (ka->args_size && memcmp(ka->args, kb->args, ka->args_size)))
        return -1;
    for (int i = 0; i < ka->n_inputs; i++) {
        const jg_in_key *a = &ka->in[i], *b = &kb->in[i];
        if (a->meta.dtype != b->meta.dtype || a->meta.ndim != b->meta.ndim ||
            a->requires_grad != b->requires_grad || a->same_as != b->same_as ||
            a->storage_as != b->storage_as)
            return -1;
        bool changed = false;
        for (int d = 0; d < JG_MAX_DIMS; d++) {
            int *g = &grp[i * JG_MAX_DIMS + d];
            *g = -1;
            if (d >= a->meta.ndim || a->meta.shape[d] == b->meta.shape[d])
                continue;
            int j = 0;
            while (j < *n_groups && (from[j] != a->meta.shape[d] || to[j] != b->meta.shape[d]))
                j++;
            if (j == *n_groups) {
                if (j == JG_DYN_MAX_SYMS)
                    return -1;
                from[j] = a->meta.shape[d], to[j] = b->meta.shape[d];
                (*n_groups)++;
            }
            *g = j;
            changed = true;
        }
        if (!changed && memcmp(a->stride, b->stride, sizeof a->stride))
            return -1;
        if (changed && (!contiguous_key(a) || !contiguous_key(b)))
            return -1;
    }
    return 0;
}

static int64_t key_size(const jg_call_key *k, int in, int d) {
    return k->in[in].meta.shape[d];
}

/* Fits the template once d's traces, symbols and dims are set. */
static int dyn_fit(jg_dyn *d, char *why, size_t why_size) {
    for (int t = 0; t < d->n_tr; t++) {
        const jg_entry *e = d->tr[t];
        if (e->eager || !e->traced)
            return WHY("out of memory keeping the traced graph");
        for (int j = 0; j < d->n_sym; j++)
            for (int k = 0; k < d->n_dims; k++)
                if (d->dim_sym[k] == j) {
                    d->sv[t][j] = key_size(&e->key, d->dim_in[k], d->dim_d[k]);
                    if (d->sv[t][j] < 2)
                        return WHY("sizes 0 and 1 are specialized");
                    break;
                }
    }
    if (check_sizes(d, why, why_size) < 0)
        return -1;
    for (int t = 1; t < d->n_tr; t++) {
        if (!same_trace_state(d->tr[t], d->tr[0]))
            return WHY("the traces captured or wrote different tensors");
    }
    for (int t = 0; t < d->n_tr; t++) {
        const jg_entry *e = d->tr[t];
        for (int j = 0; j < prog_outputs(e); j++)
            if (e->out_relayout[j])
                return WHY("an output has a layout other than row-major");
        if (e->out_view_in)
            return WHY("an output is a view of an input");
    }
    return fit_lifted(d, why, why_size) < 0 || fit_graphs(d, why, why_size) < 0 ? -1 : 0;
}

static jg_dyn *dyn_alloc(int n_dims) {
    jg_dyn *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->dim_in = malloc(sizeof(int) * (size_t)(n_dims ? n_dims : 1));
    d->dim_d = malloc(sizeof(int) * (size_t)(n_dims ? n_dims : 1));
    d->dim_sym = malloc(sizeof(int) * (size_t)(n_dims ? n_dims : 1));
    if (!d->dim_in || !d->dim_d || !d->dim_sym) {
        jg_dyn_free(d);
        return NULL;
    }
    return d;
}

/* d with its traces retained, fitted; or NULL and why. */
static int dyn_finish(jg_dyn *d, jg_dyn **out, char *why, size_t why_size) {
    for (int t = 0; t < d->n_tr; t++)
        d->tr[t]->refcount++;
    if (dyn_fit(d, why, why_size) < 0) {
        jg_dyn_free(d);
        return -1;
    }
    *out = d;
    return 1;
}

int jg_dyn_make(jg_entry *older, jg_entry *newer, jg_dyn **out, char *why, size_t why_size) {
    *out = NULL;
    int grp[64 * JG_MAX_DIMS], n_groups;
    int64_t from[JG_DYN_MAX_SYMS], to[JG_DYN_MAX_SYMS];
    if (older->key.n_inputs > 64 || older->eager || newer->eager ||
        key_diff(&older->key, &newer->key, grp, &n_groups, from, to) < 0 || !n_groups)
        return 0;
    for (int j = 0; j < n_groups; j++)
        if (from[j] < 2 || to[j] < 2)
            return WHY("sizes 0 and 1 are specialized");
    if (n_groups > 1)
        return 2; /* (the caller traces a size between: jg_dyn_mid_key) */
    int n_dims = 0;
    for (int i = 0; i < older->key.n_inputs * JG_MAX_DIMS; i++)
        n_dims += grp[i] >= 0;
    jg_dyn *d = dyn_alloc(n_dims);
    if (!d)
        return WHY("out of memory");
    for (int i = 0; i < older->key.n_inputs * JG_MAX_DIMS; i++)
        if (grp[i] >= 0) {
            d->dim_in[d->n_dims] = i / JG_MAX_DIMS;
            d->dim_d[d->n_dims] = i % JG_MAX_DIMS;
            d->dim_sym[d->n_dims++] = 0;
        }
    d->tr[0] = newer, d->tr[1] = older;
    d->n_tr = 2, d->n_sym = 1;
    d->lo[0] = 1, d->hi[0] = 0;
    return dyn_finish(d, out, why, why_size);
}

int jg_dyn_mid_key(const jg_entry *older, const jg_entry *newer, jg_in_key *in) {
    int grp[64 * JG_MAX_DIMS], n_groups;
    int64_t from[JG_DYN_MAX_SYMS], to[JG_DYN_MAX_SYMS];
    const jg_call_key *ka = &older->key;
    if (ka->n_inputs > 64 || key_diff(ka, &newer->key, grp, &n_groups, from, to) < 0 ||
        n_groups != 2)
        return -1;
    memcpy(in, ka->in, sizeof *in * (size_t)ka->n_inputs);
    for (int i = 0; i < ka->n_inputs; i++) {
        bool changed = false;
        for (int k = 0; k < ka->in[i].meta.ndim; k++)
            if (grp[i * JG_MAX_DIMS + k] == 0) {
                in[i].meta.shape[k] = to[0];
                changed = true;
            }
        if (changed) {
            memset(in[i].stride, 0, sizeof in[i].stride);
            jg_contiguous_strides(in[i].meta.ndim, in[i].meta.shape, in[i].stride);
        }
    }
    return 0;
}

int jg_dyn_make3(jg_entry *older, jg_entry *mid, jg_entry *newer, jg_dyn **out, char *why,
                 size_t why_size) {
    *out = NULL;
    int g1[64 * JG_MAX_DIMS], g2[64 * JG_MAX_DIMS], n1, n2;
    int64_t from[JG_DYN_MAX_SYMS], to[JG_DYN_MAX_SYMS];
    int n = older->key.n_inputs;
    if (n > 64 || mid->eager || mid->retry ||
        key_diff(&older->key, &mid->key, g1, &n1, from, to) < 0 || n1 != 1 ||
        key_diff(&mid->key, &newer->key, g2, &n2, from, to) < 0 || n2 != 1)
        return WHY("the size between the two was traced differently");
    int n_dims = 0;
    for (int i = 0; i < n * JG_MAX_DIMS; i++) {
        if (g1[i] >= 0 && g2[i] >= 0)
            return WHY("the size between the two was traced differently");
        n_dims += g1[i] >= 0 || g2[i] >= 0;
    }
    jg_dyn *d = dyn_alloc(n_dims);
    if (!d)
        return WHY("out of memory");
    for (int i = 0; i < n * JG_MAX_DIMS; i++)
        if (g1[i] >= 0 || g2[i] >= 0) {
            d->dim_in[d->n_dims] = i / JG_MAX_DIMS;
            d->dim_d[d->n_dims] = i % JG_MAX_DIMS;
            d->dim_sym[d->n_dims++] = g1[i] >= 0 ? 0 : 1;
        }
    d->tr[0] = newer, d->tr[1] = older, d->tr[2] = mid;
    d->n_tr = 3, d->n_sym = 2;
    d->lo[0] = 1, d->hi[0] = 2; /* older -> mid: symbol 0 */
    d->lo[1] = 2, d->hi[1] = 0; /* mid -> newer: symbol 1 */
    return dyn_finish(d, out, why, why_size);
}

int jg_dyn_extend(const jg_dyn *d, jg_entry *e, jg_dyn **out, char *why, size_t why_size) {
    *out = NULL;
    int grp[64 * JG_MAX_DIMS], n_groups;
    int64_t from[JG_DYN_MAX_SYMS], to[JG_DYN_MAX_SYMS];
    int n = e->key.n_inputs;
    if (e->eager || n > 64 || d->n_sym == JG_DYN_MAX_SYMS)
        return 0;
    for (int t = 0; t < d->n_tr; t++) {
        if (key_diff(&d->tr[t]->key, &e->key, grp, &n_groups, from, to) < 0 || n_groups != 1)
            continue;
        bool fresh = true; /* the changed dims belong to no symbol yet */
        for (int k = 0; k < d->n_dims && fresh; k++)
            fresh = grp[d->dim_in[k] * JG_MAX_DIMS + d->dim_d[k]] < 0;
        if (!fresh)
            continue;
        if (from[0] < 2 || to[0] < 2)
            return WHY("sizes 0 and 1 are specialized");
        int n_dims = d->n_dims;
        for (int i = 0; i < n * JG_MAX_DIMS; i++)
            n_dims += grp[i] >= 0;
        jg_dyn *x = dyn_alloc(n_dims);
        if (!x)
            return WHY("out of memory");
        memcpy(x->dim_in, d->dim_in, sizeof(int) * (size_t)d->n_dims);
        memcpy(x->dim_d, d->dim_d, sizeof(int) * (size_t)d->n_dims);
        memcpy(x->dim_sym, d->dim_sym, sizeof(int) * (size_t)d->n_dims);
        x->n_dims = d->n_dims;
        for (int i = 0; i < n * JG_MAX_DIMS; i++)
            if (grp[i] >= 0) {
                x->dim_in[x->n_dims] = i / JG_MAX_DIMS;
                x->dim_d[x->n_dims] = i % JG_MAX_DIMS;
                x->dim_sym[x->n_dims++] = d->n_sym;
            }
        memcpy(x->tr, d->tr, sizeof(jg_entry *) * (size_t)d->n_tr);
        x->tr[d->n_tr] = e;
        x->n_tr = d->n_tr + 1;
        x->n_sym = d->n_sym + 1;
        memcpy(x->lo, d->lo, sizeof x->lo);
        memcpy(x->hi, d->hi, sizeof x->hi);
        x->lo[d->n_sym] = t, x->hi[d->n_sym] = d->n_tr;
        x->probed = d->probed;
        return dyn_finish(x, out, why, why_size);
    }
    return 0;
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
        if (d->n_sym > 1 && len < n)
            len += (size_t)snprintf(buf + len, n - len, " (s%d)", d->dim_sym[i]);
    }
    if (len >= n)
        return;
    if (d->n_sym == 1 && d->probed)
        snprintf(buf + len, n - len, " went dynamic (%" PRId64 ", traced again at %" PRId64 ")",
                 d->sv[0][0], d->sv[1][0]);
    else if (d->n_sym == 1)
        snprintf(buf + len, n - len, " went dynamic (%" PRId64 " -> %" PRId64 ")", d->sv[1][0],
                 d->sv[0][0]);
    else {
        len += (size_t)snprintf(buf + len, n - len, " went dynamic (");
        for (int j = 0; j < d->n_sym && len < n; j++)
            len += (size_t)snprintf(buf + len, n - len, "%ss%d: %" PRId64 " -> %" PRId64,
                                    j ? ", " : "", j, d->sv[d->lo[j]][j], d->sv[d->hi[j]][j]);
        if (len < n)
            snprintf(buf + len, n - len, ")");
    }
}

void jg_dyn_set_probed(jg_dyn *d) {
    d->probed = true;
}

jg_entry *jg_dyn_base(const jg_dyn *d) {
    return d->tr[0];
}

int jg_dyn_symbols(const jg_dyn *d) {
    return d->n_sym;
}

bool jg_dyn_rekey(const jg_dyn *d, const jg_call_key *k, jg_in_key *base_in, int64_t *s) {
    const jg_call_key *b = &d->tr[0]->key;
    if (k->n_inputs != b->n_inputs)
        return false;
    for (int j = 0; j < d->n_sym; j++)
        s[j] = -1;
    for (int i = 0; i < d->n_dims; i++) {
        const jg_in_key *in = &k->in[d->dim_in[i]];
        if (in->meta.ndim != b->in[d->dim_in[i]].meta.ndim)
            return false;
        int64_t x = in->meta.shape[d->dim_d[i]], *v = &s[d->dim_sym[i]];
        if ((*v >= 0 && x != *v) || x < 2)
            return false;
        *v = x;
    }
    memcpy(base_in, k->in, sizeof *base_in * (size_t)k->n_inputs);
    for (int i = 0; i < d->n_dims; i++) {
        jg_in_key *in = &base_in[d->dim_in[i]];
        if (!contiguous_key(&k->in[d->dim_in[i]]))
            return false;
        in->meta.shape[d->dim_d[i]] = d->sv[0][d->dim_sym[i]];
        memcpy(in->stride, b->in[d->dim_in[i]].stride, sizeof in->stride);
    }
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
    e->mut_check = dup(b->mut_check, sizeof(int) * (size_t)b->n_mut);
    e->out_freed = dup(b->out_freed, sizeof(bool) * (size_t)b->n_prog_out);
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
        (b->mut_check && !e->mut_check) || (b->out_freed && !e->out_freed) ||
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

/* ------------------------------------------------------- copying graphs */

static void *arena_dup(jg_arena *a, const void *p, size_t n) {
    if (!p)
        return NULL;
    void *q = jg_arena_alloc(a, n ? n : 1);
    if (q)
        memcpy(q, p, n);
    return q;
}

static jg_graph *clone_deep(const jg_graph *g, bool keep_state);

static void ctx_release(void *p) {
    jg_ctx_free(p);
}

/* Record r (a copy of o, in g) done: with keep_state it holds a reference
 * to o's ctx (a traced call's state, trace/custom.c), since the passes
 * that run on o's graph may drop the call and free their reference. */
static jg_gcustom *copied_call(jg_gcustom *r, const jg_gcustom *o, bool keep_state) {
    if (keep_state && o->state && o->free_state) {
        r->state = jg_ctx_retain(o->state);
        r->free_state = ctx_release;
    }
    return r;
}

/* A copy of custom call n's record in g's arena, its subgraphs g's own. */
static jg_gcustom *copy_call(jg_graph *g, const jg_gnode *n, bool keep_state) {
    const jg_gcustom *o = n->custom;
    jg_arena *a = &g->arena;
    jg_gcustom *r = jg_arena_alloc(a, sizeof *r);
    if (!r)
        return NULL;
    *r = *o;
    r->fwd = r->bwd = NULL;
    r->user = NULL;
    /* no state until the copy is complete (copied_call): g frees it then
     * (without keep_state the backward is r->bwd, set by the caller) */
    r->state = NULL;
    r->free_state = NULL;
    r->owner = g;
    if ((o->args_size && !(r->args = arena_dup(a, o->args, o->args_size))) ||
        !(r->slot_map = arena_dup(a, o->slot_map, sizeof(int) * (size_t)o->n_slots)))
        return NULL;
    const jg_graph *sub[2] = {o->fwd, o->bwd};
    jg_graph **dst[2] = {&r->fwd, &r->bwd};
    for (int k = 0; k < 2; k++) {
        if (!sub[k])
            continue;
        jg_graph *c = clone_deep(sub[k], keep_state);
        if (!c || jg_graph_adopt(g, c) < 0) {
            jg_graph_free(c);
            return NULL;
        }
        *dst[k] = c;
    }
    if (!o->user)
        return copied_call(r, o, keep_state);
    if (o->opaque_backward) { /* per slot asked for: whether it answers NULL */
        r->user = arena_dup(a, o->user, sizeof(bool) * (size_t)(n->n_out / 2));
        return r->user ? copied_call(r, o, keep_state) : NULL;
    }
    const jg_custom_info *p = o->user;
    jg_custom_info *q = arena_dup(a, p, sizeof *p);
    if (!q)
        return NULL;
    q->diff = arena_dup(a, p->diff, sizeof(bool) * (size_t)p->n_call_out);
    q->saved_out = arena_dup(a, p->saved_out, sizeof(int) * (size_t)p->n_saved);
    q->kept_fval = arena_dup(a, p->kept_fval, sizeof(int) * (size_t)p->n_kept);
    q->none_slot = arena_dup(a, p->none_slot, sizeof(bool) * (size_t)o->n_slots);
    if ((p->diff && !q->diff) || (p->saved_out && !q->saved_out) ||
        (p->kept_fval && !q->kept_fval) || (p->none_slot && !q->none_slot))
        return NULL;
    r->user = q;
    return copied_call(r, o, keep_state);
}

/* A copy of g (same value ids) whose custom call records and subgraphs are
 * its own (jg_graph_clone shares them), so that it may outlive g and the
 * pipeline's passes on g (dedup rewrites a record's slot map) do not reach
 * it.  keep_state: each record holds a reference to its call's ctx (to
 * trace the backward callback from the copy after g is gone); else it has
 * none. */
static jg_graph *clone_deep(const jg_graph *g, bool keep_state) {
    jg_graph *c = jg_graph_clone(g);
    for (int i = 0; c && i < c->n_nodes; i++)
        if (c->nodes[i].kind == JG_GN_CUSTOM &&
            !(c->nodes[i].custom = copy_call(c, &g->nodes[i], keep_state))) {
            jg_graph_free(c); /* (the records not copied yet are g's: not freed) */
            c = jg_errorf_null("out of memory copying a graph");
        }
    return c;
}

jg_graph *jg_dyn_keep_traced(const jg_graph *g) {
    return clone_deep(g, true);
}

/* Graph g (a copy of the base trace's graph of fit f) with the sizes of s
 * (each fitted slot's monomial at s); one-element constants are made as the
 * program made them (jg_full of the value converted to double).  0 or -1. */
static int subst_graph(const jg_dyn *d, const gfit *f, jg_graph *g, const int64_t *s, bool consts) {
    bool ok = true;
    for (int v = 0; v < g->n_vals; v++)
        for (int i = 0; i < g->vals[v].meta.ndim; i++) {
            const mono *m = &f->shape_m[(size_t)v * JG_MAX_DIMS + (size_t)i];
            if (!is_fixed(m))
                ok &= mono_eval(m, s, d->n_sym, &g->vals[v].meta.shape[i]);
        }
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].kind != JG_GN_OP)
            continue;
        jg_attrs *a = &g->nodes[i].attrs;
        for (int j = 0; j < N_ATTR; j++) {
            const mono *m = &f->attr_m[(size_t)i * N_ATTR + (size_t)j];
            if (!is_fixed(m))
                ok &= mono_eval(m, s, d->n_sym, &a->i[j]);
        }
        int64_t x = 0;
        if (!is_fixed(&f->s_m[i])) {
            ok &= mono_eval(&f->s_m[i], s, d->n_sym, &x);
            a->s = (double)x;
        }
    }
    int rc = ok ? 0 : jg_errorf("a size of the graph does not fit in 62 bits");
    jg_scope_push();
    for (int i = 0; i < g->n_consts && rc == 0 && consts; i++) {
        if (is_fixed(&f->const_m[i]) && !f->const_fill[i] && !f->const_iota[i])
            continue;
        jg_tensor *old = g->consts[i];
        const jg_meta *m = &g->vals[g->const_vals[i]].meta; /* (substituted above) */
        double fill;
        int64_t x = 0;
        jg_tensor *t = NULL;
        if (f->const_iota[i]) {
            int64_t n = jg_shape_numel(m->ndim, m->shape);
            double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
            if (v)
                iota_values(m, f->const_iota[i] - 1, v);
            jg_tensor *ft = v ? jg_tensor_new(JG_F64, m->ndim, m->shape, v) : NULL;
            free(v);
            t = ft ? jg_to_dtype(ft, old->dtype) : NULL;
        } else if (f->const_fill[i])
            t = uniform(old, &fill) ? jg_full(old->dtype, m->ndim, m->shape, fill) : NULL;
        else if (mono_eval(&f->const_m[i], s, d->n_sym, &x))
            t = jg_full(old->dtype, old->ndim, old->shape, (double)x);
        if (!t)
            rc = -1;
        else {
            g->consts[i] = jg_retain(t);
            jg_release(old);
        }
    }
    jg_scope_pop();
    return rc;
}

/* The base graph at sizes s, its custom calls' records its own: each
 * traced call's forward subgraph at s, and its backward (the base's, at s)
 * in place of its callback. */
static jg_graph *substitute(const jg_dyn *d, const int64_t *s, bool consts) {
    jg_graph *g = clone_deep(d->tr[0]->traced, false);
    int rc = g ? subst_graph(d, &d->main, g, s, consts) : -1;
    for (int i = 0; i < d->n_cf && rc == 0; i++) {
        const cfit *f = &d->cf[i];
        jg_gcustom *c = g->nodes[f->node].custom;
        jg_graph *b = clone_deep(f->bwd_g, false);
        if (!b || jg_graph_adopt(g, b) < 0) {
            jg_graph_free(b);
            rc = -1;
            break;
        }
        c->bwd = b;
        rc = subst_graph(d, &f->fwd, c->fwd, s, consts) < 0 ||
                     subst_graph(d, &f->bwd, b, s, consts) < 0
                 ? -1
                 : 0;
    }
    if (rc < 0) {
        jg_graph_free(g);
        return NULL;
    }
    return g;
}

static void size_text(const jg_dyn *d, const int64_t *s, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int j = 0; j < d->n_sym && len < n; j++)
        len += (size_t)snprintf(buf + len, n - len, "%s%" PRId64, j ? ", " : "", s[j]);
}

jg_entry *jg_dyn_instance(jg_dyn *d, const int64_t *s, const jg_call_key *k, jg_dyn_build_fn build,
                          void *ctx, char *why, size_t why_size) {
    d->clock++;
    size_t sb = sizeof(int64_t) * (size_t)d->n_sym;
    for (int i = 0; i < d->n_inst; i++)
        if (!memcmp(d->inst_s[i], s, sb)) {
            d->inst_used[i] = d->clock;
            return d->inst[i];
        }
    char st[128];
    size_text(d, s, st, sizeof st);
    jg_graph *g = substitute(d, s, true);
    if (!g || jg_graph_verify(g) < 0) {
        snprintf(why, why_size, "the graph for size %s is not valid: %s", st, jg_last_error());
        jg_clear_error();
        jg_graph_free(g);
        return NULL;
    }
    jg_entry *e = copy_trace_state(d->tr[0], k);
    for (int i = 0; e && i < e->n_lifted; i++) {
        if (is_fixed(&d->lifted_m[i]))
            continue;
        jg_tensor *old = e->lifted[i];
        int64_t x;
        jg_scope_push();
        jg_tensor *t = mono_eval(&d->lifted_m[i], s, d->n_sym, &x)
                           ? jg_full(old->dtype, old->ndim, old->shape, (double)x)
                           : NULL;
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
        snprintf(why, why_size, "the graph for size %s failed to build: %s", st, jg_last_error());
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
    memcpy(d->inst_s[slot], s, sb);
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

/* Printing: the base graph at sentinel sizes, a prime per symbol (never
 * built or run; its one-element constants keep the base values), every
 * number they divide then printed as k*s0*s1. */
static const int64_t SENTINEL[JG_DYN_MAX_SYMS] = {100003, 100019, 100043};

static void symbolize(const jg_dyn *d, const char *src, char **buf, size_t *len, size_t *cap,
                      int *err) {
    for (const char *p = src; *p && !*err;) {
        bool starts = isdigit((unsigned char)*p) &&
                      (p == src || !(isalnum((unsigned char)p[-1]) || p[-1] == '%' ||
                                     p[-1] == '.' || p[-1] == '_'));
        if (starts) {
            char *end;
            long long v = strtoll(p, &end, 10);
            int e[JG_DYN_MAX_SYMS] = {0}, deg = 0;
            for (int j = 0; j < d->n_sym && v && *end != '.' && *end != 'e'; j++)
                while (v % SENTINEL[j] == 0) {
                    v /= SENTINEL[j];
                    e[j]++, deg++;
                }
            if (deg) {
                if (v != 1)
                    *err |= appendf(buf, len, cap, "%lld*", v) < 0;
                bool first = true;
                for (int j = 0; j < d->n_sym; j++)
                    for (int k = 0; k < e[j]; k++, first = false)
                        *err |= appendf(buf, len, cap, "%ss%d", first ? "" : "*", j) < 0;
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
        symbolize(d, text, &buf, &len, &cap, &err);
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
    for (int t = 0; t < d->n_tr; t++)
        jg_entry_release(d->tr[t]);
    free(d->dim_in);
    free(d->dim_d);
    free(d->dim_sym);
    gfit_free(&d->main);
    for (int i = 0; i < d->n_cf; i++) {
        gfit_free(&d->cf[i].fwd);
        gfit_free(&d->cf[i].bwd);
        jg_graph_free(d->cf[i].bwd_g);
    }
    free(d->cf);
    free(d->lifted_m);
    free(d);
}
