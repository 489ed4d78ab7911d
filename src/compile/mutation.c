/* In-place ops on a compiled program's inputs.  While tracing they are
 * functionalized (ops/inplace.c): the placeholder (and, through a view, its
 * base) takes the out-of-place result as its new value.  Here the entry
 * learns which inputs ended up with a new value, returns those values as
 * extra graph outputs, and every call writes them back into the real inputs
 * as an in-place op's result is -- so the version bumps, the history (the
 * input now comes out of the compiled call, or for a view, its base does:
 * CopySlices) and the errors are eager's.  The write-back comes after the
 * whole graph ran, so a failed call writes nothing; where no one can see the
 * memory move, it swaps the new value's memory in instead of copying it
 * (jg_tensor_take_memory: a training step's parameters, optimizer state and
 * .grad are megabytes per call). */
#include "autograd/node.h"
#include "backend/cgen.h"
#include "compile/compile.h"
#include "ops/viewtrack.h"
#include "trace/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local int64_t writeback_copies;

int64_t jg_writeback_copies(void) {
    return writeback_copies;
}

/* dst = src's values, counted when that is more than a few bytes */
static void copy_back(jg_tensor *dst, jg_tensor *src) {
    writeback_copies += (size_t)dst->numel * jg_dtype_size(dst->dtype) > JG_INLINE_BYTES;
    jg_copy_data(dst, src);
}

int jg_mutations_find(jg_entry *e, const jg_call_key *k, jg_tensor *const *sym, const int *orig,
                      int n_out, jg_tensor *const *outs, char *why, size_t why_size) {
    int n = k->n_inputs, n_mut = 0;
    int *mut = malloc(sizeof(int) * (size_t)(e->n_distinct ? e->n_distinct : 1));
    if (!mut)
        return jg_errorf("out of memory in jg_compile");
    for (int d = 0; d < e->n_distinct; d++) {
        int i = e->call_input_of[d];
        if (jg_view_sync(sym[i]) < 0) {
            free(mut);
            return -1;
        }
        if (sym[i]->sym->value == orig[i])
            continue;
        /* another input viewing the same memory would not see the write
         * inside the graph */
        int gi = k->in[i].storage_as >= 0 ? k->in[i].storage_as : i;
        for (int j = 0; j < n; j++) {
            int gj = k->in[j].storage_as >= 0 ? k->in[j].storage_as : j;
            if (sym[j] != sym[i] && gj == gi) {
                snprintf(why, why_size,
                         "an in-place op writes input %d, which shares storage with input %d", i,
                         j);
                free(mut);
                return 1;
            }
        }
        mut[n_mut++] = i; /* (each distinct input once) */
    }
    if (!n_mut) {
        free(mut);
        return 0;
    }
    e->mut_input = mut; /* (n_distinct long) */
    if (!(e->mut_writes = malloc(sizeof(uint64_t) * (size_t)n_mut)) ||
        !(e->mut_check = malloc(sizeof(int) * (size_t)n_mut)) ||
        !(e->out_input = malloc(sizeof(int) * (size_t)(n_out ? n_out : 1))))
        return jg_errorf("out of memory in jg_compile");
    e->n_mut = n_mut;
    for (int m = 0; m < n_mut; m++) {
        e->mut_writes[m] = jg_version(sym[mut[m]]);
        bool via_view = false;
        int first = jg_trace_first_write(sym[mut[m]], &via_view);
        e->mut_check[m] = first < 0 ? -1 : first * 2 + via_view;
        if (jg_trace_written_without_grad(sym[mut[m]])) {
            if (first >= 0) { /* (its value lost the history the first write gave) */
                snprintf(why, why_size,
                         "input %d is written in place with grad mode on and then without it",
                         mut[m]);
                return 1;
            }
            e->mut_check[m] = -2;
        }
    }
    /* the program returning a written input returns that tensor itself */
    for (int j = 0; j < n_out; j++) {
        e->out_input[j] = -1;
        for (int m = 0; m < n_mut; m++)
            if (outs[j] == sym[mut[m]])
                e->out_input[j] = mut[m];
    }
    return 0;
}

int jg_lifted_mutations_find(jg_entry *e, const jg_call_key *k, jg_tensor *const *inputs, int n_out,
                             jg_tensor *const *outs, int **vals, int n_vals, char *why,
                             size_t why_size) {
    jg_tensor *const *lifted;
    int n_lifted = jg_trace_n_lifted(&lifted), n = 0;
    for (int i = 0; i < n_lifted; i++) {
        int v, w = jg_trace_lifted_written(i, &v);
        if (!w)
            continue;
        jg_tensor *t = lifted[i];
        char d[64];
        jg_describe(t, d, sizeof d);
        /* the graph reads every tensor as it was at the call: a write
         * through one alias would not be seen through another */
        for (int j = 0; j < k->n_inputs; j++)
            if (jg_same_storage(inputs[j], t)) {
                snprintf(why, why_size,
                         "the program writes captured tensor %s in place, which shares storage "
                         "with input %d",
                         d, j);
                return 1;
            }
        for (int j = 0; j < n_lifted; j++)
            if (j != i && jg_same_storage(lifted[j], t)) {
                snprintf(why, why_size,
                         "the program writes captured tensor %s in place, which shares storage "
                         "with another captured tensor",
                         d);
                return 1;
            }
        for (int j = 0; j < n_out; j++)
            if (outs[j] == t) {
                snprintf(why, why_size,
                         "the program returns captured tensor %s, which it writes in place", d);
                return 1;
            }
        /* (at most one new value per lifted tensor: room for all at once) */
        int *grown = n ? *vals : realloc(*vals, sizeof(int) * (size_t)(n_vals + n_lifted));
        if (!grown)
            return jg_errorf("out of memory in jg_compile");
        *vals = grown;
        if ((!e->lmut_lifted && !(e->lmut_lifted = malloc(sizeof(int) * (size_t)n_lifted))) ||
            (!e->lmut_writes && !(e->lmut_writes = malloc(sizeof(uint64_t) * (size_t)n_lifted))))
            return jg_errorf("out of memory in jg_compile");
        e->lmut_lifted[n] = i;
        e->lmut_writes[n] = (uint64_t)w;
        (*vals)[n_vals + n++] = v;
    }
    e->n_lmut = n;
    return 0;
}

int jg_grad_sets_find(jg_entry *e, int **vals, int n_vals) {
    jg_tensor **owners, **grads;
    int n = jg_trace_take_grad_sets(&owners, &grads), rc = 0;
    int *grown = n ? realloc(*vals, sizeof(int) * (size_t)(n_vals + n)) : *vals;
    if (grown)
        *vals = grown;
    if (n && (!grown || !(e->gset_owner = calloc((size_t)n, sizeof *e->gset_owner)) ||
              !(e->gset_out = malloc(sizeof(int) * (size_t)n))))
        rc = jg_errorf("out of memory in jg_compile");
    for (int i = 0; i < n && rc == 0; i++) {
        e->gset_owner[i] = jg_retain(owners[i]);
        e->n_gset++;
        e->gset_out[i] = -1;
        if (!grads[i])
            continue;
        if (((*vals)[n_vals + e->n_gset_out] = jg_trace_value(grads[i])) < 0) {
            rc = -1;
        } else {
            e->gset_out[i] = e->n_gset_out++;
        }
    }
    for (int i = 0; i < n; i++) {
        jg_release(owners[i]);
        jg_release(grads[i]);
    }
    free(owners);
    free(grads);
    return rc;
}

int jg_overwrites_keep(jg_entry *e) {
    const jg_trace_overwrite *ow;
    int n = jg_trace_overwrites(&ow);
    free(e->ow);
    e->ow = NULL;
    e->n_ow = 0;
    if (!n)
        return 0;
    if (!(e->ow = malloc(sizeof *ow * (size_t)n)))
        return jg_errorf("out of memory in jg_compile");
    memcpy(e->ow, ow, sizeof *ow * (size_t)n);
    e->n_ow = n;
    return 0;
}

const char *jg_gnode_eager_name(const jg_gnode *nd) {
    return jg_op_node_name(nd->op, &nd->attrs);
}

void jg_stale_saved_find(jg_entry *e, const jg_graph *g, int n_in, const int *in_src,
                         const int *checked_by) {
    const jg_trace_overwrite *ow;
    bool direct;
    int k = checked_by
                ? jg_trace_stale_saved(g, e->ow, e->n_ow, n_in, in_src, checked_by, &ow, &direct)
                : -1;
    if (k >= 0) {
        int v = in_src[k];
        if (jg_trace_saved_output(g, checked_by[v], v)) {
            /* a saved output: eager names the node that saved it */
            const jg_gnode *nd = &g->nodes[g->vals[v].node];
            e->stale_name_nr = g->vals[v].index;
            if (nd->kind == JG_GN_OP) {
                e->stale_name = jg_gnode_eager_name(nd);
            } else if (nd->kind == JG_GN_CUSTOM) {
                snprintf(e->stale_name_buf, sizeof e->stale_name_buf, "%sBackward",
                         nd->custom->fn->name ? nd->custom->fn->name : "Function");
                e->stale_name = e->stale_name_buf;
            }
        } else if (direct) {
            /* named by the value the tensor's last write made */
            const jg_trace_overwrite *last = &e->ow[ow->last];
            int w = jg_trace_written_value(g, last);
            const jg_value *val = w >= 0 ? &g->vals[w] : NULL;
            if (val && val->requires_grad && g->nodes[val->node].kind == JG_GN_OP) {
                /* (a write through a view: eager's CopySlices) */
                e->stale_name =
                    last->via_view ? "CopySlices" : jg_gnode_eager_name(&g->nodes[val->node]);
                e->stale_name_nr = last->via_view ? 0 : val->index;
            }
        }
        e->stale = true;
        e->stale_val = v;
        e->stale_input = ow->input;
        e->stale_expected = ow->version;
        e->stale_actual = ow->end_version;
    }
    free(e->ow);
    e->ow = NULL;
    e->n_ow = 0;
}

#define MODIFIED_MSG                                                                               \
    "one of the variables needed for gradient computation has been modified by an inplace "        \
    "operation"

/* Eager's message for a saved tensor changed in place: forward value v of
 * g, named by the input's history fn/nr (an input) or by the op that made
 * it (its eager node). */
static int modified_error(const jg_graph *g, int v, const jg_node *fn, int nr, uint64_t now,
                          uint64_t expected) {
    const jg_value *val = &g->vals[v];
    jg_tensor m = {.dtype = val->meta.dtype, .ndim = val->meta.ndim};
    memcpy(m.shape, val->meta.shape, sizeof(int64_t) * (size_t)val->meta.ndim);
    char d[96], made[128] = "";
    jg_describe(&m, d, sizeof d);
    if (val->kind == JG_VAL_INPUT && fn) {
        /* (a stand-in is named as what it redirects to, a leaf by none) */
        jg_edge to = {(jg_node *)fn, nr, NULL};
        if (fn->vt->redirect && !fn->vt->redirect(fn, nr, &to))
            to = (jg_edge){(jg_node *)fn, nr, NULL};
        int enr = to.nr;
        const char *name = to.fn ? jg_node_eager_name(to.fn, to.nr, &enr) : NULL;
        if (name)
            snprintf(made, sizeof made, ", which is output %d of %s,", enr, name);
    } else if (val->kind == JG_VAL_NODE && val->requires_grad &&
               g->nodes[val->node].kind == JG_GN_OP && jg_ops[g->nodes[val->node].op].bw_name) {
        snprintf(made, sizeof made, ", which is output %d of %s,", val->index,
                 jg_gnode_eager_name(&g->nodes[val->node]));
    } else if (val->kind == JG_VAL_NODE && val->requires_grad &&
               g->nodes[val->node].kind == JG_GN_CUSTOM) {
        const jg_function *fn = g->nodes[val->node].custom->fn;
        snprintf(made, sizeof made, ", which is output %d of %.64sBackward,", val->index,
                 fn->name ? fn->name : "Function");
    }
    return jg_errorf("%s: [%.3s %s]%s is at version %llu; expected version %llu instead",
                     MODIFIED_MSG, d, d + 3, made, (unsigned long long)now,
                     (unsigned long long)expected);
}

int jg_stale_saved_error(const jg_entry *e, uint64_t base, uint64_t now, const jg_node *fn,
                         int nr) {
    /* (a captured tensor is written back at the call, an input's stand-in
     * keeps its version then) */
    uint64_t actual = now > base ? now : base + e->stale_actual;
    if (e->stale_name) {
        const jg_value *val = &e->fwd_ad->vals[e->stale_val];
        jg_tensor m = {.dtype = val->meta.dtype, .ndim = val->meta.ndim};
        memcpy(m.shape, val->meta.shape, sizeof(int64_t) * (size_t)val->meta.ndim);
        char d[96];
        jg_describe(&m, d, sizeof d);
        return jg_errorf("%s: [%.3s %s], which is output %d of %s, is at version %llu; "
                         "expected version %llu instead",
                         MODIFIED_MSG, d, d + 3, e->stale_name_nr, e->stale_name,
                         (unsigned long long)actual,
                         (unsigned long long)(base + e->stale_expected));
    }
    return modified_error(e->fwd_ad, e->stale_val, fn, nr, actual, base + e->stale_expected);
}

jg_tensor *jg_saved_read(const jg_entry *e, int i, jg_saved *s, jg_node *owner) {
    int v = e->saved_val[i];
    if (s->t && s->t->storage && !s->unchecked && s->t->storage->version != s->version) {
        modified_error(e->fwd_ad, v, s->t->grad_fn, s->t->output_nr, s->t->storage->version,
                       s->version);
        return NULL;
    }
    return jg_saved_unpack(s, owner, false);
}

int jg_entry_run_mutating(jg_entry *e, int n_inputs, jg_tensor *const *inputs,
                          jg_tensor **outputs) {
    int n_user = e->n_prog_out - e->n_mut - e->n_lmut - e->n_gset_out;
    /* eager's checks, before anything runs: the first write with grad mode
     * on (in the program's order) of a leaf that requires grad, or of a
     * view of one, fails as eager's, naming the view when the write went
     * through one (or the input is one); writes under no_grad pass */
    int failed = -1, failed_check = -1;
    for (int m = 0; m < e->n_mut; m++) {
        jg_tensor *x = inputs[e->mut_input[m]];
        if (jg_view_sync(x) < 0)
            return -1;
        int check = e->mut_check ? e->mut_check[m] : jg_grad_mode ? 0 : -1;
        if (check < 0 || (failed >= 0 && failed_check < check))
            continue;
        bool view_leaf = x->view && x->view->base->requires_grad && !x->view->base->grad_fn;
        if (view_leaf || (x->requires_grad && !x->grad_fn)) {
            failed = m;
            failed_check = check;
        }
    }
    if (failed >= 0) {
        jg_tensor *x = inputs[e->mut_input[failed]];
        if (x->view || failed_check % 2)
            return jg_errorf("a view of a leaf Variable that requires grad is being used in an "
                             "in-place operation.");
        return jg_errorf("a leaf Variable that requires grad is being used in an in-place "
                         "operation.");
    }
    jg_tensor *small[16], **ins = small;
    if (n_inputs > 16 && !(ins = malloc(sizeof *ins * (size_t)n_inputs)))
        return jg_errorf("out of memory in jg_compiled_call");
    for (int i = 0; i < n_inputs; i++)
        ins[i] = inputs[i];
    int rc = 0;
    jg_scope_push();
    /* the backward may read a written input's old value: the graph reads a
     * copy that keeps it (with the input's history), the input gets the new */
    if (jg_grad_mode && e->n_node_out)
        for (int m = 0; m < e->n_mut && rc == 0; m++) {
            jg_tensor *x = inputs[e->mut_input[m]];
            jg_tensor *s = jg_scope_track(jg_tensor_alloc(x->dtype, x->ndim, x->shape));
            if (!s) {
                rc = -1;
                break;
            }
            jg_copy_data(s, x);
            /* (x as it was at the call: a backward that fails on a saved
             * value the program overwrote counts x's writes from here) */
            s->storage->version = x->storage->version;
            jg_node_retain(x->grad_fn);
            s->grad_fn = x->grad_fn;
            s->output_nr = x->output_nr;
            s->requires_grad = x->requires_grad;
            for (int i = 0; i < n_inputs; i++)
                if (inputs[i] == x)
                    ins[i] = s;
        }
    jg_tensor *small_o[16], **outs = small_o;
    if (e->n_prog_out > 16 && !(outs = malloc(sizeof *outs * (size_t)e->n_prog_out)))
        rc = jg_errorf("out of memory in jg_compiled_call");
    /* the c backend may compute the new values in the tensors' own buffers
     * (backend/cgen.h): what follows writes them back */
    bool prev_inplace = jg_cgen_inplace_run;
    jg_cgen_inplace_run = true;
    if (rc == 0 && jg_entry_run(e, ins, outs) < 0)
        rc = -1;
    jg_cgen_inplace_run = prev_inplace;
    for (int m = 0; m < e->n_lmut && rc == 0; m++) {
        /* written without history (trace/trace.c refuses others): the
         * values, and one version bump per write, as eager's */
        jg_tensor *t = e->lifted[e->lmut_lifted[m]], *v = outs[n_user + e->n_mut + m];
        if (v != t && !jg_tensor_take_memory(t, v)) /* (v == t: computed in place) */
            copy_back(t, v);
        t->storage->version += e->lmut_writes[m];
    }
    for (int m = 0; m < e->n_gset && rc == 0; m++) {
        /* .grad as the program left it: a tensor of its own, as eager's
         * AccumulateGrad makes it */
        jg_tensor *t = e->gset_owner[m], *g = NULL;
        if (e->gset_out[m] >= 0) {
            g = outs[n_user + e->n_mut + e->n_lmut + e->gset_out[m]];
            /* (a view whose base is gone is taken as it is: a copy per
             * step of every gradient otherwise) */
            bool own = g->is_view ? !g->grad_fn && jg_tensor_claim(g)
                                  : jg_is_contiguous(g) && !g->offset && g->storage->refcount == 1;
            if (!own) {
                writeback_copies += (size_t)g->numel * jg_dtype_size(g->dtype) > JG_INLINE_BYTES;
                /* a .grad with history (create_graph) keeps it through the
                 * clone, as eager's AccumulateGrad clones it then */
                bool prev = jg_set_grad_enabled(g->requires_grad);
                g = jg_clone(g);
                jg_set_grad_enabled(prev);
                if (!g) {
                    rc = -1;
                    break;
                }
            }
        }
        jg_retain(g);
        jg_release(t->grad);
        t->grad = g;
    }
    for (int m = 0; m < e->n_mut && rc == 0; m++) {
        /* the new value's history is the compiled call's: x moves onto it
         * (a view: its base's region is replaced), as an in-place op's result */
        jg_tensor *x = inputs[e->mut_input[m]], *in2[2] = {x, outs[n_user + m]};
        if (jg_any_requires_grad(2, in2) && e->mut_check[m] != -2) {
            rc = jg_inplace_commit(x, in2[1]);
        } else {
            if (!jg_tensor_take_memory(x, in2[1]))
                copy_back(x, in2[1]);
            x->storage->version++;
        }
        if (rc == 0 && e->mut_writes[m] > 1)
            x->storage->version += e->mut_writes[m] - 1; /* eager bumps once per write */
    }
    for (int j = 0; j < n_user && rc == 0; j++)
        outputs[j] =
            jg_retain(e->out_input && e->out_input[j] >= 0 ? inputs[e->out_input[j]] : outs[j]);
    jg_scope_pop();
    if (ins != small)
        free(ins);
    if (outs != small_o)
        free(outs);
    if (rc < 0)
        return -1;
    for (int j = 0; j < n_user; j++)
        jg_scope_track(outputs[j]);
    return n_user;
}
