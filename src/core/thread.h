/* What the library does when a thread ends: its per-thread caches and
 * buffers are freed through here. */
#ifndef JG_CORE_THREAD_H
#define JG_CORE_THREAD_H

#include <stdbool.h>

/* Runs fn when the calling thread exits, after the functions it registered
 * later (reverse order).  A caller registers once per thread (it keeps its
 * own thread-local flag, and clears it in fn, so that a thread still using
 * the library during the exit registers again).  False when it cannot be
 * arranged; the caller then frees at once instead of keeping things. */
bool jg_at_thread_exit(void (*fn)(void));

#endif
