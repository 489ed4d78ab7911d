/* Captures jg_apply while tracing: the user's forward callback is traced into
 * a subgraph with one placeholder per SLOT, and the call becomes one custom
 * node in the enclosing graph.  Nothing is deduplicated here — the same value
 * in two slots is two operands — so the per-slot structure reaches the dedup
 * pass and graph autodiff intact.  A call whose callbacks read tensor values
 * becomes an opaque node instead (see custom.h). */
#include "trace/custom.h"

#include "trace/trace.h"
#include "ops/viewtrack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS 64
/* node outputs: the call's, saved values, kept values */
#define MAX_NODE_OUT (JG_MAX_OUTPUTS + 2 * MAX_SLOTS)

static const char *fn_name(const jg_function *fn) {
    return fn->name ? fn->name : "Function";
}

/* Removes (and frees) a subgraph that turned out to be of no use. */
static void drop_child(jg_graph *parent, jg_graph *child) {
    for (int i = 0; i < parent->n_children; i++)
        if (parent->children[i] == child) {
            parent->children[i] = parent->children[--parent->n_children];
            jg_graph_free(child);
            return;
        }
}

int jg_custom_trace_backward(jg_ctx *ctx, int n_out, const jg_meta *out_meta,
                             jg_tensor *const *gout, jg_tensor *const *saved, jg_tensor **gin) {
    /* the ctx keeps what the forward saved; backward sees the stand-ins */
    jg_saved *orig = ctx->saved, *tmp = NULL;
    if (ctx->n_saved && !(tmp = calloc((size_t)ctx->n_saved, sizeof *tmp)))
        return jg_errorf("out of memory tracing a backward");
    for (int j = 0; j < ctx->n_saved; j++)
        jg_saved_init(&tmp[j], saved[j]);
    ctx->saved = tmp;
    jg_node *node = ctx->node;
    ctx->node = NULL; /* saved tensors are handed out as they are */
    int breaks = jg_trace_breaks();
    int rc = jg_function_run_backward(ctx, n_out, out_meta, gout, gin);
    if (jg_trace_breaks() > breaks)
        rc = jg_errorf("the backward callback of %s cannot be traced: %s", fn_name(ctx->fn),
                       jg_trace_break_reason());
    ctx->node = node;
    ctx->saved = orig;
    for (int j = 0; j < ctx->n_saved; j++)
        jg_saved_free(&tmp[j]);
    free(tmp);
    return rc;
}

/* A callback used a traced tensor of the program that is not one of the
 * call's tensor arguments (one reached through another argument, such as a
 * field of an object, or captured by a closure).  The node could not feed
 * it, and an opaque call could not find it at run time: a graph break (the
 * program runs eagerly; with fullgraph, this is the error). */
static int foreign_error(const jg_function *fn, const char *callback) {
    return jg_errorf("%s.%s used a traced tensor that is not one of its tensor arguments (reached "
                     "through another argument or captured); pass it to apply() as an argument",
                     fn_name(fn), callback);
}

/* A custom call's slots are bounded (MAX_SLOTS): the error names the bound. */
static int slots_error(const jg_function *fn) {
    return jg_errorf("%s.forward uses more than %d traced tensors (its tensor arguments and those "
                     "it reaches through other arguments or captures); at most %d can be traced",
                     fn_name(fn), MAX_SLOTS, MAX_SLOTS);
}

static int foreign_break(const jg_function *fn, const char *callback) {
    foreign_error(fn, callback);
    jg_trace_note_break("%s", jg_last_error());
    return -1;
}

/* Tensors of the enclosing program that the forward reached other than as
 * tensor arguments (a field of an object argument, a closure): each becomes
 * one more placeholder of F after the slots, and the node takes the tensor
 * as one more operand (a lifted slot, see jg_custom_info.n_args).  Eager
 * forward runs without grad, so they get no gradient through the call. */
typedef struct {
    const jg_function *fn;
    bool hit;   /* a lift failed (the error is set) */
    bool full;  /* ... because the call has MAX_SLOTS slots already */
    int n_args; /* the call's tensor arguments: lifted slots come after them */
    int n;
    jg_tensor *outer[MAX_SLOTS]; /* retained */
    jg_tensor *ph[MAX_SLOTS];
} foreign_use;

static int lift_foreign(void *user, jg_tensor *t) {
    foreign_use *u = user;
    for (int j = 0; j < u->n; j++)
        if (u->outer[j]->sym->graph == t->sym->graph && u->outer[j]->sym->value == t->sym->value)
            return u->ph[j]->sym->value;
    if (u->n_args + u->n >= MAX_SLOTS) {
        u->hit = u->full = true;
        return slots_error(u->fn);
    }
    jg_meta m;
    jg_meta_of(t, &m);
    char name[24];
    snprintf(name, sizeof name, "obj%d", u->n);
    jg_tensor *ph = jg_trace_placeholder(&m, false, t->requires_grad, name);
    if (!ph)
        return -1;
    jg_view_traced_strides(t, ph->stride); /* (as the callback sees it eagerly) */
    u->outer[u->n] = jg_retain(t);
    u->ph[u->n++] = ph;
    return ph->sym->value;
}

static int refuse_foreign(void *user, jg_tensor *t) {
    (void)t;
    foreign_use *u = user;
    u->hit = true;
    return foreign_error(u->fn, "forward");
}

static void foreign_release(foreign_use *u) {
    for (int j = 0; j < u->n; j++)
        jg_release(u->outer[j]);
    u->n = 0;
}

/* Runs the forward callback on placeholders inside subgraph F and sets F's
 * outputs (call outputs, then saved values).  Returns the output count, or
 * -1: an error, or a graph break inside F (why is set). */
static int trace_forward(jg_graph *F, jg_ctx *ctx, int n, jg_tensor *const *inputs,
                         jg_tensor **outs, foreign_use *foreign, char *why, size_t why_n,
                         bool *wrote_input) {
    jg_tensor *ph[MAX_SLOTS];
    /* in a compiled program, the callbacks' ops on tensors they reach from
     * outside are traced too (those tensors are constants, read at run time:
     * forward runs without grad, as in eager mode) */
    if (jg_trace_begin(F, jg_trace_capture ? JG_TRACE_CAPTURE : 0) < 0)
        return -1;
    jg_trace_set_resolver(lift_foreign, foreign);
    int rc = 0, n_out = -1;
    for (int i = 0; i < n && rc == 0; i++) {
        jg_meta m;
        jg_meta_of(inputs[i], &m);
        char name[24];
        snprintf(name, sizeof name, "in%d", i);
        if (!(ph[i] = jg_trace_placeholder(&m, false, inputs[i]->requires_grad, name))) {
            n = i;
            rc = -1;
        } else { /* the slot's layout, as the callback sees it eagerly */
            jg_view_traced_strides(inputs[i], ph[i]->stride);
        }
    }
    if (rc == 0)
        n_out = jg_function_run_forward(ctx, n, ph, outs);
    *wrote_input = false; /* an in-place write into a slot (counted by the placeholder) */
    for (int i = 0; i < n; i++)
        *wrote_input |= jg_version(ph[i]) > 0;
    for (int j = 0; j < foreign->n; j++)
        *wrote_input |= jg_version(foreign->ph[j]) > 0;
    if (jg_trace_breaks()) {
        snprintf(why, why_n, "%s", jg_trace_break_reason());
        for (int k = 0; k < n_out; k++)
            jg_release(outs[k]);
        n_out = -1;
    }
    int vals[JG_MAX_OUTPUTS + MAX_SLOTS], nv = 0;
    for (int k = 0; k < n_out && rc == 0; k++)
        if ((vals[nv++] = jg_trace_value(outs[k])) < 0)
            rc = -1;
    for (int s = 0; s < ctx->n_saved && n_out > 0 && rc == 0; s++) {
        jg_tensor *t = ctx->saved[s].t;
        if (!t)
            continue;
        if (nv == JG_MAX_OUTPUTS + MAX_SLOTS)
            rc = jg_errorf("jg_apply(%s): too many saved tensors to trace", fn_name(ctx->fn));
        else if ((vals[nv++] = jg_trace_value(t)) < 0)
            rc = -1;
    }
    if (n_out > 0 && rc == 0)
        rc = jg_graph_set_outputs(F, nv, vals);
    for (int i = 0; i < n; i++)
        jg_release(ph[i]);
    for (int j = 0; j < foreign->n; j++)
        jg_release(foreign->ph[j]);
    jg_trace_end();
    if (rc < 0 && n_out > 0) {
        for (int k = 0; k < n_out; k++)
            jg_release(outs[k]);
        return -1;
    }
    return rc < 0 ? -1 : n_out;
}

static _Thread_local const jg_function *const *forced;
static _Thread_local int n_forced;

void jg_trace_custom_force_opaque(const jg_function *const *fns, int n,
                                  const jg_function *const **prev, int *n_prev) {
    if (prev)
        *prev = forced;
    if (n_prev)
        *n_prev = n_forced;
    forced = n ? fns : NULL;
    n_forced = n;
}

static bool is_forced(const jg_function *fn) {
    for (int i = 0; i < n_forced; i++)
        if (forced[i] == fn)
            return true;
    return false;
}

/* Tensors of the forward subgraph F that the backward uses without their
 * having been saved (kept in the ctx): each becomes a placeholder of the
 * trial graph, and later an extra output of F. */
typedef struct {
    const jg_function *fn;
    const jg_graph *F;
    bool foreign; /* it used a traced tensor of another graph */
    int n;
    int fval[MAX_SLOTS];
    jg_tensor *ph[MAX_SLOTS];
} kept_set;

static int resolve_kept(void *user, jg_tensor *t) {
    kept_set *k = user;
    if (t->sym->graph != k->F->id) {
        k->foreign = true;
        return foreign_error(k->fn, "backward");
    }
    for (int i = 0; i < k->n; i++)
        if (k->fval[i] == t->sym->value)
            return k->ph[i]->sym->value;
    if (k->n == MAX_SLOTS)
        return jg_errorf("the backward uses more than %d tensors its forward kept", MAX_SLOTS);
    char name[24];
    snprintf(name, sizeof name, "kept%d", k->n);
    jg_tensor *ph = jg_trace_placeholder(&k->F->vals[t->sym->value].meta, false, false, name);
    if (!ph)
        return -1;
    k->fval[k->n] = t->sym->value;
    k->ph[k->n++] = ph;
    return ph->sym->value;
}

/* Does the backward callback trace?  Tried once on stand-ins in a scratch
 * graph, with every output's gradient present.  If it fails — it reads
 * values, or it raises an error that eager mode would raise only when
 * backward runs — the call becomes opaque, so the callback runs at backward
 * time exactly as in eager mode.  Tensors of F it uses are collected in
 * kept. */
static bool backward_traces(jg_graph *G, jg_ctx *ctx, int n_out, const jg_meta *out_meta,
                            const jg_graph *F, kept_set *kept, char *why, size_t why_n) {
    jg_graph *S = jg_graph_new_child(G);
    if (!S || jg_trace_begin(S, JG_TRACE_CAPTURE) < 0) /* as autodiff traces it */
        return true; /* out of memory: the real trace will report it */
    jg_trace_set_resolver(resolve_kept, kept);
    jg_tensor *g[JG_MAX_OUTPUTS] = {0}, *saved[MAX_SLOTS + JG_MAX_OUTPUTS] = {0};
    jg_tensor *gin[MAX_SLOTS];
    bool ok = true;
    for (int k = 0; k < n_out && ok; k++)
        ok = (g[k] = jg_trace_placeholder(&out_meta[k], false, false, "g")) != NULL;
    for (int j = 0, o = n_out; j < ctx->n_saved && ok; j++)
        if (ctx->saved[j].t)
            ok = (saved[j] = jg_trace_placeholder(&F->vals[F->outputs[o++]].meta, false, false,
                                                  "s")) != NULL;
    if (ok) {
        jg_scope_push();
        int rc = jg_custom_trace_backward(ctx, n_out, out_meta, g, saved, gin);
        jg_scope_pop();
        if (rc < 0) {
            snprintf(why, why_n, "%s",
                     jg_trace_breaks() ? jg_trace_break_reason() : jg_last_error());
            ok = false;
        }
    }
    for (int k = 0; k < n_out; k++)
        jg_release(g[k]);
    for (int j = 0; j < ctx->n_saved; j++)
        jg_release(saved[j]);
    for (int j = 0; j < kept->n; j++)
        jg_release(kept->ph[j]);
    jg_trace_end();
    drop_child(G, S);
    return ok;
}

/* Appends the kept values to F's outputs. */
static int add_kept_outputs(jg_graph *F, const kept_set *kept) {
    int vals[MAX_NODE_OUT];
    if (F->n_outputs + kept->n > MAX_NODE_OUT)
        return jg_errorf("too many values saved and kept for backward");
    memcpy(vals, F->outputs, sizeof(int) * (size_t)F->n_outputs);
    for (int j = 0; j < kept->n; j++)
        vals[F->n_outputs + j] = kept->fval[j];
    return jg_graph_set_outputs(F, F->n_outputs + kept->n, vals);
}

/* An opaque call: the forward runs once on zeros here, only to learn its
 * outputs' dtypes and shapes. */

/* What running an opaque call's callbacks once on zeros tells: output
 * dtypes and shapes, the ctx's flags, and which slots the backward answers
 * with NULL (assumed not to depend on values; checked at run time). */
typedef struct {
    bool materialize;
    bool detaches; /* see jg_ctx.detaches_traced */
    bool non_diff[JG_MAX_OUTPUTS];
    bool none_known;
    bool none_slot[MAX_SLOTS];
    int64_t out_stride[JG_MAX_OUTPUTS][JG_MAX_DIMS]; /* the outputs' layouts */
} opaque_probe;

/* Zeros for an opaque call's probe in t's eager layout (an expand's zero
 * strides, a transpose's order): what the forward returns keeps the
 * layout eager's would have, and a later reshape copies where eager's
 * does.  Scope-tracked. */
static jg_tensor *probe_zeros(const jg_tensor *t, const jg_meta *m) {
    int64_t st[JG_MAX_DIMS], extent = 1, cont[JG_MAX_DIMS];
    jg_view_traced_strides(t, st);
    jg_contiguous_strides(m->ndim, m->shape, cont);
    bool same = true;
    for (int d = 0; d < m->ndim; d++) {
        if (m->shape[d] == 0 || st[d] < 0)
            return jg_full(m->dtype, m->ndim, m->shape, 0.0);
        extent += (m->shape[d] - 1) * st[d];
        same &= m->shape[d] == 1 || st[d] == cont[d];
    }
    if (same)
        return jg_full(m->dtype, m->ndim, m->shape, 0.0);
    jg_tensor *buf = jg_full(m->dtype, 1, &extent, 0.0);
    return buf ? jg_scope_track(jg_tensor_view_of(buf, m->ndim, m->shape, st, 0)) : NULL;
}

/* An opaque call: the forward runs once on zeros here, to learn its
 * outputs' dtypes and shapes and which it marked non-differentiable; the
 * backward then runs once on zero gradients, to learn which slots it
 * answers with NULL (a failure there leaves that unknown). */
static int opaque_metas(const jg_function *fn, int n, int n_all, jg_tensor *const *inputs,
                        const void *args, size_t args_size, jg_meta *metas, opaque_probe *pr) {
    jg_tensor *z[MAX_SLOTS], *o[JG_MAX_OUTPUTS];
    bool needs[MAX_SLOTS];
    jg_meta im[MAX_SLOTS];
    uint32_t capture = jg_trace_capture_pause(); /* this runs the forward, it does not trace it */
    /* in a scratch frame that refuses the program's traced tensors: one
     * reached through an object argument would not be there at run time */
    jg_graph *G = jg_trace_graph(), *S = G ? jg_graph_new_child(G) : NULL;
    foreign_use refused = {.fn = fn};
    bool scratch = S && jg_trace_begin(S, 0) == 0;
    if (scratch)
        jg_trace_set_resolver(refuse_foreign, &refused);
    jg_scope_push();
    int rc = 0;
    for (int i = 0; i < n_all && rc == 0; i++) {
        jg_meta_of(inputs[i], &im[i]);
        needs[i] = i < n && jg_grad_mode && inputs[i]->requires_grad;
        int same = 0;
        while (same < i && inputs[same] != inputs[i])
            same++;
        if (same < i) /* one tensor in two slots: one here too (marks match by identity) */
            z[i] = z[same];
        else if (!(z[i] = probe_zeros(inputs[i], &im[i])))
            rc = -1;
        else if (i >= n) /* (what the forward sees of a lifted tensor) */
            z[i]->requires_grad = inputs[i]->requires_grad;
    }
    jg_ctx *ctx = rc == 0 ? jg_ctx_new_meta(fn, n_all, im, needs, args, args_size) : NULL;
    if (ctx)
        ctx->n_own = n;
    int n_out = ctx ? jg_function_run_forward(ctx, n_all, z, o) : -1;
    pr->detaches = n_out > 0 && ctx->detaches_traced;
    if (refused.hit) {
        for (int k = 0; k < n_out; k++)
            jg_release(o[k]);
        n_out = foreign_error(fn, "forward");
    }
    for (int k = 0; k < n_out; k++) {
        jg_meta_of(o[k], &metas[k]);
        memcpy(pr->out_stride[k], o[k]->stride, sizeof(int64_t) * (size_t)o[k]->ndim);
        pr->non_diff[k] = ctx->out_non_diff[k];
    }
    pr->none_known = false;
    if (n_out > 0) {
        pr->materialize = ctx->materialize_grads;
        bool any_needs = false;
        for (int i = 0; i < n; i++)
            any_needs |= needs[i];
        jg_tensor *g[JG_MAX_OUTPUTS], *gin[MAX_SLOTS];
        bool ok = any_needs && fn->backward;
        for (int k = 0; k < n_out && ok; k++)
            ok = (g[k] = jg_full(metas[k].dtype, metas[k].ndim, metas[k].shape, 0.0)) != NULL;
        if (ok) {
            bool prev = jg_set_grad_enabled(false);
            jg_scope_push();
            pr->none_known = jg_function_run_backward(ctx, n_out, metas, g, gin) == 0;
            for (int i = 0; i < n_all && pr->none_known; i++)
                pr->none_slot[i] = needs[i] && !gin[i];
            jg_scope_pop();
            jg_set_grad_enabled(prev);
        }
        jg_clear_error();
    }
    for (int k = 0; k < n_out; k++)
        jg_release(o[k]);
    jg_ctx_free(ctx);
    jg_scope_pop();
    if (scratch)
        jg_trace_end();
    if (S)
        drop_child(G, S);
    jg_trace_capture_resume(capture);
    return n_out;
}

/* Eager mode detaches in place a tensor that requires grad returned as a
 * non-differentiable output (PyTorch's rule): a side effect on the caller's
 * tensor the graph cannot hold, so the program runs eagerly. */
static int detach_break(const jg_function *fn) {
    jg_trace_note_break("%s.forward returns a tensor that requires grad as a non-differentiable "
                        "output (no input requires grad, or mark_non_differentiable) and it is "
                        "none of its inputs: eager mode detaches it in place",
                        fn_name(fn));
    return jg_errorf("%s.forward detaches a tensor in place; it cannot be traced", fn_name(fn));
}

static void ctx_free(void *p) {
    jg_ctx_free(p);
}

/* The graph keeps the call's ctx (to trace its backward again, with
 * stand-ins for what it saved); from here on the call's record
 * (jg_custom_info.saved_out) says what was saved.  A tensor of the program
 * it saved (reached through the call's args: a stand-in that becomes the
 * piece's result, with the compiled call's node as its history) is dropped:
 * kept, the graph -> ctx -> tensor -> compiled node -> graph cycle would
 * keep the compiled piece alive, and the graph the program's tensor. */
static void unhold_program_tensors(jg_ctx *ctx, const jg_graph *F) {
    for (int j = 0; j < ctx->n_saved; j++) {
        jg_tensor *t = ctx->saved[j].t;
        if (t && !(t->sym && t->sym->graph == F->id))
            jg_saved_free(&ctx->saved[j]);
    }
}

/* The pointer-sized fields of the args bytes that hold a lifted tensor's
 * address (jg_custom_info.arg_ptr_off). */
static int find_arg_ptrs(jg_graph *G, jg_custom_info *info, const void *args, size_t args_size,
                         const foreign_use *lifted) {
    const size_t step = _Alignof(jg_tensor *), w = sizeof(jg_tensor *);
    int n = 0, off[MAX_SLOTS], slot[MAX_SLOTS];
    for (size_t o = 0; lifted->n && o + w <= args_size && n < MAX_SLOTS; o += step) {
        jg_tensor *p;
        memcpy(&p, (const char *)args + o, w);
        for (int j = 0; j < lifted->n; j++)
            if (p == lifted->outer[j]) {
                off[n] = (int)o;
                slot[n++] = info->n_args + j;
                break;
            }
    }
    if (!n)
        return 0;
    int *a = jg_arena_alloc(&G->arena, sizeof(int) * 2 * (size_t)n);
    if (!a)
        return jg_errorf("out of memory tracing a custom function");
    memcpy(a, off, sizeof(int) * (size_t)n);
    memcpy(a + n, slot, sizeof(int) * (size_t)n);
    info->n_arg_ptrs = n;
    info->arg_ptr_off = a;
    info->arg_ptr_slot = a + n;
    return 0;
}

static int trace_call(const jg_function *fn, int n, jg_tensor *const *inputs, const void *args,
                      size_t args_size, jg_tensor **outputs, foreign_use *lifted) {
    jg_graph *G = jg_trace_graph();
    if (!G)
        return jg_errorf("jg_apply(%s): a traced tensor was used outside its trace", fn_name(fn));
    if (n > MAX_SLOTS)
        return jg_errorf("jg_apply(%s): at most %d inputs can be traced", fn_name(fn), MAX_SLOTS);
    int operands[MAX_SLOTS];
    lifted->n_args = n;
    for (int i = 0; i < n; i++)
        if ((operands[i] = jg_trace_value(inputs[i])) < 0)
            return -1;
    jg_ctx *ctx = jg_ctx_new(fn, n, inputs, args, args_size);
    jg_graph *F = ctx ? jg_graph_new_child(G) : NULL;
    if (!F) {
        jg_ctx_free(ctx);
        return -1;
    }
    char fname[96], why[512] = "";
    snprintf(fname, sizeof fname, "%s.forward", fn_name(fn));
    F->name = jg_arena_strdup(&F->arena, fname);
    jg_tensor *outs[JG_MAX_OUTPUTS] = {0};
    jg_meta metas[MAX_NODE_OUT];
    bool rgs[MAX_NODE_OUT] = {0};
    kept_set kept = {.fn = fn, .F = F};
    bool force = is_forced(fn);
    bool wrote = false;
    int n_out =
        force ? -1 : trace_forward(F, ctx, n, inputs, outs, lifted, why, sizeof why, &wrote);
    if (ctx->n_dirty || wrote) { /* an input written in place: the program runs eagerly */
        jg_trace_note_break("%s.forward writes an input in place%s, which cannot be captured",
                            fn_name(fn), ctx->n_dirty ? " (ctx.mark_dirty)" : "");
        for (int k = 0; k < n_out; k++)
            jg_release(outs[k]);
        jg_ctx_free(ctx);
        drop_child(G, F);
        return jg_errorf("%s.forward writes an input in place; it cannot be traced", fn_name(fn));
    }
    if (n_out > 0 && ctx->detaches_traced) {
        for (int k = 0; k < n_out; k++)
            jg_release(outs[k]);
        jg_ctx_free(ctx);
        drop_child(G, F);
        return detach_break(fn);
    }
    if (n_out < 0 && !why[0] && !force) {
        jg_ctx_free(ctx);
        drop_child(G, F);
        if (lifted->full) {
            slots_error(fn);
            jg_trace_note_break("%s", jg_last_error());
            return -1;
        }
        return lifted->hit ? foreign_break(fn, "forward") : -1;
    }
    /* every output of the node: the call's, then the values saved for
     * backward, then those it kept */
    for (int k = 0; k < (n_out > 0 ? F->n_outputs : 0); k++)
        metas[k] = F->vals[F->outputs[k]].meta;
    bool opaque = n_out < 0 || !backward_traces(G, ctx, n_out, metas, F, &kept, why, sizeof why);
    int kept_out = n_out > 0 ? F->n_outputs : 0;
    /* the node's operands for the lifted tensors (an opaque call gets them
     * too: its callback rebuilds the objects that held them) */
    int n_all = n + lifted->n;
    bool lift_failed = false;
    for (int j = 0; j < lifted->n && !lift_failed; j++)
        lift_failed = (operands[n + j] = jg_trace_value(lifted->outer[j])) < 0;
    if (kept.foreign || lift_failed) {
        for (int k = 0; k < n_out; k++)
            jg_release(outs[k]);
        jg_ctx_free(ctx);
        drop_child(G, F);
        return foreign_break(fn, kept.foreign ? "backward" : "forward");
    }
    if (!opaque && kept.n && add_kept_outputs(F, &kept) < 0) {
        for (int k = 0; k < n_out; k++)
            jg_release(outs[k]);
        jg_ctx_free(ctx);
        drop_child(G, F);
        return -1;
    }
    for (int k = kept_out; k < (opaque ? 0 : F->n_outputs); k++)
        metas[k] = F->vals[F->outputs[k]].meta;
    bool materialize = ctx->materialize_grads;
    opaque_probe probe = {.materialize = true};
    int n_node_out = n_out > 0 ? F->n_outputs : 0;
    if (opaque) {
        /* outputs: the call's, the same with eager history, the slot leaves */
        for (int k = 0; k < n_out; k++)
            jg_release(outs[k]);
        drop_child(G, F);
        F = NULL;
        jg_tensor *all[MAX_SLOTS];
        for (int s = 0; s < n_all; s++)
            all[s] = s < n ? inputs[s] : lifted->outer[s - n];
        n_out = opaque_metas(fn, n, n_all, all, args, args_size, metas, &probe);
        materialize = probe.materialize;
        if (n_out > 0 && probe.detaches) {
            jg_ctx_free(ctx);
            return detach_break(fn);
        }
        if (n_out < 0) {
            /* e.g. it read a traced tensor of the program reached through an
             * object argument: the program runs eagerly, as it would fail
             * or succeed there */
            jg_ctx_free(ctx);
            jg_trace_note_break("%s.forward could not run when traced: %s", fn_name(fn),
                                jg_last_error());
            return -1;
        }
        for (int k = 0; k < n_out; k++)
            metas[n_out + k] = metas[k];
        for (int s = 0; s < n_all; s++)
            jg_meta_of(s < n ? inputs[s] : lifted->outer[s - n], &metas[2 * n_out + s]);
        n_node_out = 2 * n_out + n_all;
        jg_ctx_free(ctx); /* each run makes its own, as eager calls do */
        ctx = NULL;
    }
    /* the call's record: differentiable outputs, saved entries */
    jg_custom_info *info = jg_arena_alloc(&G->arena, sizeof *info);
    bool *diff = jg_arena_alloc(&G->arena, sizeof(bool) * (size_t)n_out);
    int n_saved = ctx ? ctx->n_saved : 0, n_kept = opaque ? 0 : kept.n;
    int *saved_out = jg_arena_alloc(&G->arena, sizeof(int) * (size_t)(n_saved + 1));
    int *kept_fval = jg_arena_alloc(&G->arena, sizeof(int) * (size_t)(n_kept + 1));
    int rc = info && diff && saved_out && kept_fval ? 0 : -1;
    bool any_rg = false;
    for (int i = 0; i < n; i++)
        any_rg |= jg_grad_mode && inputs[i]->requires_grad;
    for (int k = 0; k < n_out && rc == 0; k++) {
        diff[k] = jg_dtype_is_float(metas[k].dtype);
        diff[k] &= !(ctx && ctx->out_non_diff[k]);
        if (opaque)
            diff[k] &= !probe.non_diff[k];
        rgs[k] = any_rg && diff[k];
    }
    if (rc == 0) {
        int next = n_out;
        for (int s = 0; s < n_saved; s++)
            saved_out[s] = ctx->saved[s].t ? next++ : -1;
        if (n_kept)
            memcpy(kept_fval, kept.fval, sizeof(int) * (size_t)n_kept);
        bool *none_slot = NULL;
        if (opaque && probe.none_known &&
            (none_slot = jg_arena_alloc(&G->arena, sizeof(bool) * (size_t)(n_all ? n_all : 1))))
            memcpy(none_slot, probe.none_slot, sizeof(bool) * (size_t)n_all);
        *info = (jg_custom_info){n_out,  diff,      n_saved,  saved_out, materialize,
                                 n_kept, kept_fval, kept_out, none_slot, n,
                                 0,      NULL,      NULL};
        rc = find_arg_ptrs(G, info, args, args_size, lifted);
    }
    int64_t out_stride[JG_MAX_OUTPUTS][JG_MAX_DIMS]; /* the forward's layouts */
    bool out_view[JG_MAX_OUTPUTS] = {0};             /* a view, or an input returned as is */
    for (int k = 0; k < n_out && !opaque; k++) {
        out_view[k] = outs[k]->is_view || F->vals[F->outputs[k]].kind == JG_VAL_INPUT;
        memcpy(out_stride[k], outs[k]->stride, sizeof out_stride[k]);
        jg_release(outs[k]);
        outs[k] = NULL;
    }
    int out_vals[MAX_NODE_OUT];
    jg_gcustom call = {.fn = fn,
                       .args = (void *)args,
                       .args_size = args_size,
                       .fwd = F,
                       .kept_id = F ? F->id : 0,
                       .n_slots = n + lifted->n,
                       .n_call_out = n_out,
                       .opaque = opaque,
                       .user = info,
                       .state = ctx,
                       .free_state = ctx_free};
    if (rc == 0 && jg_graph_add_custom(G, &call, n + lifted->n, operands, n_node_out, metas, rgs,
                                       out_vals) < 0)
        rc = -1;
    if (rc < 0)
        jg_ctx_free(ctx); /* the graph did not take it */
    else if (ctx)
        unhold_program_tensors(ctx, F);
    for (int k = 0; k < n_out && rc == 0; k++) {
        if (!(outputs[k] = jg_trace_tensor(out_vals[k]))) {
            for (int j = 0; j < k; j++)
                jg_release(outputs[j]);
            rc = -1;
        } else {
            memcpy(outputs[k]->stride, opaque ? probe.out_stride[k] : out_stride[k],
                   sizeof out_stride[k]);
            jg_scope_track(outputs[k]);
        }
    }
    /* views refuse in-place ops as eager's outputs do (jg_apply's
     * mark_custom_views; dirty inputs never get here) */
    int n_diff = 0;
    for (int k = 0; k < n_out && rc == 0; k++)
        n_diff += outputs[k]->requires_grad;
    for (int k = 0; k < n_out && rc == 0; k++)
        if (out_view[k] && outputs[k]->requires_grad) {
            outputs[k]->custom_view = true;
            outputs[k]->custom_view_multi = n_diff > 1;
        }
    return rc < 0 ? -1 : n_out;
}

static int trace_apply(const jg_function *fn, int n, jg_tensor *const *inputs, const void *args,
                       size_t args_size, jg_tensor **outputs) {
    foreign_use lifted = {.fn = fn};
    int rc = trace_call(fn, n, inputs, args, args_size, outputs, &lifted);
    foreign_release(&lifted);
    return rc;
}

int jg_trace_opaque_backward(const jg_gcustom *call, const bool *slot_needs, int n_out,
                             jg_tensor *const *g, jg_tensor *const *hist, jg_tensor *const *leaves,
                             jg_tensor **raw, jg_tensor **filled) {
    jg_graph *G = jg_trace_graph();
    int ops[2 * JG_MAX_OUTPUTS + MAX_SLOTS], n_ops = 0, n_present = 0, n_need = 0;
    jg_meta metas[2 * MAX_SLOTS];
    bool rgs[2 * MAX_SLOTS] = {0};
    for (int k = 0; k < n_out; k++)
        if (g[k] && (ops[n_ops++] = jg_trace_value(g[k])) < 0)
            return -1;
    for (int k = 0; k < n_out; k++)
        n_present += g[k] != NULL;
    /* none arrived (materialize off): every output is a root reached
     * without a gradient, as eager reaches the call's node */
    for (int k = 0; k < n_out; k++)
        if ((g[k] || !n_present) && (ops[n_ops++] = jg_trace_value(hist[k])) < 0)
            return -1;
    for (int s = 0; s < call->n_slots; s++) {
        raw[s] = filled[s] = NULL;
        if (!slot_needs[s])
            continue;
        if ((ops[n_ops++] = jg_trace_value(leaves[s])) < 0)
            return -1;
        jg_meta_of(leaves[s], &metas[2 * n_need]);
        metas[2 * n_need + 1] = metas[2 * n_need];
        n_need++;
    }
    /* per slot asked for, in order: it must answer NULL at run time (it did
     * when probed, and graph autodiff added nothing for it) */
    const jg_custom_info *info = call->user;
    bool *expect_none = NULL;
    if (info->none_slot) {
        if (!(expect_none =
                  jg_arena_alloc(&G->arena, sizeof(bool) * (size_t)(n_need ? n_need : 1))))
            return jg_errorf("out of memory tracing a backward");
        for (int s = 0, j = 0; s < call->n_slots; s++)
            if (slot_needs[s])
                expect_none[j++] = info->none_slot[s];
    }
    /* operands: gradients, outputs with history, leaves; outputs: (raw,
     * filled) per slot that needs a gradient */
    jg_gcustom bw = *call;
    bw.fwd = bw.bwd = NULL;
    bw.slot_map = NULL;
    bw.n_slots = n_ops;
    bw.n_call_out = 0;
    bw.opaque = true;
    bw.opaque_backward = true;
    bw.no_grads = n_present == 0;
    bw.state = NULL;
    bw.free_state = NULL;
    bw.user = expect_none;
    int outs[2 * MAX_SLOTS];
    if (jg_graph_add_custom(G, &bw, n_ops, ops, 2 * n_need, metas, rgs, outs) < 0)
        return -1;
    for (int s = 0, j = 0; s < call->n_slots; s++) {
        if (!slot_needs[s])
            continue;
        raw[s] = jg_scope_track(jg_trace_tensor(outs[2 * j]));
        filled[s] = jg_scope_track(jg_trace_tensor(outs[2 * j + 1]));
        if (!raw[s] || !filled[s])
            return -1;
        j++;
    }
    return 0;
}

void jg_trace_custom_init(void) {
    jg_trace_apply_hook = trace_apply;
}
