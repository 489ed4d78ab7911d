/* The verify option: each compiled call also runs the program eagerly on
 * copies of its inputs and compares outputs and input gradients (of the sum
 * of the outputs), so a wrong compiled gradient is caught at the call that
 * produced it.  The interpreter runs the same kernels in the same order as
 * eager code, so the comparison is exact. */
#include "compile/compile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int jg_debug_corrupt_backward;

/* max |a - b| and where; a NULL gradient counts as zeros */
static double max_diff(jg_tensor *a, jg_tensor *b, int64_t *at, double *va, double *vb) {
    jg_tensor *d = a && b ? jg_sub(a, b) : a ? a : b;
    double worst = 0;
    *at = -1;
    if (!d)
        return 0;
    jg_tensor *d64 = jg_to_dtype(d, JG_F64), *a64 = a ? jg_to_dtype(a, JG_F64) : NULL,
              *b64 = b ? jg_to_dtype(b, JG_F64) : NULL;
    jg_tensor *dc = jg_contiguous(d64), *ac = a64 ? jg_contiguous(a64) : NULL,
              *bc = b64 ? jg_contiguous(b64) : NULL;
    const double *dp = jg_data(dc), *ap = ac ? jg_data(ac) : NULL, *bp = bc ? jg_data(bc) : NULL;
    for (int64_t i = 0; i < jg_numel(dc); i++) {
        if (ap && bp && isnan(ap[i]) && isnan(bp[i]))
            continue; /* NaN on both sides agrees */
        double x = isnan(dp[i]) ? INFINITY : fabs(dp[i]);
        if (x > worst) {
            worst = x;
            *at = i;
            *va = ap ? ap[i] : 0;
            *vb = bp ? bp[i] : 0;
        }
    }
    return worst;
}

int jg_compile_verify(jg_program_fn fn, void *user, const void *args, int n,
                      jg_tensor *const *inputs, int n_out, jg_tensor *const *outs) {
    /* per input: copies, ci_rg, ei_rg, gc, ge; per output: eo, co_rg,
     * eo_rg, ones (one zeroed block) */
    size_t ni_words = (size_t)n + 1, no_words = (size_t)n_out + 1;
    jg_tensor **block = calloc(5 * ni_words + 4 * no_words, sizeof *block);
    int *idx = malloc(sizeof(int) * ni_words);
    if (!block || !idx) {
        free(block);
        free(idx);
        return jg_errorf("out of memory in verify");
    }
    jg_tensor **copies = block, **ci_rg = copies + ni_words, **ei_rg = ci_rg + ni_words;
    jg_tensor **gc = ei_rg + ni_words, **ge = gc + ni_words, **eo = ge + ni_words;
    jg_tensor **co_rg = eo + no_words, **eo_rg = co_rg + no_words, **ones = eo_rg + no_words;
    jg_scope_push();
    int rc = 0;
    /* copies keep the aliasing pattern: the same tensor twice -> one copy */
    bool prev = jg_set_grad_enabled(false);
    for (int i = 0; i < n && rc == 0; i++) {
        copies[i] = NULL;
        for (int j = 0; j < i && !copies[i]; j++)
            if (inputs[j] == inputs[i])
                copies[i] = copies[j];
        if (!copies[i] && !(copies[i] = jg_clone(inputs[i])))
            rc = -1;
        else if (inputs[i]->requires_grad)
            jg_set_requires_grad(copies[i], true);
    }
    jg_set_grad_enabled(prev);
    int got = rc == 0 ? fn(user, args, n, copies, eo) : -1;
    if (rc == 0 && got != n_out)
        rc = got < 0 ? -1
                     : jg_errorf("verify: the program returned %d outputs eagerly and %d compiled",
                                 got, n_out);
    int64_t at;
    double va, vb, d;
    for (int k = 0; k < n_out && rc == 0; k++)
        if ((d = max_diff(outs[k], eo[k], &at, &va, &vb)) != 0)
            rc = jg_errorf("verify: output %d differs from eager: max |compiled - eager| = %g at "
                           "element %lld (compiled %.9g, eager %.9g)",
                           k, d, (long long)at, va, vb);
    /* gradients of sum(outputs) with respect to every input that requires grad */
    int no = 0, ni = 0;
    for (int k = 0; k < n_out && rc == 0; k++)
        if (outs[k]->requires_grad && eo[k]->requires_grad) {
            co_rg[no] = outs[k];
            eo_rg[no] = eo[k];
            ones[no++] = jg_full(outs[k]->dtype, outs[k]->ndim, outs[k]->shape, 1.0);
        }
    for (int i = 0; i < n && rc == 0; i++) {
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup |= inputs[j] == inputs[i];
        if (!dup && inputs[i]->requires_grad && jg_grad_mode) {
            idx[ni] = i;
            ci_rg[ni] = inputs[i];
            ei_rg[ni++] = copies[i];
        }
    }
    if (rc == 0 && no && ni &&
        (jg_autograd_grad(no, co_rg, ones, ni, ci_rg, JG_RETAIN_GRAPH | JG_ALLOW_UNUSED, gc) < 0 ||
         jg_autograd_grad(no, eo_rg, ones, ni, ei_rg, JG_ALLOW_UNUSED, ge) < 0))
        rc = -1;
    for (int j = 0; j < ni && rc == 0 && no; j++) {
        d = max_diff(gc[j], ge[j], &at, &va, &vb);
        if (d != 0 || (!gc[j]) != (!ge[j]))
            rc = jg_errorf("verify: the gradient of input %d differs from eager: max |compiled - "
                           "eager| = %g at element %lld (compiled %.9g, eager %.9g)%s",
                           idx[j], d, (long long)at, va, vb,
                           !gc[j] != !ge[j]
                               ? (gc[j] ? " (eager: no gradient)" : " (compiled: no gradient)")
                               : "");
    }
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", jg_last_error());
    jg_scope_pop();
    free(block);
    free(idx);
    if (rc < 0)
        jg_errorf("%s", msg);
    return rc;
}
