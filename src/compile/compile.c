/* jg_compile: guards and the cache, the trace -> passes -> autodiff ->
 * backend pipeline, graph breaks and JITGRAD_LOG. */
#include "autodiff/autodiff.h"
#include "autograd/node.h"
#include "backend/cgen.h"
#include "compile/compile.h"
#include "compile/dynamic.h"
#include "ops/viewtrack.h"
#include "passes/passes.h"
#include "trace/custom.h"
#include "trace/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LOG_RECOMPILES = 1, LOG_GRAPHS = 2, LOG_BREAKS = 4 };

struct jg_compiled {
    jg_program_fn fn;
    void *user;
    bool fullgraph;
    bool verify;
    const jg_backend *backend;
    unsigned log;
    jg_entry **entries;
    int n_entries, cap_entries;
    int fallbacks;
    int cache_limit;        /* entries traced at most (PyTorch's cache_size_limit); <= 0: none */
    bool limit_warned;      /* (the warning is printed once) */
    int dynamic;            /* JG_DYNAMIC_* (jg_compiled_set_dynamic) */
    jg_input_name_fn namer; /* (jg_compiled_set_input_namer) */
    void *namer_user;
    jg_dyn **dyn; /* templates serving dynamic sizes (compile/dynamic.h) */
    int n_dyn;
    jg_segments *segs;     /* entries run in pieces (compile/segments.c) */
    jg_break_site_fn site; /* (jg_compiled_set_break_site) */
    void *site_user;
    long graphs_run; /* whole-program graphs run, all calls (pieces: segs) */
};

/* JITGRAD_CACHE_SIZE_LIMIT, default 8 as PyTorch's; 0 turns the limit off. */
static int parse_cache_limit(void) {
    const char *s = getenv("JITGRAD_CACHE_SIZE_LIMIT");
    if (!s || !*s)
        return 8;
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v < 0 || v > 1000000 ? 8 : (int)v;
}

static unsigned parse_log(void) {
    return (jg_log_topic("recompiles") ? LOG_RECOMPILES : 0) |
           (jg_log_topic("graphs") ? LOG_GRAPHS : 0) |
           (jg_log_topic("graph_breaks") ? LOG_BREAKS : 0);
}

jg_compiled *jg_compile(jg_program_fn fn, void *user, const jg_compile_options *opts) {
    if (!fn)
        return jg_errorf_null("jg_compile: program is NULL");
    const jg_backend *be = &jg_backend_interp;
    char why[700];
    if (opts && opts->backend && !strcmp(opts->backend, "c")) {
        if (!jg_cgen_available(why, sizeof why))
            return jg_errorf_null("%s", why);
        be = &jg_backend_c;
    } else if (opts && opts->backend && strcmp(opts->backend, "interp")) {
        return jg_errorf_null("jg_compile: backend \"%s\" is not available (available: "
                              "\"interp\", \"c\")",
                              opts->backend);
    }
    jg_compiled *c = calloc(1, sizeof *c);
    if (!c)
        return jg_errorf_null("out of memory in jg_compile");
    c->fn = fn;
    c->user = user;
    c->fullgraph = opts && opts->fullgraph;
    c->verify = opts && opts->verify;
    c->backend = be;
    c->log = parse_log();
    c->cache_limit = parse_cache_limit();
    return c;
}

/* The backends (see compile.h). */
static void *interp_new(const jg_graph *g) {
    return jg_interp_plan_new(g);
}
static int interp_run(void *p, jg_tensor *const *in, jg_tensor **out) {
    return jg_interp_run(p, in, out);
}
static void interp_free(void *p) {
    jg_interp_plan_free(p);
}
const jg_backend jg_backend_interp = {"interp", interp_new, interp_run, interp_free, NULL};
static void *cgen_new(const jg_graph *g) {
    return jg_cgen_plan_new(g);
}
static int cgen_run(void *p, jg_tensor *const *in, jg_tensor **out) {
    return jg_cgen_run(p, in, out);
}
static void cgen_free(void *p) {
    jg_cgen_plan_free(p);
}
const jg_backend jg_backend_c = {"c", cgen_new, cgen_run, cgen_free, NULL};

bool jg_compile_backend_available(const char *backend) {
    if (!backend || !strcmp(backend, "interp"))
        return true;
    return !strcmp(backend, "c") && jg_cgen_available(NULL, 0);
}

void jg_compiled_free(jg_compiled *c) {
    if (!c)
        return;
    for (int i = 0; i < c->n_entries; i++)
        jg_entry_release(c->entries[i]);
    free(c->entries);
    for (int i = 0; i < c->n_dyn; i++)
        jg_dyn_free(c->dyn[i]);
    free(c->dyn);
    jg_segments_free(c->segs);
    free(c);
}

int jg_compiled_entries(const jg_compiled *c) {
    return c ? c->n_entries : 0;
}

int jg_compiled_set_mode(jg_compiled *c, const char *mode) {
    if (!c)
        return jg_errorf("jg_compiled_set_mode: compiled function is NULL");
    const jg_backend *be = jg_mode_backend(c->backend, mode);
    if (!be)
        return -1;
    if (c->n_entries)
        return jg_errorf("jg_compiled_set_mode: the program was already traced (%d entries); "
                         "set it before the first call",
                         c->n_entries);
    c->backend = be;
    return 0;
}

int jg_compiled_set_dynamic(jg_compiled *c, int mode) {
    if (!c)
        return jg_errorf("jg_compiled_set_dynamic: compiled function is NULL");
    if (mode < JG_DYNAMIC_OFF || mode > JG_DYNAMIC_ON)
        return jg_errorf("jg_compiled_set_dynamic: mode %d is not JG_DYNAMIC_OFF (0), "
                         "JG_DYNAMIC_AUTO (1) or JG_DYNAMIC_ON (2)",
                         mode);
    if (c->n_entries)
        return jg_errorf("jg_compiled_set_dynamic: the program was already traced (%d entries); "
                         "set it before the first call",
                         c->n_entries);
    c->dynamic = mode;
    return 0;
}

int jg_compiled_set_break_site(jg_compiled *c, jg_break_site_fn fn, void *user) {
    if (!c)
        return jg_errorf("jg_compiled_set_break_site: compiled function is NULL");
    c->site = fn;
    c->site_user = user;
    return 0;
}

int jg_compiled_set_input_namer(jg_compiled *c, jg_input_name_fn fn, void *user) {
    if (!c)
        return jg_errorf("jg_compiled_set_input_namer: compiled function is NULL");
    c->namer = fn;
    c->namer_user = user;
    return 0;
}

int jg_compiled_fallbacks(const jg_compiled *c) {
    return c ? c->fallbacks : 0;
}

/* ---------------------------------------------------------------- guards */

static void make_key(jg_call_key *k, jg_in_key *in, const void *args, size_t args_size, int n,
                     jg_tensor *const *inputs) {
    k->grad_mode = jg_grad_mode;
    k->n_inputs = n;
    k->in = in;
    k->args = args;
    k->args_size = args_size;
    for (int i = 0; i < n; i++) {
        jg_meta_of(inputs[i], &in[i].meta);
        for (int d = 0; d < JG_MAX_DIMS; d++)
            in[i].stride[d] = d < inputs[i]->ndim ? inputs[i]->stride[d] : 0;
        in[i].requires_grad = inputs[i]->requires_grad;
        in[i].same_as = in[i].storage_as = -1;
        for (int j = 0; j < i; j++) {
            if (in[i].same_as < 0 && inputs[j] == inputs[i])
                in[i].same_as = j;
            if (in[i].storage_as < 0 && jg_same_storage(inputs[j], inputs[i]))
                in[i].storage_as = j;
        }
    }
}

static void fmt_meta_shape(char *b, size_t n, const jg_meta *m) {
    jg_format_shape(b, n, m->ndim, m->shape);
}

/* "the same tensor as input 1" / "a distinct tensor" for a guard message */
static void alias_text(char *buf, size_t n, int other, const char *with, const char *without) {
    if (other >= 0)
        snprintf(buf, n, "%s %d", with, other);
    else
        snprintf(buf, n, "%s", without);
}

/* WHY formats the reason for a mismatch into why, unless why is NULL (the
 * guard check runs on every call; only one entry's reason is ever shown). */

/* Which call input (k) or earlier captured tensor (n + k) shares t's storage
 * first, or -1. */
static int capture_storage_as(const jg_tensor *t, int n, jg_tensor *const *inputs, int n_lifted,
                              jg_tensor *const *lifted) {
    for (int j = 0; j < n; j++)
        if (jg_same_storage(inputs[j], t))
            return j;
    for (int j = 0; j < n_lifted; j++)
        if (jg_same_storage(lifted[j], t))
            return n + j;
    return -1;
}

static void capture_key(jg_capture_key *c, const jg_tensor *t, int n, jg_tensor *const *inputs,
                        int n_lifted, jg_tensor *const *lifted) {
    jg_meta_of(t, &c->meta);
    memset(c->stride, 0, sizeof c->stride);
    memcpy(c->stride, t->stride, sizeof(int64_t) * (size_t)t->ndim);
    c->requires_grad = t->requires_grad;
    c->storage_as = capture_storage_as(t, n, inputs, n_lifted, lifted);
}

typedef struct {
    const void *storage;
    int j;
} storage_idx;

static int cmp_storage_idx(const void *pa, const void *pb) {
    const storage_idx *a = pa, *b = pb;
    uintptr_t x = (uintptr_t)a->storage, y = (uintptr_t)b->storage;
    return x != y ? (x > y) - (x < y) : (a->j > b->j) - (a->j < b->j);
}

/* capture_storage_as for the tensor at index self of refs (sorted by
 * storage, then index): the first index sharing its storage, if before
 * self, else -1 */
static int storage_as_sorted(const storage_idx *refs, int n, const jg_tensor *t, int self) {
    if (!t->storage)
        return -1;
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if ((uintptr_t)refs[mid].storage < (uintptr_t)t->storage)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && refs[lo].storage == t->storage && refs[lo].j < self ? refs[lo].j : -1;
}

/* "input 2" / "captured tensor lifted1" / "its own storage" for a guard message */
static void storage_text(char *buf, size_t n, int as, int n_inputs) {
    if (as < 0)
        snprintf(buf, n, "its own storage");
    else if (as < n_inputs)
        snprintf(buf, n, "input %d", as);
    else
        snprintf(buf, n, "captured tensor lifted%d", as - n_inputs);
}

#define WHY(...) (why ? (void)snprintf(why, n, __VA_ARGS__) : (void)0)

/* The guards on the tensors the program captured: each lifted one as it was
 * traced, each pinned call input still the captured tensor. */
static bool captures_match(const jg_entry *e, const jg_call_key *k, jg_tensor *const *inputs,
                           char *why, size_t n) {
    for (int j = 0; j < e->n_gr; j++)
        if ((jg_grad(e->gr_owner[j]) != NULL) != e->gr_had[j]) {
            char d[64] = "";
            if (why)
                jg_describe(e->gr_owner[j], d, sizeof d);
            WHY("captured tensor %s .grad is %s != %s", d, e->gr_had[j] ? "None" : "set",
                e->gr_had[j] ? "set" : "None");
            return false;
        }
    for (int j = 0; j < e->n_vg; j++) {
        const jg_tensor *t = e->vg_t[j];
        if (memcmp(jg_tensor_ptr(t), e->vg_bytes[j], (size_t)t->numel * jg_dtype_size(t->dtype))) {
            char d[64] = "";
            if (why)
                jg_describe(t, d, sizeof d);
            WHY("the values of %s the graph was traced with changed", d);
            return false;
        }
    }
    /* inputs and lifted tensors by storage (index j for input j, n + i for
     * lifted i), so that each lifted tensor's aliasing is a search: a
     * training step captures hundreds */
    int n_all = k->n_inputs + e->n_lifted, n_refs = 0;
    storage_idx *refs = malloc(((size_t)n_all + 1) * sizeof *refs);
    if (!refs) {
        WHY("out of memory checking the captured tensors");
        return false;
    }
    for (int j = 0; j < n_all; j++) {
        const jg_tensor *o = j < k->n_inputs ? inputs[j] : e->lifted[j - k->n_inputs];
        if (o && o->storage)
            refs[n_refs++] = (storage_idx){o->storage, j};
    }
    qsort(refs, (size_t)n_refs, sizeof *refs, cmp_storage_idx);
    for (int i = 0; i < e->n_lifted; i++) {
        const jg_tensor *t = e->lifted[i];
        const jg_capture_key *c = &e->lifted_key[i];
        char d[64] = "", s1[160] = "", s2[160] = "";
#define DESCRIBE() (why ? jg_describe(t, d, sizeof d) : (void)0)
        for (int j = 0; j < k->n_inputs; j++)
            if (inputs[j] == t) {
                DESCRIBE();
                WHY("captured tensor lifted%d %s is now also input %d", i, d, j);
                goto mismatch;
            }
        if (t->dtype != c->meta.dtype) {
            WHY("captured tensor lifted%d dtype %s != %s", i, jg_dtype_name(t->dtype),
                jg_dtype_name(c->meta.dtype));
            goto mismatch;
        }
        if (t->ndim != c->meta.ndim ||
            memcmp(t->shape, c->meta.shape, sizeof(int64_t) * (size_t)t->ndim)) {
            if (why) {
                jg_format_shape(s1, sizeof s1, t->ndim, t->shape);
                fmt_meta_shape(s2, sizeof s2, &c->meta);
            }
            WHY("captured tensor lifted%d shape %s != %s", i, s1, s2);
            goto mismatch;
        }
        if (memcmp(t->stride, c->stride, sizeof(int64_t) * (size_t)t->ndim)) {
            if (why) {
                DESCRIBE();
                jg_format_shape(s1, sizeof s1, t->ndim, t->stride);
                jg_format_shape(s2, sizeof s2, t->ndim, c->stride);
            }
            WHY("captured tensor lifted%d %s strides %s != %s", i, d, s1, s2);
            goto mismatch;
        }
        if (t->requires_grad != c->requires_grad) {
            DESCRIBE();
            WHY("captured tensor lifted%d %s requires_grad %s != %s", i, d,
                t->requires_grad ? "true" : "false", c->requires_grad ? "true" : "false");
            goto mismatch;
        }
        int as = storage_as_sorted(refs, n_refs, t, k->n_inputs + i);
        if (as != c->storage_as) {
            if (why) {
                DESCRIBE();
                storage_text(s1, sizeof s1, as, k->n_inputs);
                storage_text(s2, sizeof s2, c->storage_as, k->n_inputs);
            }
            WHY("captured tensor lifted%d %s storage aliasing: shares with %s != %s", i, d, s1, s2);
            goto mismatch;
        }
    }
#undef DESCRIBE
    free(refs);
    for (int i = 0; i < e->n_pinned; i++)
        if (inputs[e->pinned_input[i]] != e->pinned[i]) {
            WHY("input %d is no longer the tensor the program also captured", e->pinned_input[i]);
            return false;
        }
    return true;
mismatch:
    free(refs);
    return false;
}

/* Does the entry's key admit this call?  If not, why (new != cached). */
static bool key_match(const jg_entry *e, const jg_call_key *k, jg_tensor *const *inputs, char *why,
                      size_t n) {
    const jg_call_key *o = &e->key;
    if (o->grad_mode != k->grad_mode) {
        WHY("grad mode %s != %s", k->grad_mode ? "on" : "off", o->grad_mode ? "on" : "off");
        return false;
    }
    if (o->n_inputs != k->n_inputs) {
        WHY("number of inputs %d != %d", k->n_inputs, o->n_inputs);
        return false;
    }
    for (int i = 0; i < k->n_inputs; i++) {
        const jg_in_key *a = &k->in[i], *b = &o->in[i];
        char s1[160], s2[160];
        if (a->meta.dtype != b->meta.dtype) {
            WHY("input %d dtype %s != %s", i, jg_dtype_name(a->meta.dtype),
                jg_dtype_name(b->meta.dtype));
            return false;
        }
        if (!jg_meta_equal(&a->meta, &b->meta)) {
            if (why) {
                fmt_meta_shape(s1, sizeof s1, &a->meta);
                fmt_meta_shape(s2, sizeof s2, &b->meta);
            }
            WHY("input %d shape %s != %s", i, s1, s2);
            return false;
        }
        if (memcmp(a->stride, b->stride, sizeof a->stride)) {
            if (why) {
                jg_format_shape(s1, sizeof s1, a->meta.ndim, a->stride);
                jg_format_shape(s2, sizeof s2, b->meta.ndim, b->stride);
            }
            WHY("input %d strides %s != %s", i, s1, s2);
            return false;
        }
        if (a->requires_grad != b->requires_grad) {
            WHY("input %d requires_grad %s != %s", i, a->requires_grad ? "true" : "false",
                b->requires_grad ? "true" : "false");
            return false;
        }
        if (a->same_as != b->same_as) {
            if (why) {
                alias_text(s1, sizeof s1, a->same_as, "the same tensor as input",
                           "a distinct tensor");
                alias_text(s2, sizeof s2, b->same_as, "the same tensor as input",
                           "a distinct tensor");
            }
            WHY("input %d aliasing: %s != %s", i, s1, s2);
            return false;
        }
        if (a->storage_as != b->storage_as) {
            if (why) {
                alias_text(s1, sizeof s1, a->storage_as, "shares storage with input",
                           "has its own storage");
                alias_text(s2, sizeof s2, b->storage_as, "shares storage with input",
                           "has its own storage");
            }
            WHY("input %d storage aliasing: %s != %s", i, s1, s2);
            return false;
        }
    }
    if (o->args_size != k->args_size) {
        WHY("args size %zu != %zu", k->args_size, o->args_size);
        return false;
    }
    if (k->args_size && memcmp(o->args, k->args, k->args_size)) {
        size_t b = 0;
        while (((const unsigned char *)o->args)[b] == ((const unsigned char *)k->args)[b])
            b++;
        WHY("args byte %zu 0x%02x != 0x%02x", b, ((const unsigned char *)k->args)[b],
            ((const unsigned char *)o->args)[b]);
        return false;
    }
    if (!captures_match(e, k, inputs, why, n))
        return false;
    /* a constant the program made and returned: requiring grad now, it
     * would have been an input */
    if (e->fwd)
        for (int i = 0; i < e->fwd->n_consts; i++)
            if (e->fwd->consts[i]->requires_grad && k->grad_mode) {
                WHY("captured tensor c%d now requires grad", i);
                return false;
            }
    return true;
}
#undef WHY

/* --------------------------------------------------------------- tracing */

static int check_outputs(int n_out, jg_tensor *const *outs) {
    /* no outputs is fine: a program may only write its inputs (a training step) */
    if (n_out < 0)
        return jg_errorf("jg_compiled_call: the program returned %d outputs", n_out);
    for (int j = 0; j < n_out; j++)
        if (!outs[j])
            return jg_errorf("jg_compiled_call: the program returned NULL for output %d", j);
    return 0;
}

int jg_entry_unmerge_outputs(const jg_entry *e, jg_tensor **fo) {
    const jg_graph *g = e->fwd_ad; /* (before CSE; NULL without a backward) */
    if (!g)
        return 0;
    for (int j = 1; j < e->n_prog_out; j++) {
        int first = -1; /* an earlier output CSE merged with j, if any */
        for (int i = 0; i < j && first < 0; i++)
            if (fo[i] == fo[j] && g->outputs[i] != g->outputs[j])
                first = i;
        if (first < 0)
            continue;
        bool same_before = false; /* j repeats an output already copied */
        for (int i = 0; i < j && !same_before; i++)
            if (g->outputs[i] == g->outputs[j] && fo[i] != fo[j]) {
                jg_release(fo[j]);
                fo[j] = jg_retain(fo[i]);
                same_before = true;
            }
        if (same_before)
            continue;
        jg_tensor *c;
        if (fo[j]->is_view && e->out_view_in && e->out_view_in[j] >= 0) {
            /* a view of an input (the same view twice): a tensor of its own
             * over the input's memory, which jg_entry_run tracks as the
             * input's view, as eager returns two views */
            c = jg_alias_no_history(fo[j]);
        } else {
            jg_scope_push();
            bool prev = jg_set_grad_enabled(false);
            c = jg_keep(jg_clone(fo[j]));
            jg_set_grad_enabled(prev);
            jg_scope_pop();
        }
        if (!c)
            return -1;
        jg_release(fo[j]);
        fo[j] = c;
    }
    return 0;
}

/* Per output of g (e's forward graph), the graph input it is the new value
 * of, for the c backend to compute it in that input's buffer
 * (backend/cgen.h, jg_cgen_inout), else -1: the written captured tensors,
 * and a .grad the program leaves where it read one (zero_grad() keeping
 * the tensor).  Not a value with history (it would become the node's
 * output), nor a tensor the backward reads without a version check.  NULL
 * when there is none, or out of memory (it is only a hint). */
static int *inout_hint(const jg_entry *e, const jg_graph *g) {
    if (!e->n_lmut && !e->n_gset_out)
        return NULL;
    int *h = malloc(sizeof(int) * (size_t)g->n_outputs), any = 0;
    if (!h)
        return NULL;
    for (int k = 0; k < g->n_outputs; k++)
        h[k] = -1;
    int base = e->n_prog_out - e->n_lmut - e->n_gset_out;
    for (int m = 0; m < e->n_lmut; m++)
        h[base + m] = e->n_distinct + e->lmut_lifted[m];
    for (int m = 0; m < e->n_gset && e->lifted_grad_of; m++)
        for (int i = 0; i < e->n_lifted && e->gset_out[m] >= 0; i++)
            if (e->lifted_grad_of[i] >= 0 && e->gr_owner[e->lifted_grad_of[i]] == e->gset_owner[m])
                h[base + e->n_lmut + e->gset_out[m]] = e->n_distinct + i;
    for (int k = 0; k < g->n_outputs; k++) {
        if (h[k] >= 0 && (g->outputs[k] < 0 || g->vals[g->outputs[k]].requires_grad))
            h[k] = -1;
        for (int i = 0; i < e->n_saved && h[k] >= 0; i++)
            if (e->saved_src[i] == -1 - h[k] && !e->saved_check[i])
                h[k] = -1;
        any |= h[k] >= 0;
    }
    if (!any) {
        free(h);
        return NULL;
    }
    return h;
}

/* e's forward plan, with inout_hint's outputs. */
static void *fwd_plan_new(const jg_entry *e, const jg_graph *g) {
    int *h = inout_hint(e, g);
    const int *prev = jg_cgen_inout;
    jg_cgen_inout = h;
    void *p = e->backend->plan_new(g);
    jg_cgen_inout = prev;
    free(h);
    return p;
}

/* Fills e's run-time maps from the traced graph g and derives the backward. */
static int build(jg_compiled *c, jg_entry *e, jg_graph *g, const jg_function **failed) {
    (void)c;
    e->fwd = g; /* owned by e from here on */
    if (jg_compile_passes(g, false) <
        0) /* verify, dedup, DCE, verifying after each (no CSE before autodiff) */
        return -1;
    e->n_graph_inputs = g->n_inputs;
    e->n_prog_out = g->n_outputs;
    /* the node's outputs: distinct program outputs computed by nodes that
     * require grad (inputs and constants pass through as themselves) */
    size_t n_node_max = (size_t)(g->n_outputs ? g->n_outputs : 1);
    if (!(e->node_out_val = malloc(sizeof(int) * n_node_max)) ||
        !(e->node_out_prog = malloc(sizeof(int) * n_node_max)))
        return jg_errorf("out of memory in jg_compile");
    for (int j = 0; j < g->n_outputs; j++) {
        int v = g->outputs[j];
        if (g->vals[v].kind != JG_VAL_NODE || !g->vals[v].requires_grad)
            continue;
        bool seen = false;
        for (int k = 0; k < e->n_node_out && !seen; k++)
            seen = e->node_out_val[k] == v;
        if (!seen) {
            e->node_out_val[e->n_node_out] = v;
            e->node_out_prog[e->n_node_out++] = j;
        }
    }
    if (!e->n_node_out)
        return jg_compile_passes(g, true) < 0 || !(e->fplan = fwd_plan_new(e, g)) ? -1 : 0;
    e->fwd_ad = g;
    e->fwd = NULL;
    for (int i = 0; i < g->n_nodes; i++)
        e->has_custom |= g->nodes[i].kind == JG_GN_CUSTOM;
    jg_autodiff_result r;
    /* (the seeds: every node output, node_out_val's order) */
    if (jg_autodiff(g, e->n_node_out, e->node_out_val, 0, NULL, &r) < 0) {
        *failed = r.failed_fn;
        return -1;
    }
    jg_stale_saved_find(e, g, r.n_in, r.in_src, r.checked_by);
    free(r.checked_by);
    r.checked_by = NULL;
    /* cheap values the backward recomputes are not saved (remat.c) */
    if (jg_entry_remat_choose(e, &r) < 0 ||
        jg_entry_remat_apply(e, r.bwd, &r.in_src, &r.in_checked, &r.n_in) < 0) {
        jg_autodiff_result_free(&r);
        return -1;
    }
    /* saved values: forward inputs come from the call; node values become
     * extra outputs of the forward graph */
    int n_save = 0;
    for (int k = 0; k < r.n_in; k++)
        n_save += r.in_src[k] >= 0;
    int *outs = malloc(sizeof(int) * (size_t)(g->n_outputs + n_save));
    e->saved_val = malloc(sizeof(int) * (size_t)(n_save ? n_save : 1));
    e->saved_src = malloc(sizeof(int) * (size_t)(n_save ? n_save : 1));
    e->saved_check = malloc(sizeof(bool) * (size_t)(n_save ? n_save : 1));
    e->n_edges = r.n_contrib;
    e->edge_input = r.contrib_input;
    r.contrib_input = NULL;
    e->n_groups = jg_entry_count_groups(e);
    /* the full backward: every node output received a gradient, the engine
     * holds nothing for any input yet */
    unsigned char *all = calloc((size_t)(e->n_node_out + e->n_groups + e->n_edges), 1);
    jg_bwd_variant v = {all, r.bwd, NULL, r.n_in, r.in_src, 0};
    if (!outs || !all || !e->saved_val || !e->saved_src || !e->saved_check) {
        free(outs);
        free(all);
        jg_autodiff_result_free(&r);
        return jg_errorf("out of memory in jg_compile");
    }
    memset(all, JG_BWD_GRAD, (size_t)e->n_node_out);
    memcpy(outs, g->outputs, sizeof(int) * (size_t)g->n_outputs);
    int n_fout = g->n_outputs;
    for (int k = 0; k < r.n_in; k++) {
        int src = r.in_src[k];
        if (src < 0)
            continue; /* -1 - seed index == -1 - node output index */
        int i = e->n_saved++;
        e->saved_val[i] = src;
        e->saved_check[i] = r.in_checked[k];
        if (g->vals[src].kind == JG_VAL_INPUT) {
            e->saved_src[i] = -1 - g->vals[src].index;
        } else {
            e->saved_src[i] = n_fout;
            outs[n_fout++] = src;
        }
        v.in_src[k] = i;
    }
    free(r.in_checked); /* read into saved_check; the rest moved into v */
    r.in_checked = NULL;
    if (!(e->bwd = malloc(sizeof *e->bwd))) {
        free(outs);
        free(all);
        jg_autodiff_result_free(&r);
        return jg_errorf("out of memory in jg_compile");
    }
    e->bwd[0] = v;
    e->n_bwd = e->cap_bwd = 1;
    /* the variant a plain backward uses: each input's contributions summed
     * in the graph, the engine holding nothing for them yet */
    if (e->n_groups) {
        e->bwd[0].sum = JG_SUM_IN_GRAPH;
        if (jg_entry_sum_in_graph(e, &e->bwd[0]) < 0) {
            free(outs);
            return -1;
        }
    }
    if (jg_compile_passes(e->bwd[0].g, true) < 0 ||
        !(e->bwd[0].plan = e->backend->plan_new(e->bwd[0].g))) {
        free(outs);
        return -1;
    }
    /* the forward that runs: a copy (same value ids) with the saved values
     * as extra outputs, then CSE and DCE */
    e->fwd = jg_graph_clone(g);
    int rc = e->fwd ? jg_graph_set_outputs(e->fwd, n_fout, outs) : -1;
    free(outs);
    if (rc < 0 || jg_compile_passes(e->fwd, true) < 0 || !(e->fplan = fwd_plan_new(e, e->fwd)))
        return -1;
    return 0;
}

/* Moves the trace's captured tensors into e with their guards. */
static int take_captures(jg_entry *e, const jg_call_key *k, jg_tensor *const *inputs) {
    int n = k->n_inputs;
    e->n_lifted = jg_trace_take_lifted(&e->lifted);
    if (e->n_lifted && !(e->lifted_key = malloc(sizeof *e->lifted_key * (size_t)e->n_lifted)))
        return jg_errorf("out of memory in jg_compile");
    for (int i = 0; i < e->n_lifted; i++)
        capture_key(&e->lifted_key[i], e->lifted[i], n, inputs, i, e->lifted);
    e->n_vg = jg_trace_take_value_guards(&e->vg_t, &e->vg_bytes);
    jg_tensor **grads;
    e->n_gr = jg_trace_take_grad_reads(&e->gr_owner, &grads);
    int rc = 0;
    if (e->n_gr &&
        (!(e->gr_had = malloc(sizeof(bool) * (size_t)e->n_gr)) ||
         (e->n_lifted && !(e->lifted_grad_of = malloc(sizeof(int) * (size_t)e->n_lifted)))))
        rc = jg_errorf("out of memory in jg_compile");
    for (int i = 0; i < e->n_lifted && e->lifted_grad_of && rc == 0; i++) {
        e->lifted_grad_of[i] = -1;
        for (int j = 0; j < e->n_gr; j++)
            if (grads[j] && grads[j] == e->lifted[i])
                e->lifted_grad_of[i] = j;
    }
    for (int j = 0; j < e->n_gr; j++) {
        if (e->gr_had)
            e->gr_had[j] = grads[j] != NULL;
        jg_release(grads[j]);
    }
    free(grads);
    if (rc < 0)
        return -1;
    for (int d = 0; d < e->n_distinct; d++) {
        int i = e->call_input_of[d];
        if (!jg_trace_bound_used(i))
            continue;
        if (!e->pinned && (!(e->pinned = malloc(sizeof *e->pinned * (size_t)n)) ||
                           !(e->pinned_input = malloc(sizeof(int) * (size_t)n))))
            return jg_errorf("out of memory in jg_compile");
        e->pinned[e->n_pinned] = jg_retain(inputs[i]);
        e->pinned_input[e->n_pinned++] = i;
    }
    /* a call input whose .grad the program read or set: its guard and its
     * .grad afterwards are that tensor's, so the call must pass it again */
    for (int j = 0; j < e->n_gr && rc == 0; j++)
        for (int d = 0; d < e->n_distinct; d++) {
            int i = e->call_input_of[d];
            bool pinned = false;
            for (int q = 0; q < e->n_pinned && !pinned; q++)
                pinned = e->pinned_input[q] == i;
            if (inputs[i] != e->gr_owner[j] || pinned)
                continue;
            if (!e->pinned && (!(e->pinned = malloc(sizeof *e->pinned * (size_t)n)) ||
                               !(e->pinned_input = malloc(sizeof(int) * (size_t)n))))
                rc = jg_errorf("out of memory in jg_compile");
            else {
                e->pinned[e->n_pinned] = jg_retain(inputs[i]);
                e->pinned_input[e->n_pinned++] = i;
            }
        }
    return rc < 0 ? -1 : 0;
}

int jg_compile_take_captures(jg_entry *e) {
    return take_captures(e, &e->key, NULL);
}

int jg_compile_build(jg_entry *e, jg_graph *g) {
    const jg_function *failed = NULL;
    return build(NULL, e, g, &failed);
}

/* Traces the program for this key.  Returns the new entry (possibly an eager
 * one after a graph break), or NULL + error (*failed: the function of a
 * custom call whose backward could not be traced). */
/* Program outputs made by view ops from a graph input (a call input, or a
 * tensor the program reached by capture): at run time they become tracked
 * views of that input's tensor (see jg_entry.out_view_in), as in eager. */
/* The graph input that value v (without history) is, returned as itself by
 * the custom call that made it (a non-differentiable output), or -1. */
static int passthrough_input(const jg_graph *g, int v) {
    if (v < 0 || g->vals[v].kind != JG_VAL_NODE || g->vals[v].requires_grad)
        return -1;
    const jg_gnode *nd = &g->nodes[g->vals[v].node];
    const jg_gcustom *c = nd->kind == JG_GN_CUSTOM ? nd->custom : NULL;
    if (!c || c->opaque || c->opaque_backward || !c->fwd || !c->user)
        return -1;
    const jg_custom_info *info = c->user;
    int k = 0;
    while (k < info->n_call_out && nd->out[k] != v)
        k++;
    if (k == info->n_call_out || k >= c->fwd->n_outputs)
        return -1;
    const jg_value *fv = &c->fwd->vals[c->fwd->outputs[k]];
    if (fv->kind != JG_VAL_INPUT || fv->index >= info->n_args)
        return -1;
    int in = jg_gnode_slot_value(nd, fv->index);
    return g->vals[in].kind == JG_VAL_INPUT ? in : -1;
}

int jg_compile_output_views(jg_entry *e, const jg_graph *g, int n_out, const int *vals) {
    for (int j = 0; j < n_out; j++) {
        jg_opcode ops[16];
        const jg_attrs *attrs[16];
        int n = 0, v = vals[j];
        while (v >= 0 && g->vals[v].kind == JG_VAL_NODE && n < 16) {
            const jg_gnode *nd = &g->nodes[g->vals[v].node];
            if (nd->kind != JG_GN_OP || (nd->op != JG_OP_SLICE && nd->op != JG_OP_PERMUTE &&
                                         nd->op != JG_OP_RESHAPE && nd->op != JG_OP_EXPAND))
                break;
            ops[n] = nd->op;
            attrs[n++] = &nd->attrs;
            v = nd->in[0];
        }
        /* a custom call's non-differentiable output that is its own input
         * (directly the program's output): eager gives a view of the input
         * made without grad mode (n = 0: jg_view_track_alias) */
        int alias_of = n ? -1 : passthrough_input(g, v);
        if (alias_of >= 0)
            v = alias_of;
        else if (!n || v < 0 || g->vals[v].kind != JG_VAL_INPUT)
            continue;
        for (int a = 0, b = n - 1; a < b; a++, b--) { /* from the input outwards */
            jg_opcode o = ops[a];
            const jg_attrs *t = attrs[a];
            ops[a] = ops[b], attrs[a] = attrs[b];
            ops[b] = o, attrs[b] = t;
        }
        if (!e->out_view_in) {
            e->out_view_in = malloc(sizeof(int) * (size_t)n_out);
            e->out_view_n = calloc((size_t)n_out, sizeof(int));
            e->out_view_steps = calloc((size_t)n_out, sizeof(void *));
            if (!e->out_view_in || !e->out_view_n || !e->out_view_steps)
                return jg_errorf("out of memory in jg_compile");
            e->n_out_view = n_out;
            for (int m = 0; m < n_out; m++)
                e->out_view_in[m] = -1;
        }
        if (n && jg_view_steps_make(n, ops, attrs, &e->out_view_steps[j]) < 0)
            return -1;
        e->out_view_n[j] = n;
        e->out_view_in[j] = g->vals[v].index;
    }
    return 0;
}

/* Which graph outputs a backward after the call cannot go through, as
 * eager's cannot: from them it reaches a node that saves tensors and that
 * an in-program backward without retain_graph freed (e->out_freed; left
 * NULL when there is none).  The innermost frame is g's.  0 or -1. */
static int find_freed_outputs(jg_entry *e, const jg_graph *g) {
    bool any = false;
    for (int i = 0; i < g->n_nodes && !any; i++)
        any = jg_trace_node_freed(i);
    if (!any || !g->n_outputs)
        return 0;
    bool *seen = malloc(sizeof *seen * (size_t)g->n_vals);
    int *stack = malloc(sizeof *stack * (size_t)g->n_vals);
    if (!seen || !stack || !(e->out_freed = calloc((size_t)g->n_outputs, sizeof *e->out_freed))) {
        free(seen);
        free(stack);
        return jg_errorf("out of memory in jg_compile");
    }
    for (int j = 0; j < g->n_outputs; j++) {
        memset(seen, 0, sizeof *seen * (size_t)g->n_vals);
        int n = 0;
        stack[n++] = g->outputs[j];
        seen[g->outputs[j]] = true;
        while (n && !e->out_freed[j]) {
            const jg_value *v = &g->vals[stack[--n]];
            if (v->kind != JG_VAL_NODE || !v->requires_grad)
                continue;
            const jg_gnode *nd = &g->nodes[v->node];
            /* (a custom call's node is taken to save what its forward saved) */
            bool saves =
                nd->kind != JG_GN_OP || (jg_ops[nd->op].flags & (JG_OPF_SAVE_IN | JG_OPF_SAVE_OUT));
            if (saves && jg_trace_node_freed(v->node)) {
                e->out_freed[j] = true;
                break;
            }
            for (int s = 0; s < nd->n_in; s++)
                if (!seen[nd->in[s]]) {
                    seen[nd->in[s]] = true;
                    stack[n++] = nd->in[s];
                }
        }
    }
    free(seen);
    free(stack);
    return 0;
}

/* Whether the program wrote a captured tensor in place so far. */
static bool lifted_written(void) {
    jg_tensor *const *lifted;
    int n = jg_trace_n_lifted(&lifted), v;
    for (int i = 0; i < n; i++)
        if (jg_trace_lifted_written(i, &v))
            return true;
    return false;
}

/* A graph of op nodes only: custom calls keep records (and callbacks'
 * state) that a template's instances cannot share. */

/* outs: the caller's outputs array, which the program writes as when called
 * directly (so it holds as many outputs as the program returns) */
static jg_entry *trace_entry_once(jg_compiled *c, const jg_call_key *k, jg_tensor *const *inputs,
                                  jg_tensor **outs, const jg_function **failed) {
    int n = k->n_inputs;
    jg_entry *e = calloc(1, sizeof *e);
    if (!e)
        return jg_errorf_null("out of memory in jg_compile");
    e->refcount = 1;
    e->backend = c->backend;
    e->index = c->n_entries;
    e->key = *k;
    e->key.in = malloc(sizeof *k->in * (size_t)(n ? n : 1));
    e->key.args = k->args_size ? malloc(k->args_size) : NULL;
    e->graph_input_of = malloc(sizeof(int) * (size_t)(n ? n : 1));
    e->call_input_of = malloc(sizeof(int) * (size_t)(n ? n : 1));
    jg_tensor **sym = calloc((size_t)(n ? n : 1), sizeof *sym);
    int *orig = calloc((size_t)(n ? n : 1), sizeof *orig);
    jg_graph *g = jg_graph_new();
    if (!e->key.in || (k->args_size && !e->key.args) || !e->graph_input_of || !e->call_input_of ||
        !sym || !orig || !g) {
        free(sym);
        free(orig);
        jg_graph_free(g);
        jg_entry_release(e);
        return jg_errorf_null("out of memory in jg_compile");
    }
    memcpy(e->key.in, k->in, sizeof *k->in * (size_t)n);
    if (k->args_size)
        memcpy((void *)e->key.args, k->args, k->args_size);
    g->name = "forward";

    if (jg_trace_begin(g, JG_TRACE_LIFT) < 0) {
        free(sym);
        free(orig);
        jg_graph_free(g);
        jg_entry_release(e);
        return NULL;
    }
    jg_scope_push();
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        if (k->in[i].same_as >= 0) {
            /* the same tensor in two positions is ONE graph input */
            sym[i] = sym[k->in[i].same_as];
            e->graph_input_of[i] = e->graph_input_of[k->in[i].same_as];
            continue;
        }
        e->graph_input_of[i] = e->n_distinct;
        e->call_input_of[e->n_distinct++] = i;
        bool rg = inputs[i]->requires_grad;
        if (!(sym[i] = jg_scope_track(
                  jg_trace_placeholder(&k->in[i].meta, rg && k->grad_mode, rg, NULL))) ||
            jg_trace_bind(inputs[i], sym[i]->sym->value, i) < 0)
            rc = -1;
        else { /* the input's layout (guarded), so contiguous() and view() act as eager */
            memcpy(sym[i]->stride, k->in[i].stride, sizeof(int64_t) * (size_t)sym[i]->ndim);
            orig[i] = sym[i]->sym->value;
        }
    }
    /* the trace has no side effects: randomness it drew (a graph break) is
     * drawn again by the eager run */
    int rng = jg_rng_checkpoint();
    jg_sizes_record *prev_sizes = jg_sizes_record_begin(&e->sizes);
    int n_out = rc < 0 ? -1 : c->fn(c->user, k->args, n, sym, outs);
    jg_sizes_record_end(prev_sizes);
    jg_rng_rollback(rng);
    int breaks = jg_trace_breaks();
    if (breaks && jg_trace_break_retry()) {
        /* (also under fullgraph: what to trace does not exist yet) */
        e->eager = e->retry = true;
        if (!(e->break_reason = strdup(jg_trace_break_reason())))
            rc = jg_errorf("out of memory in jg_compile");
    } else if (breaks) {
        if (c->fullgraph) {
            jg_errorf("jg_compiled_call(fullgraph): the program cannot be captured in one graph: "
                      "%s",
                      jg_trace_break_reason());
            rc = -1;
        } else {
            e->eager = true;
            /* value reads in the program itself split it into pieces */
            e->pieces = jg_trace_read_breaks() == breaks;
            e->break_reason = strdup(jg_trace_break_reason());
            if (!e->break_reason)
                rc = jg_errorf("out of memory in jg_compile");
        }
    } else if (rc == 0 && n_out < 0 && lifted_written()) {
        /* eager mode would have written before failing: the eager run does
         * both (with its own error), and the next call is traced again */
        e->eager = e->retry = true;
        if (!(e->break_reason = strdup("the program failed while traced after writing a captured "
                                       "tensor in place")))
            rc = jg_errorf("out of memory in jg_compile");
    } else if (rc == 0 && n_out < 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", jg_last_error());
        rc = jg_errorf("jg_compiled_call: the program failed while being traced: %s", msg);
    } else if (rc == 0) {
        rc = check_outputs(n_out, outs);
        char why[200];
        if (rc == 0 &&
            (rc = jg_mutations_find(e, k, sym, orig, n_out, outs, why, sizeof why)) > 0) {
            rc = 0;
            if (c->fullgraph)
                rc = jg_errorf("jg_compiled_call(fullgraph): the program cannot be captured in "
                               "one graph: %s",
                               why);
            else if (!(e->break_reason = strdup(why)))
                rc = jg_errorf("out of memory in jg_compile");
            else
                e->eager = true;
        }
    }
    int *vals = NULL; /* the graph's outputs: grown by the mutation finders */
    if (rc == 0 && !e->eager) {
        /* relayout info per graph output; the extra outputs (new values of
         * written tensors) need none: calloc'd for all of them below */
        if (!(vals = malloc(sizeof(int) * (size_t)(n_out + e->n_mut + 1))) ||
            !(e->out_relayout = calloc((size_t)(n_out + 1), sizeof *e->out_relayout)) ||
            !(e->out_stride = calloc((size_t)(n_out + 1), sizeof *e->out_stride)))
            rc = jg_errorf("out of memory in jg_compile");
        for (int j = 0; j < n_out && rc == 0; j++)
            if (jg_view_sync(outs[j]) < 0 || (vals[j] = jg_trace_value(outs[j])) < 0)
                rc = -1;
        if (rc == 0 && n_out && !e->n_mut)
            rc = jg_compile_output_views(e, g, n_out, vals);
        for (int j = 0; j < n_out && rc == 0; j++) {
            e->out_relayout[j] = !outs[j]->is_view && !jg_dense(outs[j]);
            memcpy(e->out_stride[j], outs[j]->stride, sizeof(int64_t) * (size_t)outs[j]->ndim);
        }
        for (int m = 0; m < e->n_mut && rc == 0; m++) /* written inputs' new values */
            if ((vals[n_out + m] = jg_trace_value(sym[e->mut_input[m]])) < 0)
                rc = -1;
        char why[300];
        if (rc == 0 && (rc = jg_lifted_mutations_find(e, k, inputs, n_out, outs, &vals,
                                                      n_out + e->n_mut, why, sizeof why)) > 0) {
            rc = 0;
            if (c->fullgraph)
                rc = jg_errorf("jg_compiled_call(fullgraph): the program cannot be captured in "
                               "one graph: %s",
                               why);
            else if (!(e->break_reason = strdup(why)))
                rc = jg_errorf("out of memory in jg_compile");
            else
                e->eager = true;
        }
        if (rc == 0 && !e->eager)
            rc = jg_grad_sets_find(e, &vals, n_out + e->n_mut + e->n_lmut);
        if (rc == 0 && !e->eager)
            rc = jg_graph_set_outputs(g, n_out + e->n_mut + e->n_lmut + e->n_gset_out, vals);
        if (rc == 0 && !e->eager)
            rc = find_freed_outputs(e, g);
        if (rc == 0 && !e->eager)
            rc = take_captures(e, k, inputs);
    }
    if (rc == 0 && !e->eager)
        rc = jg_overwrites_keep(e);
    free(vals);
    jg_scope_pop();
    jg_trace_end();
    free(sym);
    free(orig);
    if (rc == 0 && e->eager) {
        jg_graph_free(g);
        return e;
    }
    /* (NULL when out of memory: no dynamic sizes) */
    if (rc == 0 && c->dynamic != JG_DYNAMIC_OFF && !(e->traced = jg_dyn_keep_traced(g)))
        jg_clear_error();
    if (rc == 0)
        rc = build(c, e, g, failed);
    else
        jg_graph_free(g);
    if (rc == 0)
        return e;
    jg_entry_release(e); /* build() gave g to e */
    return NULL;
}

/* A custom call whose backward callback cannot be traced for the output
 * gradients that reach it (it fails, e.g. with materialize_grads off and a
 * gradient missing) must not fail the forward: eager mode would fail only
 * when backward runs.  The program is traced again with that function's
 * calls opaque, so its callbacks run at run time exactly as in eager mode. */
static jg_entry *trace_entry(jg_compiled *c, const jg_call_key *k, jg_tensor *const *inputs,
                             jg_tensor **outs) {
    const jg_function **opaque = NULL;
    int n_opaque = 0;
    for (;;) {
        const jg_function *failed = NULL, *const * prev;
        int n_prev;
        jg_trace_custom_force_opaque(opaque, n_opaque, &prev, &n_prev);
        jg_entry *e = trace_entry_once(c, k, inputs, outs, &failed);
        jg_trace_custom_force_opaque(prev, n_prev, NULL, NULL);
        bool again = !e && failed;
        for (int i = 0; i < n_opaque && again; i++)
            again = opaque[i] != failed;
        /* (each function at most once: the loop ends) */
        const jg_function **more =
            again ? realloc(opaque, sizeof *opaque * (size_t)(n_opaque + 1)) : NULL;
        if (!more) {
            free(opaque);
            return again ? jg_errorf_null("out of memory in jg_compile") : e;
        }
        opaque = more;
        opaque[n_opaque++] = failed;
    }
}

/* ---------------------------------------------------------------- calls */

/* A lifted tensor that was some captured tensor's .grad: the program reads
 * that .grad again at every call (zero_grad(set_to_none) and the next
 * backward leave a new tensor there). */
static void refresh_grads(jg_entry *e) {
    for (int i = 0; i < e->n_lifted && e->lifted_grad_of; i++) {
        int j = e->lifted_grad_of[i];
        jg_tensor *g = j >= 0 ? e->gr_owner[j]->grad : NULL;
        if (g && g != e->lifted[i]) {
            jg_release(e->lifted[i]);
            e->lifted[i] = jg_retain(g);
        }
    }
}

static int run_eager(jg_compiled *c, const void *args, int n, jg_tensor *const *inputs,
                     jg_tensor **outputs) {
    /* the program fills the caller's array, as when called directly */
    jg_tensor **outs = outputs;
    jg_scope_push();
    int n_out = c->fn(c->user, args, n, inputs, outs);
    int rc = n_out < 0 ? -1 : check_outputs(n_out, outs);
    if (rc == 0)
        for (int j = 0; j < n_out; j++)
            jg_retain(outs[j]);
    jg_scope_pop();
    if (rc < 0)
        return -1;
    for (int j = 0; j < n_out; j++)
        outputs[j] = jg_scope_track(outs[j]);
    return n_out;
}

/* ------------------------------------------------------- dynamic sizes */

static int build_cb(void *ctx, jg_entry *e, jg_graph *g) {
    const jg_function *failed = NULL;
    return build(ctx, e, g, &failed);
}

static void drop_dyn(jg_compiled *c, int i) {
    jg_dyn_free(c->dyn[i]);
    memmove(&c->dyn[i], &c->dyn[i + 1], sizeof *c->dyn * (size_t)(c->n_dyn - i - 1));
    c->n_dyn--;
}

/* The entry of a template that admits the call: its instance for the
 * call's size.  A template whose graph does not hold for that size is
 * dropped (its dims are specialized again) and the call traces. */
static jg_entry *dyn_lookup(jg_compiled *c, const jg_call_key *k, jg_tensor *const *inputs) {
    int n = k->n_inputs;
    jg_in_key small[16], *base_in = n > 16 ? malloc(sizeof *base_in * (size_t)n) : small;
    if (!base_in)
        return NULL; /* (the call traces) */
    jg_entry *e = NULL;
    for (int i = c->n_dyn - 1; i >= 0 && !e; i--) {
        int64_t s[JG_DYN_MAX_SYMS];
        if (!jg_dyn_rekey(c->dyn[i], k, base_in, s))
            continue;
        jg_call_key bk = *k;
        bk.in = base_in;
        if (!key_match(jg_dyn_base(c->dyn[i]), &bk, inputs, NULL, 0))
            continue;
        char why[600];
        if ((e = jg_dyn_instance(c->dyn[i], s, k, build_cb, c, why, sizeof why)))
            break;
        if (c->log & LOG_RECOMPILES) {
            char d[300];
            jg_dyn_describe(c->dyn[i], c->namer, c->namer_user, d, sizeof d);
            fprintf(stderr, "jitgrad: dynamic sizes dropped (%s): %s\n", d, why);
        }
        drop_dyn(c, i);
    }
    if (base_in != small)
        free(base_in);
    if (e)
        refresh_grads(e);
    return e;
}

/* Adds template d, in place of c->dyn[replace] when >= 0 (a template
 * with one symbol less). */
static void dyn_add(jg_compiled *c, jg_dyn *d, int replace) {
    if (replace >= 0) {
        jg_dyn_free(c->dyn[replace]);
        c->dyn[replace] = d;
    } else {
        jg_dyn **ds = realloc(c->dyn, sizeof *ds * (size_t)(c->n_dyn + 1));
        if (!ds) { /* (no dynamic sizes: calls keep tracing per size) */
            jg_dyn_free(d);
            return;
        }
        c->dyn = ds;
        c->dyn[c->n_dyn++] = d;
    }
    char text[300];
    jg_dyn_describe(d, c->namer, c->namer_user, text, sizeof text);
    if (c->log & LOG_RECOMPILES)
        fprintf(stderr, "jitgrad: %s\n", text);
    char *g = c->log & LOG_GRAPHS ? jg_dyn_graph(d) : NULL;
    if (g)
        fprintf(stderr, "jitgrad: entry %d serves every size %s of those dims:\n%s",
                jg_dyn_base(d)->index,
                jg_dyn_symbols(d) == 1   ? "s0"
                : jg_dyn_symbols(d) == 2 ? "s0, s1"
                                         : "s0, s1, s2",
                g);
    else
        jg_clear_error();
    free(g);
}

/* Older and e differ in two groups of input dims (a batch and a sequence
 * length changing together): one more trace, at older's sizes with the
 * first group at e's, tells which sizes follow which group. */
static int dyn_two_groups(jg_compiled *c, jg_entry *older, jg_entry *e, jg_tensor *const *inputs,
                          jg_dyn **out, char *why, size_t why_size) {
    const jg_call_key *k = &older->key;
    jg_in_key *in = malloc(sizeof *in * (size_t)(k->n_inputs ? k->n_inputs : 1));
    if (!in || jg_dyn_mid_key(older, e, in) < 0) {
        free(in);
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    jg_call_key mk = *k;
    mk.in = in;
    jg_tensor **scratch = calloc((size_t)e->n_prog_out + 64, sizeof *scratch);
    jg_entry *mid = scratch ? trace_entry(c, &mk, inputs, scratch) : NULL;
    free(scratch);
    free(in);
    if (!mid) {
        snprintf(why, why_size, "the program failed when traced at the sizes between: %s",
                 jg_last_error());
        jg_clear_error();
        return -1;
    }
    int r = jg_dyn_make3(older, mid, e, out, why, why_size);
    jg_entry_release(mid); /* (the template holds it) */
    return r;
}

/* After a new trace e: when it differs from an earlier one only in the
 * sizes of some input dims (PyTorch's "automatic dynamic"), a template
 * serves those dims from now on; when it differs from a template's trace
 * in other dims only, the template gets one more symbol. */
static bool dyn_after_trace(jg_compiled *c, jg_entry *e, jg_tensor *const *inputs) {
    char why[400], first[400] = ""; /* the newest entry's reason is logged */
    for (int i = c->n_dyn - 1; i >= 0; i--) {
        jg_dyn *d;
        int r = jg_dyn_extend(c->dyn[i], e, &d, why, sizeof why);
        if (r > 0) {
            dyn_add(c, d, i);
            return true;
        }
        if (r < 0 && !first[0])
            snprintf(first, sizeof first, "%s", why);
    }
    for (int i = c->n_entries - 1; i >= 0; i--) {
        if (c->entries[i] == e)
            continue;
        jg_dyn *d;
        int r = jg_dyn_make(c->entries[i], e, &d, why, sizeof why);
        if (r == 2)
            r = dyn_two_groups(c, c->entries[i], e, inputs, &d, why, sizeof why);
        if (r > 0) {
            dyn_add(c, d, -1);
            return true;
        }
        if (r < 0 && !first[0])
            snprintf(first, sizeof first, "%s", why);
    }
    if (first[0] && (c->log & LOG_RECOMPILES))
        fprintf(stderr, "jitgrad: input sizes of entry %d stay static: %s\n", e->index, first);
    return false;
}

/* dynamic=1: the first trace e is followed by one more at another size of
 * the first input dim of size >= 2 (and of every input dim of that size),
 * so a template exists from the first call.  The program failing at that
 * size (it needs the size) leaves the dims static. */
static void dyn_probe(jg_compiled *c, jg_entry *e, jg_tensor *const *inputs) {
    const jg_call_key *k = &e->key;
    int n = k->n_inputs;
    int64_t v = 0;
    for (int i = 0; i < n && !v; i++)
        for (int d = 0; d < k->in[i].meta.ndim && !v; d++)
            if (k->in[i].meta.shape[d] >= 2)
                v = k->in[i].meta.shape[d];
    jg_in_key *in = v ? malloc(sizeof *in * (size_t)n) : NULL;
    if (!in)
        return;
    memcpy(in, k->in, sizeof *in * (size_t)n);
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        jg_meta *m = &in[i].meta;
        bool changed = false;
        for (int d = 0; d < m->ndim; d++)
            if (m->shape[d] == v) {
                m->shape[d] = v + 1;
                changed = true;
            }
        int64_t st[JG_MAX_DIMS] = {0};
        jg_contiguous_strides(k->in[i].meta.ndim, k->in[i].meta.shape, st);
        ok = !changed || !memcmp(st, k->in[i].stride, sizeof st);
        if (changed) {
            memset(in[i].stride, 0, sizeof in[i].stride);
            jg_contiguous_strides(m->ndim, m->shape, in[i].stride);
        }
    }
    jg_call_key pk = *k;
    pk.in = in;
    /* the probe's outputs: the program returned e->n_prog_out when traced
     * (room to spare for one that returns more at another size) */
    jg_tensor **scratch = ok ? calloc((size_t)e->n_prog_out + 64, sizeof *scratch) : NULL;
    jg_entry *p = scratch ? trace_entry(c, &pk, inputs, scratch) : NULL;
    free(scratch);
    free(in);
    if (!p) {
        if (ok && (c->log & LOG_RECOMPILES))
            fprintf(stderr,
                    "jitgrad: input sizes of entry %d stay static: the program failed when "
                    "traced with size %lld for %lld: %s\n",
                    e->index, (long long)(v + 1), (long long)v, jg_last_error());
        jg_clear_error();
        return;
    }
    jg_dyn *d;
    char why[400];
    int r = p->eager || p->retry ? 0 : jg_dyn_make(p, e, &d, why, sizeof why);
    if (r > 0) {
        jg_dyn_set_probed(d);
        dyn_add(c, d, -1);
    } else if (r < 0 && (c->log & LOG_RECOMPILES))
        fprintf(stderr, "jitgrad: input sizes of entry %d stay static: %s\n", e->index, why);
    jg_entry_release(p);
}

static void log_graphs(const jg_entry *e) {
    char *s = jg_compiled_graph_of(e);
    if (s)
        fprintf(stderr, "jitgrad: new entry %d\n%s", e->index, s);
    free(s);
}

int jg_compiled_call(jg_compiled *c, const void *args, size_t args_size, int n_inputs,
                     jg_tensor *const *inputs, jg_tensor **outputs) {
    if (!c)
        return jg_errorf("jg_compiled_call: compiled function is NULL");
    if (n_inputs < 0 || (n_inputs > 0 && !inputs))
        return jg_errorf("jg_compiled_call: bad input list (n_inputs %d, inputs %s)", n_inputs,
                         inputs ? "set" : "NULL");
    if (!outputs)
        return jg_errorf("jg_compiled_call: outputs is NULL");
    if (args_size && !args)
        return jg_errorf("jg_compiled_call: args is NULL but args_size is %zu", args_size);
    bool symbolic = false;
    for (int i = 0; i < n_inputs; i++) {
        if (!inputs[i])
            return jg_errorf("jg_compiled_call: input %d is NULL", i);
        symbolic |= inputs[i]->sym != NULL;
        jg_view_follow_base(inputs[i]); /* (before the guards read requires_grad) */
    }
    if (symbolic || jg_trace_capture) /* called inside another trace: inline the program there */
        return run_eager(c, args, n_inputs, inputs, outputs);
    if (!args_size)
        args = NULL;
    jg_in_key small[16], *in = small;
    if (n_inputs > 16 && !(in = malloc(sizeof *in * (size_t)n_inputs)))
        return jg_errorf("out of memory in jg_compiled_call");
    jg_call_key key;
    make_key(&key, in, args, args_size, n_inputs, inputs);
    for (int i = 0; i < c->n_entries; i++)
        refresh_grads(c->entries[i]);
    jg_entry *e = NULL;
    char why[1024] = "";
    for (int i = c->n_entries - 1; i >= 0 && !e; i--) /* the newest entry's reason is logged */
        if (key_match(c->entries[i], &key, inputs, i == c->n_entries - 1 ? why : NULL, sizeof why))
            e = c->entries[i];
    if (!e && c->n_dyn)
        e = dyn_lookup(c, &key, inputs);
    if (!e && c->cache_limit > 0 && c->n_entries >= c->cache_limit) {
        /* retracing for every new shape or value would cost more than it
         * gains: such calls run eagerly, as PyTorch's past its limit */
        if (!c->limit_warned)
            fprintf(stderr,
                    "jitgrad: a compiled program hit the cache size limit (%d entries); calls "
                    "matching none of them run eagerly. Last reason: %s. "
                    "JITGRAD_CACHE_SIZE_LIMIT raises the limit (0: none); "
                    "JITGRAD_LOG=recompiles logs every reason.\n",
                    c->cache_limit, why);
        c->limit_warned = true;
        if (in != small)
            free(in);
        c->fallbacks++;
        return run_eager(c, args, n_inputs, inputs, outputs);
    }
    if (!e) {
        if (c->n_entries && (c->log & LOG_RECOMPILES))
            fprintf(stderr, "jitgrad: recompiling (entry %d): %s\n", c->n_entries, why);
        if (c->n_entries == c->cap_entries) {
            int cap = c->cap_entries ? c->cap_entries * 2 : 4;
            jg_entry **es = realloc(c->entries, (size_t)cap * sizeof *es);
            if (!es) {
                if (in != small)
                    free(in);
                return jg_errorf("out of memory in jg_compiled_call");
            }
            c->entries = es;
            c->cap_entries = cap;
        }
        e = trace_entry(c, &key, inputs, outputs);
        if (in != small)
            free(in);
        if (!e)
            return -1;
        if (e->retry) { /* eager this time, traced again next time */
            if (c->log & LOG_RECOMPILES)
                fprintf(stderr, "jitgrad: runs eagerly once: %s\n", e->break_reason);
            jg_entry_release(e);
            c->fallbacks++;
            return run_eager(c, args, n_inputs, inputs, outputs);
        }
        c->entries[c->n_entries++] = e;
        if (e->eager)
            fprintf(stderr, "jitgrad: graph break (entry %d): %s; calls with these guards run %s\n",
                    e->index, e->break_reason,
                    e->pieces ? "as compiled pieces around each read" : "eagerly");
        if (c->log & LOG_GRAPHS)
            log_graphs(e);
        /* (without a traced graph, custom calls: the reason is logged) */
        if (!e->eager && c->dynamic != JG_DYNAMIC_OFF && !dyn_after_trace(c, e, inputs) &&
            e->traced && c->dynamic == JG_DYNAMIC_ON)
            dyn_probe(c, e, inputs);
    } else if (in != small) {
        free(in);
    }
    if (e->pieces) {
        jg_segments_env env = {c->fn,
                               c->user,
                               c->backend,
                               e->index,
                               (c->log & LOG_GRAPHS) != 0,
                               (c->log & LOG_BREAKS) != 0,
                               c->site,
                               c->site_user};
        int n_out = jg_segments_call(&c->segs, &env, args, n_inputs, inputs, outputs);
        if (n_out == JG_SEGMENTS_BROKE) {
            /* this program can break where nothing splits it: from now on
             * its calls run eagerly */
            e->pieces = false;
            fprintf(stderr, "jitgrad: entry %d: %s; calls with these guards run eagerly\n",
                    e->index, jg_last_error());
            return -1;
        }
        if (n_out != JG_SEGMENTS_EAGER)
            return n_out;
        /* a break nothing can split came first: this call runs eagerly */
        if (c->log & LOG_BREAKS)
            fprintf(stderr, "jitgrad: entry %d runs eagerly this call: %s\n", e->index,
                    jg_last_error());
        jg_clear_error();
        c->fallbacks++;
        return run_eager(c, args, n_inputs, inputs, outputs);
    }
    if (e->eager) {
        c->fallbacks++;
        return run_eager(c, args, n_inputs, inputs, outputs);
    }
    c->graphs_run++;
    int n_out = e->n_mut || e->n_lmut || e->n_gset
                    ? jg_entry_run_mutating(e, n_inputs, inputs, outputs)
                    : jg_entry_run(e, inputs, outputs);
    /* (verify reruns the program on copies of the inputs, which a program
     * writing its inputs has already changed) */
    if (n_out >= 0 && c->verify && !e->n_mut && !e->n_lmut && !e->n_gset &&
        jg_compile_verify(c->fn, c->user, args, n_inputs, inputs, n_out, outputs) < 0) {
        for (int j = 0; j < n_out; j++) /* out of the caller's scope, then freed */
            jg_release(jg_keep(outputs[j]));
        return -1;
    }
    return n_out;
}

/* ---------------------------------------------------------------- graphs */

char *jg_compiled_graph_of(const jg_entry *e) {
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    if (e->eager) {
        const char *fmt = "entry %d runs eagerly (graph break: %s)\n";
        size_t n = strlen(fmt) + strlen(e->break_reason) + 32;
        if (!(buf = malloc(n)))
            return jg_errorf_null("out of memory");
        snprintf(buf, n, fmt, e->index, e->break_reason);
        return buf;
    }
    rc = jg_graph_print_to(e->fwd, &buf, &len, &cap);
    const jg_graph *b = e->n_bwd ? e->bwd[0].g : NULL;
    if (rc == 0 && b)
        rc = jg_graph_print_to(b, &buf, &len, &cap);
    else if (rc == 0) {
        const char *none = "backward: none\n";
        char *nb = realloc(buf, len + strlen(none) + 1);
        if (!nb)
            rc = -1;
        else {
            buf = nb;
            memcpy(buf + len, none, strlen(none) + 1);
        }
    }
    if (rc < 0) {
        free(buf);
        return jg_errorf_null("out of memory printing a graph");
    }
    return buf;
}

char *jg_compiled_graph(const jg_compiled *c, int entry) {
    if (!c)
        return jg_errorf_null("jg_compiled_graph: compiled function is NULL");
    if (entry < 0 || entry >= c->n_entries)
        return jg_errorf_null("jg_compiled_graph: entry %d out of range (%d entries)", entry,
                              c->n_entries);
    if (c->entries[entry]->pieces)
        return jg_segments_graph(c->segs, entry);
    return jg_compiled_graph_of(c->entries[entry]);
}

int jg_compiled_breaks(const jg_compiled *c, const char *const **reasons) {
    if (!c || !reasons)
        return jg_errorf("jg_compiled_breaks: %s is NULL", c ? "reasons" : "compiled function");
    return jg_segments_breaks(c->segs, reasons);
}

long jg_compiled_graphs_run(const jg_compiled *c) {
    return c ? c->graphs_run + jg_segments_graphs(c->segs) : 0;
}
