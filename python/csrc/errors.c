/* Errors across the C boundary, and the deferred releases of tensors that
 * callbacks hand to the library. */
#include "jgpy.h"

#include <string.h>

/* The Python exception a callback raised during the current top-level call,
 * and the start of the message the library got for it. */
static PyObject *pending_type, *pending_value, *pending_tb;
static char pending_msg[64];
static int depth;
static jg_tensor **deferred;
static size_t n_deferred, cap_deferred;

static void clear_pending(void) {
    Py_CLEAR(pending_type);
    Py_CLEAR(pending_value);
    Py_CLEAR(pending_tb);
}

PyObject *jgp_raise(void) {
    /* the library may go on past a callback's failure (a custom Function's
     * forward that read a value while traced runs as an opaque call) and
     * fail later for another reason: that error is the call's, not the
     * callback's (whose message the library passes on, perhaps prefixed) */
    const char *last = jg_last_error();
    if (pending_type && last && last[0] && pending_msg[0] && !strstr(last, pending_msg))
        clear_pending();
    if (pending_type) {
        PyErr_Restore(pending_type, pending_value, pending_tb);
        pending_type = pending_value = pending_tb = NULL;
        return NULL;
    }
    if (PyErr_Occurred())
        return NULL;
    const char *msg = jg_last_error();
    if (!msg || !msg[0])
        msg = "jitgrad: unknown error";
    /* the library names its own C API where PyTorch names Python's */
    if (strncmp(msg, "Trying to backward through the graph a second time", 50) == 0)
        msg = "Trying to backward through the graph a second time (or directly access saved "
              "tensors after they have already been freed). Saved intermediate values of the "
              "graph are freed when you call .backward() or autograd.grad(). Specify "
              "retain_graph=True if you need to backward through the graph a second time or if "
              "you need to access saved tensors after calling backward.";
    PyObject *type = PyExc_RuntimeError;
    if (strncmp(msg, "Dimension out of range", 22) == 0 || strstr(msg, "out of bounds") ||
        strncmp(msg, "index ", 6) == 0 || strstr(msg, "Index is supposed to be a vector") ||
        strstr(msg, "to have non-zero size.")) /* an empty reduced dim */
        type = PyExc_IndexError;
    PyErr_SetString(type, msg);
    jg_clear_error();
    return NULL;
}

int jgp_raise_int(void) {
    jgp_raise();
    return -1;
}

int jgp_callback_fail(void) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (!type)
        return jg_set_error("a Python callback failed without an exception");
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb)
        PyException_SetTraceback(value, tb);
    char buf[1024] = "";
    PyObject *s = value ? PyObject_Str(value) : NULL;
    const char *m = s ? PyUnicode_AsUTF8(s) : NULL;
    if (m)
        snprintf(buf, sizeof buf, "%s", m);
    else
        PyErr_Clear();
    Py_XDECREF(s);
    clear_pending();
    pending_type = type;
    pending_value = value;
    pending_tb = tb;
    const char *msg = buf[0] ? buf : ((PyTypeObject *)type)->tp_name;
    snprintf(pending_msg, sizeof pending_msg, "%s", msg);
    return jg_set_error("%s", msg);
}

void jgp_callback_retry(void) {
    /* the library went on past that failure: it is not this call's error */
    clear_pending();
}

void jgp_enter(void) {
    if (depth++ == 0)
        clear_pending();
}

void jgp_leave(bool ok) {
    if (--depth > 0)
        return;
    if (ok) /* a callback failure the library recovered from (eager fallback) */
        clear_pending();
    /* releasing may run nothing Python-side, but copy first anyway */
    while (n_deferred > 0)
        jg_release(deferred[--n_deferred]);
    if (cap_deferred > 4096) {
        PyMem_RawFree(deferred);
        deferred = NULL;
        cap_deferred = 0;
    }
}

void jgp_defer_release(jg_tensor *t) {
    if (!t)
        return;
    if (depth == 0) { /* not inside a library call: nothing borrows it */
        jg_release(t);
        return;
    }
    if (n_deferred == cap_deferred) {
        size_t cap = cap_deferred ? cap_deferred * 2 : 64;
        jg_tensor **d = PyMem_RawRealloc(deferred, cap * sizeof *d);
        if (!d) {
            /* leaking one reference beats a use after free */
            return;
        }
        deferred = d;
        cap_deferred = cap;
    }
    deferred[n_deferred++] = t;
}
