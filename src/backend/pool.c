/* Per-plan buffer reuse (see pool.h). */
#include "backend/pool.h"
#include "backend/static_plan.h"

#include <string.h>

/* A contiguous buffer nobody else sees: safe to overwrite next time. */
static bool poolable(const jg_tensor *t) {
    return t->refcount == 1 && t->storage && t->storage->refcount == 1 && !t->is_view && !t->grad &&
           !t->grad_fn && t->offset == 0 && jg_is_contiguous(t);
}

void jg_pool_drop(jg_buffer_pool *p, jg_tensor *t) {
    if (!t)
        return;
    if (p->sp) { /* the plan's slot holds its own reference */
        jg_release(t);
        return;
    }
    if (p->n < JG_POOL_MAX && poolable(t)) {
        p->t[p->n++] = t;
        return;
    }
    jg_release(t);
}

jg_tensor *jg_pool_alloc(jg_buffer_pool *p, const jg_meta *m) {
    for (int i = p->n - 1; i >= 0; i--) {
        jg_tensor *t = p->t[i];
        if (t->dtype == m->dtype && t->ndim == m->ndim &&
            !memcmp(t->shape, m->shape, sizeof(int64_t) * (size_t)m->ndim)) {
            p->t[i] = p->t[--p->n];
            t->requires_grad = false;
            return t;
        }
    }
    return jg_tensor_alloc(m->dtype, m->ndim, m->shape);
}

jg_tensor *jg_pool_alloc_value(jg_buffer_pool *p, int v, const jg_meta *m) {
    if (p->sp)
        return jg_static_plan_alloc(p->sp, v, m);
    return jg_pool_alloc(p, m);
}

void jg_pool_clear(jg_buffer_pool *p) {
    for (int i = 0; i < p->n; i++)
        jg_release(p->t[i]);
    p->n = 0;
    jg_static_plan_free(p->sp);
    p->sp = NULL;
}

int jg_pool_make_static(jg_buffer_pool *p, const jg_graph *g) {
    jg_static_plan *sp = jg_static_plan_new(g);
    if (!sp)
        return -1;
    jg_static_plan_free(p->sp);
    p->sp = sp;
    return 0;
}
