/* jg_parallel_for: see parallel.h. */
#include "core/parallel.h"

void jg_parallel_for(int64_t n, int64_t grain, jg_parallel_fn fn, void *ctx) {
    if (grain < 1)
        grain = 1;
    for (int64_t lo = 0; lo < n; lo += grain)
        fn(ctx, lo, n - lo > grain ? lo + grain : n);
}
