/* Declarations of every function named by a row of ops.def. */
#ifndef JG_OPS_DECLS_H
#define JG_OPS_DECLS_H

#include "ops/optable.h"

#define JG_OP(ID, name, bw_name, n_in, n_out, flags, infer, kernel, vjp, cexpr)                    \
    int infer(const jg_attrs *a, const jg_meta *in, jg_meta *out);                                 \
    int kernel(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out);                          \
    int vjp(const jg_attrs *a, const jg_meta *meta, jg_tensor *const *in, jg_tensor *const *out,   \
            jg_tensor *const *gout, const bool *needs, jg_tensor **gin);
#include "ops/ops.def"
#undef JG_OP

/* The parameter list of every VJP rule (jg_vjp_fn), for their definitions. */
#define VJP_ARGS                                                                                   \
    const jg_attrs *a, const jg_meta *meta, jg_tensor *const *in, jg_tensor *const *out,           \
        jg_tensor *const *gout, const bool *needs, jg_tensor **gin
/* ... and a rule's way to say it reads none of them but its own. */
#define UNUSED_ARGS (void)a, (void)meta, (void)in, (void)out, (void)gout, (void)needs

#endif
