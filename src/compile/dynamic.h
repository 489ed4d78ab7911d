/* Dynamic sizes: one traced entry that serves every size of some input
 * dimensions (see docs/compiler.md, "Dynamic shapes").
 *
 * A TEMPLATE has symbols s0, s1, ... (at most JG_DYN_MAX_SYMS), each a
 * group of input dims of one size, and is made from traces of the program
 * whose guards differ only in those sizes: for every symbol, two of the
 * traces differ in that symbol alone.  Every integer of the traced graphs
 * (value shapes, op attributes, one-element constants the program or a VJP
 * made, such as mean's count) is either the same in all traces or one
 * monomial k * s0^a * s1^b ... (degree at most 3: [B * T, C], B * T * C)
 * in all of them; otherwise the dims stay static.  A call whose dims of
 * each symbol are all of one size >= 2 (0 and 1 are specialized, as in
 * PyTorch) and whose other guards are the base trace's gets an INSTANCE:
 * the base graph with the monomials evaluated, verified, and built like a
 * fresh trace (autodiff, passes, backend plan) without running the
 * program. */
#ifndef JG_COMPILE_DYNAMIC_H
#define JG_COMPILE_DYNAMIC_H

#include "compile/compile.h"

typedef struct jg_dyn jg_dyn;

#define JG_DYN_MAX_SYMS 3

/* Builds an entry from a traced graph (compile.c's pipeline after the
 * trace); takes g.  0 or -1 + error. */
typedef int (*jg_dyn_build_fn)(void *ctx, jg_entry *e, jg_graph *g);

/* A one-symbol template from entries `older` and `newer` (newer is its
 * base; both retained).  1: made (*out); 0: the two keys differ in more
 * than sizes (nothing to say); -1: they differ only in sizes, but the dims
 * stay static (why); 2: they differ in two groups of dims (each group from
 * one size to one other): the caller traces jg_dyn_mid_key's key and calls
 * jg_dyn_make3. */
int jg_dyn_make(jg_entry *older, jg_entry *newer, jg_dyn **out, char *why, size_t why_size);
/* in (older's n_inputs entries): older's key with the first group of
 * changed dims at newer's size.  0 or -1 (not two groups). */
int jg_dyn_mid_key(const jg_entry *older, const jg_entry *newer, jg_in_key *in);
/* A two-symbol template from older, mid (traced at jg_dyn_mid_key's key)
 * and newer (the base).  1 or -1 (why), as jg_dyn_make. */
int jg_dyn_make3(jg_entry *older, jg_entry *mid, jg_entry *newer, jg_dyn **out, char *why,
                 size_t why_size);
/* A template with one symbol more than d: e differs from one of d's traces
 * only in a group of dims of no symbol of d.  1: made (*out; d unchanged);
 * 0: e does not; -1: it does, but the new template fails (why). */
int jg_dyn_extend(const jg_dyn *d, jg_entry *e, jg_dyn **out, char *why, size_t why_size);
int jg_dyn_symbols(const jg_dyn *d);
/* "dim 0 of input 0 went dynamic (64 -> 17)" (name may be NULL: "input
 * N"; else it names input N, see jg_compiled_set_input_namer) */
void jg_dyn_describe(const jg_dyn *d, jg_input_name_fn name, void *user, char *buf, size_t n);
/* The older trace was dynamic=True's probe: "(64, traced again at 65)". */
void jg_dyn_set_probed(jg_dyn *d);
/* Whether call key k has the dims of each of d's symbols all of one size
 * s[j] >= 2 (inputs holding them contiguous); then base_in (k->n_inputs
 * entries) is k's inputs with the base trace's sizes and strides, for the
 * other guards.  s: JG_DYN_MAX_SYMS entries. */
bool jg_dyn_rekey(const jg_dyn *d, const jg_call_key *k, jg_in_key *base_in, int64_t *s);
jg_entry *jg_dyn_base(const jg_dyn *d);
/* The instance for sizes s (made on first use; a few are kept, least
 * recently used dropped).  NULL with why when the template does not give a
 * valid graph for s (the caller traces instead); the error is cleared. */
jg_entry *jg_dyn_instance(jg_dyn *d, const int64_t *s, const jg_call_key *k, jg_dyn_build_fn build,
                          void *ctx, char *why, size_t why_size);
/* Printed base graphs with the dynamic sizes written as k*s0*s1 (caller
 * frees). */
char *jg_dyn_graph(const jg_dyn *d);
void jg_dyn_free(jg_dyn *d);
/* The copy of traced graph g that an entry keeps for templates (its
 * traced): custom call records and subgraphs its own, each holding a
 * reference to its call's ctx (the copy may outlive g).  NULL + error. */
jg_graph *jg_dyn_keep_traced(const jg_graph *g);

#endif
