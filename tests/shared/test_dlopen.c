/* The shared library loaded with dlopen(), as bindings in other languages
 * load it: it uses initial-exec thread-local storage (see CMakeLists.txt),
 * so loading must succeed after program start, and per-thread state (the
 * error text, grad mode, scopes) must work in the loading thread and in a
 * thread started afterwards.  Argument: the path of libjitgrad.so. */
#include <jitgrad.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const char *lib_path;

typedef struct {
    jg_tensor *(*full)(jg_dtype, int, const int64_t *, double);
    jg_tensor *(*mul)(jg_tensor *, jg_tensor *);
    jg_tensor *(*sum)(jg_tensor *);
    jg_tensor *(*matmul)(jg_tensor *, jg_tensor *);
    double (*item)(const jg_tensor *);
    const char *(*last_error)(void);
    void (*clear_error)(void);
    void (*scope_push)(void);
    void (*scope_pop)(void);
    bool (*set_grad_enabled)(bool);
    bool (*is_grad_enabled)(void);
} api;

static void load(void *dl, api *a) {
#define SYM(field, name)                                                                           \
    do {                                                                                           \
        *(void **)(&a->field) = dlsym(dl, name);                                                   \
        assert_non_null(*(void **)(&a->field));                                                    \
    } while (0)
    SYM(full, "jg_full");
    SYM(mul, "jg_mul");
    SYM(sum, "jg_sum");
    SYM(matmul, "jg_matmul");
    SYM(item, "jg_item");
    SYM(last_error, "jg_last_error");
    SYM(clear_error, "jg_clear_error");
    SYM(scope_push, "jg_scope_push");
    SYM(scope_pop, "jg_scope_pop");
    SYM(set_grad_enabled, "jg_set_grad_enabled");
    SYM(is_grad_enabled, "jg_is_grad_enabled");
#undef SYM
}

/* A computation, an error with its text, and grad mode, in this thread. */
static void *exercise(void *user) {
    const api *a = user;
    a->scope_push();
    jg_tensor *x = a->full(JG_F32, 1, (int64_t[]){4}, 1.5);
    jg_tensor *y = a->full(JG_F32, 1, (int64_t[]){4}, 2.0);
    double s = a->item(a->sum(a->mul(x, y)));
    jg_tensor *bad = a->matmul(a->full(JG_F32, 2, (int64_t[]){2, 4}, 1.0),
                               a->full(JG_F32, 2, (int64_t[]){3, 2}, 1.0));
    bool ok = s == 12.0 && !bad && strstr(a->last_error(), "(2x4 and 3x2)") != NULL;
    bool was = a->set_grad_enabled(false);
    ok = ok && was && !a->is_grad_enabled();
    a->set_grad_enabled(true);
    a->scope_pop();
    return ok ? (void *)1 : NULL;
}

static void test_dlopen_and_threads(void **state) {
    (void)state;
    void *dl = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        fail_msg("dlopen(%s): %s", lib_path, dlerror());
    api a;
    load(dl, &a);
    assert_non_null(exercise(&a));
    a.clear_error();
    pthread_t th;
    void *ret = NULL;
    assert_int_equal(pthread_create(&th, NULL, exercise, &a), 0);
    assert_int_equal(pthread_join(th, &ret), 0);
    assert_non_null(ret);
    /* the error text is per thread: the other thread's failure is not here */
    assert_string_equal(a.last_error(), "");
    a.scope_push();
    assert_true(a.item(a.sum(a.full(JG_F64, 1, (int64_t[]){3}, 2.0))) == 6.0);
    a.scope_pop();
    assert_int_equal(dlclose(dl), 0);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s path/to/libjitgrad.so\n", argv[0]);
        return 2;
    }
    lib_path = argv[1];
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_dlopen_and_threads)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
