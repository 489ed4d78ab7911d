/* The static memory plan of mode "reduce-overhead" (docs/compiler.md,
 * "Modes"): every value a graph allocates and does not return has a slot,
 * chosen once from the graph's lifetimes (values whose lifetimes do not
 * overlap and whose dtype and shape agree share one), and each slot keeps
 * its buffer from call to call, so a replay allocates only the buffers it
 * returns.  Those are the caller's: a slot never holds them (an output's
 * history would hold the plan's entry, and the slot the output: a cycle),
 * so no later call can overwrite an output the caller still holds.
 *
 * Safety does not rest on the lifetimes: a slot's buffer is handed out only
 * while the slot holds the one reference to it and to its storage.  Else
 * the value gets a new buffer, which then stays with it: the slot is split
 * off, so a plan whose lifetimes a backend runs differently (the c
 * backend's fused loops free operands after the loop) settles after one
 * call. */
#ifndef JG_BACKEND_STATIC_PLAN_H
#define JG_BACKEND_STATIC_PLAN_H

#include "graph/graph.h"

typedef struct jg_static_plan jg_static_plan;

/* NULL + error when out of memory. */
jg_static_plan *jg_static_plan_new(const jg_graph *g);
void jg_static_plan_free(jg_static_plan *sp);
/* Value v's buffer (a new reference; NULL + error when out of memory): a
 * new one for a value without a slot. */
jg_tensor *jg_static_plan_alloc(jg_static_plan *sp, int v, const jg_meta *m);

/* What every static plan of the process did so far (tests, benchmarks). */
typedef struct jg_static_plan_stats {
    int64_t reused; /* buffers handed out again */
    int64_t fresh;  /* slot buffers allocated: a first call's, a busy or resized slot's */
} jg_static_plan_stats;
void jg_static_plan_totals(jg_static_plan_stats *out);

#endif
