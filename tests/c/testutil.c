#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int64_t tu_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

jg_tensor *tu_tensor(jg_dtype dtype, int ndim, const int64_t *shape, const double *values) {
    int64_t n = tu_numel(ndim, shape);
    void *buf = malloc((size_t)(n ? n : 1) * 8);
    for (int64_t i = 0; i < n; i++) {
        if (dtype == JG_F32)
            ((float *)buf)[i] = (float)values[i];
        else if (dtype == JG_F64)
            ((double *)buf)[i] = values[i];
        else if (dtype == JG_BOOL)
            ((bool *)buf)[i] = values[i] != 0;
        else if (dtype == JG_I32)
            ((int32_t *)buf)[i] = (int32_t)values[i];
        else
            ((int64_t *)buf)[i] = (int64_t)values[i];
    }
    jg_tensor *t = jg_tensor_new(dtype, ndim, shape, buf);
    free(buf);
    assert_non_null(t);
    return t;
}

void tu_values(const jg_tensor *t, double *out) {
    int64_t n = jg_numel(t);
    jg_dtype d = jg_dtype_of(t);
    size_t es = d == JG_BOOL ? 1 : d == JG_F32 || d == JG_I32 ? 4 : 8;
    void *buf = malloc((size_t)(n ? n : 1) * es);
    assert_int_equal(jg_copy_to(t, buf, (size_t)n * es), 0);
    for (int64_t i = 0; i < n; i++) {
        if (d == JG_F32)
            out[i] = ((float *)buf)[i];
        else if (d == JG_F64)
            out[i] = ((double *)buf)[i];
        else if (d == JG_BOOL)
            out[i] = ((bool *)buf)[i];
        else if (d == JG_I32)
            out[i] = ((int32_t *)buf)[i];
        else
            out[i] = (double)((int64_t *)buf)[i];
    }
    free(buf);
}

void tu_check(const jg_tensor *t, int ndim, const int64_t *shape, const double *want, double tol,
              const char *file, int line) {
    if (!t)
        _fail(file, line);
    if (jg_ndim(t) != ndim) {
        print_error("%s:%d: ndim %d, expected %d\n", file, line, jg_ndim(t), ndim);
        _fail(file, line);
    }
    for (int i = 0; i < ndim; i++)
        if (jg_shape(t)[i] != shape[i]) {
            print_error("%s:%d: dim %d is %lld, expected %lld\n", file, line, i,
                        (long long)jg_shape(t)[i], (long long)shape[i]);
            _fail(file, line);
        }
    int64_t n = jg_numel(t);
    double *got = malloc((size_t)(n ? n : 1) * sizeof *got);
    tu_values(t, got);
    for (int64_t i = 0; i < n; i++) {
        bool ok = tol == 0 ? (got[i] == want[i] || (isnan(got[i]) && isnan(want[i])))
                           : fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]));
        if (!ok) {
            print_error("%s:%d: element %lld is %.17g, expected %.17g\n", file, line, (long long)i,
                        got[i], want[i]);
            free(got);
            _fail(file, line);
        }
    }
    free(got);
}

void tu_check_same(const jg_tensor *a, const jg_tensor *b, const char *file, int line) {
    if (!a || !b) {
        print_error("%s:%d: NULL tensor (%p, %p)\n", file, line, (const void *)a, (const void *)b);
        _fail(file, line);
    }
    int64_t n = jg_numel(b);
    double *want = malloc((size_t)(n ? n : 1) * sizeof *want);
    tu_values(b, want);
    if (jg_dtype_of(a) != jg_dtype_of(b)) {
        print_error("%s:%d: dtypes differ\n", file, line);
        free(want);
        _fail(file, line);
    }
    tu_check(a, jg_ndim(b), jg_shape(b), want, 0, file, line);
    free(want);
}

void tu_check_error(const char *needle, const char *file, int line) {
    if (!strstr(jg_last_error(), needle)) {
        print_error("%s:%d: error is \"%s\", expected it to contain \"%s\"\n", file, line,
                    jg_last_error(), needle);
        _fail(file, line);
    }
}

char *tu_capture_stderr(void (*fn)(void)) {
    char path[] = "/tmp/jg_test_stderr_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    char *buf = calloc(1, 1 << 20);
    ssize_t n = read(fd, buf, (1 << 20) - 1);
    (void)n;
    close(fd);
    unlink(path);
    return buf;
}

int tu_setup(void **state) {
    (void)state;
    jg_clear_error();
    jg_set_grad_enabled(true);
    jg_scope_push();
    return 0;
}

int tu_teardown(void **state) {
    (void)state;
    jg_scope_pop();
    return 0;
}
