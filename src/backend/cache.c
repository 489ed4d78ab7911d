/* The c backend's cache directory (see cache.h). */
#include "backend/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_DEFAULT_LIMIT 1000

static int make_dirs(const char *dir) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
        return -1;
    struct stat st;
    return stat(tmp, &st) == 0 && S_ISDIR(st.st_mode) && access(tmp, W_OK) == 0 ? 0 : -1;
}

int jg_cache_dir(char *dir, size_t n, char *why, size_t why_n) {
    const char *e = getenv("JITGRAD_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    if (e && *e)
        snprintf(dir, n, "%s", e);
    else if (x && *x)
        snprintf(dir, n, "%.3000s/jitgrad", x);
    else if (h && *h)
        snprintf(dir, n, "%.3000s/.cache/jitgrad", h);
    else {
        snprintf(why, why_n, "no cache directory (set JITGRAD_CACHE_DIR)");
        return -1;
    }
    errno = 0;
    if (make_dirs(dir) < 0) {
        snprintf(why, why_n, "cannot create or write the cache directory %.400s: %s", dir,
                 strerror(errno ? errno : EACCES));
        return -1;
    }
    return 0;
}

void jg_cache_touch(const char *path) {
    (void)utimensat(AT_FDCWD, path, NULL, 0);
}

long jg_cache_limit(void) {
    const char *s = getenv("JITGRAD_CACHE_MAX");
    if (!s || !*s)
        return CACHE_DEFAULT_LIMIT;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0)
        return CACHE_DEFAULT_LIMIT;
    return v;
}

/* "<16 hex digits>.so": an object the backend made (not a temporary). */
static bool is_object(const char *name) {
    if (strlen(name) != 19 || strcmp(name + 16, ".so") != 0)
        return false;
    for (int i = 0; i < 16; i++)
        if (!strchr("0123456789abcdef", name[i]))
            return false;
    return true;
}

typedef struct {
    char name[20];
    struct timespec used;
} entry;

static int older_first(const void *a, const void *b) {
    const struct timespec *x = &((const entry *)a)->used, *y = &((const entry *)b)->used;
    if (x->tv_sec != y->tv_sec)
        return x->tv_sec < y->tv_sec ? -1 : 1;
    if (x->tv_nsec != y->tv_nsec)
        return x->tv_nsec < y->tv_nsec ? -1 : 1;
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

int jg_cache_prune(const char *dir, const char *keep) {
    long limit = jg_cache_limit();
    if (limit == 0)
        return 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    entry *all = NULL;
    size_t n = 0, cap = 0;
    const char *keep_name = keep ? strrchr(keep, '/') : NULL;
    keep_name = keep_name ? keep_name + 1 : keep;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_object(de->d_name) || (keep_name && !strcmp(de->d_name, keep_name)))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, 0) < 0)
            continue; /* removed meanwhile */
        if (n == cap) {
            size_t c = cap ? cap * 2 : 64;
            entry *e = realloc(all, c * sizeof *e);
            if (!e)
                break; /* prune what was seen */
            all = e;
            cap = c;
        }
        memcpy(all[n].name, de->d_name, 20);
        all[n].used = st.st_mtim;
        n++;
    }
    /* the kept object counts against the limit too */
    size_t room = (size_t)limit - (keep_name ? 1 : 0), removed = 0;
    if (n > room) {
        qsort(all, n, sizeof *all, older_first);
        for (size_t i = 0; i < n - room; i++) {
            if (unlinkat(dirfd(d), all[i].name, 0) == 0)
                removed++;
            char src[20];
            memcpy(src, all[i].name, 17);
            memcpy(src + 17, "c", 2); /* <hash>.c, the source kept for reading */
            (void)unlinkat(dirfd(d), src, 0);
        }
    }
    closedir(d);
    free(all);
    return (int)removed;
}
