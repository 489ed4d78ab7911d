/* Helpers shared by the C test suites (cmocka). */
#ifndef JG_TESTUTIL_H
#define JG_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jitgrad.h>

/* A tensor from doubles (converted to dtype). */
jg_tensor *tu_tensor(jg_dtype dtype, int ndim, const int64_t *shape, const double *values);
#define TU_SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define TU_VALS(...) ((const double[]){__VA_ARGS__})
/* Product of a shape's dims. */
int64_t tu_numel(int ndim, const int64_t *shape);
/* Reads a tensor's values as doubles into out (numel entries). */
void tu_values(const jg_tensor *t, double *out);
/* Fails the test unless t has the shape and values within tol (tol 0: exact). */
void tu_check(const jg_tensor *t, int ndim, const int64_t *shape, const double *want, double tol,
              const char *file, int line);
#define TU_CHECK(t, ndim, shape, want, tol)                                                        \
    tu_check((t), (ndim), (shape), (want), (tol), __FILE__, __LINE__)
/* Fails unless the two tensors have equal shapes and bitwise-equal values. */
void tu_check_same(const jg_tensor *a, const jg_tensor *b, const char *file, int line);
#define TU_SAME(a, b) tu_check_same((a), (b), __FILE__, __LINE__)
/* Fails unless jg_last_error() contains needle. */
void tu_check_error(const char *needle, const char *file, int line);
#define TU_ERROR(needle) tu_check_error((needle), __FILE__, __LINE__)
/* Runs fn with stderr (fd 2) redirected to a temporary file and returns what
 * it wrote, NUL-terminated (at most 1 MiB - 1 bytes); the caller frees it. */
char *tu_capture_stderr(void (*fn)(void));
/* Every test opens a scope in setup and pops it in teardown. */
int tu_setup(void **state);
int tu_teardown(void **state);
#define TU_TEST(f) cmocka_unit_test_setup_teardown(f, tu_setup, tu_teardown)

#endif
