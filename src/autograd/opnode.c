/* The autograd node that every built-in op records: it keeps the op, its
 * attributes and what its VJP rule reads, and calls that rule in backward. */
#include "autograd/engine.h"
#include "autograd/node.h"
#include "ops/optable.h"

#include <string.h>

#define OPNODE_MAX_IN 3
#define OPNODE_MAX_OUT 2

/* Sized per call: in_meta has n_in entries, then come the saved slots the op
 * fills (its n_in inputs if it saves inputs, then its n_out outputs if it
 * saves outputs), then a copy of the attributes only when the op was given
 * some (attrs then points at it).  Op nodes keep no output metadata
 * (base.out_meta is NULL): nothing reads it for them. */
typedef struct {
    jg_node base;
    jg_opcode op;
    const jg_attrs *attrs; /* the copy at the end, or no_attrs */
    const char *alias;     /* a composite op's PyTorch name (jg_autograd_name_node), or NULL */
    unsigned saved_in;     /* bit k: input k is saved (jg_op_saved_inputs) */
    jg_saved *saved;       /* SAVE_IN: inputs at [0, n_in); SAVE_OUT: outputs after them */
    jg_meta in_meta[];
} op_node;

static inline jg_saved *saved_out(op_node *o, const jg_op_info *info) {
    return o->saved + ((info->flags & JG_OPF_SAVE_IN) ? info->n_in : 0);
}

static const jg_attrs no_attrs; /* what a NULL attrs argument means */

static int opnode_apply(jg_node *n, jg_tensor *const *gout, const bool *reached, jg_tensor **gin,
                        bool create_graph) {
    (void)reached;
    op_node *o = (op_node *)n;
    const jg_op_info *info = &jg_ops[o->op];
    jg_tensor *in[OPNODE_MAX_IN] = {0}, *out[OPNODE_MAX_OUT] = {0};
    bool needs[OPNODE_MAX_IN];
    for (int k = 0; k < info->n_in; k++) {
        needs[k] = n->next[k].fn || n->next[k].leaf;
        if ((o->saved_in & (1u << k)) && !(in[k] = jg_saved_unpack(&o->saved[k], n, create_graph)))
            return -1;
    }
    if (info->flags & JG_OPF_SAVE_OUT) {
        jg_saved *so = saved_out(o, info);
        for (int k = 0; k < info->n_out; k++)
            if (so[k].output_nr >= 0 && !(out[k] = jg_saved_unpack(&so[k], n, create_graph)))
                return -1;
    }
    if (o->op == JG_OP_SLICE && needs[0] && gout[0]) {
        /* into the sliced tensor's accumulator (a node's input buffer; a
         * leaf's pending .grad goes the ordinary way, for its hooks) */
        const void *target;
        jg_tensor **acc;
        if (jg_engine_edge_acc(n, 0, &target, &acc) == 0 && acc && target == (const void *)acc) {
            int done = jg_grad_accumulate_slice(acc, gout[0], o->attrs);
            if (done != 0) {
                gin[0] = NULL;
                return done < 0 ? -1 : 0;
            }
        }
    }
    if (info->vjp(o->attrs, o->in_meta, in, out, gout, needs, gin) < 0)
        return -1;
    for (int k = 0; k < info->n_in; k++) {
        if (!needs[k])
            gin[k] = NULL;
        if (gin[k]) {
            JG_ASSERT(gin[k]->ndim == o->in_meta[k].ndim);
            for (int d = 0; d < gin[k]->ndim; d++)
                JG_ASSERT(gin[k]->shape[d] == o->in_meta[k].shape[d]);
        }
    }
    return 0;
}

static void opnode_release_saved(jg_node *n) {
    op_node *o = (op_node *)n;
    const jg_op_info *info = &jg_ops[o->op];
    if (info->flags & JG_OPF_SAVE_IN)
        for (int k = 0; k < info->n_in; k++)
            jg_saved_free(&o->saved[k]);
    if (info->flags & JG_OPF_SAVE_OUT) {
        jg_saved *so = saved_out(o, info);
        for (int k = 0; k < info->n_out; k++)
            jg_saved_free(&so[k]);
    }
}

static const char *opnode_name(const jg_node *n) {
    const op_node *o = (const op_node *)n;
    if (o->alias)
        return o->alias;
    return jg_op_node_name(o->op, o->attrs);
}

/* An op's VJP rule is written with library ops only. */
static bool opnode_pure(const jg_node *n) {
    (void)n;
    return true;
}

static const jg_node_vt opnode_vt = {
    opnode_apply, opnode_release_saved, opnode_release_saved, opnode_name, false, NULL,
    NULL,         opnode_pure};

int jg_autograd_record_op(int op, const void *attrs, int n_in, jg_tensor *const *in, int n_out,
                          jg_tensor *const *out) {
    const jg_op_info *info = &jg_ops[op];
    JG_ASSERT(n_in <= OPNODE_MAX_IN && n_out <= OPNODE_MAX_OUT);
    int n_saved =
        ((info->flags & JG_OPF_SAVE_IN) ? n_in : 0) + ((info->flags & JG_OPF_SAVE_OUT) ? n_out : 0);
    size_t size = sizeof(op_node) + (size_t)n_in * sizeof(jg_meta) +
                  (size_t)n_saved * sizeof(jg_saved) + (attrs ? sizeof(jg_attrs) : 0);
    /* every field below the header is written here */
    op_node *o = (op_node *)jg_node_alloc_fields(size, &opnode_vt, n_in, 0);
    if (!o)
        return -1;
    o->base.n_out = n_out; /* (no output metadata is stored) */
    o->base.out_meta = NULL;
    o->op = (jg_opcode)op;
    o->alias = NULL;
    o->saved = (jg_saved *)&o->in_meta[n_in];
    if (attrs) {
        jg_attrs *copy = (jg_attrs *)&o->saved[n_saved];
        *copy = *(const jg_attrs *)attrs;
        o->attrs = copy;
    } else {
        o->attrs = &no_attrs;
    }
    bool needs[OPNODE_MAX_IN];
    for (int k = 0; k < n_in; k++) {
        jg_meta_of(in[k], &o->in_meta[k]);
        jg_node_set_edge(&o->base, k, in[k]);
        needs[k] = o->base.next[k].fn || o->base.next[k].leaf;
    }
    o->saved_in = jg_op_saved_inputs((jg_opcode)op, needs);
    if (info->flags & JG_OPF_SAVE_IN)
        for (int k = 0; k < n_in; k++)
            jg_saved_init(&o->saved[k], (o->saved_in & (1u << k)) ? in[k] : NULL);
    if (info->flags & JG_OPF_SAVE_OUT) {
        jg_saved *so = saved_out(o, info);
        for (int k = 0; k < n_out; k++) {
            jg_saved_init(&so[k],
                          jg_op_saves_output((jg_opcode)op, k, out[k]->dtype) ? out[k] : NULL);
            if (so[k].t)
                jg_saved_mark_output(&so[k], k); /* (output_nr >= 0 marks a kept one) */
        }
    }
    o->base.has_saved = n_saved != 0;
    /* jg_node_set_outputs without the metadata; the node's reference is
     * handed to the first differentiable output */
    bool handed = false;
    for (int k = 0; k < n_out; k++) {
        jg_tensor *t = out[k];
        if (t->dtype != JG_F32 && t->dtype != JG_F64)
            continue; /* integer outputs (indices) are never differentiable */
        if (handed)
            jg_node_retain(&o->base);
        handed = true;
        jg_node_release(t->grad_fn);
        t->grad_fn = &o->base;
        t->output_nr = k;
        t->requires_grad = true;
    }
    if (!handed)
        jg_node_release(&o->base);
    return 0;
}

void jg_autograd_name_node(jg_tensor *t, const char *name) {
    if (t && !t->sym && t->grad_fn && t->grad_fn->vt == &opnode_vt)
        ((op_node *)t->grad_fn)->alias = name;
}
