/* The c backend's on-disk cache of compiled graphs: where it is, and how it
 * stays bounded (see docs/compiler.md, "Cache"). */
#ifndef JG_BACKEND_CACHE_H
#define JG_BACKEND_CACHE_H

#include <stdbool.h>
#include <stddef.h>

/* JITGRAD_CACHE_DIR, else $XDG_CACHE_HOME/jitgrad, else ~/.cache/jitgrad,
 * created when missing; -1 with the reason in why when there is none or it
 * is not writable. */
int jg_cache_dir(char *dir, size_t n, char *why, size_t why_n);

/* Marks a cached object as just used (its modification time), so pruning
 * removes the least recently used first.  Errors are ignored. */
void jg_cache_touch(const char *path);

/* The number of compiled objects the cache keeps: JITGRAD_CACHE_MAX when it
 * is a non-negative integer (0: no limit), else 1000. */
long jg_cache_limit(void);

/* Removes the least recently used objects of dir (<16 hex digits>.so and
 * the .c next to it) beyond jg_cache_limit(), never `keep`; returns how
 * many it removed.  Safe while other processes use the cache: a loaded
 * object stays mapped after its file is removed, and a process that finds
 * an entry gone compiles it again. */
int jg_cache_prune(const char *dir, const char *keep);

#endif
