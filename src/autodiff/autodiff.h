/* Graph autodiff: derives a backward graph from a forward graph by calling
 * the op table's VJP rules on symbolic tensors while a trace of the backward
 * graph records — the same rules, in the same order, with the same
 * accumulation function (jg_grad_accumulate) as the eager engine, so compiled
 * gradients are bitwise equal to eager ones.
 *
 * The backward graph's inputs are, in order: one gradient per seed (named
 * g0, g1, ...), then the forward values the VJP rules read ("saved" values,
 * named after a forward input or s0, s1, ... for node outputs), created in
 * the order the rules first ask for them.
 *
 * Its outputs are the gradient CONTRIBUTIONS to the forward graph's inputs,
 * one per (node, slot) whose operand is a graph input that requires grad, in
 * the eager engine's order (latest node first, slots in order); -1 ("none")
 * where no gradient reached that node or its rule returned NULL.  They are
 * not summed in the graph: the compiled autograd node has one edge per
 * contribution, so the engine adds them into the input's accumulator one by
 * one, exactly as it adds eager contributions — which keeps gradients bitwise
 * equal even when the input also receives gradients from outside the
 * compiled call (a sum formed inside the graph would group them
 * differently).  The layout depends only on the forward graph, so every
 * output-mask variant has the same outputs. */
#ifndef JG_AUTODIFF_AUTODIFF_H
#define JG_AUTODIFF_AUTODIFF_H

#include "graph/graph.h"

typedef struct jg_autodiff_result {
    jg_graph *bwd;
    /* per backward input: >= 0: the forward value id it stands for (saved);
     * < 0: -1 - k, the gradient of seed k */
    int *in_src;
    /* per backward input: an eager reader would fail on an in-place change
     * of it since the forward (false: only ctx attributes read it) */
    bool *in_checked;
    /* per forward value: the least value id a node that reads it as eager's
     * saved tensor outputs (that node came before values made later);
     * INT_MAX: none */
    int *checked_by;
    int n_in;
    /* per backward output: the forward graph input it contributes to */
    int *contrib_input;
    int n_contrib;
    /* on failure: the function of the custom call whose backward could not
     * be traced (the compiler traces such calls as opaque ones instead) */
    const jg_function *failed_fn;
    /* jg_autodiff_capture only (jg_autodiff leaves them NULL): per forward
     * node, part of this backward's graph (reached from a seed through
     * differentiable operands: eager without retain_graph frees its saved
     * tensors), and whether its VJP ran (a gradient arrived, or a custom
     * call reached: eager reads its saved tensors) */
    bool *node_reached, *node_ran;
    /* jg_autodiff_capture: the backward outputs after the contributions */
    int n_capture;
} jg_autodiff_result;

/* seeds: distinct forward values (requiring grad) whose gradients arrive
 * from outside; reach: values that receive no gradient but are part of the
 * backward graph (so the custom calls leading to them still run their
 * backward, as eager does).  Custom nodes are differentiated by their own backward:
 * traced into the backward graph, or, for opaque calls, one node that asks
 * the eager engine at run time (custom_vjp in autodiff.c). */
int jg_autodiff(const jg_graph *fwd, int n_seeds, const int *seeds, int n_reach, const int *reach,
                jg_autodiff_result *r);
/* jg_autodiff, whose backward graph also outputs, after the contributions,
 * the gradient of each forward value capture[k] (-1: none reached it): the
 * sum of its uses' contributions in eager's order, what eager's
 * autograd.grad returns for a non-leaf input.  The gradient still flows on
 * through the value's node to everything before it. */
int jg_autodiff_capture(const jg_graph *fwd, int n_seeds, const int *seeds, int n_reach,
                        const int *reach, int n_capture, const int *capture, jg_autodiff_result *r);
void jg_autodiff_result_free(jg_autodiff_result *r);

/* The backward of custom call n (a traced call, not opaque) of graph f,
 * traced from its callback with its ctx as graph autodiff traces it, every
 * output gradient present: inputs g0.. (one per call output), the saved
 * values present, the kept values; one output per slot (-1: none).  A
 * graph of its own (caller frees), or NULL + error. */
jg_graph *jg_custom_backward_template(const jg_graph *f, const jg_gnode *n);

/* contrib_reached[c] (one per contribution, jg_autodiff's layout): whether
 * contribution c's node is part of eager's backward graph when the values
 * `from` are (reached from the outputs through differentiable operands),
 * whether or not a gradient arrives there. */
int jg_autodiff_edges_reached(const jg_graph *fwd, int n_from, const int *from,
                              bool *contrib_reached);

/* Sums the contributions of each forward input inside bwd (a jg_autodiff
 * backward graph of fwd): the group's first output becomes the sum, in
 * output order (acc + c, as jg_grad_accumulate adds), the others -1.  With
 * init_head[h] (h a group's first output) the sum starts from a new
 * placeholder "accN" (the gradient the engine already holds for that
 * input), appended after the other inputs in order of h.  The engine then
 * adds exactly what it would have added one by one, when the accumulator
 * starts empty (or is taken as that placeholder).  Returns the number of
 * placeholders added, or -1. */
int jg_autodiff_sum_contribs(jg_graph *bwd, const jg_graph *fwd, const int *contrib_input,
                             const bool *init_head);
/* The same for bwd's first n outputs (the contributions); the outputs after
 * them (jg_autodiff_capture's) are kept as they are. */
int jg_autodiff_sum_contribs_n(jg_graph *bwd, int n, const jg_graph *fwd, const int *contrib_input,
                               const bool *init_head);

/* Adds a held .grad to outputs of bwd: for each h with fold_head[h] (h an
 * output holding the whole gradient of forward input contrib_input[h]: its
 * only contribution, or the group's sum from jg_autodiff_sum_contribs), a
 * new placeholder input "gradN" (N in order of h, appended after the other
 * inputs), and output h becomes gradN + output h, the engine's
 * `.grad += sum`.  An output h that computes no gradient (-1) gets no
 * placeholder: fold_head[h] is cleared.  Returns the number of
 * placeholders added, or -1. */
int jg_autodiff_fold_grads(jg_graph *bwd, const jg_graph *fwd, const int *contrib_input,
                           bool *fold_head);

#endif
