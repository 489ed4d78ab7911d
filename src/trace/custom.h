/* What the tracer records about a captured custom function call, beyond the
 * IR's jg_gcustom (it hangs off jg_gcustom.user, in the graph's arena).
 *
 * A captured call is one JG_GN_CUSTOM node.  Its forward subgraph has one
 * placeholder per SLOT and returns the call's outputs followed by the values
 * the forward saved for backward; the node has the same outputs, so graph
 * autodiff can hand the saved values to the traced backward like any other
 * forward value. */
#ifndef JG_TRACE_CUSTOM_H
#define JG_TRACE_CUSTOM_H

#include "graph/graph.h"

typedef struct jg_custom_info {
    int n_call_out; /* node outputs [0, n_call_out) are the call's outputs */
    bool *diff;     /* per call output: differentiable (not marked otherwise) */
    int n_saved;    /* the ctx's saved entries */
    int *saved_out; /* per saved entry: its node output index, or -1 (NULL) */
    bool materialize;
} jg_custom_info;

/* Makes sure the tracer's jg_apply hook is installed (it is at load). */
void jg_trace_custom_init(void);

#endif
