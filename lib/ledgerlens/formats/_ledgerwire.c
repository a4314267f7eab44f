/*
 * Compiled fast path of ledgerlens.sources.zookeeper.LedgerColumns.add: one ledger znode (v3
 * BookKeeper metadata, FORMATS.md section 2) decoded straight into the column lists.
 *
 * It takes only the common, clean case and answers False for anything else, having appended
 * nothing: the caller then runs the Python decoder, which names the problem. "Clean" means: the
 * v3 header, a one- or two-byte length prefix that covers the rest exactly, a ledger path of the
 * short or long layout under the root, every known field with its wire type, known enum values,
 * every required field present (quorumSize, ensembleSize, length, state; firstEntryId in every
 * segment), UTF-8 strings, at most MAX_MEMBERS bookies and MAX_CUSTOM custom metadata entries.
 * Unknown fields are skipped, as protobuf does. What it appends is exactly what the Python path
 * appends for the same bytes (tests/unit/test_ledger_columns.py compares both on random input).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MAX_MEMBERS 64
#define MAX_CUSTOM 32
#define N_SCALARS 15 /* ledger_id .. error: the BK_LEDGERS columns before bookies */
#define N_CUSTOM_COLUMNS 9

static const char V3_HEADER[] = "BookieMetadataFormatVersion\t3\n";
#define V3_HEADER_LEN 30

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} Buf;

typedef struct {
    const uint8_t *s;
    Py_ssize_t n;
} Bytes;

typedef struct {
    int has_q, has_e, has_len, has_last, has_state, has_digest, has_ack, has_ctime;
    int32_t q, e, ack, state, digest;
    int64_t length, last, ctime;
    Bytes members[MAX_MEMBERS]; /* every segment's bookies, in order, duplicates dropped */
    int n_members;
    Bytes keys[MAX_CUSTOM]; /* custom metadata: first position of a key, its last value */
    Bytes values[MAX_CUSTOM];
    int n_custom;
} Meta;

static int read_varint(Buf *b, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift <= 63 && b->p < b->end; shift += 7) {
        uint8_t c = *b->p++;
        v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0; /* truncated, or longer than ten bytes */
}

/* A field's tag: its number (1 .. 2^29-1, as protobuf allows) and wire type. */
static int read_tag(Buf *b, int *field, int *wt) {
    uint64_t tag;
    if (!read_varint(b, &tag) || (tag >> 3) == 0 || (tag >> 3) > 536870911)
        return 0;
    *field = (int)(tag >> 3);
    *wt = (int)(tag & 7);
    return 1;
}

static int read_bytes(Buf *b, Bytes *out) {
    uint64_t n;
    if (!read_varint(b, &n) || n > (uint64_t)(b->end - b->p))
        return 0;
    out->s = b->p;
    out->n = (Py_ssize_t)n;
    b->p += n;
    return 1;
}

/* Skip one field of wire type wt (groups are not taken: the caller falls back). */
static int skip_field(Buf *b, int wt) {
    uint64_t v;
    Bytes ignored;
    switch (wt) {
    case 0:
        return read_varint(b, &v);
    case 1: /* fixed 64 bits */
    case 5: /* fixed 32 bits */
        if (b->end - b->p < (wt == 1 ? 8 : 4))
            return 0;
        b->p += wt == 1 ? 8 : 4;
        return 1;
    case 2:
        return read_bytes(b, &ignored);
    default:
        return 0;
    }
}

static int same(Bytes a, Bytes b) { return a.n == b.n && memcmp(a.s, b.s, (size_t)a.n) == 0; }

static int parse_segment(Buf b, Meta *m) {
    int has_first = 0;
    uint64_t v;
    while (b.p < b.end) {
        int field, wt;
        if (!read_tag(&b, &field, &wt))
            return 0;
        if (field == 1) {
            Bytes member;
            if (wt != 2 || !read_bytes(&b, &member))
                return 0;
            int seen = 0;
            for (int i = 0; i < m->n_members && !seen; i++)
                seen = same(m->members[i], member);
            if (!seen) {
                if (m->n_members == MAX_MEMBERS)
                    return 0;
                m->members[m->n_members++] = member;
            }
        } else if (field == 2) {
            if (wt != 0 || !read_varint(&b, &v))
                return 0;
            has_first = 1;
        } else if (!skip_field(&b, wt)) {
            return 0;
        }
    }
    return has_first;
}

static int parse_custom(Buf b, Meta *m) {
    Bytes key = {(const uint8_t *)"", 0}, value = {(const uint8_t *)"", 0};
    while (b.p < b.end) {
        int field, wt;
        if (!read_tag(&b, &field, &wt))
            return 0;
        if (field == 1 || field == 2) {
            if (wt != 2 || !read_bytes(&b, field == 1 ? &key : &value))
                return 0;
        } else if (!skip_field(&b, wt)) {
            return 0;
        }
    }
    for (int i = 0; i < m->n_custom; i++) {
        if (same(m->keys[i], key)) { /* a dict: the first position, the last value */
            m->values[i] = value;
            return 1;
        }
    }
    if (m->n_custom == MAX_CUSTOM)
        return 0;
    m->keys[m->n_custom] = key;
    m->values[m->n_custom++] = value;
    return 1;
}

static int parse_metadata(Buf b, Meta *m) {
    uint64_t v;
    memset(m, 0, offsetof(Meta, members));
    m->n_members = m->n_custom = 0;
    while (b.p < b.end) {
        int field, wt;
        if (!read_tag(&b, &field, &wt))
            return 0;
        Bytes sub;
        switch (field) {
        case 6: /* segment */
        case 11: /* customMetadata */
            if (wt != 2 || !read_bytes(&b, &sub))
                return 0;
            {
                Buf inner = {sub.s, sub.s + sub.n};
                if (!(field == 6 ? parse_segment(inner, m) : parse_custom(inner, m)))
                    return 0;
            }
            break;
        case 8: /* password: not kept */
            if (wt != 2 || !read_bytes(&b, &sub))
                return 0;
            break;
        case 1: case 2: case 3: case 4: case 5: case 7: case 9: case 10: case 12:
            if (wt != 0 || !read_varint(&b, &v))
                return 0;
            switch (field) {
            case 1: m->q = (int32_t)(uint32_t)v; m->has_q = 1; break;
            case 2: m->e = (int32_t)(uint32_t)v; m->has_e = 1; break;
            case 3: m->length = (int64_t)v; m->has_len = 1; break;
            case 4: m->last = (int64_t)v; m->has_last = 1; break;
            case 5:
                m->state = (int32_t)(uint32_t)v;
                if (m->state < 1 || m->state > 3)
                    return 0; /* a closed enum's unknown value: protobuf's own rules decide */
                m->has_state = 1;
                break;
            case 7:
                m->digest = (int32_t)(uint32_t)v;
                if (m->digest < 1 || m->digest > 4)
                    return 0;
                m->has_digest = 1;
                break;
            case 9: m->ack = (int32_t)(uint32_t)v; m->has_ack = 1; break;
            case 10: m->ctime = (int64_t)v; m->has_ctime = 1; break;
            default: break; /* 12, cToken: not kept */
            }
            break;
        default:
            if (!skip_field(&b, wt))
                return 0;
        }
    }
    return m->has_q && m->has_e && m->has_len && m->has_state;
}

/* The ledger id of root/NN/NNNN/LNNNN or root/NNN/NNNN/NNNN/NNNN/LNNNN; -1 when it is not one. */
static int64_t ledger_id_of(const char *path, Py_ssize_t n_path, const char *root, Py_ssize_t n_root) {
    while (n_root > 0 && root[n_root - 1] == '/')
        n_root--;
    if (n_path <= n_root || memcmp(path, root, (size_t)n_root) != 0 || path[n_root] != '/')
        return -1;
    const char *rest = path + n_root + 1;
    Py_ssize_t n = n_path - n_root - 1;
    static const char SHORT[] = "dd/dddd/Ldddd";
    static const char LONG[] = "ddd/dddd/dddd/dddd/Ldddd";
    const char *pattern = n == (Py_ssize_t)sizeof(SHORT) - 1 ? SHORT : n == (Py_ssize_t)sizeof(LONG) - 1 ? LONG : NULL;
    if (pattern == NULL)
        return -1;
    uint64_t id = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (pattern[i] == 'd') {
            if (rest[i] < '0' || rest[i] > '9')
                return -1;
            id = id * 10 + (uint64_t)(rest[i] - '0');
        } else if (rest[i] != pattern[i]) {
            return -1;
        }
    }
    return id > (uint64_t)INT64_MAX ? -1 : (int64_t)id;
}

/* The lists and names an Appender holds, one array (indices below). */
enum {
    SCALARS = 0,                                /* N_SCALARS column lists, ledger_id .. error */
    CUSTOM_KEYS = SCALARS + N_SCALARS,          /* bytes: the custom metadata keys with a column */
    CUSTOM_LISTS = CUSTOM_KEYS + N_CUSTOM_COLUMNS, /* their column lists */
    BOOKIES = CUSTOM_LISTS + N_CUSTOM_COLUMNS,  /* the nested columns' value, offset and null lists */
    BOOKIE_ENDS,
    BOOKIES_NULL,
    KEYS,
    VALUES,
    CUSTOM_ENDS,
    CUSTOM_NULL,
    STATES,  /* tuple: OPEN, IN_RECOVERY, CLOSED */
    DIGESTS, /* tuple: CRC32, HMAC, CRC32C, DUMMY; set last, only when __init__ succeeds */
    N_REFS
};

typedef struct {
    PyObject_HEAD
    PyObject *refs[N_REFS];
} Appender;

static void appender_dealloc(Appender *a) {
    PyObject_GC_UnTrack(a);
    for (int i = 0; i < N_REFS; i++)
        Py_CLEAR(a->refs[i]);
    Py_TYPE(a)->tp_free((PyObject *)a);
}

static int appender_traverse(Appender *a, visitproc visit, void *arg) {
    for (int i = 0; i < N_REFS; i++)
        Py_VISIT(a->refs[i]);
    return 0;
}

static int take_lists(PyObject *seq, PyObject **out, Py_ssize_t n, const char *what) {
    if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_TypeError, "%s: a tuple of %zd expected", what, n);
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(seq, i);
        out[i] = Py_NewRef(x);
    }
    return 1;
}

static int appender_init(Appender *a, PyObject *args, PyObject *kwargs) {
    PyObject *scalars, *custom_keys, *custom_lists, *nested, *states, *digests;
    static char *names[] = {"scalars", "custom_keys", "custom_lists", "nested", "states", "digests", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOO", names, &scalars, &custom_keys, &custom_lists, &nested,
                                     &states, &digests))
        return -1;
    for (int i = 0; i < N_REFS; i++)
        Py_CLEAR(a->refs[i]);
    if (!take_lists(scalars, a->refs + SCALARS, N_SCALARS, "scalars") ||
        !take_lists(custom_keys, a->refs + CUSTOM_KEYS, N_CUSTOM_COLUMNS, "custom_keys") ||
        !take_lists(custom_lists, a->refs + CUSTOM_LISTS, N_CUSTOM_COLUMNS, "custom_lists") ||
        !take_lists(nested, a->refs + BOOKIES, CUSTOM_NULL - BOOKIES + 1, "nested"))
        return -1;
    for (int i = SCALARS; i <= CUSTOM_NULL; i++) {
        int want_bytes = i >= CUSTOM_KEYS && i < CUSTOM_LISTS;
        if (want_bytes ? !PyBytes_Check(a->refs[i]) : !PyList_Check(a->refs[i]))
            return PyErr_SetString(PyExc_TypeError, "lists expected (bytes for the custom keys)"), -1;
    }
    if (!PyTuple_Check(states) || PyTuple_GET_SIZE(states) != 3 || !PyTuple_Check(digests) ||
        PyTuple_GET_SIZE(digests) != 4)
        return PyErr_SetString(PyExc_TypeError, "states: 3 names, digests: 4 names expected"), -1;
    a->refs[STATES] = Py_NewRef(states);
    a->refs[DIGESTS] = Py_NewRef(digests); /* last: add() tests it */
    return 0;
}

/* Append obj (a new reference, stolen) to list; 0 on failure. */
static int push(PyObject *list, PyObject *obj) {
    if (obj == NULL)
        return 0;
    int rc = PyList_Append(list, obj);
    Py_DECREF(obj);
    return rc == 0;
}

static int push_ssize(PyObject *list, Py_ssize_t n) { return push(list, PyLong_FromSsize_t(n)); }

/* Append the row of one ledger znode: 1 appended, 0 declined (nothing appended), -1 error. */
static int add_row(Appender *a, PyObject *path, PyObject *root, PyObject *ledger_id, const uint8_t *d,
                   Py_ssize_t n, PyObject *ctime, PyObject *mtime, PyObject *version) {
    if (!PyUnicode_Check(path))
        return 0;
    if (n < V3_HEADER_LEN + 1 || memcmp(d, V3_HEADER, V3_HEADER_LEN) != 0)
        return 0;
    Py_ssize_t size = d[30], start = 31;
    if (size & 0x80) {
        if (n < 32 || d[31] & 0x80)
            return 0;
        size = (size & 0x7F) | ((Py_ssize_t)d[31] << 7);
        start = 32;
    }
    if (start + size != n)
        return 0;
    Meta m;
    Buf b = {d + start, d + n};
    if (!parse_metadata(b, &m))
        return 0;

    PyObject *id_obj;
    if (ledger_id == Py_None) {
        Py_ssize_t n_path, n_root;
        const char *p = PyUnicode_AsUTF8AndSize(path, &n_path);
        const char *r = p != NULL && PyUnicode_Check(root) ? PyUnicode_AsUTF8AndSize(root, &n_root) : NULL;
        if (r == NULL) {
            PyErr_Clear();
            return 0;
        }
        int64_t id = ledger_id_of(p, n_path, r, n_root);
        if (id < 0)
            return 0;
        id_obj = PyLong_FromLongLong(id);
        if (id_obj == NULL)
            return -1;
    } else {
        id_obj = Py_NewRef(ledger_id);
    }

    /* every string first: a value that is not UTF-8 sends the whole row to the Python decoder */
    PyObject *members[MAX_MEMBERS], *keys[MAX_CUSTOM], *values[MAX_CUSTOM];
    int n_members = 0, n_keys = 0, n_values = 0, ok = 1;
    for (int i = 0; ok && i < m.n_members; i++)
        ok = (members[n_members++] = PyUnicode_DecodeUTF8((const char *)m.members[i].s, m.members[i].n, NULL)) != NULL;
    for (int i = 0; ok && i < m.n_custom; i++) {
        ok = (keys[n_keys++] = PyUnicode_DecodeUTF8((const char *)m.keys[i].s, m.keys[i].n, NULL)) != NULL;
        ok = ok && (values[n_values++] = PyUnicode_DecodeUTF8((const char *)m.values[i].s, m.values[i].n, NULL)) != NULL;
    }
    int result = -1;
    if (!ok) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            result = 0;
        }
        goto done;
    }
    PyObject **c = a->refs + SCALARS;
    int pushed = PyList_Append(c[0], id_obj) == 0 && PyList_Append(c[1], path) == 0 &&
                 push(c[2], PyLong_FromLong(3)) &&
                 PyList_Append(c[3], PyTuple_GET_ITEM(a->refs[STATES], m.state - 1)) == 0 &&
                 push(c[4], PyLong_FromLong(m.e)) && push(c[5], PyLong_FromLong(m.q)) &&
                 push(c[6], PyLong_FromLong(m.has_ack ? m.ack : m.q)) &&
                 push(c[7], PyLong_FromLongLong(m.length)) &&
                 push(c[8], PyLong_FromLongLong(m.has_last ? m.last : -1)) &&
                 (m.has_ctime ? push(c[9], PyLong_FromLongLong(m.ctime)) : PyList_Append(c[9], ctime) == 0) &&
                 PyList_Append(c[10], ctime) == 0 && PyList_Append(c[11], mtime) == 0 &&
                 PyList_Append(c[12], version) == 0 &&
                 PyList_Append(c[13], m.has_digest ? PyTuple_GET_ITEM(a->refs[DIGESTS], m.digest - 1) : Py_None) == 0 &&
                 PyList_Append(c[14], Py_None) == 0;
    for (int k = 0; pushed && k < N_CUSTOM_COLUMNS; k++) {
        PyObject *value = Py_None;
        Bytes want = {(const uint8_t *)PyBytes_AS_STRING(a->refs[CUSTOM_KEYS + k]), PyBytes_GET_SIZE(a->refs[CUSTOM_KEYS + k])};
        for (int i = 0; i < m.n_custom; i++) {
            if (same(m.keys[i], want)) {
                value = values[i];
                break;
            }
        }
        pushed = PyList_Append(a->refs[CUSTOM_LISTS + k], value) == 0;
    }
    for (int i = 0; pushed && i < n_members; i++)
        pushed = PyList_Append(a->refs[BOOKIES], members[i]) == 0;
    pushed = pushed && push_ssize(a->refs[BOOKIE_ENDS], PyList_GET_SIZE(a->refs[BOOKIES])) &&
             PyList_Append(a->refs[BOOKIES_NULL], Py_False) == 0;
    for (int i = 0; pushed && i < n_keys; i++)
        pushed = PyList_Append(a->refs[KEYS], keys[i]) == 0 && PyList_Append(a->refs[VALUES], values[i]) == 0;
    pushed = pushed && push_ssize(a->refs[CUSTOM_ENDS], PyList_GET_SIZE(a->refs[KEYS])) &&
             PyList_Append(a->refs[CUSTOM_NULL], Py_False) == 0;
    result = pushed ? 1 : -1; /* only a MemoryError stops it half way */
done:
    Py_DECREF(id_obj);
    for (int i = 0; i < n_members; i++)
        Py_XDECREF(members[i]);
    for (int i = 0; i < n_keys; i++)
        Py_XDECREF(keys[i]);
    for (int i = 0; i < n_values; i++)
        Py_XDECREF(values[i]);
    return result;
}

/* add(path, root, ledger_id, data, ctime, mtime, version) -> bool: the row appended, or False
 * (nothing appended: the caller decodes it in Python). */
static PyObject *appender_add(Appender *a, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7)
        return PyErr_Format(PyExc_TypeError, "add() takes 7 arguments (%zd given)", nargs);
    if (a->refs[DIGESTS] == NULL)
        return PyErr_Format(PyExc_RuntimeError, "Appender used before __init__ succeeded");
    if (!PyBytes_Check(args[3]))
        Py_RETURN_FALSE;
    int rc = add_row(a, args[0], args[1], args[2], (const uint8_t *)PyBytes_AS_STRING(args[3]),
                     PyBytes_GET_SIZE(args[3]), args[4], args[5], args[6]);
    return rc < 0 ? NULL : PyBool_FromLong(rc);
}

static int64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return (int64_t)v;
}

static int32_t be32(const uint8_t *p) { return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]); }

#define GET_DATA 4
#define STAT_SIZE 68 /* czxid mzxid ctime mtime version cversion aversion ephemeralOwner dataLength numChildren pzxid */

/* add_reads(reply, offset, paths, index, root) -> (index, offset, stopped): the rows of a ZooKeeper
 * multiRead reply's getData results (the layout _MultiRead in sources/zookeeper.py reads), paths[index] onwards, starting at byte
 * offset. It stops at the first result it does not take (an error result, or a value add() declines),
 * having appended the rows before it: stopped is True and index/offset point at that result, for the
 * caller to read in Python; else every path was taken. */
static PyObject *appender_add_reads(Appender *a, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5)
        return PyErr_Format(PyExc_TypeError, "add_reads() takes 5 arguments (%zd given)", nargs);
    if (a->refs[DIGESTS] == NULL)
        return PyErr_Format(PyExc_RuntimeError, "Appender used before __init__ succeeded");
    PyObject *reply = args[0], *paths = args[2], *root = args[4];
    Py_ssize_t off = PyLong_AsSsize_t(args[1]), i = PyLong_AsSsize_t(args[3]);
    if ((off == -1 || i == -1) && PyErr_Occurred())
        return NULL;
    if (!PyBytes_Check(reply) || !PyList_Check(paths))
        return PyErr_Format(PyExc_TypeError, "add_reads(): a bytes reply and a list of paths expected");
    const uint8_t *buf = (const uint8_t *)PyBytes_AS_STRING(reply);
    Py_ssize_t size = PyBytes_GET_SIZE(reply), n_paths = PyList_GET_SIZE(paths);
    for (; i < n_paths; i++) {
        if (off < 0 || size - off < 13)
            break;
        const uint8_t *head = buf + off;
        int32_t n = be32(head + 9);
        if (be32(head) != GET_DATA || head[4] != 0 || n < 0 || size - off - 13 < (Py_ssize_t)n + STAT_SIZE)
            break;
        const uint8_t *data = head + 13, *stat = data + n;
        PyObject *ctime = PyLong_FromLongLong(be64(stat + 16));
        PyObject *mtime = PyLong_FromLongLong(be64(stat + 24));
        PyObject *version = PyLong_FromLong(be32(stat + 32));
        int rc = ctime && mtime && version
                     ? add_row(a, PyList_GET_ITEM(paths, i), root, Py_None, data, n, ctime, mtime, version)
                     : -1;
        Py_XDECREF(ctime);
        Py_XDECREF(mtime);
        Py_XDECREF(version);
        if (rc < 0)
            return NULL;
        if (rc == 0)
            break;
        off += 13 + n + STAT_SIZE;
    }
    return Py_BuildValue("(nnO)", i, off, i < n_paths ? Py_True : Py_False);
}

static PyMethodDef appender_methods[] = {
    {"add_reads", (PyCFunction)(void (*)(void))appender_add_reads, METH_FASTCALL,
     "add_reads(reply, offset, paths, index, root) -> (index, offset, stopped): append the rows of a "
     "multiRead reply's getData results until one it does not take."},
    {"add", (PyCFunction)(void (*)(void))appender_add, METH_FASTCALL,
     "add(path, root, ledger_id, data, ctime, mtime, version) -> bool: append one v3 ledger's row "
     "(True), or append nothing (False: decode it in Python)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject AppenderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ledgerlens.formats._ledgerwire.Appender",
    .tp_basicsize = sizeof(Appender),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Appender(scalars, custom_keys, custom_lists, nested, states, digests): v3 ledger metadata "
              "decoded into BK_LEDGERS column lists.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)appender_init,
    .tp_dealloc = (destructor)appender_dealloc,
    .tp_traverse = (traverseproc)appender_traverse,
    .tp_methods = appender_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_ledgerwire", "Compiled decoding of BookKeeper v3 ledger metadata into columns.", -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ledgerwire(void) {
    if (PyType_Ready(&AppenderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Appender", (PyObject *)&AppenderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
