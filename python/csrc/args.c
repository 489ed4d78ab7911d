/* Deterministic bytes for non-tensor arguments: what compiled code guards
 * on and what a custom function's forward is rebuilt from when the library
 * calls it outside the Python call that made it.  Tensors are written as a
 * 'T' marker (and collected in order when the caller allows them). */
#include "args.h"

#include <string.h>

static int put(jgp_buf *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->len + n)
            cap *= 2;
        char *d = PyMem_Realloc(b->data, cap);
        if (!d) {
            PyErr_NoMemory();
            return -1;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

static int put_tag(jgp_buf *b, char tag) {
    return put(b, &tag, 1);
}

static int put_str(jgp_buf *b, char tag, PyObject *s) {
    Py_ssize_t n;
    const char *c = PyUnicode_AsUTF8AndSize(s, &n);
    uint32_t len = (uint32_t)n;
    if (!c || put_tag(b, tag) < 0 || put(b, &len, 4) < 0 || put(b, c, (size_t)n) < 0)
        return -1;
    return 0;
}

int jgp_buf_put(jgp_buf *b, const void *p, size_t n) {
    return put(b, p, n);
}

void jgp_buf_free(jgp_buf *b) {
    PyMem_Free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* The name of an object argument in the bytes: its type and address, and
 * a serial number the object keeps while it lives.  An address freed and
 * taken by another object (a new Box each call, as CPython reuses memory)
 * gets another name: bytes that named the earlier object -- a cached
 * graph's guard, a compiled call's custom node that a create_graph
 * backward runs again -- never find the new one (fuzz seed 3402457: the
 * rerun read the next call's Box, silently).  An object without weak
 * references is named by its address alone. */
static PyObject *obj_serials; /* "type@address" -> (weakref, serial) */
static unsigned long long obj_serial_next;
static Py_ssize_t obj_serials_prune_at = 256;

static int prune_obj_serials(void) {
    PyObject *dead = PyList_New(0), *k, *v;
    Py_ssize_t pos = 0;
    int rc = dead ? 0 : -1;
    while (rc == 0 && PyDict_Next(obj_serials, &pos, &k, &v))
        if (PyWeakref_GetObject(PyTuple_GET_ITEM(v, 0)) == Py_None)
            rc = PyList_Append(dead, k);
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(dead); i++)
        rc = PyDict_DelItem(obj_serials, PyList_GET_ITEM(dead, i));
    Py_XDECREF(dead);
    obj_serials_prune_at = 2 * PyDict_Size(obj_serials) + 256;
    return rc;
}

static PyObject *object_key(PyObject *o) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s@%p", Py_TYPE(o)->tp_name, (void *)o);
    PyObject *addr = PyUnicode_FromString(buf);
    if (!addr || (!obj_serials && !(obj_serials = PyDict_New()))) {
        Py_XDECREF(addr);
        return NULL;
    }
    PyObject *ent = PyDict_GetItemWithError(obj_serials, addr); /* (borrowed) */
    unsigned long long serial = 0;
    if (ent && PyWeakref_GetObject(PyTuple_GET_ITEM(ent, 0)) == o)
        serial = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(ent, 1));
    if (PyErr_Occurred()) {
        Py_DECREF(addr);
        return NULL;
    }
    if (!serial) {
        PyObject *ref = PyWeakref_NewRef(o, NULL);
        if (!ref) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError)) {
                Py_DECREF(addr);
                return NULL;
            }
            PyErr_Clear(); /* (no weak references: the address alone) */
            return addr;
        }
        serial = ++obj_serial_next;
        PyObject *val = Py_BuildValue("(NK)", ref, serial);
        int rc = val ? PyDict_SetItem(obj_serials, addr, val) : -1;
        Py_XDECREF(val);
        if (rc == 0 && PyDict_Size(obj_serials) > obj_serials_prune_at)
            rc = prune_obj_serials();
        if (rc < 0) {
            Py_DECREF(addr);
            return NULL;
        }
    }
    Py_DECREF(addr);
    return PyUnicode_FromFormat("%s#%llu", buf, serial);
}

PyObject *jgp_object_key(PyObject *o) {
    return object_key(o);
}

/* key -> list of (holder, value), oldest first: the newest holder's value
 * is the one found (the objects of the latest call that made a compiled
 * graph with them, as live as they can be; an older graph that reruns an
 * object given to several calls gets it as the latest call saw it). */
static PyObject *held_objects;

static void drop_holder(PyObject *key, PyObject *tag) {
    PyObject *list = PyDict_GetItemWithError(held_objects, key);
    Py_ssize_t n = list ? PyList_GET_SIZE(list) : 0;
    for (Py_ssize_t i = n - 1; i >= 0; i--)
        if (PyObject_RichCompareBool(PyTuple_GET_ITEM(PyList_GET_ITEM(list, i), 0), tag, Py_EQ) ==
            1) {
            /* (may free the value, its holder's ctx going) */
            if (n == 1)
                PyDict_DelItem(held_objects, key);
            else
                PySequence_DelItem(list, i);
            break;
        }
    PyErr_Clear();
}

int jgp_objects_hold(PyObject *held) {
    if (!held_objects && !(held_objects = PyDict_New()))
        return -1;
    PyObject *tag = PyLong_FromVoidPtr(held), *k, *v;
    Py_ssize_t pos = 0;
    int rc = tag ? 0 : -1;
    while (rc == 0 && PyDict_Next(held, &pos, &k, &v)) {
        PyObject *list = PyDict_GetItemWithError(held_objects, k);
        if (!list && !PyErr_Occurred()) {
            list = PyList_New(0);
            rc = list ? PyDict_SetItem(held_objects, k, list) : -1;
            Py_XDECREF(list); /* (the dict's) */
        }
        PyObject *ent = list && rc == 0 ? PyTuple_Pack(2, tag, v) : NULL;
        rc = ent ? PyList_Append(list, ent) : -1;
        Py_XDECREF(ent);
    }
    if (rc < 0) { /* undo: nothing held */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        pos = 0;
        while (tag && PyDict_Next(held, &pos, &k, &v))
            drop_holder(k, tag);
        PyErr_Restore(et, ev, tb);
    }
    Py_XDECREF(tag);
    return rc;
}

void jgp_objects_drop(PyObject *held) {
    if (!held_objects)
        return;
    PyObject *et, *ev, *tb, *k, *v;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *tag = PyLong_FromVoidPtr(held);
    Py_ssize_t pos = 0;
    while (tag && PyDict_Next(held, &pos, &k, &v))
        drop_holder(k, tag);
    Py_XDECREF(tag);
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}

PyObject *jgp_held_object(PyObject *key) {
    PyObject *list = held_objects ? PyDict_GetItemWithError(held_objects, key) : NULL;
    Py_ssize_t n = list ? PyList_GET_SIZE(list) : 0;
    return n ? PyTuple_GET_ITEM(PyList_GET_ITEM(list, n - 1), 1) : NULL;
}

int jgp_serialize(PyObject *o, jgp_buf *b, PyObject *tensors) {
    if (jgp_is_tensor(o)) {
        if (!tensors) {
            PyErr_SetString(PyExc_TypeError,
                            "jitgrad: tensors nested inside a container argument are not supported "
                            "here");
            return -1;
        }
        return PyList_Append(tensors, o) < 0 ? -1 : put_tag(b, 'T');
    }
    if (o == Py_None)
        return put_tag(b, 'N');
    if (PyBool_Check(o)) {
        char v = o == Py_True;
        return put_tag(b, 'b') < 0 ? -1 : put(b, &v, 1);
    }
    if (PyLong_Check(o)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (!overflow) {
            int64_t x = v;
            return put_tag(b, 'i') < 0 ? -1 : put(b, &x, 8);
        }
        PyObject *s = PyObject_Repr(o);
        int rc = s ? put_str(b, 'I', s) : -1;
        Py_XDECREF(s);
        return rc;
    }
    if (PyFloat_Check(o)) {
        double x = PyFloat_AS_DOUBLE(o);
        return put_tag(b, 'f') < 0 ? -1 : put(b, &x, 8);
    }
    if (PyUnicode_Check(o))
        return put_str(b, 's', o);
    if (PyObject_TypeCheck(o, &JGDtype_Type)) {
        char d = (char)((JGDtype *)o)->d;
        return put_tag(b, 'd') < 0 ? -1 : put(b, &d, 1);
    }
    if (PyTuple_Check(o) || PyList_Check(o)) {
        uint32_t n = (uint32_t)PySequence_Fast_GET_SIZE(o);
        if (put_tag(b, PyTuple_Check(o) ? '(' : '[') < 0 || put(b, &n, 4) < 0)
            return -1;
        for (uint32_t i = 0; i < n; i++)
            if (jgp_serialize(PySequence_Fast_GET_ITEM(o, i), b, tensors) < 0)
                return -1;
        return 0;
    }
    if (PyDict_Check(o)) {
        /* keys in insertion order, as Python compares kwargs-like dicts */
        uint32_t n = (uint32_t)PyDict_Size(o);
        if (put_tag(b, '{') < 0 || put(b, &n, 4) < 0)
            return -1;
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(o, &pos, &k, &v))
            if (jgp_serialize(k, b, NULL) < 0 || jgp_serialize(v, b, tensors) < 0)
                return -1;
        return 0;
    }
    /* anything else: guarded by identity (its repr would not be stable) */
    PyObject *s = object_key(o);
    int rc = s ? put_str(b, 'o', s) : -1;
    if (rc == 0 && jgp_trace_objects && PyDict_SetItem(jgp_trace_objects, s, o) < 0)
        rc = -1;
    Py_XDECREF(s);
    return rc;
}

static int get(const char **p, const char *end, void *dst, size_t n) {
    if ((size_t)(end - *p) < n) {
        PyErr_SetString(PyExc_RuntimeError, "jitgrad: corrupt argument bytes");
        return -1;
    }
    memcpy(dst, *p, n);
    *p += n;
    return 0;
}

PyObject *jgp_deserialize(const char **p, const char *end, jg_tensor *const *tensors, int n_tensors,
                          int *next_tensor) {
    char tag;
    if (get(p, end, &tag, 1) < 0)
        return NULL;
    switch (tag) {
    case 'T':
        if (*next_tensor >= n_tensors) {
            PyErr_SetString(PyExc_RuntimeError, "jitgrad: argument bytes name more tensors than "
                                                "the call has");
            return NULL;
        }
        return jgp_wrap_borrowed(tensors[(*next_tensor)++]);
    case 'N':
        Py_RETURN_NONE;
    case 'b': {
        char v;
        return get(p, end, &v, 1) < 0 ? NULL : PyBool_FromLong(v);
    }
    case 'i': {
        int64_t v;
        return get(p, end, &v, 8) < 0 ? NULL : PyLong_FromLongLong(v);
    }
    case 'f': {
        double v;
        return get(p, end, &v, 8) < 0 ? NULL : PyFloat_FromDouble(v);
    }
    case 'd': {
        char d;
        return get(p, end, &d, 1) < 0 ? NULL : Py_NewRef(jgp_dtype_obj((jg_dtype)d));
    }
    case 's':
    case 'I':
    case 'o': {
        uint32_t n;
        if (get(p, end, &n, 4) < 0 || (size_t)(end - *p) < n) {
            PyErr_SetString(PyExc_RuntimeError, "jitgrad: corrupt argument bytes");
            return NULL;
        }
        const char *s = *p;
        *p += n;
        if (tag == 's')
            return PyUnicode_FromStringAndSize(s, n);
        if (tag == 'I') {
            PyObject *str = PyUnicode_FromStringAndSize(s, n);
            PyObject *r = str ? PyLong_FromUnicodeObject(str, 10) : NULL;
            Py_XDECREF(str);
            return r;
        }
        PyObject *key = PyUnicode_FromStringAndSize(s, n);
        PyObject *o = key ? jgp_find_object(key) : NULL;
        if (o) {
            Py_DECREF(key);
            return Py_NewRef(o);
        }
        if (key && !PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError,
                         "jitgrad: cannot rebuild the argument %U of a custom function called "
                         "outside its Python call",
                         key);
        Py_XDECREF(key);
        return NULL;
    }
    case '(':
    case '[':
    case '{': {
        uint32_t n;
        if (get(p, end, &n, 4) < 0)
            return NULL;
        PyObject *r = tag == '{' ? PyDict_New() : PyList_New(n);
        for (uint32_t i = 0; r && i < n; i++) {
            if (tag == '{') {
                PyObject *k = jgp_deserialize(p, end, tensors, n_tensors, next_tensor);
                PyObject *v = k ? jgp_deserialize(p, end, tensors, n_tensors, next_tensor) : NULL;
                if (!v || PyDict_SetItem(r, k, v) < 0)
                    Py_CLEAR(r);
                Py_XDECREF(k);
                Py_XDECREF(v);
                continue;
            }
            PyObject *v = jgp_deserialize(p, end, tensors, n_tensors, next_tensor);
            if (!v)
                Py_CLEAR(r);
            else
                PyList_SET_ITEM(r, i, v);
        }
        if (r && tag == '(') {
            PyObject *t = PyList_AsTuple(r);
            Py_DECREF(r);
            r = t;
        }
        return r;
    }
    default:
        PyErr_SetString(PyExc_RuntimeError, "jitgrad: corrupt argument bytes");
        return NULL;
    }
}
