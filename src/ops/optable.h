/* THE op table: one row per op.  Eager dispatch, autograd, the tracer, the IR
 * printer, graph autodiff, the interpreter and the code generator all read
 * these rows; adding an op means adding a row to ops.def plus its functions. */
#ifndef JG_OPS_OPTABLE_H
#define JG_OPS_OPTABLE_H

#include "core/iter.h"
#include "core/tensor.h"

typedef enum {
#define JG_OP(ID, name, bw_name, n_in, n_out, flags, infer, kernel, vjp, cexpr) JG_OP_##ID,
#include "ops/ops.def"
#undef JG_OP
    JG_OP_COUNT
} jg_opcode;

/* Non-tensor operands of an op: dims, shapes, a scalar.  Plain data, compared
 * with memcmp by CSE and guards, so always zero-initialise. */
typedef struct jg_attrs {
    int64_t i[JG_MAX_DIMS + 4]; /* dims / shape / perm / (dim, start, end, shape...) */
    int n;                      /* entries of i[] in use */
    /* 1: a reduction called without dims (sum(), mean(), prod()), which
     * only its autograd node's name reads (PyTorch's ...Backward0); a
     * member, not padding: initialisers zero it */
    int32_t whole;
    double s; /* scalar operand */
    int keepdim;
    int dtype; /* target dtype of to_dtype */
} jg_attrs;
/* matmul's attribute i[0] (ops/api.c jg_matmul): the operand was a
 * column-major 2-D matrix, so its gradient is produced column-major too. */
enum { JG_MATMUL_A_COL_MAJOR = 1, JG_MATMUL_B_COL_MAJOR = 2 };

/* No padding bytes: `jg_attrs a = {.n = 1}` sets every byte memcmp reads. */
_Static_assert(sizeof(jg_attrs) == sizeof(int64_t) * (JG_MAX_DIMS + 4) + 2 * sizeof(int) +
                                       sizeof(double) + 2 * sizeof(int),
               "jg_attrs has padding");

enum {
    JG_OPF_ELEMENTWISE = 1u << 0, /* broadcasting map; has a C expression */
    JG_OPF_VIEW = 1u << 1,        /* output aliases input 0's storage */
    JG_OPF_SAVE_IN = 1u << 2,     /* VJP reads the inputs */
    JG_OPF_SAVE_OUT = 1u << 3,    /* VJP reads the outputs */
    JG_OPF_FLOAT = 1u << 4,       /* integer and bool inputs are promoted to float32 */
    JG_OPF_PROMOTE = 1u << 5,     /* tensor inputs are promoted to one dtype */
    JG_OPF_NONDIFF = 1u << 6,     /* no VJP: outputs never require grad */
    JG_OPF_SCALAR = 1u << 7,      /* reads the scalar attribute s (expression and printer) */
    /* its expression calls a libm function (expf, logf, powf) that keeps gcc
     * from vectorizing a loop: the c backend runs it as its own kernel step
     * rather than inside a fused loop (backend/cgen.c) */
    JG_OPF_NOFUSE = 1u << 8,
    /* the kernel fails on some operand values (an index out of range), so
     * a compiled program keeps it even when its result is unused: it must
     * fail where eager fails (passes/dce.c) */
    JG_OPF_CHECKS = 1u << 9,
    /* with SAVE_OUT: eager backward keeps only the integer outputs (max's
     * indices, as PyTorch saves them), so an in-place op on the values does
     * not invalidate the node */
    JG_OPF_SAVE_IDX = 1u << 10,
    JG_OPF_NOBOOL = 1u << 11, /* refuses bool operands as PyTorch does (no promotion) */
};

/* Shape/dtype rule: fills out[0..n_out) from the inputs' metadata; -1 with a
 * message on bad input. */
typedef int (*jg_infer_fn)(const jg_attrs *a, const jg_meta *in, jg_meta *out);
/* Eager kernel: outputs are allocated (contiguous) per the shape rule; inputs
 * may be arbitrarily strided.  View ops instead return a new alias in out[0]. */
typedef int (*jg_kernel_fn)(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out);
/* VJP rule, written with jitgrad ops so it serves eager, traced and higher
 * order backward alike.  in/out are the saved inputs/outputs (NULL where the
 * op does not save them), meta the inputs' metadata, gout the output
 * gradients (NULL = zero; at least one is set).  Writes gin[k] for each k
 * with needs[k]: NULL for no contribution, else a tensor of in[k]'s shape and
 * dtype that is BORROWED: owned by the scope the caller opened around the
 * call, or one of the arguments.  Returns 0 or -1. */
typedef int (*jg_vjp_fn)(const jg_attrs *a, const jg_meta *meta, jg_tensor *const *in,
                         jg_tensor *const *out, jg_tensor *const *gout, const bool *needs,
                         jg_tensor **gin);

typedef struct jg_op_info {
    const char *name;    /* "add" */
    const char *bw_name; /* "AddBackward0", as PyTorch names grad_fns */
    int n_in, n_out;
    unsigned flags;
    jg_infer_fn infer;
    jg_kernel_fn kernel;
    jg_vjp_fn vjp;
    const char *cexpr; /* elementwise ops: expression over a, b, s and type T */
} jg_op_info;

extern const jg_op_info jg_ops[JG_OP_COUNT];

/* The name of the autograd node op records with attributes a (NULL: none),
 * as PyTorch names it: bw_name, but a reduction without dims is its
 * ...Backward0 overload and copy_'s whole-tensor slice_scatter is
 * CopyBackwards.  Eager nodes and compiled calls' messages both use it. */
const char *jg_op_node_name(jg_opcode op, const jg_attrs *a);

/* Bit k set: op's backward reads input k, given which inputs get a
 * gradient (needs[k]); eager nodes save, and compiled programs keep, only
 * those (0 for ops without JG_OPF_SAVE_IN). */
unsigned jg_op_saved_inputs(jg_opcode op, const bool *needs);
/* Whether op's eager node saves its output k, of dtype d, for the backward
 * (an in-place change of it then fails backward), as PyTorch's does:
 * JG_OPF_SAVE_OUT ops save every output the VJP reads (those that also
 * return indices keep only those; std_mean only the std). */
bool jg_op_saves_output(jg_opcode op, int k, jg_dtype d);

/* nll_loss's and nll_loss_backward's attributes (their one encoding; the
 * layout is described in ops/softmax.c). */
jg_attrs jg_nll_attrs(bool has_ignore, int64_t ignore_index, int reduction, int64_t n_cls);

/* The row functions of the elementwise ops by dtype (ops/elementwise.c);
 * NULL for other ops.  Hot paths call a row directly for dense operands. */
extern const jg_inner_fn jg_ew_rows[JG_OP_COUNT][JG_NDTYPES];
/* Dense loop of an elementwise.def op: out[i] = op(a[i], b[i]) for n
 * elements (b unused by unary ops), out sharing no memory with a or b. */
typedef void (*jg_dense_fn)(int64_t n, void *out, const void *a, const void *b, double s);
extern const jg_dense_fn jg_ew_dense[JG_OP_COUNT][JG_NDTYPES];

/* x.add_(y, alpha=alpha) without history, in one pass: x[i] + y[i] * alpha
 * with the product rounded to x's dtype first, the bits of mul_scalar then
 * add_ (the optimizers' update).  Only for float x and y of one dtype, both
 * dense with the same shape, untraced, not views, sharing no memory; then
 * it bumps x's version and returns true.  False: nothing was done (the
 * caller composes the ops). */
bool jg_add_scaled_dense_(jg_tensor *x, const jg_tensor *y, double alpha);

/* Runs one op: promotion, shape rule, then tracing (symbolic inputs), or the
 * kernel plus autograd recording.  Outputs are new references tracked by the
 * innermost scope.  Returns 0 or -1. */
int jg_op_call(jg_opcode op, const jg_attrs *a, jg_tensor *const *in, jg_tensor **out);

/* PyTorch's error for a JG_OPF_NOBOOL op whose operands are all bool;
 * returns -1. */
int jg_bool_refused(jg_opcode op);

/* Set by the tracer: records an op whose inputs include a symbolic tensor
 * and makes symbolic outputs (new references, untracked). */
typedef int (*jg_trace_op_fn)(jg_opcode op, const jg_attrs *a, jg_tensor *const *in,
                              const jg_meta *out_meta, jg_tensor **out);
extern jg_trace_op_fn jg_trace_op_hook;
/* The strides eager gives out[0] of view op `op` (a JG_OPF_VIEW row) applied
 * to x, whose shape out_shape the shape rule gave (a reshape that cannot be
 * a view copies: contiguous strides).  The tracer records them, so a traced
 * tensor has its eager counterpart's layout (ops/view.c). */
/* The strides eager gives an elementwise result of in[0..n_in) with meta om
 * (PyTorch's TensorIterator rule): writes st and returns true when they are
 * not row-major (ops/dispatch.c). The tracer gives symbolic results the same. */
bool jg_ew_layout(int n_in, jg_tensor *const *in, const jg_meta *om, int64_t *st);
void jg_view_strides(jg_opcode op, const jg_attrs *a, const jg_tensor *x, int out_ndim,
                     const int64_t *out_shape, int64_t *stride);
/* Can x be seen with shape (same element count) without copying? */
bool jg_reshape_is_view(const jg_tensor *x, int ndim, const int64_t *shape);
/* Single-output convenience: NULL on error. */
jg_tensor *jg_op1(jg_opcode op, const jg_attrs *a, jg_tensor *a0, jg_tensor *a1);
/* op computed into self in place (ops/inplace.c: checks, rebase history,
 * functionalized when traced); fn names it in errors */
int jg_inplace_op(const char *fn, jg_opcode op, const jg_attrs *a, jg_tensor *self,
                  jg_tensor *other);
/* The public elementwise functions (api.c): op(x, y) and op(x) with the
 * scalar attribute s.  They take the dispatch shortcut directly, and fall
 * back to jg_op1 for everything it does not cover (any op may be passed:
 * ops without an elementwise row always fall back). */
jg_tensor *jg_ew_call(jg_opcode op, jg_tensor *x, jg_tensor *y);
jg_tensor *jg_ew_call_scalar(jg_opcode op, jg_tensor *x, double s);

/* Shared shape rules (ops/shape.c). */
int jg_broadcast_shapes(const jg_meta *a, const jg_meta *b, jg_meta *out);
int jg_infer_same(const jg_attrs *a, const jg_meta *in, jg_meta *out);
int jg_infer_broadcast(const jg_attrs *a, const jg_meta *in, jg_meta *out);
/* Normalises a possibly negative dim; -1 + PyTorch's message when out of
 * range. */
int jg_wrap_dim(int dim, int ndim);

/* Sums g down to shape (for broadcasting VJPs): g itself when the shapes
 * match, else a tensor owned by the current scope (call inside one). */
jg_tensor *jg_sum_to(jg_tensor *g, int ndim, const int64_t *shape);

#endif
