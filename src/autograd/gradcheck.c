/* jg_gradcheck: compares the analytic Jacobian (one vector-Jacobian product
 * per output element, through jg_autograd_grad) with central finite
 * differences in float64.  Inputs are perturbed in place through their
 * storage, without a version bump, and restored bit for bit; no .grad is
 * touched. */
#include "core/tensor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Byte offset of row-major element k of t from jg_tensor_ptr(t). */
static int64_t elem_offset(const jg_tensor *t, int64_t k) {
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t n = t->shape[d];
        off += (k % n) * t->stride[d];
        k /= n;
    }
    return off * (int64_t)jg_dtype_size(t->dtype);
}

/* Reads a float tensor's values as doubles (row-major). */
static int read_f64(const jg_tensor *t, double *out) {
    if (t->dtype == JG_F64)
        return jg_copy_to(t, out, (size_t)t->numel * sizeof(double));
    if (t->dtype == JG_F32) {
        float *tmp = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *tmp);
        if (!tmp)
            return jg_errorf("jg_gradcheck: out of memory");
        int rc = jg_copy_to(t, tmp, (size_t)t->numel * sizeof(float));
        for (int64_t i = 0; rc == 0 && i < t->numel; i++)
            out[i] = tmp[i];
        free(tmp);
        return rc;
    }
    return jg_errorf("jg_gradcheck: expected a floating point tensor, got %s",
                     jg_dtype_name(t->dtype));
}

/* Evaluates fn; values of its output into vals (m).  Grad mode stays on: fn
 * may itself differentiate (a gradient of a gradient is checked this way). */
static int eval_values(jg_gradcheck_fn fn, void *user, int n, jg_tensor *const *inputs, int64_t m,
                       double *vals) {
    jg_scope_push();
    jg_tensor *y = fn(user, n, inputs);
    int rc = -1;
    if (!y) {
        if (!*jg_last_error())
            jg_errorf("jg_gradcheck: the function returned NULL");
    } else if (y->numel != m) {
        jg_errorf("jg_gradcheck: the function's output changed size (%lld, then %lld elements)",
                  (long long)m, (long long)y->numel);
    } else {
        rc = read_f64(y, vals);
    }
    jg_keep(y);
    jg_release(y);
    jg_scope_pop();
    return rc;
}

int jg_gradcheck(jg_gradcheck_fn fn, void *user, int n_inputs, jg_tensor *const *inputs, double eps,
                 double atol, double rtol) {
    if (!fn || n_inputs <= 0 || !inputs)
        return jg_errorf("jg_gradcheck: needs a function and at least one input");
    if (!(eps > 0) || !(atol >= 0) || !(rtol >= 0))
        return jg_errorf("jg_gradcheck: eps must be positive and atol, rtol non-negative");
    int n_req = 0;
    for (int i = 0; i < n_inputs; i++) {
        jg_tensor *t = inputs[i];
        if (!t)
            return jg_errorf("jg_gradcheck: input %d is NULL", i);
        if (t->sym)
            return jg_errorf("jg_gradcheck: input %d is a traced tensor", i);
        if (t->dtype == JG_F32 || (t->requires_grad && t->dtype != JG_F64))
            return jg_errorf("gradcheck expects float64 inputs; input %d is %s", i,
                             jg_dtype_name(t->dtype));
        if (!t->requires_grad)
            continue;
        for (int d = 0; d < t->ndim; d++)
            if (t->stride[d] == 0 && t->shape[d] > 1)
                return jg_errorf("jg_gradcheck: input %d has overlapping memory (stride 0 in dim "
                                 "%d); pass a contiguous copy",
                                 i, d);
        n_req++;
    }
    if (!n_req)
        return jg_errorf("gradcheck expects at least one input tensor to require gradient, but "
                         "none of the them have requires_grad=True.");

    bool prev_mode = jg_set_grad_enabled(true);
    jg_scope_push();
    int rc = -1;
    int *req = malloc((size_t)n_req * sizeof *req);
    jg_tensor **req_t = malloc((size_t)n_req * sizeof *req_t);
    jg_tensor **res = calloc((size_t)n_req, sizeof *res);
    double **ana = calloc((size_t)n_req, sizeof *ana); /* [input][elem * m + j] */
    double *yplus = NULL, *yminus = NULL, *gbuf = NULL;
    if (!req || !req_t || !res || !ana) {
        jg_errorf("jg_gradcheck: out of memory");
        goto out;
    }
    for (int i = 0, r = 0; i < n_inputs; i++)
        if (inputs[i]->requires_grad) {
            req[r] = i;
            req_t[r++] = inputs[i];
        }

    jg_tensor *y = fn(user, n_inputs, inputs);
    if (!y) {
        if (!*jg_last_error())
            jg_errorf("jg_gradcheck: the function returned NULL");
        goto out;
    }
    jg_scope_track(jg_keep(y)); /* owned by our scope either way */
    if (y->sym || !jg_dtype_is_float(y->dtype)) {
        jg_errorf("jg_gradcheck: the function must return a floating point tensor, got %s",
                  jg_dtype_name(y->dtype));
        goto out;
    }
    int64_t m = y->numel;
    size_t mm = (size_t)(m ? m : 1);
    int64_t max_in = 1;
    for (int r = 0; r < n_req; r++) {
        int64_t n = req_t[r]->numel;
        max_in = n > max_in ? n : max_in;
        if (!(ana[r] = calloc((size_t)(n ? n : 1) * mm, sizeof(double)))) {
            jg_errorf("jg_gradcheck: out of memory");
            goto out;
        }
    }
    yplus = malloc(mm * sizeof *yplus);
    yminus = malloc(mm * sizeof *yminus);
    gbuf = malloc((size_t)max_in * sizeof *gbuf);
    if (!yplus || !yminus || !gbuf) {
        jg_errorf("jg_gradcheck: out of memory");
        goto out;
    }

    /* analytic: row j of the Jacobian is the VJP with the one-hot e_j */
    if (y->requires_grad) {
        for (int64_t j = 0; j < m; j++) {
            jg_scope_push();
            jg_tensor *e = jg_full(y->dtype, y->ndim, y->shape, 0.0);
            int st = e ? 0 : -1;
            if (st == 0) {
                char *p = jg_tensor_ptr(e) + j * (int64_t)jg_dtype_size(e->dtype);
                if (e->dtype == JG_F32)
                    *(float *)p = 1.0f;
                else
                    *(double *)p = 1.0;
                st = jg_autograd_grad(1, &y, &e, n_req, req_t, JG_RETAIN_GRAPH | JG_ALLOW_UNUSED,
                                      res);
            }
            for (int r = 0; r < n_req && st == 0; r++) {
                if (!res[r])
                    continue; /* unused input: a zero row */
                st = read_f64(res[r], gbuf);
                for (int64_t k = 0; st == 0 && k < req_t[r]->numel; k++)
                    ana[r][k * m + j] = gbuf[k];
            }
            jg_scope_pop(); /* releases e and the results */
            if (st < 0)
                goto out;
        }
    }

    /* numeric: central differences, one element at a time */
    for (int r = 0; r < n_req; r++) {
        jg_tensor *t = req_t[r];
        for (int64_t k = 0; k < t->numel; k++) {
            double *p = (double *)(jg_tensor_ptr(t) + elem_offset(t, k));
            double orig = *p;
            *p = orig + eps;
            int st = eval_values(fn, user, n_inputs, inputs, m, yplus);
            *p = orig - eps;
            if (st == 0)
                st = eval_values(fn, user, n_inputs, inputs, m, yminus);
            *p = orig;
            if (st < 0)
                goto out;
            for (int64_t j = 0; j < m; j++) {
                double num = (yplus[j] - yminus[j]) / (2 * eps);
                double an = ana[r][k * m + j];
                if (!(fabs(an - num) <= atol + rtol * fabs(num))) {
                    jg_errorf("Jacobian mismatch for output 0 with respect to input %d, element "
                              "%lld (output element %lld): numerical %.10g, analytical %.10g",
                              req[r], (long long)k, (long long)j, num, an);
                    goto out;
                }
            }
        }
    }
    rc = 0;
out:
    for (int r = 0; ana && r < n_req; r++)
        free(ana[r]);
    free(ana);
    free(res);
    free(req);
    free(req_t);
    free(yplus);
    free(yminus);
    free(gbuf);
    jg_scope_pop();
    jg_set_grad_enabled(prev_mode);
    return rc;
}
