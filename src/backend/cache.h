/* The c backend's on-disk cache of compiled graphs: where it is, and how it
 * stays bounded (see docs/compiler.md, "Cache"). */
#ifndef JG_BACKEND_CACHE_H
#define JG_BACKEND_CACHE_H

#include <stdbool.h>
#include <stddef.h>

/* JITGRAD_CACHE_DIR, else $XDG_CACHE_HOME/jitgrad, else ~/.cache/jitgrad,
 * created (0700) when missing.  -1 with the reason in why when there is none
 * or it is not writable; -2 when it is refused because another user could
 * plant code in it: not owned by this user, or writable by group/others. */
int jg_cache_dir(char *dir, size_t n, char *why, size_t why_n);

/* Loads the shared object compiled from src (one C translation unit): the
 * cached object when it is a regular file of this user, writable by nobody
 * else, whose exported jg_object_key is the full source, flags and compiler;
 * else compiles it (JITGRAD_CC, at most JITGRAD_CC_TIMEOUT seconds) through
 * exclusively created temporaries and renames it into the cache.  *hit: it
 * came from the cache.  NULL + error on failure; *fallback is then true when
 * the interpreter should run instead (the directory was refused, the
 * compiler timed out).  label names the graph in messages; quiet: no
 * JITGRAD_LOG=code output. */
void *jg_cache_load(const char *src, const char *label, bool quiet, bool *hit, bool *fallback);

/* How many objects this process has compiled (cache misses that ran the
 * compiler and loaded its result): tests count compilations with it. */
long jg_cache_compiles(void);

/* The instruction set levels the generated code is compiled for. */
enum { JG_CC_ARCH_NONE, JG_CC_ARCH_AVX2, JG_CC_ARCH_AVX512 };

/* The highest level this CPU (and OS) runs: AVX-512 needs F, VL, DQ and BW. */
int jg_cc_arch_supported(void);

/* The level compiled for: JITGRAD_CC_ARCH (avx512, avx2 or none) when it is
 * at most jg_cc_arch_supported(), else that (a bad or too high value is said
 * once on stderr).  Read at each compilation. */
int jg_cc_arch(void);

/* "none", "avx2", "avx512". */
const char *jg_cc_arch_name(int level);

/* JITGRAD_CC_TIMEOUT in seconds (default 60). */
double jg_cc_timeout(void);

/* Marks a cached object as just used (its modification time), so pruning
 * removes the least recently used first.  Errors are ignored. */
void jg_cache_touch(const char *path);

/* The number of compiled objects the cache keeps: JITGRAD_CACHE_MAX when it
 * is a non-negative integer (0: no limit), else 1000 (a bad value is said
 * once on stderr). */
long jg_cache_limit(void);

/* Removes the least recently used objects of dir (<16 hex digits>.so and
 * the .c next to it) beyond jg_cache_limit(), never `keep`, and temporaries
 * of compilations killed long ago; returns how many objects it removed.  Safe while other processes
 * use the cache: a loaded object stays mapped after its file is removed, and a process that finds
 * an entry gone compiles it again. */
int jg_cache_prune(const char *dir, const char *keep);

#endif
