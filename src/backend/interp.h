/* The reference backend: runs a graph node by node with the eager kernels.
 * No autograd history is recorded.  A plan, made once per graph, knows each
 * value's last use: a value's tensor is dropped right after it, and buffers
 * nobody else holds go to a small pool that later nodes (of this call or the
 * next) reuse when they need the same dtype and shape. */
#ifndef JG_BACKEND_INTERP_H
#define JG_BACKEND_INTERP_H

#include "backend/pool.h"
#include "graph/graph.h"

typedef struct jg_interp_plan jg_interp_plan;

/* The graph must outlive the plan and not change after this. */
jg_interp_plan *jg_interp_plan_new(const jg_graph *g);
void jg_interp_plan_free(jg_interp_plan *p);
/* Mode "reduce-overhead": the plan keeps a buffer per value across calls
 * (backend/static_plan.h).  Before the first run; 0 or -1 + error. */
int jg_interp_plan_make_static(jg_interp_plan *p);
/* inputs: one tensor per graph input (borrowed; metas must match).  outputs:
 * one per graph output, new references (NULL for a "none" output).  Not
 * thread safe per plan (the buffer pool).  0 or -1. */
int jg_interp_run(jg_interp_plan *p, jg_tensor *const *inputs, jg_tensor **outputs);
/* Runs op node n with its eager kernel: operands from vals, outputs (from
 * pool) into vals.  Shared with the c backend, which calls it for the nodes
 * it does not fuse.  0 or -1. */
int jg_interp_run_op(jg_buffer_pool *pool, const jg_graph *g, const jg_gnode *n, jg_tensor **vals);

#endif
