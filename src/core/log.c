/* JITGRAD_LOG: a comma-separated list of topics (see docs/compiler.md). */
#include "core/tensor.h"

#include <stdlib.h>
#include <string.h>

bool jg_log_topic(const char *topic) {
    size_t tn = strlen(topic);
    for (const char *s = getenv("JITGRAD_LOG"); s && *s;) {
        size_t n = strcspn(s, ",");
        if ((n == tn && !strncmp(s, topic, n)) || (n == 3 && !strncmp(s, "all", 3)))
            return true;
        s += n + (s[n] == ',');
    }
    return false;
}
