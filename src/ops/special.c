/* lgamma, digamma and trigamma (rows at the end of elementwise.def): the
 * public functions and the VJPs of PyTorch 1.13's derivatives.yaml. */
#include "ops/decls.h"

int jg_vjp_lgamma(VJP_ARGS) { /* grad * digamma(x) */
    UNUSED_ARGS;
    gin[0] = jg_mul(gout[0], jg_digamma(in[0]));
    return gin[0] ? 0 : -1;
}

int jg_vjp_digamma(VJP_ARGS) { /* grad * polygamma(1, x) */
    UNUSED_ARGS;
    gin[0] = jg_mul(gout[0], jg_trigamma(in[0]));
    return gin[0] ? 0 : -1;
}

jg_tensor *jg_lgamma(jg_tensor *a) {
    return jg_ew_call(JG_OP_LGAMMA, a, NULL);
}

jg_tensor *jg_digamma(jg_tensor *a) {
    return jg_ew_call(JG_OP_DIGAMMA, a, NULL);
}

jg_tensor *jg_trigamma(jg_tensor *a) {
    return jg_ew_call(JG_OP_TRIGAMMA, a, NULL);
}
