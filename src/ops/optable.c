/* The op table, instantiated from ops.def. */
#include "ops/decls.h"

const jg_op_info jg_ops[JG_OP_COUNT] = {
#define JG_OP(ID, name, bw_name, n_in, n_out, flags, infer, kernel, vjp, cexpr)                    \
    [JG_OP_##ID] = {name, bw_name, n_in, n_out, flags, infer, kernel, vjp, cexpr},
#include "ops/ops.def"
#undef JG_OP
};
