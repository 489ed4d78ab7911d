/* batch_norm: normalization per channel (dim 1) over every other dim, as
 * PyTorch's native_batch_norm.  Composed of library ops (mean, sub, mul,
 * sqrt, div), so its gradient for input, weight and bias, its double
 * backward, tracing and code generation all follow from theirs.  The
 * running statistics are updated with jg_copy_ with grad mode off: a plain
 * in-place write eagerly, and under jg_compile a captured tensor's traced
 * mutation, written back after each call exactly as eager writes it. */
#include "ops/decls.h"

#include <stdio.h>

/* a [C] tensor viewed as [1, C, 1, ...] against an nd-dim input */
static jg_tensor *per_channel(jg_tensor *v, int nd, int64_t c) {
    int64_t shape[JG_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        shape[d] = d == 1 ? c : 1;
    return jg_reshape(v, nd, shape);
}

static void shape_str(const jg_tensor *x, char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < jg_ndim(x) && n < size; d++)
        n +=
            (size_t)snprintf(buf + n, size - n, "%s%lld", d ? ", " : "", (long long)jg_shape(x)[d]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
}

/* running_mean = (1 - m) * running_mean + m * mean, running_var likewise
 * with the unbiased batch variance (sum of squares / (n - 1)), as
 * PyTorch's batch_norm_cpu_update_stats. */
static int update_stats(jg_tensor *rm, jg_tensor *rv, jg_tensor *mean, jg_tensor *sq_sum, int64_t n,
                        double momentum) {
    bool was = jg_set_grad_enabled(false);
    int rc = 0;
    if (rm) {
        jg_tensor *m = jg_to_dtype(jg_reshape(jg_detach(mean), 1, (const int64_t[]){jg_numel(rm)}),
                                   jg_dtype_of(rm));
        jg_tensor *nm =
            m ? jg_add(jg_mul_scalar(m, momentum), jg_mul_scalar(rm, 1.0 - momentum)) : NULL;
        rc = nm ? jg_copy_(rm, nm) : -1;
    }
    if (rc == 0 && rv) {
        jg_tensor *s = jg_reshape(jg_detach(sq_sum), 1, (const int64_t[]){jg_numel(rv)});
        jg_tensor *uv =
            s ? jg_to_dtype(jg_mul_scalar(s, 1.0 / (double)(n - 1)), jg_dtype_of(rv)) : NULL;
        jg_tensor *nv =
            uv ? jg_add(jg_mul_scalar(uv, momentum), jg_mul_scalar(rv, 1.0 - momentum)) : NULL;
        rc = nv ? jg_copy_(rv, nv) : -1;
    }
    jg_set_grad_enabled(was);
    return rc;
}

jg_tensor *jg_batch_norm(jg_tensor *x, jg_tensor *running_mean, jg_tensor *running_var,
                         jg_tensor *weight, jg_tensor *bias, bool training, double momentum,
                         double eps) {
    if (!x)
        return jg_errorf_null("jg_batch_norm: NULL input");
    int nd = jg_ndim(x);
    if (nd < 2)
        return jg_errorf_null("batch_norm: expected an input with at least 2 dims (N, C, ...), "
                              "got %d",
                              nd);
    jg_dtype dt = jg_dtype_of(x);
    if (dt != JG_F32 && dt != JG_F64)
        return jg_errorf_null("\"batch_norm\" not implemented for '%s'", jg_dtype_name(dt));
    int64_t c = jg_shape(x)[1];
    const char *names[4] = {"running_mean", "running_var", "weight", "bias"};
    jg_tensor *vecs[4] = {running_mean, running_var, weight, bias};
    for (int k = 0; k < 4; k++)
        if (vecs[k] && jg_numel(vecs[k]) != c)
            return jg_errorf_null("%s should contain %lld elements not %lld", names[k],
                                  (long long)c, (long long)jg_numel(vecs[k]));
    for (int k = 0; k < 4; k++)
        if (vecs[k] && jg_dtype_of(vecs[k]) != JG_F32 && jg_dtype_of(vecs[k]) != JG_F64)
            return jg_errorf_null("batch_norm: %s must be a floating tensor, got %s", names[k],
                                  jg_dtype_name(jg_dtype_of(vecs[k])));
    if (!training && (!running_mean || !running_var))
        return jg_errorf_null("%s must be defined in evaluation mode",
                              running_mean ? "running_var" : "running_mean");
    int64_t n = jg_numel(x) / (c ? c : 1);
    if (training && n <= 1) {
        char s[256];
        shape_str(x, s, sizeof s);
        return jg_errorf_null("Expected more than 1 value per channel when training, got input "
                              "size %s",
                              s);
    }
    int dims[JG_MAX_DIMS], nr = 0;
    for (int d = 0; d < nd; d++)
        if (d != 1)
            dims[nr++] = d;
    jg_scope_push();
    jg_tensor *y;
    if (training) {
        jg_tensor *mean = jg_mean_dims(x, nr, dims, true);
        jg_tensor *cen = mean ? jg_sub(x, mean) : NULL;
        jg_tensor *sq = cen ? jg_mul(cen, cen) : NULL;
        jg_tensor *var = sq ? jg_mean_dims(sq, nr, dims, true) : NULL;
        y = var ? jg_div(cen, jg_sqrt(jg_add_scalar(var, eps))) : NULL;
        if (y && (running_mean || running_var)) {
            bool was = jg_set_grad_enabled(false);
            jg_tensor *sq_sum = jg_sum_dims(jg_detach(sq), nr, dims, true);
            jg_set_grad_enabled(was);
            if (!sq_sum || update_stats(running_mean, running_var, mean, sq_sum, n, momentum) < 0)
                y = NULL;
        }
    } else {
        jg_tensor *rm = per_channel(jg_to_dtype(running_mean, dt), nd, c);
        jg_tensor *rv = per_channel(jg_to_dtype(running_var, dt), nd, c);
        y = rm && rv ? jg_div(jg_sub(x, rm), jg_sqrt(jg_add_scalar(rv, eps))) : NULL;
    }
    if (y && weight)
        y = jg_mul(y, per_channel(weight, nd, c));
    if (y && bias)
        y = jg_add(y, per_channel(bias, nd, c));
    jg_keep(y);
    jg_scope_pop();
    return jg_scope_track(y);
}
