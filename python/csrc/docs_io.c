/* Docstrings of the extension's functions and Tensor methods (help(), ?),
 * kept apart from the method tables so that each table stays one line per
 * entry.  jgp_docs_apply fills the entries that have none: from the table
 * below, else a generic pointer to PyTorch's documentation of the same name
 * (jitgrad keeps PyTorch's signatures). */
#include "jgpy.h"

#include <string.h>

typedef struct {
    const char *name, *doc;
} doc_entry;

#define T "-> Tensor\n\n"
static const doc_entry docs[] = {
    /* creation */
    {"tensor", "tensor(data, *, dtype=None, device=None, requires_grad=False) " T
               "A new tensor holding a copy of data (nested lists or tuples, numbers, NumPy "
               "arrays, tensors): floats give float32, ints int64, bools bool."},
    {"from_numpy", "from_numpy(ndarray) " T "A tensor sharing the array's memory (float32, "
                   "float64, int64; other dtypes are converted, so copied)."},
    {"randn", "randn(*size, *, dtype=None, device=None, requires_grad=False) " T
              "Normal(0, 1) samples from jitgrad's generator (see manual_seed)."},
    {"rand", "rand(*size, *, dtype=None, device=None, requires_grad=False) " T
             "Uniform [0, 1) samples from jitgrad's generator (see manual_seed)."},
    {"zeros",
     "zeros(*size, *, dtype=None, device=None, requires_grad=False) " T "A tensor filled with 0."},
    {"ones",
     "ones(*size, *, dtype=None, device=None, requires_grad=False) " T "A tensor filled with 1."},
    {"full", "full(size, fill_value, *, dtype=None, device=None, requires_grad=False) " T
             "A tensor filled with fill_value."},
    {"zeros_like", "zeros_like(input, *, dtype=None, requires_grad=False) " T
                   "Zeros of input's shape (and dtype unless given)."},
    {"ones_like", "ones_like(input, *, dtype=None, requires_grad=False) " T
                  "Ones of input's shape (and dtype unless given)."},
    {"randn_like", "randn_like(input, *, dtype=None, requires_grad=False) " T
                   "Normal(0, 1) samples of input's shape."},
    {"rand_like", "rand_like(input, *, dtype=None, requires_grad=False) " T
                  "Uniform [0, 1) samples of input's shape."},
    {"arange", "arange(start=0, end, step=1, *, dtype=None, requires_grad=False) " T
               "Values from start to end (excluded) by step."},
    {"manual_seed", "manual_seed(seed)\n\nSeeds jitgrad's generator (SplitMix64: the same "
                    "numbers on every machine, not PyTorch's)."},
    {"set_num_threads", "set_num_threads(int)\n\nSets how many threads large kernels (from 64K "
                        "elements, and large matmuls) use; results are bitwise the same for "
                        "any count.  Values above 256 are capped."},
    {"get_num_threads", "get_num_threads() -> int\n\nThe number of threads large kernels use "
                        "(default: the cores the process may run on, or JITGRAD_NUM_THREADS)."},
    {"memory_allocated", "memory_allocated() -> int\n\nBytes of tensor data jitgrad holds now, "
                         "over all threads (tensors of 64 bytes or less and memory shared "
                         "with NumPy are not counted); torch.cuda.memory_allocated's "
                         "counterpart for the CPU."},
    {"max_memory_allocated", "max_memory_allocated() -> int\n\nThe most bytes of tensor data "
                             "jitgrad held since the start or the last "
                             "reset_peak_memory_stats()."},
    {"reset_peak_memory_stats", "reset_peak_memory_stats()\n\nSets the peak that "
                                "max_memory_allocated() reports to the bytes held now."},
    {"is_grad_enabled", "is_grad_enabled() -> bool\n\nWhether operations record history "
                        "(see no_grad, enable_grad, set_grad_enabled)."},
    {"where", "where(condition, input, other) " T
              "Elementwise input where condition is True, else other (broadcast; numbers "
              "allowed for input and other)."},
    /* arithmetic */
    {"add", "add(other, *, alpha=1) " T "self + alpha * other, broadcast."},
    {"sub", "sub(other, *, alpha=1) " T "self - alpha * other, broadcast."},
    {"mul", "mul(other) " T "self * other elementwise, broadcast."},
    {"div", "div(other) " T "self / other elementwise (true division), broadcast."},
    {"add_", "add_(other, *, alpha=1) " T "In-place self += alpha * other."},
    {"sub_", "sub_(other, *, alpha=1) " T "In-place self -= alpha * other."},
    {"mul_", "mul_(other) " T "In-place self *= other."},
    {"div_", "div_(other) " T "In-place self /= other."},
    {"zero_", "zero_() " T "Fills self with zeros, in place."},
    {"copy_", "copy_(src) " T "Copies src's values into self (broadcast), in place; "
              "differentiable."},
    {"pow", "pow(exponent) " T "self ** exponent elementwise."},
    {"matmul", "matmul(other) " T "Matrix product with NumPy's broadcasting rules (1-D, 2-D, "
               "batched)."},
    {"mm", "mm(mat2) " T "Product of two 2-D matrices."},
    {"neg", "neg() " T "-self elementwise."},
    {"abs", "abs() " T "|self| elementwise."},
    {"exp", "exp() " T "e ** self elementwise."},
    {"log", "log() " T "Natural logarithm elementwise."},
    {"tanh", "tanh() " T "Hyperbolic tangent elementwise."},
    {"sigmoid", "sigmoid() " T "1 / (1 + exp(-self)) elementwise."},
    {"relu", "relu() " T "max(self, 0) elementwise."},
    {"sqrt", "sqrt() " T "Square root elementwise."},
    {"square", "square() " T "self * self elementwise."},
    {"clone", "clone() " T "A copy with its own memory (row-major), differentiable."},
    {"detach", "detach() " T "A tensor sharing self's memory, without history."},
    {"detach_", "detach_() " T "Detaches self in place: a leaf without history that does not "
                "require grad (not for views); returns self."},
    {"contiguous", "contiguous() " T "self when row-major, else a row-major copy."},
    /* reductions */
    {"sum", "sum(dim=None, keepdim=False) " T "Sum of all elements, or over dim (an int or "
            "tuple)."},
    {"mean", "mean(dim=None, keepdim=False) " T "Mean of all elements, or over dim (an int or "
             "tuple)."},
    {"max", "max(dim=None, keepdim=False) -> Tensor or (values, indices)\n\nThe largest "
            "element, or the largest along dim with its indices."},
    {"softmax", "softmax(dim) " T "exp(self) / sum(exp(self)) along dim, computed stably."},
    {"log_softmax", "log_softmax(dim) " T "log(softmax(self, dim)), computed stably."},
    {"any", "any(dim=None, keepdim=False) " T "Whether any element is True (non-zero)."},
    {"all", "all(dim=None, keepdim=False) " T "Whether every element is True (non-zero)."},
    /* views and shapes */
    {"view", "view(*shape) " T "A view with another shape over the same memory (fails when "
             "the strides do not allow it; see reshape)."},
    {"reshape", "reshape(*shape) " T "A view with another shape when possible, else a copy."},
    {"view_as", "view_as(other) " T "self.view(other.shape)."},
    {"reshape_as", "reshape_as(other) " T "self.reshape(other.shape)."},
    {"expand", "expand(*sizes) " T "A view repeating size-1 dims (-1 keeps a size)."},
    {"expand_as", "expand_as(other) " T "self.expand(other.shape)."},
    {"transpose", "transpose(dim0, dim1) " T "A view with two dims swapped."},
    {"t", "t() " T "Transpose of a tensor of at most 2 dims (a view)."},
    {"permute", "permute(*dims) " T "A view with the dims reordered."},
    {"unsqueeze", "unsqueeze(dim) " T "A view with a size-1 dim inserted at dim."},
    {"squeeze", "squeeze(dim=None) " T "A view without size-1 dims (or only dim)."},
    {"flatten", "flatten(start_dim=0, end_dim=-1) " T "Dims start_dim..end_dim merged into "
                "one."},
    /* dtype conversion */
    {"float", "float() " T "self as float32."},
    {"double", "double() " T "self as float64."},
    {"long", "long() " T "self as int64."},
    {"int", "int() " T "self as int32."},
    {"bool", "bool() " T "self as bool."},
    {"to", "to(dtype=None, device=None, ...) " T "self converted to dtype (device: 'cpu' "
           "only)."},
    {"type_as", "type_as(other) " T "self converted to other's dtype."},
    /* comparisons, logic */
    {"eq", "eq(other) " T "self == other elementwise (bool)."},
    {"ne", "ne(other) " T "self != other elementwise (bool)."},
    {"lt", "lt(other) " T "self < other elementwise (bool)."},
    {"le", "le(other) " T "self <= other elementwise (bool)."},
    {"gt", "gt(other) " T "self > other elementwise (bool)."},
    {"ge", "ge(other) " T "self >= other elementwise (bool)."},
    {"logical_and", "logical_and(other) " T "Elementwise and of truth values (bool)."},
    {"logical_or", "logical_or(other) " T "Elementwise or of truth values (bool)."},
    {"logical_xor", "logical_xor(other) " T "Elementwise xor of truth values (bool)."},
    {"logical_not", "logical_not() " T "Elementwise not of truth values (bool)."},
    {"masked_fill", "masked_fill(mask, value) " T "self with value where mask is True."},
    {"masked_fill_", "masked_fill_(mask, value) " T "Fills value where mask is True, in "
                     "place."},
    /* information */
    {"dim", "dim() -> int\n\nNumber of dimensions."},
    {"ndimension", "ndimension() -> int\n\nNumber of dimensions."},
    {"numel", "numel() -> int\n\nNumber of elements."},
    {"nelement", "nelement() -> int\n\nNumber of elements."},
    {"size", "size(dim=None) -> tuple or int\n\nThe shape, or the size of dim."},
    {"stride", "stride(dim=None) -> tuple or int\n\nStrides in elements, or that of dim."},
    {"storage_offset", "storage_offset() -> int\n\nOffset of the first element in the "
                       "memory, in elements."},
    {"is_contiguous", "is_contiguous() -> bool\n\nWhether the layout is row-major."},
    {"element_size", "element_size() -> int\n\nBytes per element."},
    {"is_floating_point", "is_floating_point() -> bool\n\nWhether the dtype is float32 or "
                          "float64."},
    {"item", "item() -> number\n\nThe value of a one-element tensor as a Python number."},
    {"tolist", "tolist() -> list or number\n\nThe values as (nested) Python lists."},
    {"numpy", "numpy(*, force=False) -> numpy.ndarray\n\nAn array sharing the tensor's memory "
              "(refused for tensors that require grad unless force)."},
    {"requires_grad_", "requires_grad_(requires_grad=True) " T "Sets requires_grad in place "
                       "(leaves only) and returns self."},
    {"backward", "backward(gradient=None, retain_graph=None, create_graph=False)\n\n"
                 "Accumulates the gradient of self into the .grad of the leaves that need "
                 "it (gradient: d(loss)/d(self), needed unless self is a scalar)."},
    {NULL, NULL},
};
#undef T

static const char generic_doc[] =
    "As PyTorch's function of the same name (same signature and results; see "
    "docs/python.md for what jitgrad supports).";

void jgp_docs_apply(PyMethodDef *defs) {
    for (PyMethodDef *d = defs; d->ml_name; d++) {
        if (d->ml_doc || d->ml_name[0] == '_')
            continue;
        d->ml_doc = generic_doc;
        for (const doc_entry *e = docs; e->name; e++)
            if (!strcmp(e->name, d->ml_name)) {
                d->ml_doc = e->doc;
                break;
            }
    }
}
