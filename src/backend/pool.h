/* The buffer pool both backends keep per plan: contiguous buffers nobody
 * else holds, handed back to later nodes (of this call or the next) that need
 * the same dtype and shape. */
#ifndef JG_BACKEND_POOL_H
#define JG_BACKEND_POOL_H

#include "core/tensor.h"

#define JG_POOL_MAX 32

typedef struct jg_buffer_pool {
    jg_tensor *t[JG_POOL_MAX];
    int n;
} jg_buffer_pool;

/* Gives t up: kept for reuse if nothing else can see it, else released. */
void jg_pool_drop(jg_buffer_pool *p, jg_tensor *t);
/* A tensor of meta m: a pooled one if any fits, else a new one. */
jg_tensor *jg_pool_alloc(jg_buffer_pool *p, const jg_meta *m);
void jg_pool_clear(jg_buffer_pool *p);

#endif
