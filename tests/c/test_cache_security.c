/* The c backend's cache runs only code it made for this exact graph: the
 * directory is private, foreign or mismatched objects are never run,
 * temporaries are exclusive and pruned, and a compiler that hangs is cut
 * off (the interpreter runs instead). */
#include "testutil.h"

#include "backend/cache.h"
#include "backend/cgen.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char root[64]; /* a fresh directory per test */

static void fresh_root(void) {
    snprintf(root, sizeof root, "/tmp/jg_cache_sec_XXXXXX");
    assert_non_null(mkdtemp(root));
}

static void rm_rf(const char *dir) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static int p_poly(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_mul(jg_add_scalar(in[0], 1.5), in[1]);
    return 1;
}

static int p_other(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sub(jg_mul_scalar(in[0], 3.0), in[1]);
    return 1;
}

/* Runs fn compiled with backend c (no grad) on fixed inputs; checks the
 * result against eager bitwise; returns whether the plan was a cache hit. */
static bool run_checked(jg_program_fn fn) {
    bool prev = jg_set_grad_enabled(false);
    jg_tensor *in[2] = {tu_tensor(JG_F32, 1, TU_SHAPE(5), TU_VALS(1, 2, 3, 4, 5)),
                        tu_tensor(JG_F32, 1, TU_SHAPE(5), TU_VALS(.5, .25, -1, 2, 7))};
    jg_tensor *want, *got;
    assert_int_equal(fn(NULL, NULL, 2, in, &want), 1);
    jg_compiled *c = jg_compile(fn, NULL, &(jg_compile_options){.backend = "c"});
    assert_non_null(c);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &got), 1);
    TU_SAME(got, want);
    bool hit = false;
    jg_cgen_last_stats(NULL, NULL, &hit);
    jg_compiled_free(c);
    jg_set_grad_enabled(prev);
    return hit;
}

static int mode_of(const char *path) {
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return (int)(st.st_mode & 07777);
}

/* The one object in dir whose source is not the probe's; path receives it. */
static void graph_object(const char *dir, char *path, size_t n) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    path[0] = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l != 18 || strcmp(e->d_name + 16, ".c"))
            continue;
        char c[600], buf[200] = {0};
        snprintf(c, sizeof c, "%s/%s", dir, e->d_name);
        FILE *f = fopen(c, "r");
        assert_non_null(f);
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        (void)got;
        fclose(f);
        if (strstr(buf, "jg_probe"))
            continue;
        assert_int_equal(path[0], 0); /* exactly one */
        snprintf(path, n, "%s/%.16s.so", dir, e->d_name);
    }
    closedir(d);
    assert_true(path[0] != 0);
}

static void test_private_directory_and_files(void **state) {
    (void)state;
    if (!jg_compile_backend_available("c"))
        skip();
    fresh_root();
    char dir[256], mid[256];
    snprintf(mid, sizeof mid, "%s/a", root);
    snprintf(dir, sizeof dir, "%s/a/b", root);
    setenv("JITGRAD_CACHE_DIR", dir, 1);
    assert_false(run_checked(p_poly));
    assert_int_equal(mode_of(mid) & 077, 0);
    assert_int_equal(mode_of(dir) & 077, 0);
    char so[600], c[600];
    graph_object(dir, so, sizeof so);
    snprintf(c, sizeof c, "%.*s.c", (int)strlen(so) - 3, so);
    assert_int_equal(mode_of(so), 0600);
    assert_int_equal(mode_of(c), 0600);
    assert_true(run_checked(p_poly)); /* the verified object is reused */
    unsetenv("JITGRAD_CACHE_DIR");
    rm_rf(root);
}

static void test_directory_refused(void **state) {
    (void)state;
    fresh_root();
    char dir[256], why[700];
    snprintf(dir, sizeof dir, "%s/open", root);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(chmod(dir, 0777), 0);
    setenv("JITGRAD_CACHE_DIR", dir, 1);
    char got[4096];
    assert_int_equal(jg_cache_dir(got, sizeof got, why, sizeof why), -2);
    assert_non_null(strstr(why, "is writable by group or others (mode 0777); refusing"));
    assert_int_equal(chmod(dir, 0775), 0);
    assert_int_equal(jg_cache_dir(got, sizeof got, why, sizeof why), -2);
    assert_int_equal(chmod(dir, 0755), 0); /* readable by others is fine */
    assert_int_equal(jg_cache_dir(got, sizeof got, why, sizeof why), 0);
    if (geteuid() == 0) { /* another owner: only root can make one here */
        assert_int_equal(chown(dir, 65534, 65534), 0);
        assert_int_equal(jg_cache_dir(got, sizeof got, why, sizeof why), -2);
        assert_non_null(strstr(why, "is owned by uid 65534, not by this user (uid 0)"));
    }
    unsetenv("JITGRAD_CACHE_DIR");
    rm_rf(root);
}

/* In a child (the fallback is said once per process): a refused directory
 * leaves the program running on the interpreter, with eager's results. */
static void refused_run(void) {
    assert_false(run_checked(p_poly));
}

static void test_directory_refused_falls_back(void **state) {
    (void)state;
    if (!jg_compile_backend_available("c"))
        skip();
    fresh_root();
    char dir[256];
    snprintf(dir, sizeof dir, "%s/open", root);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(chmod(dir, 0777), 0);
    setenv("JITGRAD_CACHE_DIR", dir, 1);
    char *err = tu_capture_stderr(refused_run);
    assert_non_null(strstr(err, "writable by group or others (mode 0777); refusing to load code"));
    assert_non_null(strstr(err, "the interpreter runs instead"));
    free(err);
    DIR *d = opendir(dir); /* nothing was written into it */
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(n, 0);
    unsetenv("JITGRAD_CACHE_DIR");
    rm_rf(root);
}

/* A shared object whose constructor leaves a marker file: what a planted
 * library would run at load time. */
static void make_planted(const char *so, const char *marker) {
    char src[300], cmd[1200];
    snprintf(src, sizeof src, "%s/planted.c", root);
    FILE *f = fopen(src, "w");
    assert_non_null(f);
    fprintf(f,
            "#include <stdio.h>\n"
            "__attribute__((constructor)) static void planted(void) {\n"
            "    FILE *f = fopen(\"%s\", \"w\");\n"
            "    if (f) fclose(f);\n"
            "}\n"
            "int jg_gen_run(void *rt, void *ctx) { (void)rt; (void)ctx; return 0; }\n",
            marker);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o '%s' '%s'", so, src);
    assert_int_equal(system(cmd), 0);
}

static void test_planted_object_never_runs(void **state) {
    (void)state;
    if (!jg_compile_backend_available("c"))
        skip();
    fresh_root();
    char dir[256], so[600], marker[300];
    snprintf(dir, sizeof dir, "%s/cache", root);
    snprintf(marker, sizeof marker, "%s/planted-ran", root);
    setenv("JITGRAD_CACHE_DIR", dir, 1);
    assert_false(run_checked(p_poly));
    graph_object(dir, so, sizeof so);
    /* writable by others: never loaded, compiled again */
    make_planted(so, marker);
    assert_int_equal(chmod(so, 0666), 0);
    assert_false(run_checked(p_poly));
    assert_int_not_equal(access(marker, F_OK), 0);
    assert_int_equal(mode_of(so), 0600);
    /* owned by another user */
    if (geteuid() == 0) {
        make_planted(so, marker);
        assert_int_equal(chmod(so, 0600), 0);
        assert_int_equal(chown(so, 65534, 65534), 0);
        assert_false(run_checked(p_poly));
        assert_int_not_equal(access(marker, F_OK), 0);
    }
    /* a symbolic link is never followed */
    char target[300];
    snprintf(target, sizeof target, "%s/elsewhere.so", root);
    make_planted(target, marker);
    assert_int_equal(unlink(so), 0);
    assert_int_equal(symlink(target, so), 0);
    assert_false(run_checked(p_poly));
    assert_int_not_equal(access(marker, F_OK), 0);
    assert_int_equal(mode_of(so), 0600); /* a file of its own again */
    assert_true(run_checked(p_poly));
    unsetenv("JITGRAD_CACHE_DIR");
    rm_rf(root);
}

/* A valid object of another graph under this graph's name is detected by
 * its key and replaced: the results stay this graph's. */
static void test_object_of_another_graph(void **state) {
    (void)state;
    if (!jg_compile_backend_available("c"))
        skip();
    fresh_root();
    char dir_a[256], dir_b[256], so_a[600], so_b[600], cmd[1400];
    snprintf(dir_a, sizeof dir_a, "%s/a", root);
    snprintf(dir_b, sizeof dir_b, "%s/b", root);
    setenv("JITGRAD_CACHE_DIR", dir_a, 1);
    assert_false(run_checked(p_poly));
    graph_object(dir_a, so_a, sizeof so_a);
    setenv("JITGRAD_CACHE_DIR", dir_b, 1);
    assert_false(run_checked(p_other));
    graph_object(dir_b, so_b, sizeof so_b);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", so_b, so_a);
    assert_int_equal(system(cmd), 0);
    setenv("JITGRAD_CACHE_DIR", dir_a, 1);
    assert_false(run_checked(p_poly)); /* the copy is not run: compiled again */
    assert_true(run_checked(p_poly));
    unsetenv("JITGRAD_CACHE_DIR");
    rm_rf(root);
}

static void touch_at(const char *path, time_t when) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    struct timespec ts[2] = {{when, 0}, {when, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static void test_stale_temporaries_pruned(void **state) {
    (void)state;
    if (!jg_compile_backend_available("c"))
        skip();
    fresh_root();
    char dir[256], old[400], young[400];
    snprintf(dir, sizeof dir, "%s/cache", root);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(old, sizeof old, "%s/0123456789abcdef.tmp.Ab12Cd", dir);
    snprintf(young, sizeof young, "%s/0123456789abcdef.tmp.Ef34Gh", dir);
    touch_at(old, time(NULL) - 7200); /* a compilation killed two hours ago */
    touch_at(young, time(NULL));      /* one that may still be running */
    setenv("JITGRAD_CACHE_DIR", dir, 1);
    assert_false(run_checked(p_poly));
    assert_int_not_equal(access(old, F_OK), 0);
    assert_int_equal(access(young, F_OK), 0);
    unsetenv("JITGRAD_CACHE_DIR");
    rm_rf(root);
}

static void timeout_run(void) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_false(run_checked(p_poly)); /* the interpreter's result, equal to eager */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_true(t1.tv_sec - t0.tv_sec < 20); /* the compiler sleeps 60 s */
}

static void test_compiler_timeout(void **state) {
    (void)state;
    fresh_root();
    char cc[300], dir[300];
    snprintf(cc, sizeof cc, "%s/slow-cc", root);
    snprintf(dir, sizeof dir, "%s/cache", root);
    FILE *f = fopen(cc, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\nsleep 60\n");
    fclose(f);
    assert_int_equal(chmod(cc, 0700), 0);
    setenv("JITGRAD_CC", cc, 1);
    setenv("JITGRAD_CC_TIMEOUT", "0.3", 1);
    setenv("JITGRAD_CACHE_DIR", dir, 1);
    char *err = tu_capture_stderr(timeout_run);
    assert_non_null(
        strstr(err, "did not finish the probe graph within 0.3 s (JITGRAD_CC_TIMEOUT)"));
    assert_non_null(strstr(err, "the interpreter runs instead"));
    free(err);
    /* the killed compiler left nothing behind */
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)))
        assert_true(e->d_name[0] == '.');
    closedir(d);
    unsetenv("JITGRAD_CC");
    unsetenv("JITGRAD_CC_TIMEOUT");
    unsetenv("JITGRAD_CACHE_DIR");
    rm_rf(root);
}

static void bad_settings(void) {
    setenv("JITGRAD_CC_TIMEOUT", "soon", 1);
    assert_true(jg_cc_timeout() == 60.0);
    setenv("JITGRAD_CACHE_MAX", "-3", 1);
    assert_int_equal(jg_cache_limit(), 1000);
    unsetenv("JITGRAD_CC_TIMEOUT");
    unsetenv("JITGRAD_CACHE_MAX");
}

static void test_bad_settings_are_said(void **state) {
    (void)state;
    char *err = tu_capture_stderr(bad_settings);
    assert_non_null(strstr(err, "ignoring JITGRAD_CC_TIMEOUT='soon'"));
    assert_non_null(strstr(err, "ignoring JITGRAD_CACHE_MAX='-3'"));
    free(err);
}

int main(void) {
    /* the fallback and bad settings are said once per process: each case
     * runs in a child of its own */
    const struct CMUnitTest tests[] = {
        TU_TEST(test_private_directory_and_files),
        TU_TEST(test_directory_refused),
        TU_TEST(test_directory_refused_falls_back),
        TU_TEST(test_planted_object_never_runs),
        TU_TEST(test_object_of_another_graph),
        TU_TEST(test_stale_temporaries_pruned),
        TU_TEST(test_compiler_timeout),
        TU_TEST(test_bad_settings_are_said),
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            const struct CMUnitTest one[1] = {tests[i]};
            _exit(cmocka_run_group_tests(one, NULL, NULL) ? 1 : 0);
        }
        int st;
        waitpid(pid, &st, 0);
        failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    printf("%d passed, %d failed\n", (int)(sizeof tests / sizeof *tests) - failed, failed);
    return failed != 0;
}
