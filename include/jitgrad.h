/* jitgrad — tensors, reverse-mode autograd, custom differentiable functions
 * and a tracing graph compiler, in C11.
 *
 * Tutorial (this block is compiled and run by the test suite):
 *
 * BEGIN TUTORIAL
 * #include <jitgrad.h>
 * #include <stdio.h>
 *
 * int main(void) {
 *     jg_scope_push();                       // temporaries below die at pop
 *     int64_t shape[] = {3};
 *     float xs[] = {1, 2, 3};
 *     jg_tensor *x = jg_tensor_new(JG_F32, 1, shape, xs);
 *     jg_set_requires_grad(x, true);         // a leaf we want d/dx for
 *     jg_tensor *y = jg_sum(jg_mul(x, x));   // y = sum(x*x)
 *     if (!y || jg_backward(y, NULL, 0) < 0) {
 *         fprintf(stderr, "error: %s\n", jg_last_error());
 *         return 1;
 *     }
 *     float g[3];
 *     jg_copy_to(jg_grad(x), g, sizeof g);   // dy/dx = 2x
 *     printf("y=%g grad=[%g %g %g]\n", jg_item(y), g[0], g[1], g[2]);
 *     jg_scope_pop();                        // releases x, x*x and y
 *     return g[2] == 6.0f ? 0 : 1;
 * }
 * END TUTORIAL
 *
 * Conventions
 *  - Every function that returns a jg_tensor* returns a NEW reference (or
 *    NULL after setting the thread's error, see jg_last_error()).  While a
 *    scope is open the innermost scope owns that reference too and releases it
 *    at jg_scope_pop() unless jg_keep() moved it out; with no scope open the
 *    caller releases it with jg_release().
 *  - Functions returning int return >= 0 on success and -1 on error.
 *  - Bad input never changes state: a failed call leaves every tensor, every
 *    .grad and every cache as it was.
 *  - Tensors, scopes, the grad mode and the error are per thread; a tensor is
 *    not to be used by two threads at once.
 */
#ifndef JITGRAD_H
#define JITGRAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct jg_tensor jg_tensor;     /* reference counted */
typedef struct jg_ctx jg_ctx;           /* a custom function call's context */
typedef struct jg_compiled jg_compiled; /* a compiled program and its cache */

/* JG_BOOL elements are one byte holding 0 or 1 (C's bool). */
typedef enum { JG_F32, JG_F64, JG_I64, JG_BOOL, JG_I32 } jg_dtype;
#define JG_MAX_DIMS 8
#define JG_MAX_OUTPUTS 16

/* ---- errors ---- */
const char *jg_last_error(void); /* this thread's last message; "" if none */
void jg_clear_error(void);
/* Sets this thread's error (printf-style) and returns -1: for callbacks
 * (custom forward/backward, programs) that fail. */
int jg_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- lifetime ---- */
jg_tensor *jg_retain(jg_tensor *t);
void jg_release(jg_tensor *t);
void jg_scope_push(void);
void jg_scope_pop(void);
jg_tensor *jg_keep(jg_tensor *t); /* no scope open: returns t unchanged */

/* ---- creation and access ---- */
jg_tensor *jg_tensor_new(jg_dtype dtype, int ndim, const int64_t *shape,
                         const void *data); /* data NULL: zeros */
/* A tensor over memory the caller owns, without a copy (PyTorch's
 * from_blob): strides in elements (NULL: row-major), none negative.  Writes
 * through either side show in the other.  release(release_ctx), if given,
 * runs once when the last tensor using the memory is gone; on failure it
 * does not run and the caller keeps the memory. */
jg_tensor *jg_tensor_from_blob(jg_dtype dtype, int ndim, const int64_t *shape,
                               const int64_t *strides, void *data, void (*release)(void *),
                               void *release_ctx);
jg_tensor *jg_full(jg_dtype dtype, int ndim, const int64_t *shape, double value);
jg_tensor *jg_scalar(jg_dtype dtype, double value); /* a 0-d tensor */
/* Normal(0, 1) by Box-Muller over a counter-based generator (SplitMix64):
 * the same seed gives the same sequence on every machine and run. */
jg_tensor *jg_randn(jg_dtype dtype, int ndim, const int64_t *shape);
jg_tensor *jg_rand(jg_dtype dtype, int ndim, const int64_t *shape); /* U[0,1) */
void jg_manual_seed(uint64_t seed);

jg_dtype jg_dtype_of(const jg_tensor *t);
/* "float32", "float64", "int64", "bool", "int32" */
const char *jg_dtype_name(jg_dtype dtype);
int jg_ndim(const jg_tensor *t);
const int64_t *jg_shape(const jg_tensor *t);
const int64_t *jg_strides(const jg_tensor *t); /* in elements */
int64_t jg_storage_offset(const jg_tensor *t); /* in elements */
int64_t jg_numel(const jg_tensor *t);
bool jg_is_contiguous(const jg_tensor *t);
bool jg_same_storage(const jg_tensor *a, const jg_tensor *b);
uint64_t jg_version(const jg_tensor *t);                     /* bumped by every in-place op */
int jg_copy_to(const jg_tensor *t, void *dst, size_t bytes); /* row-major */
double jg_item(const jg_tensor *t); /* one-element tensors; NaN + error otherwise */
/* Address of element [0,...,0] (strides apply); NULL + error for a traced
 * (symbolic) tensor, whose values do not exist yet.  The address stays
 * t's: a compiled program that writes t copies its result there instead of
 * giving t other memory (docs/compiler.md). */
void *jg_data(jg_tensor *t);
/* Whether t is such a traced (symbolic) tensor; never an error. */
bool jg_is_traced(const jg_tensor *t);
/* "f32[2, 3]": a short description for messages; writes at most n bytes. */
int jg_describe(const jg_tensor *t, char *buf, size_t n);

/* ---- autograd ---- */
void jg_set_requires_grad(jg_tensor *t, bool on);
bool jg_requires_grad(const jg_tensor *t);
bool jg_is_leaf(const jg_tensor *t);
/* "MulBackward0" for a tensor made by an op that records history; NULL for
 * leaves. */
const char *jg_grad_fn_name(const jg_tensor *t);
jg_tensor *jg_grad(const jg_tensor *t); /* BORROWED; NULL while no gradient */
void jg_clear_grad(jg_tensor *t);
int jg_set_grad(jg_tensor *t, jg_tensor *grad); /* shape and dtype must match */
#define JG_RETAIN_GRAPH 1u
#define JG_CREATE_GRAPH 2u
int jg_backward(jg_tensor *root, jg_tensor *grad /* NULL: root is a scalar */, unsigned flags);
/* Gradients of outputs w.r.t. inputs without touching any .grad (PyTorch's
 * torch.autograd.grad).  grad_outputs may be NULL (all outputs scalar) or hold
 * NULL entries.  results[i] is owned like any returned tensor (by the
 * innermost open scope, else by the caller), or NULL when inputs[i] is
 * unreachable and allow_unused is set (otherwise that is an error). */
#define JG_ALLOW_UNUSED 4u
int jg_autograd_grad(int n_outputs, jg_tensor *const *outputs, jg_tensor *const *grad_outputs,
                     int n_inputs, jg_tensor *const *inputs, unsigned flags, jg_tensor **results);

/* ---- gradient hooks on leaves (what data-parallel training builds on) ----
 * A grad-ready hook runs during jg_backward once the leaf's gradient is
 * final (every contribution of this backward summed), before any .grad is
 * written: grad is that would-be gradient (BORROWED, read only).  Hooks run
 * in the order gradients become final (the engine's order, the same on every
 * run of the same graph), a leaf's hooks in registration order.  A hook
 * returning -1 (after setting an error) fails the backward: no .grad changes.
 * A post-accumulate hook (PyTorch's register_post_accumulate_grad_hook)
 * runs after the leaf's .grad was written.  Hooks and callbacks run with
 * grad mode off (on with JG_CREATE_GRAPH), as PyTorch's.  None of them runs for
 * jg_autograd_grad.  Registering returns a handle (> 0) or -1 (t is not a
 * leaf, or does not require grad).  free_user (may be NULL) runs on removal
 * or when t dies. */
typedef int (*jg_grad_ready_fn)(void *user, jg_tensor *leaf, jg_tensor *grad);
typedef int (*jg_post_accumulate_fn)(void *user, jg_tensor *leaf);
int jg_register_grad_ready_hook(jg_tensor *t, jg_grad_ready_fn fn, void *user,
                                void (*free_user)(void *));
int jg_register_post_accumulate_grad_hook(jg_tensor *t, jg_post_accumulate_fn fn, void *user,
                                          void (*free_user)(void *));
/* An expected hook runs when a backward starts (before any node runs) if it
 * will compute a gradient for t: a hook that must act at the end of every
 * such backward, even one that fails before t's gradient is final, queues
 * its callback here. */
int jg_register_grad_expected_hook(jg_tensor *t, jg_post_accumulate_fn fn, void *user,
                                   void (*free_user)(void *));
int jg_remove_grad_hook(jg_tensor *t, int handle); /* 0, or -1 if no such hook */
/* ---- tensor gradient hooks (PyTorch's Tensor.register_hook) ----
 * For any tensor that requires grad, leaf or not.  hook runs once per
 * backward in which t's gradient is computed, when that gradient is final
 * (summed over every use of t, every slot it fills): for a non-leaf just
 * before the gradient flows into t's grad_fn, for a leaf before it is
 * accumulated into .grad (and before the leaf's grad-ready hooks, which see
 * the result).  grad is BORROWED; the hook sets *replacement to NULL (keep)
 * or to a new reference of the same shape and dtype, which the next hook
 * sees ("hook <id> has changed the size of value" otherwise: the backward
 * fails, no .grad changes).  t's hooks run in registration order, with grad
 * mode off (on with JG_CREATE_GRAPH).  A non-leaf's hooks belong to its
 * grad_fn (they run while that node runs, also in jg_autograd_grad, after
 * a captured input's gradient was taken, as PyTorch 1.13's); a leaf's run
 * in jg_backward only.  Returns a handle (> 0) for jg_remove_grad_hook, or
 * -1 ("cannot register a hook on a tensor that doesn't require gradient").
 * free_user (may be NULL) runs on removal or when the hook's owner dies. */
typedef int (*jg_tensor_hook_fn)(void *user, jg_tensor *grad, jg_tensor **replacement);
int jg_register_tensor_hook(jg_tensor *t, jg_tensor_hook_fn fn, void *user,
                            void (*free_user)(void *));
/* PyTorch's Tensor.retain_grad: a non-leaf's gradient is accumulated into
 * its .grad by every backward (and jg_autograd_grad) that runs its grad_fn,
 * as a tensor hook registered now would see it; committed with the leaves'
 * (a failing backward changes none).  A no-op on a leaf; -1 if t does not
 * require grad.  jg_retains_grad: whether t is such a non-leaf. */
int jg_retain_grad(jg_tensor *t);
bool jg_retains_grad(const jg_tensor *t);
/* Only while a backward runs (from its hooks or callbacks): replaces the
 * gradient that will be committed to leaf t (grad NULL: none), for a leaf
 * whose gradient is final or that got none.  0 or -1. */
int jg_backward_set_grad(jg_tensor *t, jg_tensor *grad);
/* Only from a hook of a running backward: fn runs once when that backward
 * has computed every gradient and run every grad-ready hook, before the
 * commit (status 0; returning -1 fails the backward), or when it fails
 * (status -1, after the error is set; the return value is ignored and the
 * error text kept).  Callbacks run in the order they were queued. */
typedef int (*jg_backward_callback_fn)(void *user, int status);
int jg_backward_queue_callback(jg_backward_callback_fn fn, void *user);
bool jg_set_grad_enabled(bool on); /* returns the previous mode */
bool jg_is_grad_enabled(void);

/* ---- threads ---- */
/* Large kernels (from 64K elements) split their work into fixed chunks run
 * on a pool of threads; results are bitwise the same for any count.  The
 * count is process-wide: the cores it may run on by default, or
 * JITGRAD_NUM_THREADS (read once, at load).  jg_set_num_threads
 * sets OpenBLAS's count too; n < 1 is an error (-1), values above 256 are
 * capped.  Like torch.set_num_threads / torch.get_num_threads. */
int jg_set_num_threads(int n);
int jg_get_num_threads(void);

/* ---- memory ---- */
/* Bytes of tensor data jitgrad holds now, and the most it held since the
 * start or the last jg_reset_peak_memory_stats, over all threads: every
 * storage jitgrad allocates for tensors (eager results, saved tensors,
 * gradients, a compiled program's buffers), at its requested size.  Not
 * counted: tensors of 64 bytes or less (their data lives in the tensor's own
 * struct), memory given by the caller (jg_tensor_from_blob, NumPy), and
 * OpenBLAS's or the allocator's own overhead.  Like PyTorch's
 * torch.cuda.memory_allocated / max_memory_allocated, for the CPU. */
int64_t jg_memory_allocated(void);
int64_t jg_max_memory_allocated(void);
void jg_reset_peak_memory_stats(void); /* peak := current */

/* ---- ops (all broadcast like NumPy) ---- */
jg_tensor *jg_add(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_sub(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_mul(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_div(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_neg(jg_tensor *a);
jg_tensor *jg_exp(jg_tensor *a);
jg_tensor *jg_log(jg_tensor *a);
jg_tensor *jg_tanh(jg_tensor *a);
jg_tensor *jg_abs(jg_tensor *a); /* |a|; gradient grad * sign(a), 0 at 0 */
jg_tensor *jg_relu(jg_tensor *a);
jg_tensor *jg_sigmoid(jg_tensor *a);
jg_tensor *jg_sqrt(jg_tensor *a);
jg_tensor *jg_pow_scalar(jg_tensor *a, double exponent);
jg_tensor *jg_add_scalar(jg_tensor *a, double s);
jg_tensor *jg_mul_scalar(jg_tensor *a, double s);
jg_tensor *jg_sum(jg_tensor *a); /* all elements -> 0-d */
/* Sum over the listed dims (negative counts from the end). */
jg_tensor *jg_sum_dims(jg_tensor *a, int n_dims, const int *dims, bool keepdim);
jg_tensor *jg_mean(jg_tensor *a);
jg_tensor *jg_mean_dims(jg_tensor *a, int n_dims, const int *dims, bool keepdim);
/* Max of all elements -> 0-d (NaN if any is NaN); its gradient is shared
 * evenly by the elements equal to it, as PyTorch's max() does. */
jg_tensor *jg_max(jg_tensor *a);
/* Max over one dim: values (a's dtype) and i64 indices (first maximum). */
int jg_max_dim(jg_tensor *a, int dim, bool keepdim, jg_tensor **values, jg_tensor **indices);
jg_tensor *jg_matmul(jg_tensor *a, jg_tensor *b); /* 1-D, 2-D and batched */
jg_tensor *jg_reshape(jg_tensor *a, int ndim,
                      const int64_t *shape); /* view when possible; one -1 allowed */
/* reshape that must be a view: fails as PyTorch's view() does when the
 * strides do not allow one (traced tensors too: they carry eager's strides) */
jg_tensor *jg_view(jg_tensor *a, int ndim, const int64_t *shape);
jg_tensor *jg_slice(jg_tensor *a, int dim, int64_t start, int64_t end); /* a view */
jg_tensor *jg_transpose(jg_tensor *a, int dim0, int dim1);              /* a view */
jg_tensor *jg_permute(jg_tensor *a, const int *perm);                   /* a view */
jg_tensor *jg_expand(jg_tensor *a, int ndim, const int64_t *shape);     /* a view; -1 keeps */
jg_tensor *jg_contiguous(jg_tensor *a); /* a itself (new reference) when already contiguous */
jg_tensor *jg_clone(jg_tensor *a);      /* a contiguous copy that records history */
jg_tensor *jg_detach(jg_tensor *a);     /* shares storage, no history */
/* In place: a loses its history and becomes a leaf that does not require
 * grad (PyTorch's detach_).  0, or -1 for a differentiable view (detach()
 * it instead) or inside a compiled program (a graph break: it runs eagerly). */
int jg_detach_(jg_tensor *a);
jg_tensor *jg_to_dtype(jg_tensor *a, jg_dtype dtype); /* records history */
jg_tensor *jg_softmax(jg_tensor *a, int dim);
jg_tensor *jg_log_softmax(jg_tensor *a, int dim);
/* Mean cross entropy of [N, C] logits against i64 class targets [N]; rows
 * whose target is -100 are left out (PyTorch's defaults). */
jg_tensor *jg_cross_entropy(jg_tensor *logits, jg_tensor *target);
/* How a loss reduces its per-row values, as PyTorch's reduction=. */
typedef enum { JG_REDUCTION_MEAN, JG_REDUCTION_SUM, JG_REDUCTION_NONE } jg_reduction;
/* Cross entropy with PyTorch's reduction and ignore_index: rows whose target
 * equals ignore_index count neither in the sum nor in the mean's divisor (a
 * mean over no rows is NaN), and get no gradient; JG_REDUCTION_NONE returns
 * the [N] per-row losses (0 for ignored rows). */
jg_tensor *jg_cross_entropy_ex(jg_tensor *logits, jg_tensor *target, jg_reduction reduction,
                               int64_t ignore_index);

/* ---- comparisons and logical ops: bool results, never requiring grad ----
 * Tensor operands are promoted to one dtype first.  The _scalar forms
 * compare with a number as PyTorch compares with a Python scalar: in the
 * tensor's dtype if it is floating (s converted to it first), else in
 * int64 or float32 when s does not fit (bool tensor == 2, int tensor < 0.5). */
jg_tensor *jg_eq(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_ne(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_lt(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_le(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_gt(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_ge(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_eq_scalar(jg_tensor *a, double s);
jg_tensor *jg_ne_scalar(jg_tensor *a, double s);
jg_tensor *jg_lt_scalar(jg_tensor *a, double s);
jg_tensor *jg_le_scalar(jg_tensor *a, double s);
jg_tensor *jg_gt_scalar(jg_tensor *a, double s);
jg_tensor *jg_ge_scalar(jg_tensor *a, double s);
/* any dtype: nonzero (NaN included) is true */
jg_tensor *jg_logical_and(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_logical_or(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_logical_xor(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_logical_not(jg_tensor *a);
/* bool: some / every element nonzero, over all elements (0-d) or one dim */
jg_tensor *jg_any(jg_tensor *a);
jg_tensor *jg_all(jg_tensor *a);
jg_tensor *jg_any_dim(jg_tensor *a, int dim, bool keepdim);
jg_tensor *jg_all_dim(jg_tensor *a, int dim, bool keepdim);
/* a where the bool cond is set, else b (all three broadcast; a and b are
 * promoted to one dtype); differentiable in a and b. */
jg_tensor *jg_where(jg_tensor *cond, jg_tensor *a, jg_tensor *b);
/* a with value where the bool mask (broadcast) is set; differentiable in a. */
jg_tensor *jg_masked_fill(jg_tensor *a, jg_tensor *mask, double value);
/* a[mask] for a bool mask whose shape is a leading part of a's: the
 * selected rows, stacked ([count, a's remaining dims...]); differentiable
 * in a.  The mask's values are read, so it cannot be a traced tensor. */
jg_tensor *jg_mask_select_rows(jg_tensor *a, jg_tensor *mask);

/* in place: return 0 or -1; bump the storage's version counter; refuse, as
 * PyTorch does, a leaf that requires grad while grad mode is on */
int jg_add_(jg_tensor *a, jg_tensor *b);
int jg_sub_(jg_tensor *a, jg_tensor *b);
int jg_mul_(jg_tensor *a, jg_tensor *b);
int jg_div_(jg_tensor *a, jg_tensor *b); /* a float: int64 a is refused, as in PyTorch */
int jg_mul_scalar_(jg_tensor *a, double s);
int jg_zero_(jg_tensor *a); /* with history: gradient zeros (PyTorch's ZeroBackward0) */
int jg_copy_(jg_tensor *dst, jg_tensor *src); /* src broadcast to dst */

/* ---- gradcheck: central finite differences in f64 ----
 * fn maps inputs to one output; every f64 input that requires grad is
 * checked.  Returns 0 when analytic and numeric Jacobians agree to
 * atol + rtol*|numeric|, -1 with a message naming input and element. */
typedef jg_tensor *(*jg_gradcheck_fn)(void *user, int n_inputs, jg_tensor *const *inputs);
int jg_gradcheck(jg_gradcheck_fn fn, void *user, int n_inputs, jg_tensor *const *inputs, double eps,
                 double atol, double rtol);

/* ---- custom differentiable functions ---- */
typedef struct jg_function {
    const char *name;
    int (*forward)(jg_ctx *ctx, int n_inputs, jg_tensor *const *inputs, jg_tensor **outputs);
    int (*backward)(jg_ctx *ctx, int n_outputs, jg_tensor *const *grad_outputs, int n_inputs,
                    jg_tensor **grad_inputs);
    void *user; /* anything the callbacks need */
} jg_function;

int jg_apply(const jg_function *fn, int n_inputs, jg_tensor *const *inputs, const void *args,
             size_t args_size, jg_tensor **outputs);

int jg_ctx_save_for_backward(jg_ctx *ctx, int n, jg_tensor *const *tensors);
jg_tensor *jg_ctx_saved(jg_ctx *ctx, int i); /* BORROWED */
int jg_ctx_n_saved(const jg_ctx *ctx);
bool jg_ctx_needs_input_grad(const jg_ctx *ctx, int slot);
const void *jg_ctx_args(const jg_ctx *ctx);
size_t jg_ctx_args_size(const jg_ctx *ctx);
void jg_ctx_mark_non_differentiable(jg_ctx *ctx, jg_tensor *output);
/* In forward: `input` was modified in place and is returned as an output;
 * the call returns it as itself with its history moved onto the call
 * (PyTorch's ctx.mark_dirty).  Traced, the call is not captured (a graph
 * break: it runs eagerly). */
void jg_ctx_mark_dirty(jg_ctx *ctx, jg_tensor *input);
void jg_ctx_set_materialize_grads(jg_ctx *ctx, bool on);
const jg_function *jg_ctx_function(const jg_ctx *ctx);
void jg_ctx_set_state(jg_ctx *ctx, void *state, void (*free_state)(void *));
void *jg_ctx_state(const jg_ctx *ctx);

/* ---- compile ---- */
typedef int (*jg_program_fn)(void *user, const void *args, int n_inputs, jg_tensor *const *inputs,
                             jg_tensor **outputs);

typedef struct jg_compile_options {
    const char *backend; /* "interp" (default when NULL) or "c" */
    bool fullgraph;      /* fail instead of falling back to eager */
    bool verify;         /* also run eagerly and fail on any gradient mismatch */
} jg_compile_options;

jg_compiled *jg_compile(jg_program_fn fn, void *user, const jg_compile_options *opts);
/* outputs: room for as many outputs as the program returns (it writes them
 * there, as when called directly); no other bound */
int jg_compiled_call(jg_compiled *c, const void *args, size_t args_size, int n_inputs,
                     jg_tensor *const *inputs, jg_tensor **outputs);
void jg_compiled_free(jg_compiled *c);
char *jg_compiled_graph(const jg_compiled *c, int entry);
int jg_compiled_entries(const jg_compiled *c);
int jg_compiled_fallbacks(const jg_compiled *c); /* calls that ran eagerly */
/* Graph breaks that split the program (docs/compiler.md, "Graph breaks"):
 * a call whose trace read a value (jg_item, jg_copy_to, jg_data) runs as
 * compiled graphs around each read.  The breaks of the last such call
 * (*reasons: strings owned by c, valid until its next call), and how many;
 * -1 + error for NULL arguments. */
int jg_compiled_breaks(const jg_compiled *c, const char *const **reasons);
/* Called from a program while jg_compile traces it: code that must run on
 * every call (a hook with side effects, e.g. a module's Python hooks) is
 * not traceable, so the call runs eagerly -- a graph break -- and this
 * returns -1 with `why` as the error (fullgraph: the call fails with it).
 * Anywhere else it returns 0 and does nothing. */
int jg_graph_break(const char *why);
/* Graphs run so far: one per call of a whole-program graph, one per piece
 * of a call run in pieces (N breaks: N+1, fewer when a piece is empty). */
long jg_compiled_graphs_run(const jg_compiled *c);
/* Names where the program is now, for the breaks' reasons ("at
 * train.py:12"): fn writes it into buf (n bytes) and returns 0, or -1 for
 * none; called at a break during a jg_compiled_call only.  0 or -1 +
 * error. */
typedef int (*jg_break_site_fn)(void *user, char *buf, size_t n);
int jg_compiled_set_break_site(jg_compiled *c, jg_break_site_fn fn, void *user);
/* Dynamic sizes (PyTorch's dynamic=): JG_DYNAMIC_OFF (the default in C:
 * every new input size traces), JG_DYNAMIC_AUTO (input dims whose size
 * changed between two traces, all from one size to one other, stop being
 * traced per size where the graph allows; Python's default) or
 * JG_DYNAMIC_ON (also from the first call: the program is traced once more
 * with the first input dim of size >= 2, and every input dim of that size,
 * one larger).  The library sees what the program does with a size only
 * through jg_sizes_note: a C program that decides anything from a traced
 * tensor's jg_shape() must report it there, or keep JG_DYNAMIC_OFF.  Before
 * the first call; 0 or -1 + error.  See docs/compiler.md, "Dynamic shapes". */
enum { JG_DYNAMIC_OFF = 0, JG_DYNAMIC_AUTO = 1, JG_DYNAMIC_ON = 2 };
int jg_compiled_set_dynamic(jg_compiled *c, int mode);
/* PyTorch's compile mode= (docs/compiler.md, "Modes"): "default" (or
 * NULL); "reduce-overhead", each graph keeps a buffer per intermediate value
 * across calls (a replay allocates only its outputs, which are the
 * caller's: never overwritten by a later call); "max-autotune-no-cudagraphs", each graph's first
 * run times its schedules (generated loops or the library's kernels, with or without the thread
 * pool) and keeps the fastest; "max-autotune", both.  Results are bitwise those of "default" in
 * every mode.  Before the first call; 0, or -1
 * + error for an unknown mode ("Unrecognized mode=..."). */
int jg_compiled_set_mode(jg_compiled *c, const char *mode);
/* While a program is traced: it compared sizes (or integers computed from
 * them) a and b with op JG_SIZES_EQ ... JG_SIZES_GE and went on by the
 * result, or (JG_SIZES_OPAQUE) used size a in a way the library cannot
 * follow.  Dims stay dynamic only where every such comparison has the same
 * result for every size; otherwise they are traced per size.  Outside a
 * trace it does nothing. */
enum {
    JG_SIZES_EQ,
    JG_SIZES_NE,
    JG_SIZES_LT,
    JG_SIZES_LE,
    JG_SIZES_GT,
    JG_SIZES_GE,
    JG_SIZES_OPAQUE
};
void jg_sizes_note(int op, int64_t a, int64_t b);
/* Names call inputs in JITGRAD_LOG lines ("dim 0 of x went dynamic"): fn
 * writes input i's name into buf (n bytes) and returns 0, or -1 for the
 * default ("input 2"); called during a jg_compiled_call only.  0 or -1 +
 * error. */
typedef int (*jg_input_name_fn)(void *user, int input, char *buf, size_t n);
int jg_compiled_set_input_namer(jg_compiled *c, jg_input_name_fn fn, void *user);
/* Whether jg_compile can use this backend here ("interp": always; "c": a C
 * compiler works and the cache directory is writable). */
bool jg_compile_backend_available(const char *backend);

/* ---- optim ----
 * Optimizers over leaf tensors, following PyTorch 1.13's single-tensor
 * (foreach=False) updates in the same order of operations.  A step runs
 * jitgrad ops with grad mode off and updates parameters and state in place
 * (their version counters move, as with any in-place op); parameters whose
 * .grad is unset are skipped.  Values agree with PyTorch to rounding (its
 * CPU kernels fuse some multiply-adds); see docs/api.md. */
typedef struct jg_optim jg_optim;
typedef enum {
    JG_OPTIM_SGD,
    JG_OPTIM_ADAM,
    JG_OPTIM_ADAMW,
    JG_OPTIM_ADAGRAD,
    JG_OPTIM_RMSPROP,
    JG_OPTIM_ADADELTA
} jg_optim_kind;
/* One parameter group's hyperparameters (PyTorch's names); an algorithm
 * ignores the fields it does not use. */
typedef struct jg_optim_hparams {
    double lr;
    double momentum, dampening; /* SGD; momentum also RMSprop */
    bool nesterov;              /* SGD */
    double beta1, beta2;        /* Adam, AdamW */
    bool amsgrad;               /* Adam, AdamW */
    double eps;                 /* Adam, AdamW, Adagrad, RMSprop, Adadelta */
    double weight_decay;
    double lr_decay, initial_accumulator_value; /* Adagrad */
    double alpha;                               /* RMSprop */
    bool centered;                              /* RMSprop */
    bool maximize;
    double rho; /* Adadelta */
} jg_optim_hparams;
/* PyTorch 1.13's defaults for kind (SGD's lr, which PyTorch requires, is
 * 0.001 here). */
jg_optim_hparams jg_optim_defaults(jg_optim_kind kind);
/* A new optimizer with one group over params (leaf floating tensors, no
 * duplicates) or NULL + error (bad hyperparameters name PyTorch's messages). */
jg_optim *jg_optim_new(jg_optim_kind kind, jg_tensor *const *params, int n,
                       const jg_optim_hparams *hparams);
jg_optim *jg_optim_sgd(jg_tensor *const *params, int n, double lr, double momentum,
                       double dampening, double weight_decay, bool nesterov);
jg_optim *jg_optim_adam(jg_tensor *const *params, int n, double lr, double beta1, double beta2,
                        double eps, double weight_decay);
jg_optim *jg_optim_adamw(jg_tensor *const *params, int n, double lr, double beta1, double beta2,
                         double eps, double weight_decay);
jg_optim *jg_optim_adagrad(jg_tensor *const *params, int n, double lr, double lr_decay,
                           double weight_decay, double initial_accumulator_value, double eps);
jg_optim *jg_optim_rmsprop(jg_tensor *const *params, int n, double lr, double alpha, double eps,
                           double weight_decay, double momentum, bool centered);
jg_optim *jg_optim_adadelta(jg_tensor *const *params, int n, double lr, double rho, double eps,
                            double weight_decay);
void jg_optim_free(jg_optim *opt); /* NULL is fine */
/* Adds a group (hparams NULL: the first group's); returns its index. */
int jg_optim_add_param_group(jg_optim *opt, jg_tensor *const *params, int n,
                             const jg_optim_hparams *hparams);
jg_optim_kind jg_optim_kind_of(const jg_optim *opt);
int jg_optim_n_groups(const jg_optim *opt);
int jg_optim_group_size(const jg_optim *opt, int group);          /* -1 + error: no such group */
jg_tensor *jg_optim_param(const jg_optim *opt, int group, int i); /* BORROWED */
int jg_optim_get_hparams(const jg_optim *opt, int group, jg_optim_hparams *out);
int jg_optim_set_hparams(jg_optim *opt, int group, const jg_optim_hparams *hparams); /* checked */
double jg_optim_get_lr(const jg_optim *opt, int group);   /* NaN + error: no such group */
int jg_optim_set_lr(jg_optim *opt, int group, double lr); /* for schedulers */
int jg_optim_step(jg_optim *opt);
/* set_to_none: every .grad unset; else zeroed in place (PyTorch 1.13's
 * default is false). */
int jg_optim_zero_grad(jg_optim *opt, bool set_to_none);
/* State per parameter, by PyTorch's names: "momentum_buffer" (SGD,
 * RMSprop), "step" (f32 0-d), "exp_avg", "exp_avg_sq" (Adam, AdamW), "sum"
 * (Adagrad), "square_avg", "grad_avg" (RMSprop), "max_exp_avg_sq" (Adam and
 * AdamW with amsgrad), "square_avg", "acc_delta" (Adadelta).  jg_optim_state_name lists
 * the kind's names (NULL past the end).  jg_optim_state returns the live
 * tensor (BORROWED; NULL without error while that state does not exist yet,
 * e.g. before the first step); jg_optim_set_state stores a copy of value
 * (converted to the parameter's dtype; "step" takes any one-element tensor)
 * or, value NULL, drops it. */
const char *jg_optim_state_name(jg_optim_kind kind, int i);
jg_tensor *jg_optim_state(const jg_optim *opt, int group, int i, const char *name);
int jg_optim_set_state(jg_optim *opt, int group, int i, const char *name, jg_tensor *value);
/* The update of one parameter, without an optimizer object: state holds
 * the kind's state tensors in jg_optim_state_name order.  The tensors given
 * are updated in place; NULL entries the algorithm needs are filled with new
 * tensors (as PyTorch creates them) whose references the caller owns, not
 * owned by any scope.  Fails, touching nothing, inside a traced program (a
 * graph break under jg_compile). */
#define JG_OPTIM_MAX_STATE 4
int jg_optim_update(jg_optim_kind kind, const jg_optim_hparams *hparams, jg_tensor *param,
                    jg_tensor *grad, jg_tensor **state);

/* ---- io ---- */
/* The size in bytes of the memory t views (all of it, not only t's elements);
 * -1 + error for a traced tensor. */
int64_t jg_storage_nbytes(const jg_tensor *t);
/* A new tensor over t's memory with the given geometry (strides and offset in
 * elements, none negative), sharing it and its version counter, with no
 * history (requires_grad off): what checkpoint loaders rebuild views with.
 * Fails, naming the sizes, when the view reaches past the memory's end. */
jg_tensor *jg_storage_view(jg_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                           int64_t offset);
/* state_dicts: names -> tensors in insertion order, saved and loaded in
 * PyTorch's checkpoint format (torch.load reads what jg_state_dict_save
 * writes; jg_state_dict_load reads what torch.save(model.state_dict()) and
 * jitgrad.save write).  Dtypes f32, f64, i64, i32 and bool.  Entries that
 * share memory (tied weights, views) are saved with one copy of it and load
 * sharing it again; requires_grad is kept.  The dict holds its own reference
 * to each tensor; get / tensor return BORROWED ones.  Loading a damaged or
 * foreign file fails with NULL and a message naming what is wrong. */
typedef struct jg_state_dict jg_state_dict;
jg_state_dict *jg_state_dict_new(void);
void jg_state_dict_free(jg_state_dict *sd); /* NULL is fine */
/* Adds name -> t, or replaces the tensor of an existing name in its place. */
int jg_state_dict_set(jg_state_dict *sd, const char *name, jg_tensor *t);
jg_tensor *jg_state_dict_get(const jg_state_dict *sd, const char *name); /* NULL + error: none */
int jg_state_dict_size(const jg_state_dict *sd);
const char *jg_state_dict_name(const jg_state_dict *sd, int i);
jg_tensor *jg_state_dict_tensor(const jg_state_dict *sd, int i);
int jg_state_dict_save(const jg_state_dict *sd, const char *path);
jg_state_dict *jg_state_dict_load(const char *path);
/* ---- OPS-SHAPE: shapes, indexing, creation ---- */
/* Joins tensors of one number of dims along dim (all other sizes equal;
 * dtypes promoted); differentiable in each.  stack: along a new dim. */
jg_tensor *jg_cat(int n, jg_tensor *const *tensors, int dim);
jg_tensor *jg_stack(int n, jg_tensor *const *tensors, int dim);
/* The view a[start:start+length] along dim (start < 0 counts from the end). */
jg_tensor *jg_narrow(jg_tensor *a, int dim, int64_t start, int64_t length);
/* The view a[start:end:step] along dim (Python's clamping; step >= 1). */
jg_tensor *jg_slice_step(jg_tensor *a, int dim, int64_t start, int64_t end, int64_t step);
/* Lower / upper triangle of the last two dims, the rest zero; diagonal 0 is
 * the main one, > 0 above it, < 0 below. */
jg_tensor *jg_tril(jg_tensor *a, int64_t diagonal);
jg_tensor *jg_triu(jg_tensor *a, int64_t diagonal);
/* PyTorch's index_select: a along dim at a 1-D (or 0-d) int64/int32 index. */
jg_tensor *jg_index_select(jg_tensor *a, int dim, jg_tensor *index);
/* PyTorch's gather / scatter / scatter_add along dim (int64 index of a's
 * number of dims; src may be larger than index): results of a's shape.
 * Indices out of range are an error, never read or written. */
jg_tensor *jg_gather(jg_tensor *a, int dim, jg_tensor *index);
jg_tensor *jg_scatter(jg_tensor *a, int dim, jg_tensor *index, jg_tensor *src);
jg_tensor *jg_scatter_value(jg_tensor *a, int dim, jg_tensor *index, double value);
jg_tensor *jg_scatter_add(jg_tensor *a, int dim, jg_tensor *index, jg_tensor *src);
/* index_add (src * alpha added at the 1-D int32/int64 index along dim, in
 * index order), index_copy, index_fill (negative indices count from the end) */
jg_tensor *jg_index_add(jg_tensor *a, int dim, jg_tensor *index, jg_tensor *src, double alpha);
jg_tensor *jg_index_copy(jg_tensor *a, int dim, jg_tensor *index, jg_tensor *src);
jg_tensor *jg_index_fill(jg_tensor *a, int dim, jg_tensor *index, double value);
/* a's elements where the bool mask (broadcast with a) is set, 1-D; reads
 * the mask's values (a traced mask makes a compiled call run in pieces) */
jg_tensor *jg_masked_select(jg_tensor *a, jg_tensor *mask);
jg_tensor *jg_flip(jg_tensor *a, int n_dims, const int *dims);
/* n_dims 0: the flattened tensor rolled by shifts[0] (n_shifts 1) */
jg_tensor *jg_roll(jg_tensor *a, int n_shifts, const int64_t *shifts, int n_dims, const int *dims);
jg_tensor *jg_repeat(jg_tensor *a, int n, const int64_t *repeats);
/* repeats: the int, or the int tensor repeats_t when not NULL (its values
 * read now); has_dim false: over the flattened tensor */
jg_tensor *jg_repeat_interleave(jg_tensor *a, int64_t repeats, jg_tensor *repeats_t, int dim,
                                bool has_dim);
/* argsort: sort's indices (stable) */
jg_tensor *jg_argsort(jg_tensor *a, int dim, bool descending);
/* a[..., index, ...] with index an int64/int32 tensor of any shape at dim:
 * the result has a's dims with dim replaced by index's; negative entries
 * count from the end (Python indexing).  Differentiable in a. */
jg_tensor *jg_index(jg_tensor *a, int dim, jg_tensor *index);
/* In place: a[..., index, ...] = values (broadcast to jg_index's result
 * shape, cast to a's dtype), with PyTorch's autograd semantics (the written
 * elements get no gradient through a; values get theirs).  Repeated
 * indices: the last write wins. */
int jg_index_put_(jg_tensor *a, int dim, jg_tensor *index, jg_tensor *values);
/* The coordinates of a's nonzero (true) elements in row-major order:
 * int64 [count, ndim] (PyTorch's nonzero).  Reads the values, so a traced
 * tensor is a graph break. */
jg_tensor *jg_nonzero(jg_tensor *a);
/* n x m with ones on the diagonal. */
jg_tensor *jg_eye(jg_dtype dtype, int64_t n, int64_t m);
/* steps values from start to end inclusive, as PyTorch computes them. */
jg_tensor *jg_linspace(jg_dtype dtype, double start, double end, int64_t steps);
/* From jitgrad's generator (jg_manual_seed), not PyTorch's numbers:
 * integers uniform in [low, high); a permutation of 0..n-1; num_samples
 * category indices per row of a 1-D or 2-D tensor of weights (int64). */
jg_tensor *jg_randint(jg_dtype dtype, int64_t low, int64_t high, int ndim, const int64_t *shape);
jg_tensor *jg_randperm(jg_dtype dtype, int64_t n);
jg_tensor *jg_multinomial(jg_tensor *probs, int64_t num_samples, bool replacement);
/* ---- nn ---- */
/* gelu: x * Phi(x) (JG_GELU_NONE, with erf) or PyTorch's tanh approximation
 * (JG_GELU_TANH); silu: x * sigmoid(x).  Floating dtypes. */
typedef enum { JG_GELU_NONE = 0, JG_GELU_TANH = 1 } jg_gelu_approximate;
jg_tensor *jg_gelu(jg_tensor *a, jg_gelu_approximate approximate);
jg_tensor *jg_silu(jg_tensor *a);
/* hardswish: x * min(max(x + 3, 0), 6) / 6; hardsigmoid: min(max(x + 3, 0),
 * 6) / 6.  Floating dtypes; gradients (and double backward) as PyTorch's. */
jg_tensor *jg_hardswish(jg_tensor *a);
jg_tensor *jg_hardsigmoid(jg_tensor *a);
/* leaky_relu: x > 0 ? x : x * negative_slope (PyTorch's default slope is
 * 0.01).  Floating dtypes; a gradient made with create_graph requires grad
 * (its derivative in x is zero), as PyTorch's. */
jg_tensor *jg_leaky_relu(jg_tensor *a, double negative_slope);
/* hardtanh: x clamped to [min_val, max_val] (relu6: 0 and 6); the
 * gradient is zero where x <= min_val or x >= max_val, as PyTorch's. */
jg_tensor *jg_hardtanh(jg_tensor *a, double min_val, double max_val);
/* embedding: the rows of weight [V, D] at int64/int32 indices (any shape)
 * -> indices.shape + [D]; the row padding_idx (negative: none) gets no
 * gradient.  An index outside [0, V) fails when the op runs. */
jg_tensor *jg_embedding(jg_tensor *weight, jg_tensor *indices, int64_t padding_idx);
/* layer_norm over x's last n_norm dims; weight and bias (NULL: none) have
 * their shape: (x - mean) / sqrt(biased var + eps) * weight + bias. */
jg_tensor *jg_layer_norm(jg_tensor *x, int n_norm, jg_tensor *weight, jg_tensor *bias, double eps);
/* batch_norm over every dim of x [N, C, ...] but dim 1, per channel.
 * training: the batch's mean and biased variance normalize x, and
 * running_mean / running_var (either NULL: not kept) become
 * (1 - momentum) * old + momentum * (batch mean / unbiased variance), in
 * place without history (under jg_compile: written back after each call).
 * Not training: the running statistics (both required) normalize x.  Then
 * * weight + bias, each [C] or NULL.  f32 and f64. */
jg_tensor *jg_batch_norm(jg_tensor *x, jg_tensor *running_mean, jg_tensor *running_var,
                         jg_tensor *weight, jg_tensor *bias, bool training, double momentum,
                         double eps);
/* dropout with the library's generator: train false or p == 0 returns x (a
 * new reference); otherwise x * mask / (1 - p), mask kept with prob 1 - p. */
jg_tensor *jg_dropout(jg_tensor *x, double p, bool train);
/* 2-D convolution of x [N, C, H, W] (or unbatched [C, H, W]) with weight
 * [O, C / groups, kh, kw] and bias [O] (NULL: none), as PyTorch's conv2d:
 * stride, padding (zeros) and dilation per (H, W) dim; float32 or float64.
 * jg_conv2d_same is padding='same' (stride 1; an odd total padding puts the
 * extra row/column at the end, as PyTorch 1.13). */
jg_tensor *jg_conv2d(jg_tensor *x, jg_tensor *weight, jg_tensor *bias, const int64_t stride[2],
                     const int64_t padding[2], const int64_t dilation[2], int64_t groups);
jg_tensor *jg_conv2d_same(jg_tensor *x, jg_tensor *weight, jg_tensor *bias,
                          const int64_t dilation[2], int64_t groups);
/* Transposed 2-D convolution of x [N, Cin, H, W] (or [Cin, H, W]) with
 * weight [Cin, Cout / groups, kh, kw] and bias [Cout] (NULL: none), as
 * PyTorch's conv_transpose2d: output (H - 1) * stride - 2 * padding +
 * dilation * (kh - 1) + output_padding + 1 per dim (output_padding below
 * the stride or the dilation); float32 or float64.  The gradient of
 * jg_conv2d with respect to its input. */
jg_tensor *jg_conv_transpose2d(jg_tensor *x, jg_tensor *weight, jg_tensor *bias,
                               const int64_t stride[2], const int64_t padding[2],
                               const int64_t output_padding[2], const int64_t dilation[2],
                               int64_t groups);
/* max_pool2d of x [N, C, H, W] or [C, H, W] (padding counts as -inf, at
 * most half the kernel); indices (NULL: not wanted) receives the int64
 * position of each maximum in its flattened H * W plane, as PyTorch's
 * return_indices=True. */
jg_tensor *jg_max_pool2d(jg_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                         const int64_t padding[2], const int64_t dilation[2], bool ceil_mode,
                         jg_tensor **indices);
/* avg_pool2d: the window's mean, divided by the window's size in the padded
 * input (count_include_pad) or by its elements inside the input, or by
 * divisor_override when it is not 0. */
jg_tensor *jg_avg_pool2d(jg_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                         const int64_t padding[2], bool ceil_mode, bool count_include_pad,
                         int64_t divisor_override);
/* adaptive_avg_pool2d to an output of output_size (oh, ow): output row o
 * averages input rows [floor(o * H / oh), ceil((o + 1) * H / oh)), as
 * PyTorch's; (1, 1) is the mean over the last two dims, as PyTorch 1.13. */
jg_tensor *jg_adaptive_avg_pool2d(jg_tensor *x, const int64_t output_size[2]);
/* nll_loss of [N, C] log-probabilities and cross entropy of [N, C] logits
 * against int64 targets [N], with PyTorch's options: rows whose target is
 * ignore_index count nowhere; weight ([C], the input's dtype, or NULL)
 * scales each row by its target's weight, and a weighted mean divides by
 * the rows' summed weights; label_smoothing in [0, 1] mixes in the mean
 * over classes of -logp (weighted), as PyTorch 1.13's cross_entropy.  An
 * out-of-range target fails when the op runs ("Target 5 is out of
 * bounds."). */
typedef struct jg_loss_options {
    jg_reduction reduction;
    int64_t ignore_index; /* PyTorch's default: -100 */
    jg_tensor *weight;    /* NULL: all ones */
    double label_smoothing;
} jg_loss_options;
jg_tensor *jg_nll_loss(jg_tensor *logp, jg_tensor *target, const jg_loss_options *o);
jg_tensor *jg_cross_entropy_opts(jg_tensor *logits, jg_tensor *target, const jg_loss_options *o);
/* Regression losses (input and target broadcast): (x - y)^2, |x - y|, and
 * |x - y| < beta ? 0.5 (x - y)^2 / beta : |x - y| - beta / 2 (beta >= 0;
 * 0 gives l1), reduced as PyTorch's reduction=. */
jg_tensor *jg_mse_loss(jg_tensor *input, jg_tensor *target, jg_reduction reduction);
jg_tensor *jg_l1_loss(jg_tensor *input, jg_tensor *target, jg_reduction reduction);
jg_tensor *jg_smooth_l1_loss(jg_tensor *input, jg_tensor *target, jg_reduction reduction,
                             double beta);
/* softmax(q k^T / sqrt(E) [+ mask]) v over the last two dims; is_causal
 * masks keys after each query; attn_mask (NULL: none; not with is_causal):
 * bool keeps where true, float is added; dropout_p > 0 drops weights. */
jg_tensor *jg_scaled_dot_product_attention(jg_tensor *q, jg_tensor *k, jg_tensor *v,
                                           jg_tensor *attn_mask, double dropout_p, bool is_causal);
/* ---- opsmath ----
 * Math ops with PyTorch's semantics (values, NaN handling, dtypes and
 * gradients); every one records history and traces under jg_compile. */
/* float results (integer and bool inputs compute in float32) */
jg_tensor *jg_sin(jg_tensor *a);
jg_tensor *jg_cos(jg_tensor *a);
jg_tensor *jg_erf(jg_tensor *a);
/* clamp_min: max(a, min); clamp_max: min(a, max); NaN stays NaN */
jg_tensor *jg_clamp_min(jg_tensor *a, double min);
jg_tensor *jg_clamp_max(jg_tensor *a, double max);
/* clamp_max(clamp_min(a, min), max) as one node; has_min / has_max say which apply (at
 * least one, as PyTorch requires) */
jg_tensor *jg_clamp(jg_tensor *a, bool has_min, double min, bool has_max, double max);
/* clamp with tensor bounds (NULL: none; promoted, broadcast); NaN in any
 * operand gives NaN; PyTorch's gradients for all three */
jg_tensor *jg_clamp_tensor(jg_tensor *a, jg_tensor *min, jg_tensor *max);
/* elementwise max / min of two tensors (promoted, broadcast); NaN wins */
jg_tensor *jg_maximum(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_minimum(jg_tensor *a, jg_tensor *b);
/* a ** b elementwise (promoted, broadcast); differentiable in both */
jg_tensor *jg_pow(jg_tensor *a, jg_tensor *b);
/* product of all elements (0-d), or over one dim; bool and int32 give int64 */
jg_tensor *jg_prod(jg_tensor *a);
jg_tensor *jg_prod_dim(jg_tensor *a, int dim, bool keepdim);
/* variance / standard deviation over dims (n_dims == 0: all) with
 * sum((x - mean)^2) / (N - correction); correction 1 is PyTorch's default
 * (unbiased).  float inputs only. */
jg_tensor *jg_var(jg_tensor *a, int n_dims, const int *dims, double correction, bool keepdim);
jg_tensor *jg_std(jg_tensor *a, int n_dims, const int *dims, double correction, bool keepdim);
/* both of var's results: *var and *mean (the mean over the same dims) */
int jg_var_mean(jg_tensor *a, int n_dims, const int *dims, double correction, bool keepdim,
                jg_tensor **var, jg_tensor **mean);
/* p-norm over dims (n_dims == 0: all): p = 2 (PyTorch's default 'fro'), 1,
 * INFINITY, -INFINITY, 0 (count of nonzeros) or any other p */
jg_tensor *jg_norm(jg_tensor *a, double p, int n_dims, const int *dims, bool keepdim);
/* running sum along dim; bool and integer inputs give int64 */
jg_tensor *jg_cumsum(jg_tensor *a, int dim);
/* bool masks of NaN / infinite / finite elements (integers: none, none, all) */
jg_tensor *jg_isnan(jg_tensor *a);
jg_tensor *jg_isinf(jg_tensor *a);
jg_tensor *jg_isfinite(jg_tensor *a);
/* NaN, +inf and -inf replaced; posinf / neginf NULL: the dtype's largest
 * finite value (negated) */
jg_tensor *jg_nan_to_num(jg_tensor *a, double nan, const double *posinf, const double *neginf);
/* log(sum(exp(a))) over dims (n_dims 0: all), stabilized by the max */
jg_tensor *jg_logsumexp(jg_tensor *a, int n_dims, const int *dims, bool keepdim);
/* PyTorch's remainder (Python's %: the divisor's sign), fmod (the
 * dividend's) and floor_divide; an integer divisor of 0 is an error */
jg_tensor *jg_remainder(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_fmod(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_floor_divide(jg_tensor *a, jg_tensor *b);
/* div(a, b, rounding_mode="floor" / "trunc"): floor_divide's value and
 * trunc(a / b) (integers stay integers, exactly); zero gradients for both
 * operands, without history, as PyTorch's DivBackward2 */
jg_tensor *jg_div_floor(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_div_trunc(jg_tensor *a, jg_tensor *b);
/* outer product of 1-D tensors, dot of 1-D, matrix @ vector,
 * beta * input + alpha * (m1 @ m2) (input broadcast), sum of the diagonal */
jg_tensor *jg_outer(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_dot(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_mv(jg_tensor *m, jg_tensor *v);
jg_tensor *jg_addmm(jg_tensor *input, jg_tensor *m1, jg_tensor *m2, double beta, double alpha);
jg_tensor *jg_trace(jg_tensor *a);
/* int64 index of the first maximum / minimum (a NaN counts as the
 * extreme), over all elements (flattened, 0-d result) or along dim */
jg_tensor *jg_argmax(jg_tensor *a);
jg_tensor *jg_argmin(jg_tensor *a);
jg_tensor *jg_argmax_dim(jg_tensor *a, int dim, bool keepdim);
jg_tensor *jg_argmin_dim(jg_tensor *a, int dim, bool keepdim);
/* the k largest (or smallest) along dim, in order, with their int64
 * indices; equal values keep their order (NaN counts as the largest) */
int jg_topk(jg_tensor *a, int64_t k, int dim, bool largest, jg_tensor **values,
            jg_tensor **indices);
/* values sorted along dim and their int64 indices; stable */
int jg_sort(jg_tensor *a, int dim, bool descending, jg_tensor **values, jg_tensor **indices);

/* ---- math2 ----
 * More elementwise math with PyTorch's values, dtypes and gradients.
 * floor, ceil, trunc, round (half to even), sign and sgn keep integer
 * dtypes (bool: sign and sgn only) and have zero gradients; frac (a -
 * trunc(a)) is float only.  The rest compute integer and bool inputs in
 * float32. */
jg_tensor *jg_floor(jg_tensor *a);
jg_tensor *jg_ceil(jg_tensor *a);
jg_tensor *jg_trunc(jg_tensor *a);
jg_tensor *jg_round(jg_tensor *a);
/* round to `decimals` decimal places (negative: tens, hundreds ...) as
 * PyTorch's round(decimals=): float only, decimals 0 included */
jg_tensor *jg_round_decimals(jg_tensor *a, int decimals);
jg_tensor *jg_frac(jg_tensor *a);
jg_tensor *jg_sign(jg_tensor *a);
jg_tensor *jg_sgn(jg_tensor *a);
jg_tensor *jg_log1p(jg_tensor *a);
jg_tensor *jg_expm1(jg_tensor *a);
jg_tensor *jg_log2(jg_tensor *a);
jg_tensor *jg_log10(jg_tensor *a);
jg_tensor *jg_rsqrt(jg_tensor *a);
jg_tensor *jg_reciprocal(jg_tensor *a);
jg_tensor *jg_sinh(jg_tensor *a);
jg_tensor *jg_cosh(jg_tensor *a);
jg_tensor *jg_tan(jg_tensor *a);
jg_tensor *jg_asin(jg_tensor *a);
jg_tensor *jg_acos(jg_tensor *a);
jg_tensor *jg_atan(jg_tensor *a);
jg_tensor *jg_erfc(jg_tensor *a);
/* atan2(a, b) elementwise (promoted, broadcast; float results) */
jg_tensor *jg_atan2(jg_tensor *a, jg_tensor *b);
/* self + value * t1 * t2 and self + value * t1 / t2 (promoted, broadcast;
 * addcmul refuses bool, addcdiv integer t1 and t2); gradients for all three */
jg_tensor *jg_addcmul(jg_tensor *self, jg_tensor *t1, jg_tensor *t2, double value);
jg_tensor *jg_addcdiv(jg_tensor *self, jg_tensor *t1, jg_tensor *t2, double value);
/* self + weight * (end - self), exact at weight 0 and 1 (broadcast; float
 * operands of one dtype, as PyTorch requires); gradients for every tensor */
jg_tensor *jg_lerp(jg_tensor *self, jg_tensor *end, jg_tensor *weight);
jg_tensor *jg_lerp_scalar(jg_tensor *self, jg_tensor *end, double weight);

/* ---- surface2 ---- */
/* min of all elements (0-d; NaN if any): the gradient is shared evenly by
 * the elements equal to it, as PyTorch's min() does */
jg_tensor *jg_min(jg_tensor *a);
/* min over one dim: values (a's dtype) and i64 indices (first minimum) */
int jg_min_dim(jg_tensor *a, int dim, bool keepdim, jg_tensor **values, jg_tensor **indices);
/* max / min over dims (n_dims == 0: all); the gradient is split evenly among
 * the elements equal to the result in each reduced slice */
jg_tensor *jg_amax(jg_tensor *a, int n_dims, const int *dims, bool keepdim);
jg_tensor *jg_amin(jg_tensor *a, int n_dims, const int *dims, bool keepdim);
/* std's and mean's results over the same dims (as jg_var_mean) */
int jg_std_mean(jg_tensor *a, int n_dims, const int *dims, double correction, bool keepdim,
                jg_tensor **std, jg_tensor **mean);
/* in-place jg_clamp / jg_clamp_min / jg_clamp_max (a's dtype kept; on a
 * leaf that requires grad: PyTorch's error) */
int jg_clamp_(jg_tensor *a, bool has_min, double min, bool has_max, double max);
int jg_clamp_min_(jg_tensor *a, double min);
int jg_clamp_max_(jg_tensor *a, double max);
/* cross_entropy with class-probability targets (target: logits' shape,
 * float; class dim 1, or 0 for a 1-D input) as PyTorch 1.13: o->weight and
 * o->label_smoothing apply, o->ignore_index must be negative (-100) */
jg_tensor *jg_cross_entropy_probs(jg_tensor *logits, jg_tensor *target, const jg_loss_options *o);
/* Random generators: SplitMix64 states like the global one jg_manual_seed
 * seeds (the same seed gives the same stream).  Every random draw of the
 * calling thread (jg_rand, jg_randn, jg_randint, jg_randperm,
 * jg_multinomial, dropout) comes from the generator jg_generator_use
 * installed (NULL: the global one); it returns the previous one, to be
 * reinstalled after the draws.  Freeing the installed generator reinstalls
 * the global one. */
typedef struct jg_generator jg_generator;
jg_generator *jg_generator_new(uint64_t seed);
void jg_generator_free(jg_generator *g);
void jg_generator_manual_seed(jg_generator *g, uint64_t seed);
uint64_t jg_generator_initial_seed(const jg_generator *g);
uint64_t jg_generator_get_state(const jg_generator *g);
void jg_generator_set_state(jg_generator *g, uint64_t state);
jg_generator *jg_generator_use(jg_generator *g);
/* The calling thread's global generator: its initial seed (the last
 * jg_manual_seed) and state, read and written whatever generator is
 * installed (get_rng_state / set_rng_state / initial_seed). */
void jg_global_rng_get(uint64_t *initial, uint64_t *state);
void jg_global_rng_set(uint64_t initial, uint64_t state);
/* Views of consecutive pieces of a along dim, into out[]: of split_size
 * each (the last may be smaller; at most max_out pieces), of the n listed
 * sizes (summing to the dim's size), or every index with dim removed
 * (unbind).  Return the number of pieces or -1. */
int jg_split(jg_tensor *a, int dim, int64_t split_size, int max_out, jg_tensor **out);
int jg_split_with_sizes(jg_tensor *a, int dim, int n, const int64_t *sizes, jg_tensor **out);
int jg_unbind(jg_tensor *a, int dim, int max_out, jg_tensor **out);
/* in place: value where the bool mask (broadcast to a's shape) is set; one
 * node (MaskedFillBackward0; jg_index_put_mask_, PyTorch's a[mask] = value:
 * IndexPutBackward0) */
int jg_masked_fill_(jg_tensor *a, jg_tensor *mask, double value);
int jg_index_put_mask_(jg_tensor *a, jg_tensor *mask, double value);
/* ---- linear algebra (LAPACK, by LU) ----
 * jg_linalg_inv: the inverse of each matrix of a float32/float64 batch
 * [..., n, n]; fails with PyTorch's message on a singular matrix.
 * jg_linalg_slogdet: the sign (-1, 0, 1) and log|det| of each, both of
 * shape [...] (a singular matrix: 0 and -inf).  Gradients as PyTorch's. */
jg_tensor *jg_linalg_inv(jg_tensor *a);
int jg_linalg_slogdet(jg_tensor *a, jg_tensor **sign, jg_tensor **logabsdet);
/* the lower Cholesky factor L (A = L L^T) of each matrix, read from its
 * lower triangle; fails with PyTorch's message when one is not
 * positive-definite */
jg_tensor *jg_linalg_cholesky(jg_tensor *a);
/* the eigenvalues [..., n] (ascending) and eigenvectors [..., n, n] (as
 * columns) of each symmetric matrix, read from its lower triangle (upper:
 * its upper one); gradients as PyTorch's */
int jg_linalg_eigh(jg_tensor *a, bool upper, jg_tensor **eigenvalues, jg_tensor **eigenvectors);

/* bitwise ops of integer and bool tensors (PyTorch's bitwise_*, & | ^ ~
 * << >>); float operands are refused with PyTorch's message, the shifts
 * refuse bool too.  No gradient. */
jg_tensor *jg_bitwise_and(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_bitwise_or(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_bitwise_xor(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_bitwise_not(jg_tensor *a);
jg_tensor *jg_bitwise_left_shift(jg_tensor *a, jg_tensor *b);
jg_tensor *jg_bitwise_right_shift(jg_tensor *a, jg_tensor *b);
/* lgamma (libm's), digamma and trigamma (PyTorch's polygamma(1, x)) as
 * PyTorch computes them; integer inputs give float32.  Gradients digamma
 * and trigamma; trigamma has none. */
jg_tensor *jg_lgamma(jg_tensor *a);
jg_tensor *jg_digamma(jg_tensor *a);
jg_tensor *jg_trigamma(jg_tensor *a);

#ifdef __cplusplus
}
#endif
#endif
