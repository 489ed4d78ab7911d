/* Graph passes.  Each returns the number of nodes it removed (>= 0) or -1;
 * callers run jg_graph_verify after each (the tests always do). */
#ifndef JG_PASSES_PASSES_H
#define JG_PASSES_PASSES_H

#include "graph/graph.h"

/* Common subexpression elimination: an op node with the same opcode,
 * attributes and operands as an earlier one is replaced by it.  Custom nodes
 * are left alone.  Run it on a forward graph only AFTER autodiff (merging two
 * forward uses would merge their gradient contributions into one VJP call,
 * changing the order of additions relative to eager). */
int jg_pass_cse(jg_graph *g);
/* Dead code elimination: removes nodes none of whose outputs is used. */
int jg_pass_dce(jg_graph *g);
/* Slice-gradient fusion (passes/slices.c): add(slice_backward(a),
 * slice_backward(b)) over disjoint ranges of one dim becomes one
 * slice_backward2 node, reading a and b through any reshapes.  Run it after
 * autodiff (slice_backward2 has no VJP; values that require grad are left
 * alone) and DCE after it.  Returns how many adds it rewrote. */
int jg_pass_slices(jg_graph *g);
/* Dedup-inputs: merges repeated operands of custom calls into one operand
 * each and records the slot -> operand slot_map.  Returns how many slot
 * operands it merged. */
int jg_pass_dedup(jg_graph *g);

#endif
