/* The "c" backend: generated C, compiled with the system C compiler into a
 * cache directory and loaded with dlopen (see docs/compiler.md, "The c
 * backend").
 *
 * A plan turns a graph into one C function, jg_gen_run, that runs the graph
 * step by step.  Maximal groups of elementwise nodes of one shape become one
 * loop over the elements, built from each op's C expression (jg_ops[].cexpr)
 * with the element type substituted, so values are bitwise those of the
 * eager kernels.  Every other node (reductions, matmul, views, softmax,
 * custom calls, elementwise nodes that broadcast a non-scalar operand) is run
 * by the library through a table of function pointers (the generated code
 * links against no jitgrad symbol); buffers are allocated through the same
 * table, from a small per-plan pool as in the interpreter. */
#ifndef JG_BACKEND_CGEN_H
#define JG_BACKEND_CGEN_H

#include "graph/graph.h"

typedef struct jg_cgen_plan jg_cgen_plan;

/* Generates, compiles (or finds in the cache) and loads the code of g.  The
 * graph must outlive the plan and not change after this.  NULL + error (the
 * compiler's message) on failure. */
jg_cgen_plan *jg_cgen_plan_new(const jg_graph *g);
void jg_cgen_plan_free(jg_cgen_plan *p);
/* Mode "reduce-overhead": buffers per value kept across calls
 * (backend/static_plan.h).  Before the first run; 0 or -1 + error. */
int jg_cgen_plan_make_static(jg_cgen_plan *p);
/* Same contract as jg_interp_run: inputs borrowed, outputs new references
 * (NULL for a "none" output).  Not thread safe per plan.  0 or -1. */
int jg_cgen_run(jg_cgen_plan *p, jg_tensor *const *inputs, jg_tensor **outputs);

/* The generated source of g (caller frees), without compiling it; NULL +
 * error on failure.  n_loops / n_fused (may be NULL) receive the number of
 * fused loops and of nodes inside them. */
char *jg_cgen_source(const jg_graph *g, int *n_loops, int *n_fused);

/* Whether the backend can run here: a C compiler is found (JITGRAD_CC, else
 * cc on PATH), the cache directory is writable, and a probe compiles and
 * loads.  On false, why (if non-NULL) receives the reason. */
bool jg_cgen_available(char *why, size_t why_size);

/* Statistics of the most recent plan made by this thread (tests). */
void jg_cgen_last_stats(int *n_loops, int *n_fused, bool *cache_hit);

/* While set, plans this thread makes leave the elementwise ops whose
 * expression calls exp, log, tanh or erf to their eager kernels (vectorised
 * by the library) instead of fusing them: max-autotune's "split" variant
 * (compile/modes.c).  The same values either way. */
extern _Thread_local bool jg_cgen_split_math;

/* Writing outputs into their inputs' buffers (docs/compiler.md, "Updates
 * in place").  While jg_cgen_inout is set, plans this thread makes may
 * write graph output k into the buffer of graph input jg_cgen_inout[k]
 * (-1: none; one entry per output of the graph): a training step's new
 * parameter, optimizer state or .grad, whose caller then finds the output
 * in the input's memory.  The plan does it only where that is invisible
 * to the program: the output is made by a fused loop that reads the input
 * at the same element (or by an adam_moments / adam_update node from the
 * operand it replaces), no later step reads the input or a view of it,
 * and every later step is such a loop or node, which cannot fail once its
 * buffers are allocated (they are allocated before the first such write,
 * so a failed run leaves its inputs as they were).  At run time it does so only
 * while jg_cgen_inplace_run is set (by the caller that writes the outputs
 * back, jg_entry_run_mutating) and the input is dense and shares its
 * storage with no other input; otherwise the output gets a fresh buffer
 * (for a loop holding a copy of the input, which the loop updates). */
extern _Thread_local const int *jg_cgen_inout;
extern _Thread_local bool jg_cgen_inplace_run;
/* Outputs every plan of the process computed in their input's buffer, and
 * in a copy of it, so far (tests, benchmarks). */
void jg_cgen_inout_totals(int64_t *in_place, int64_t *copied);

/* Test hook: appended to every generated source (e.g. "#error ..."), so
 * tests can check how compiler failures are reported. */
extern const char *jg_cgen_debug_extra_source;

#endif
