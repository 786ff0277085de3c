/* rankwise.data._walk: one C pass over the groups of a {query: {doc: value}} dict (or {query: [doc, ...]}).

   items(groups, total, values, rank) -> (chars, offsets, scores, hashes) | None

   groups: a list of exact dicts (with values true) or of exact dicts, lists or tuples (keys only);
   total: the number of keys in all of them. Returns the keys' UTF-8 bytes one after another (a bytearray),
   their int32 offsets (a bytearray of total + 1 of them: an Arrow string array's offsets buffer) and, with
   values true, each key's value as a float64 (a bytearray of total doubles), else None in its place, and each
   key's 64-bit hash (a bytearray of total uint64): the hash rankwise.data.columns.string_hashes computes with
   numpy, bit for bit (tests/data/test_walk.py holds them equal).

   With rank true (a scored run) each dict's items come out in rank order, highest score first and, among equal
   scores, the greater doc id (bytes) first: the order rankwise.data.ranking.rank_rows puts them in. The sort is
   only a head start: rank_rows still checks the order (and would fix any row out of it), finding it right
   costs it one pass instead of a sort and a move of every row. A score that is not finite gives None (the
   Python path reports it on the row it was in).

   The walk takes only what it can read exactly as the pure-Python path in rankwise/data/columns.py does:
   keys that are exact str (encodable: no lone surrogate) and values that are floats (or their subclasses),
   exact ints or bools. On anything else (another type, more than 2 GiB of keys) it returns None and the
   caller takes the Python path, which reads every input and words every error; no exception leaves here
   but MemoryError. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static const uint64_t K1 = 0x9E3779B97F4A7C15ULL;
static const uint64_t FACTORS[6] = {0xC2B2AE3D27D4EB4FULL, 0x165667B19E3779F9ULL, 0xBF58476D1CE4E5B9ULL,
                                    0x94D049BB133111EBULL, 0xFF51AFD7ED558CCDULL, 0xC4CEB9FE1A85EC53ULL};

/* 8 bytes as a little-endian word */
static uint64_t word_at(const char *s) {
    uint64_t w;
    memcpy(&w, s, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

/* string_hashes' hash: the first word (a shorter string zero-padded) times K1, XOR each further word (the last
   one overlapping the one before) times its own constant */
static uint64_t hash_of(const char *s, Py_ssize_t len) {
    uint64_t h = 0;
    if (len >= 8) {
        h = word_at(s);
    } else {
        for (Py_ssize_t i = 0; i < len; i++) h |= (uint64_t)(unsigned char)s[i] << (8 * i);
    }
    h *= K1;
    for (Py_ssize_t at = 8; at < len; at += 8) {
        Py_ssize_t pos = len <= at + 8 ? len - 8 : at;
        h ^= word_at(s + pos) * FACTORS[(at / 8) % 6];
    }
    return h;
}

/* the bytes of one key, or NULL (with no error set) when the key is not for this walk */
static const char *key_bytes(PyObject *key, Py_ssize_t *len) {
    if (!PyUnicode_CheckExact(key)) return NULL;
    if (PyUnicode_IS_ASCII(key)) {
        *len = PyUnicode_GET_LENGTH(key);
        return (const char *)PyUnicode_DATA(key);
    }
    const char *s = PyUnicode_AsUTF8AndSize(key, len);
    if (s == NULL) PyErr_Clear(); /* a lone surrogate: the Python path says so */
    return s;
}

/* a value as a double; 0 when it is not for this walk (no error set) */
static int value_of(PyObject *v, double *out) {
    if (PyFloat_Check(v)) {
        *out = PyFloat_AS_DOUBLE(v);
        return 1;
    }
    if (PyLong_CheckExact(v) || PyBool_Check(v)) {
        double x = PyLong_AsDouble(v);
        if (x == -1.0 && PyErr_Occurred()) { /* too large for a double */
            PyErr_Clear();
            return 0;
        }
        *out = x;
        return 1;
    }
    return 0;
}

/* one item of a dict being ranked */
typedef struct {
    const char *s;
    Py_ssize_t len;
    double score;
} Item;

/* a goes before b: the higher score, then the greater doc id by bytes (no two doc ids of a dict are equal) */
static inline int before(const Item *a, const Item *b) {
    if (a->score != b->score) return a->score > b->score;
    size_t n = (size_t)(a->len < b->len ? a->len : b->len);
    int c = memcmp(a->s, b->s, n);
    return c != 0 ? c > 0 : a->len > b->len;
}

/* a stable merge sort of items[0..n) by before(), with runs of 32 sorted by insertion first */
static void sort_items(Item *items, Item *spare, Py_ssize_t n) {
    for (Py_ssize_t lo = 0; lo < n; lo += 32) {
        Py_ssize_t hi = lo + 32 < n ? lo + 32 : n;
        for (Py_ssize_t i = lo + 1; i < hi; i++) {
            Item x = items[i];
            Py_ssize_t j = i;
            for (; j > lo && before(&x, &items[j - 1]); j--) items[j] = items[j - 1];
            items[j] = x;
        }
    }
    Item *from = items, *to = spare;
    for (Py_ssize_t width = 32; width < n; width *= 2) {
        for (Py_ssize_t lo = 0; lo < n; lo += 2 * width) {
            Py_ssize_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            Py_ssize_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) to[k++] = before(&from[j], &from[i]) ? from[j++] : from[i++];
            while (i < mid) to[k++] = from[i++];
            while (j < hi) to[k++] = from[j++];
        }
        Item *t = from;
        from = to;
        to = t;
    }
    if (from != items) memcpy(items, from, (size_t)n * sizeof(Item));
}

typedef struct {
    PyObject *chars;   /* bytearray, grown as keys come */
    Py_ssize_t used;
    int32_t *offsets;  /* total + 1 */
    double *scores;    /* total, or NULL */
    uint64_t *hashes;  /* total */
    Py_ssize_t row, total;
    Item *items, *spare; /* rank: one dict's items, and room to sort them */
    Py_ssize_t room;
} Walk;

/* append one key's bytes; 1 on success, 0 to give up (no error), -1 on MemoryError */
static int append_bytes(Walk *w, const char *s, Py_ssize_t len) {
    if (w->row >= w->total) return 0;
    if (w->used + len > INT32_MAX) return 0; /* past 32-bit offsets: Arrow's own builder decides */
    Py_ssize_t have = PyByteArray_GET_SIZE(w->chars);
    if (w->used + len > have) {
        Py_ssize_t want = have * 2 > w->used + len ? have * 2 : w->used + len;
        if (PyByteArray_Resize(w->chars, want) < 0) return -1;
    }
    memcpy(PyByteArray_AS_STRING(w->chars) + w->used, s, (size_t)len);
    w->hashes[w->row] = hash_of(s, len);
    w->used += len;
    w->offsets[++w->row] = (int32_t)w->used;
    return 1;
}

/* append one key (and its value) */
static int append(Walk *w, PyObject *key, PyObject *value) {
    Py_ssize_t len;
    const char *s = key_bytes(key, &len);
    if (s == NULL || w->row >= w->total) return 0;
    if (w->scores != NULL && !value_of(value, &w->scores[w->row])) return 0;
    return append_bytes(w, s, len);
}

/* append a dict's items in rank order */
static int append_ranked(Walk *w, PyObject *group) {
    Py_ssize_t m = PyDict_GET_SIZE(group), pos = 0, i = 0;
    if (m > w->room) {
        Item *items = PyMem_Realloc(w->items, (size_t)m * sizeof(Item));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        w->items = items;
        Item *spare = PyMem_Realloc(w->spare, (size_t)m * sizeof(Item));
        if (spare == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        w->spare = spare;
        w->room = m;
    }
    PyObject *key, *value;
    int ranked = 1;
    while (PyDict_Next(group, &pos, &key, &value)) {
        Item *it = &w->items[i];
        it->s = key_bytes(key, &it->len);
        if (it->s == NULL || !value_of(value, &it->score) || !isfinite(it->score)) return 0;
        if (i > 0 && ranked && before(it, it - 1)) ranked = 0;
        i++;
    }
    if (!ranked) sort_items(w->items, w->spare, m);
    for (i = 0; i < m; i++) {
        if (w->row >= w->total) return 0;
        w->scores[w->row] = w->items[i].score;
        int ok = append_bytes(w, w->items[i].s, w->items[i].len);
        if (ok != 1) return ok;
    }
    return 1;
}

static int walk_group(Walk *w, PyObject *group) {
    if (w->items != NULL && PyDict_CheckExact(group)) return append_ranked(w, group);
    if (PyDict_CheckExact(group)) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(group, &pos, &key, &value)) {
            int ok = append(w, key, value);
            if (ok != 1) return ok;
        }
        return 1;
    }
    if (w->scores == NULL && (PyList_CheckExact(group) || PyTuple_CheckExact(group))) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(group);
        PyObject **keys = PySequence_Fast_ITEMS(group);
        for (Py_ssize_t i = 0; i < n; i++) {
            int ok = append(w, keys[i], NULL);
            if (ok != 1) return ok;
        }
        return 1;
    }
    return 0;
}

static PyObject *items(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *groups;
    Py_ssize_t total;
    int with_values, rank;
    if (!PyArg_ParseTuple(args, "O!npp", &PyList_Type, &groups, &total, &with_values, &rank)) return NULL;
    if (rank && !with_values) Py_RETURN_NONE;
    if (total < 0 || total >= INT32_MAX) Py_RETURN_NONE;
    Walk w = {0};
    PyObject *offsets = PyByteArray_FromStringAndSize(NULL, (total + 1) * (Py_ssize_t)sizeof(int32_t));
    PyObject *scores = with_values ? PyByteArray_FromStringAndSize(NULL, total * (Py_ssize_t)sizeof(double)) : NULL;
    PyObject *hashes = PyByteArray_FromStringAndSize(NULL, total * (Py_ssize_t)sizeof(uint64_t));
    /* a first guess at the keys' bytes; untouched pages cost nothing, the rest grows by doubling */
    PyObject *chars = PyByteArray_FromStringAndSize(NULL, total * 12 + 64);
    PyObject *result = NULL;
    if (offsets == NULL || chars == NULL || hashes == NULL || (with_values && scores == NULL)) goto done;
    w.chars = chars;
    w.offsets = (int32_t *)PyByteArray_AS_STRING(offsets);
    w.scores = with_values ? (double *)PyByteArray_AS_STRING(scores) : NULL;
    w.hashes = (uint64_t *)PyByteArray_AS_STRING(hashes);
    w.total = total;
    if (rank && (w.items = PyMem_Malloc(sizeof(Item))) == NULL) { /* (items set: the walk ranks) */
        PyErr_NoMemory();
        goto done;
    }
    w.offsets[0] = 0;
    Py_ssize_t n = PyList_GET_SIZE(groups);
    for (Py_ssize_t g = 0; g < n; g++) {
        int ok = walk_group(&w, PyList_GET_ITEM(groups, g));
        if (ok < 0) goto done;
        if (ok == 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    if (w.row != total) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (PyByteArray_Resize(chars, w.used) < 0) goto done;
    result = Py_BuildValue("OOOO", chars, offsets, with_values ? scores : Py_None, hashes);
done:
    PyMem_Free(w.items);
    PyMem_Free(w.spare);
    Py_XDECREF(hashes);
    Py_XDECREF(chars);
    Py_XDECREF(offsets);
    Py_XDECREF(scores);
    return result;
}

static PyMethodDef methods[] = {
    {"items", items, METH_VARARGS,
     "items(groups, total, values, rank) -> (chars, offsets, scores, hashes) | None: the keys (and values) of every group."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_walk", "One C pass over a dict of dicts.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__walk(void) { return PyModule_Create(&module); }
