/* Cache-blocked strided copies (docs/kernels.md, "Strided copies"). */
#ifndef JG_CORE_COPY_H
#define JG_CORE_COPY_H

#include "core/tensor.h"

/* Copies src into dst (same dtype and shape, no broadcast) in tiles when
 * their unit-stride dims differ (a transpose or permute), on the pool when
 * large.  Returns false, having done nothing, for any other case. */
bool jg_copy_blocked(jg_tensor *dst, const jg_tensor *src);

#endif
