/* The IR printer: one line per node, in the style of torch.fx.
 *
 *   graph(x0: f32[16], x1: f32[16]):
 *     c0 : f32[] = constant(2)
 *     %0 : f32[16] = add(x1, x1)
 *     %1 : f32[16] = mul(x0, %0)
 *     %2 : f32[] = sum(%1)
 *     return (%2)
 */
#include "graph/graph.h"

#include "core/strbuf.h"
#include "optim/adam_fused.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char **buf;
    size_t *len, *cap;
    int err;
} out_t;

static void emit(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(out_t *o, const char *fmt, ...) {
    if (o->err)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (jg_vappendf(o->buf, o->len, o->cap, fmt, ap) < 0)
        o->err = 1;
    va_end(ap);
}

static void emit_meta(out_t *o, const jg_meta *m) {
    char s[160];
    jg_format_shape(s, sizeof s, m->ndim, m->shape);
    emit(o, "%s%s", jg_dtype_short(m->dtype), s);
}

static void emit_list(out_t *o, const int64_t *v, int n) {
    char s[200];
    jg_format_shape(s, sizeof s, n, v);
    emit(o, "%s", s);
}

/* Scalars print like Python's repr of a float where that is exact enough. */
static void emit_scalar(out_t *o, double s) {
    emit(o, "%.17g", s);
}

/* Non-tensor operands, spelled per op family. */
static void emit_attrs(out_t *o, const jg_graph *g, const jg_gnode *n) {
    const jg_attrs *a = &n->attrs;
    const jg_meta *in0 = n->n_in ? &g->vals[n->in[0]].meta : NULL;
    if (jg_ops[n->op].flags & JG_OPF_SCALAR) {
        emit(o, ", ");
        emit_scalar(o, a->s);
        return;
    }
    switch (n->op) {
    case JG_OP_MATMUL: /* attrs: ops/api.c jg_matmul */
        if (a->i[0] & JG_MATMUL_A_COL_MAJOR)
            emit(o, ", a_col_major");
        if (a->i[0] & JG_MATMUL_B_COL_MAJOR)
            emit(o, ", b_col_major");
        return;
    case JG_OP_TO_DTYPE:
        emit(o, ", %s", jg_dtype_short((jg_dtype)a->dtype));
        return;
    case JG_OP_SUM:
    case JG_OP_MEAN: {
        bool all = in0 && a->n == in0->ndim;
        for (int k = 0; all && k < a->n; k++)
            all = a->i[k] == k;
        if (!all) {
            emit(o, ", dims=");
            emit_list(o, a->i, a->n);
        }
        if (a->keepdim)
            emit(o, ", keepdim=True");
        return;
    }
    case JG_OP_MAX_DIM:
        emit(o, ", dim=%lld%s", (long long)a->i[0], a->keepdim ? ", keepdim=True" : "");
        return;
    case JG_OP_SOFTMAX:
    case JG_OP_LOG_SOFTMAX:
        emit(o, ", dim=%lld", (long long)a->i[0]);
        return;
    case JG_OP_RESHAPE:
    case JG_OP_EXPAND:
    case JG_OP_PERMUTE:
        emit(o, ", ");
        emit_list(o, a->i, a->n);
        return;
    case JG_OP_SLICE:
    case JG_OP_SLICE_SCATTER:
        emit(o, ", dim=%lld, start=%lld, end=%lld", (long long)a->i[0], (long long)a->i[1],
             (long long)a->i[2]);
        if (a->n >= 4 && a->i[3] != 1)
            emit(o, ", step=%lld", (long long)a->i[3]);
        if (a->n >= 5 && a->i[4])
            emit(o, ", copy");
        return;
    case JG_OP_SLICE_BACKWARD:
        emit(o, ", dim=%lld, start=%lld, end=%lld, shape=", (long long)a->i[0], (long long)a->i[1],
             (long long)a->i[2]);
        emit_list(o, a->i + 3, a->n - 3);
        return;
    case JG_OP_SLICE_BACKWARD2:
        emit(o, ", dim=%lld, ranges=[%lld, %lld) [%lld, %lld), shape=", (long long)a->i[0],
             (long long)a->i[1], (long long)a->i[2], (long long)a->i[3], (long long)a->i[4]);
        emit_list(o, a->i + 5, a->n - 5);
        return;
    case JG_OP_GATHER:
    case JG_OP_SCATTER:
    case JG_OP_SCATTER_ADD_INTO:
    case JG_OP_SCATTER_VALUE:
        emit(o, ", dim=%lld", (long long)a->i[0]);
        return;
    case JG_OP_SCATTER_ADD:
        emit(o, ", dim=%lld, shape=", (long long)a->i[0]);
        emit_list(o, a->i + 1, a->n - 1);
        return;
    case JG_OP_NLL_LOSS:
    case JG_OP_NLL_LOSS_BACKWARD: { /* attrs: ops/softmax.c */
        static const char *const red[] = {"mean", "sum", "none"};
        int r = a->n ? (int)a->i[2] : 0;
        emit(o, ", reduction=%s", r >= 0 && r < 3 ? red[r] : "?");
        if (a->n && a->i[0])
            emit(o, ", ignore_index=%lld", (long long)a->i[1]);
        if (n->op == JG_OP_NLL_LOSS_BACKWARD)
            emit(o, ", classes=%lld", (long long)a->i[3]);
        return;
    }
    case JG_OP_ADAM_MOMENTS:
    case JG_OP_ADAM_UPDATE: { /* attrs: optim/adam_fused.c */
        jg_adam_fused_args h;
        jg_adam_step_attrs_read(a, &h);
        if (n->op == JG_OP_ADAM_UPDATE)
            emit(o, ", lr=%.17g", h.lr);
        emit(o, ", betas=(%.17g, %.17g), eps=%.17g", h.beta1, h.beta2, h.eps);
        if (h.decoupled)
            emit(o, ", decay=%.17g", h.decay);
        else if (h.weight_decay)
            emit(o, ", weight_decay=%.17g", h.wd);
        return;
    }
    default: {
        static const jg_attrs zero;
        if (memcmp(a, &zero, sizeof zero)) {
            emit(o, ", attrs=");
            emit_list(o, a->i, a->n);
            if (a->s != 0) {
                emit(o, ", s=");
                emit_scalar(o, a->s);
            }
        }
        return;
    }
    }
}

static void emit_const_values(out_t *o, jg_tensor *t) {
    if (t->numel > 6 || t->sym) {
        emit(o, "...");
        return;
    }
    double v[6];
    for (int64_t i = 0; i < t->numel; i++) {
        /* element i in row-major order */
        int64_t rem = i, off = t->offset;
        for (int d = t->ndim - 1; d >= 0; d--) {
            off += (rem % t->shape[d]) * t->stride[d];
            rem /= t->shape[d];
        }
        const char *p = (const char *)t->storage->data + off * (int64_t)jg_dtype_size(t->dtype);
        v[i] = jg_elem_to_double(t->dtype, p);
    }
    if (t->ndim)
        emit(o, "[");
    for (int64_t i = 0; i < t->numel; i++) {
        if (i)
            emit(o, ", ");
        emit(o, "%.9g", v[i]);
    }
    if (t->ndim)
        emit(o, "]");
}

/* A subgraph, each line indented by four spaces. */
static void print_sub(out_t *o, const jg_graph *sub) {
    char *text = jg_graph_print(sub);
    if (!text) {
        o->err = 1;
        return;
    }
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        int n = nl ? (int)(nl - line) : (int)strlen(line);
        emit(o, "    %.*s\n", n, line);
        line += n + (nl != NULL);
    }
    free(text);
}

int jg_graph_print_to(const jg_graph *g, char **buf, size_t *len, size_t *cap) {
    out_t o = {buf, len, cap, 0};
    char **names = calloc((size_t)(g->n_vals ? g->n_vals : 1), sizeof *names);
    char *pool = malloc((size_t)(g->n_vals ? g->n_vals : 1) * 24);
    if (!names || !pool) {
        free(names);
        free(pool);
        return jg_errorf("out of memory printing a graph");
    }
    int seq = 0;
    for (int v = 0; v < g->n_vals; v++) {
        char *p = pool + (size_t)v * 24;
        const jg_value *val = &g->vals[v];
        if (val->kind == JG_VAL_INPUT)
            snprintf(p, 24, "%.23s", g->input_names[val->index]);
        else if (val->kind == JG_VAL_CONST)
            snprintf(p, 24, "c%d", val->index);
        else
            snprintf(p, 24, "?%d", v);
        names[v] = p;
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_out; k++)
            snprintf(names[g->nodes[i].out[k]], 24, "%%%d", seq++);

    emit(&o, "%s(", g->name);
    for (int k = 0; k < g->n_inputs; k++) {
        int v = g->inputs[k];
        emit(&o, "%s%s: ", k ? ", " : "", names[v]);
        emit_meta(&o, &g->vals[v].meta);
    }
    emit(&o, "):\n");
    for (int c = 0; c < g->n_consts; c++) {
        int v = g->const_vals[c];
        emit(&o, "  %s : ", names[v]);
        emit_meta(&o, &g->vals[v].meta);
        emit(&o, " = constant(");
        emit_const_values(&o, g->consts[c]);
        emit(&o, ")\n");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const jg_gnode *n = &g->nodes[i];
        emit(&o, "  ");
        int n_shown = n->n_out; /* a custom call's saved values print as saved=(...) */
        if (n->kind == JG_GN_CUSTOM && n->custom && n->custom->n_call_out > 0)
            n_shown = n->custom->n_call_out;
        if (n_shown == 1) {
            emit(&o, "%s : ", names[n->out[0]]);
            emit_meta(&o, &g->vals[n->out[0]].meta);
        } else {
            emit(&o, "(");
            for (int k = 0; k < n_shown; k++)
                emit(&o, "%s%s", k ? ", " : "", names[n->out[k]]);
            emit(&o, ") : (");
            for (int k = 0; k < n_shown; k++) {
                if (k)
                    emit(&o, ", ");
                emit_meta(&o, &g->vals[n->out[k]].meta);
            }
            emit(&o, ")");
        }
        if (n->kind == JG_GN_OP)
            emit(&o, " = %s(", jg_ops[n->op].name);
        else
            emit(&o, " = custom[%s%s](",
                 n->custom && n->custom->fn && n->custom->fn->name ? n->custom->fn->name : "?",
                 n->custom && n->custom->opaque_backward ? ".backward" : "");
        if (n->kind == JG_GN_CUSTOM && n->custom) {
            /* one operand per slot, then the dedup map */
            const jg_gcustom *c = n->custom;
            for (int s = 0; s < c->n_slots; s++)
                emit(&o, "%s%s", s ? ", " : "", names[jg_gnode_slot_value(n, s)]);
            emit(&o, ")  slots=(");
            for (int s = 0; s < c->n_slots; s++)
                emit(&o, "%s%d", s ? "," : "", c->slot_map[s]);
            emit(&o, ")");
            if (c->args_size) {
                emit(&o, " args=0x");
                for (size_t b = 0; b < c->args_size; b++)
                    emit(&o, "%02x", ((const unsigned char *)c->args)[b]);
            }
            if (c->opaque)
                emit(&o, " opaque");
            if (n_shown < n->n_out) {
                emit(&o, "  saved=(");
                for (int k = n_shown; k < n->n_out; k++)
                    emit(&o, "%s%s", k > n_shown ? ", " : "", names[n->out[k]]);
                emit(&o, ")");
            }
            emit(&o, "\n");
            continue;
        }
        for (int k = 0; k < n->n_in; k++)
            emit(&o, "%s%s", k ? ", " : "", names[n->in[k]]);
        emit_attrs(&o, g, n);
        emit(&o, ")\n");
    }
    emit(&o, "  return (");
    for (int k = 0; k < g->n_outputs; k++)
        emit(&o, "%s%s", k ? ", " : "", g->outputs[k] >= 0 ? names[g->outputs[k]] : "None");
    emit(&o, ")\n");
    free(names);
    free(pool);
    /* subgraphs (custom calls' traced callbacks), indented under their graph */
    for (int i = 0; i < g->n_nodes && !o.err; i++)
        if (g->nodes[i].kind == JG_GN_CUSTOM && g->nodes[i].custom->fwd)
            print_sub(&o, g->nodes[i].custom->fwd);
    for (int i = 0; i < g->n_children && !o.err; i++) {
        bool shown = false;
        for (int j = 0; j < g->n_nodes && !shown; j++)
            shown = g->nodes[j].kind == JG_GN_CUSTOM && g->nodes[j].custom->fwd == g->children[i];
        if (!shown)
            print_sub(&o, g->children[i]);
    }
    return o.err ? jg_errorf("out of memory printing a graph") : 0;
}

char *jg_graph_print(const jg_graph *g) {
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (jg_graph_print_to(g, &buf, &len, &cap) < 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
