/* The autograd node that every built-in op records: it keeps the op, its
 * attributes and what its VJP rule reads, and calls that rule in backward. */
#include "autograd/node.h"
#include "ops/optable.h"

#include <string.h>

#define OPNODE_MAX_IN 3
#define OPNODE_MAX_OUT 2

/* Sized per call: in_meta has n_in entries, followed by a copy of the
 * attributes only when the op was given some (attrs then points at it). */
typedef struct {
    jg_node base;
    jg_opcode op;
    const jg_attrs *attrs; /* the copy after in_meta, or no_attrs */
    jg_saved in[OPNODE_MAX_IN];
    jg_saved out[OPNODE_MAX_OUT];
    jg_meta in_meta[];
} op_node;

static const jg_attrs no_attrs; /* what a NULL attrs argument means */

static int opnode_apply(jg_node *n, jg_tensor *const *gout, jg_tensor **gin, bool create_graph) {
    op_node *o = (op_node *)n;
    const jg_op_info *info = &jg_ops[o->op];
    jg_tensor *in[OPNODE_MAX_IN] = {0}, *out[OPNODE_MAX_OUT] = {0};
    bool needs[OPNODE_MAX_IN];
    for (int k = 0; k < info->n_in; k++) {
        needs[k] = n->next[k].fn || n->next[k].leaf;
        if ((info->flags & JG_OPF_SAVE_IN) &&
            !(in[k] = jg_saved_unpack(&o->in[k], n, create_graph)))
            return -1;
    }
    if (info->flags & JG_OPF_SAVE_OUT)
        for (int k = 0; k < info->n_out; k++)
            if (!(out[k] = jg_saved_unpack(&o->out[k], n, create_graph)))
                return -1;
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
    if (info->flags & JG_OPF_SAVE_IN) /* (no other slot is ever filled) */
        for (int k = 0; k < info->n_in; k++)
            jg_saved_free(&o->in[k]);
    if (info->flags & JG_OPF_SAVE_OUT)
        for (int k = 0; k < info->n_out; k++)
            jg_saved_free(&o->out[k]);
}

static const char *opnode_name(const jg_node *n) {
    return jg_ops[((const op_node *)n)->op].bw_name;
}

static const jg_node_vt opnode_vt = {opnode_apply, opnode_release_saved, opnode_release_saved,
                                     opnode_name};

int jg_autograd_record_op(int op, const void *attrs, int n_in, jg_tensor *const *in, int n_out,
                          jg_tensor *const *out) {
    const jg_op_info *info = &jg_ops[op];
    JG_ASSERT(n_in <= OPNODE_MAX_IN && n_out <= OPNODE_MAX_OUT);
    size_t size = sizeof(op_node) + (size_t)n_in * sizeof(jg_meta);
    if (attrs)
        size += sizeof(jg_attrs);
    op_node *o = (op_node *)jg_node_alloc(size, &opnode_vt, n_in, n_out);
    if (!o)
        return -1;
    o->op = (jg_opcode)op;
    if (attrs) {
        jg_attrs *copy = (jg_attrs *)&o->in_meta[n_in];
        *copy = *(const jg_attrs *)attrs;
        o->attrs = copy;
    } else {
        o->attrs = &no_attrs;
    }
    for (int k = 0; k < n_in; k++) {
        jg_meta_of(in[k], &o->in_meta[k]);
        jg_node_set_edge(&o->base, k, in[k]);
        if (info->flags & JG_OPF_SAVE_IN)
            jg_saved_init(&o->in[k], in[k]);
    }
    if (info->flags & JG_OPF_SAVE_OUT)
        for (int k = 0; k < n_out; k++) {
            jg_saved_init(&o->out[k], out[k]);
            jg_saved_mark_output(&o->out[k], k);
        }
    o->base.has_saved = (info->flags & (JG_OPF_SAVE_IN | JG_OPF_SAVE_OUT)) != 0;
    jg_node_set_outputs(&o->base, n_out, out);
    jg_node_release(&o->base); /* the outputs hold it now */
    return 0;
}
