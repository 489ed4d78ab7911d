/* Dynamic sizes: one traced entry that serves every size of some input
 * dimensions (see docs/compiler.md, "Dynamic shapes").
 *
 * A TEMPLATE is made from two traces of the program whose guards differ
 * only in the sizes of some input dims, all of them n1 in one trace and n2
 * in the other (the symbol s).  Every integer of the second trace's graph
 * (value shapes, op attributes, one-element constants the program or a VJP
 * made, such as mean's count) is either the same in both traces or k * s
 * with the same integer k in both; otherwise the dims stay static.  A call
 * whose dynamic dims are all one size s >= 2 (0 and 1 are specialized, as
 * in PyTorch) and whose other guards are the base trace's gets an INSTANCE:
 * the base graph with k * s substituted, verified, and built like a fresh
 * trace (autodiff, passes, backend plan) without running the program. */
#ifndef JG_COMPILE_DYNAMIC_H
#define JG_COMPILE_DYNAMIC_H

#include "compile/compile.h"

typedef struct jg_dyn jg_dyn;

/* Builds an entry from a traced graph (compile.c's pipeline after the
 * trace); takes g.  0 or -1 + error. */
typedef int (*jg_dyn_build_fn)(void *ctx, jg_entry *e, jg_graph *g);

/* A template from entries `older` and `newer` (newer is its base, retained).
 * 1: made (*out); 0: the two keys differ in more than sizes (nothing to
 * say); -1: they differ only in sizes, but the dims stay static (why). */
int jg_dyn_make(jg_entry *older, jg_entry *newer, jg_dyn **out, char *why, size_t why_size);
/* "dim 0 of input 0 went dynamic (64 -> 17)" (name may be NULL: "input
 * N"; else it names input N, see jg_compiled_set_input_namer) */
void jg_dyn_describe(const jg_dyn *d, jg_input_name_fn name, void *user, char *buf, size_t n);
/* The older trace was dynamic=True's probe: "(64, traced again at 65)". */
void jg_dyn_set_probed(jg_dyn *d);
/* Whether call key k has d's dynamic dims all of one size s >= 2 (inputs
 * holding them contiguous); then base_in (k->n_inputs entries) is k's
 * inputs with the base trace's sizes and strides, for the other guards. */
bool jg_dyn_rekey(const jg_dyn *d, const jg_call_key *k, jg_in_key *base_in, int64_t *s);
jg_entry *jg_dyn_base(const jg_dyn *d);
/* The instance for size s (made on first use; a few are kept, least
 * recently used dropped).  NULL with why when the template does not give a
 * valid graph for s (the caller traces instead); the error is cleared. */
jg_entry *jg_dyn_instance(jg_dyn *d, int64_t s, const jg_call_key *k, jg_dyn_build_fn build,
                          void *ctx, char *why, size_t why_size);
/* Printed base graphs with the dynamic sizes written as k*s0 (caller frees). */
char *jg_dyn_graph(const jg_dyn *d);
void jg_dyn_free(jg_dyn *d);

#endif
