/* Graph autodiff (see autodiff.h). */
#include "autodiff/autodiff.h"

#include "autograd/node.h"
#include "trace/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const jg_graph *f;
    jg_tensor **fsym; /* per forward value: its stand-in in the backward trace */
    int *in_src;
    int n_in, cap_in, n_saved;
} ad_state;

static int note_input(ad_state *s, int src) {
    if (s->n_in == s->cap_in) {
        int cap = s->cap_in ? s->cap_in * 2 : 16;
        int *n = realloc(s->in_src, (size_t)cap * sizeof *n);
        if (!n)
            return jg_errorf("out of memory in autodiff");
        s->in_src = n;
        s->cap_in = cap;
    }
    s->in_src[s->n_in++] = src;
    return 0;
}

/* The backward graph's stand-in for forward value v (borrowed). */
static jg_tensor *fwd_value(ad_state *s, int v) {
    if (s->fsym[v])
        return s->fsym[v];
    const jg_value *val = &s->f->vals[v];
    if (val->kind == JG_VAL_CONST)
        return s->fsym[v] = jg_retain(s->f->consts[val->index]);
    char name[32];
    if (val->kind == JG_VAL_INPUT)
        snprintf(name, sizeof name, "%.31s", s->f->input_names[val->index]);
    else
        snprintf(name, sizeof name, "s%d", s->n_saved++);
    if (note_input(s, v) < 0)
        return NULL;
    return s->fsym[v] = jg_trace_placeholder(&val->meta, false, false, name);
}

int jg_autodiff(const jg_graph *f, int n_seeds, const int *seeds, jg_autodiff_result *r) {
    memset(r, 0, sizeof *r);
    jg_graph *b = jg_graph_new();
    if (!b)
        return -1;
    b->name = "backward";
    int nv = f->n_vals ? f->n_vals : 1;
    ad_state s = {.f = f};
    s.fsym = calloc((size_t)nv, sizeof *s.fsym);
    jg_tensor **acc = calloc((size_t)nv, sizeof *acc);
    /* contribution layout: (node, slot) with a graph input operand that
     * requires grad, latest node first */
    int n_contrib = 0;
    for (int i = f->n_nodes - 1; i >= 0; i--)
        for (int k = 0; k < f->nodes[i].n_in; k++) {
            const jg_value *ov = &f->vals[f->nodes[i].in[k]];
            n_contrib += ov->kind == JG_VAL_INPUT && ov->requires_grad;
        }
    int *first = malloc(sizeof(int) * (size_t)(f->n_nodes + 1)); /* node -> first contrib */
    int *cin = malloc(sizeof(int) * (size_t)(n_contrib ? n_contrib : 1));
    jg_tensor **contrib = calloc((size_t)(n_contrib ? n_contrib : 1), sizeof *contrib);
    int *outs = malloc((size_t)(n_contrib ? n_contrib : 1) * sizeof *outs);
    if (first && cin) {
        int c = 0;
        for (int i = f->n_nodes - 1; i >= 0; i--) {
            first[i] = c;
            for (int k = 0; k < f->nodes[i].n_in; k++) {
                const jg_value *ov = &f->vals[f->nodes[i].in[k]];
                if (ov->kind == JG_VAL_INPUT && ov->requires_grad)
                    cin[c++] = ov->index;
            }
        }
    }
    if (!s.fsym || !acc || !outs || !first || !cin || !contrib || jg_trace_begin(b, 0) < 0) {
        free(s.fsym);
        free(acc);
        free(outs);
        free(first);
        free(cin);
        free(contrib);
        jg_graph_free(b);
        return jg_errorf("out of memory in autodiff");
    }
    bool prev = jg_set_grad_enabled(false);
    jg_scope_push();
    int rc = 0;
    for (int k = 0; k < n_seeds && rc == 0; k++) {
        char name[16];
        snprintf(name, sizeof name, "g%d", k);
        const jg_value *sv = &f->vals[seeds[k]];
        JG_ASSERT(sv->requires_grad);
        jg_tensor *g = jg_trace_placeholder(&sv->meta, false, false, name);
        if (!g || note_input(&s, -1 - k) < 0 || jg_grad_accumulate(&acc[seeds[k]], g) < 0)
            rc = -1;
    }
    /* latest node first, slots in order: the eager engine's order */
    for (int i = f->n_nodes - 1; i >= 0 && rc == 0; i--) {
        const jg_gnode *n = &f->nodes[i];
        bool any_out = false, any_need = false;
        for (int k = 0; k < n->n_out; k++)
            any_out |= acc[n->out[k]] != NULL;
        for (int k = 0; k < n->n_in; k++)
            any_need |= f->vals[n->in[k]].requires_grad;
        if (!any_out || !any_need)
            continue;
        if (n->kind != JG_GN_OP) {
            rc = jg_errorf("autodiff: custom nodes are not supported yet");
            break;
        }
        const jg_op_info *info = &jg_ops[n->op];
        if (info->flags & JG_OPF_NONDIFF)
            continue;
        jg_tensor *in[4] = {0}, *out[2] = {0}, *gout[2] = {0}, *gin[4] = {0};
        jg_meta meta[4];
        bool needs[4];
        for (int k = 0; k < n->n_in && rc == 0; k++) {
            meta[k] = f->vals[n->in[k]].meta;
            needs[k] = f->vals[n->in[k]].requires_grad;
            if ((info->flags & JG_OPF_SAVE_IN) && !(in[k] = fwd_value(&s, n->in[k])))
                rc = -1;
        }
        for (int k = 0; k < n->n_out && rc == 0; k++) {
            gout[k] = acc[n->out[k]];
            if ((info->flags & JG_OPF_SAVE_OUT) && !(out[k] = fwd_value(&s, n->out[k])))
                rc = -1;
        }
        if (rc < 0)
            break;
        jg_scope_push();
        rc = info->vjp(&n->attrs, meta, in, out, gout, needs, gin);
        int c = first[i];
        for (int k = 0; k < n->n_in && rc == 0; k++) {
            bool to_input = f->vals[n->in[k]].kind == JG_VAL_INPUT && needs[k];
            if (to_input)
                contrib[c++] = needs[k] && gin[k] ? jg_retain(gin[k]) : NULL;
            else if (needs[k] && gin[k])
                rc = jg_grad_accumulate(&acc[n->in[k]], jg_retain(gin[k]));
        }
        jg_scope_pop();
    }
    for (int k = 0; k < n_contrib && rc == 0; k++) {
        outs[k] = -1;
        if (contrib[k] && (outs[k] = jg_trace_value(contrib[k])) < 0)
            rc = -1;
    }
    if (rc == 0)
        rc = jg_graph_set_outputs(b, n_contrib, outs);
    for (int v = 0; v < f->n_vals; v++) {
        jg_release(acc[v]);
        jg_release(s.fsym[v]);
    }
    for (int k = 0; k < n_contrib; k++)
        jg_release(contrib[k]);
    free(contrib);
    free(first);
    jg_scope_pop();
    jg_set_grad_enabled(prev);
    jg_trace_end();
    free(acc);
    free(s.fsym);
    free(outs);
    if (rc < 0) {
        free(s.in_src);
        free(cin);
        jg_graph_free(b);
        return -1;
    }
    r->contrib_input = cin;
    r->n_contrib = n_contrib;
    r->bwd = b;
    r->in_src = s.in_src;
    r->n_in = s.n_in;
    return 0;
}

void jg_autodiff_result_free(jg_autodiff_result *r) {
    jg_graph_free(r->bwd);
    free(r->in_src);
    free(r->contrib_input);
    memset(r, 0, sizeof *r);
}
