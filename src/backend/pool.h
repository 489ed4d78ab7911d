/* The buffer pool both backends keep per plan: contiguous buffers nobody
 * else holds, handed back to later nodes (of this call or the next) that need
 * the same dtype and shape. */
#ifndef JG_BACKEND_POOL_H
#define JG_BACKEND_POOL_H

#include "core/tensor.h"

#define JG_POOL_MAX 32

typedef struct jg_static_plan jg_static_plan;
typedef struct jg_graph jg_graph;

typedef struct jg_buffer_pool {
    jg_tensor *t[JG_POOL_MAX];
    int n;
    /* mode "reduce-overhead": one preallocated buffer per value, kept across
     * calls (static_plan.h); NULL: the search above */
    jg_static_plan *sp;
} jg_buffer_pool;

/* Gives t up: kept for reuse if nothing else can see it, else released. */
void jg_pool_drop(jg_buffer_pool *p, jg_tensor *t);
/* A tensor of meta m: a pooled one if any fits, else a new one. */
jg_tensor *jg_pool_alloc(jg_buffer_pool *p, const jg_meta *m);
/* The buffer of graph value v (meta m): with a static plan, v's own
 * preallocated buffer when nobody else holds it; else jg_pool_alloc. */
jg_tensor *jg_pool_alloc_value(jg_buffer_pool *p, int v, const jg_meta *m);
/* Releases the pooled buffers and the static plan. */
void jg_pool_clear(jg_buffer_pool *p);
/* Gives the pool a static plan of graph g (see static_plan.h): 0 or -1 +
 * error.  Before the first run. */
int jg_pool_make_static(jg_buffer_pool *p, const jg_graph *g);

#endif
