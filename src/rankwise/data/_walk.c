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

   ranked_rows(qcodes, offsets, chunks, scores, threads=1) -> (chars, str_offsets, scores, hashes, order) | None

   The rows of a table read from a file, in any order, grouped by query and ranked, in one pass: qcodes (int32,
   each row's query code), offsets (int64, the first row of each query once grouped, and the total), chunks
   (the doc-id column's string chunks, each (offsets buffer, data buffer, offset, length)) and scores (float64).
   Returns the doc ids, scores and hashes in rank order (within a query: score, then doc id, descending; rows
   equal in both keep the file's order) and the row each came from (int32). None when the doc ids' bytes pass
   2 GiB (or the rows 2**31). As for a dict, rank_rows checks the order it is handed. The pass runs without the GIL; with threads
   above 1 the queries are split into that many ranges of about equal rows (the doc ids' bytes of each range
   counted while grouping, so each knows where its output starts) and each range is ranked on a thread of its
   own, byte for byte what one thread writes.

   encode_ids(chunks, threads=1) -> (codes, firsts, counts) | None

   A string column's ids (chunks as for ranked_rows) numbered in order of first appearance, as Arrow's
   dictionary encoding numbers them: each row's code (int32), each code's first row and its rows (int64). One
   open-addressing hash table per thread over its part of the rows (an id of 8 bytes or fewer compared in the
   slot itself, a longer one by its hash and then byte for byte), the tables then merged in order. None past
   2**31 rows. A shuffled run's query column: rankwise.data.ranking groups it with this.

   join_grades(run, per_query, qrels, matrix, threads=1) -> bool

   The relevance matrix's cells of a run's judged rows, one query at a time: run = (sorted row keys, the
   run's query offsets, query bits, row bits, the doc-id chunk), per_query = (each run query's matrix row or
   -1, its qrels query or -1, each matrix row's length), qrels = (offsets, doc hashes, the doc-id chunk,
   grades), matrix = (grades int64, judged bool, pooled bool: written in place). Each judgement is looked up
   by binary search among its query's keys (a few hundred bytes), every key sharing its prefix confirmed on
   the doc id's bytes (hashes that collide never join), and its cells written as rankwise.metrics.matrix.join's
   numpy path writes them. False (nothing written) for inputs it does not take: doc ids in more than one
   chunk, or keys with no hash bits.

   census(data, threads=1) -> (flags, lines)

   Which bytes and pairs of bytes data holds, as flags (rankwise.data.compiled names them): 1 a CR, 2 a byte
   from 0x80, 4 a tab, 8 a space, 16 a VT or FF, 32 a space beside a space or an LF, 64 a tab beside a tab or
   an LF; and how many LF bytes (a --stream piece's lines). One pass, 16 bytes at a time (SSE2 where the compiler has it), on two threads from 1 MiB, without
   the GIL. rankwise.data.text.read_lines takes a mapped file only with neither of the first two, and
   rankwise.data.trec.unsplittable reads from the same flags what the fast reader must not meet (another
   whitespace byte, an empty field).

   The walk takes only what it can read exactly as the pure-Python path in rankwise/data/columns.py does:
   keys that are exact str (encodable: no lone surrogate) and values that are floats (or their subclasses),
   exact ints or bools. On anything else (another type, more than 2 GiB of keys) it returns None and the
   caller takes the Python path, which reads every input and words every error; no exception leaves here
   but MemoryError. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#ifndef AHEAD
#define AHEAD 16 /* rows ahead a random read is asked for (__builtin_prefetch) */
#endif
#include <stdint.h>
#include <string.h>
#ifndef _WIN32
#include <pthread.h>
#define RANKWISE_THREADS
#endif
#define MAX_THREADS 16 /* threads at most */
#ifdef __SSE2__
#include <emmintrin.h>
#endif

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
    int64_t row; /* ranked_rows: the row's number in the table */
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

/* the order of a score, as an integer: a higher score, a smaller key (-0.0 is 0.0) */
static inline uint64_t descending_key(double score) {
    uint64_t bits;
    if (score == 0.0) score = 0.0;
    memcpy(&bits, &score, 8);
    bits = (bits >> 63) ? ~bits : bits ^ 0x8000000000000000ULL; /* ascending with the score */
    return ~bits;
}

typedef struct {
    uint64_t key;
    Py_ssize_t at; /* the item's place before the sort */
} Keyed;

/* room to sort up to `room` items: the items, a spare copy and the radix sort's keys; grown as lists come,
   freed once. Raw allocations: ranked_rows sorts with the GIL released. */
typedef struct {
    Item *items, *spare;
    Keyed *a, *b;
    Py_ssize_t room;
} Scratch;

/* *at reallocated to `size` bytes (raw: no GIL needed); -1, *at kept, when memory runs out */
static int resize(void *at, size_t size) {
    void *moved = PyMem_RawRealloc(*(void **)at, size);
    if (moved == NULL) return -1;
    *(void **)at = moved;
    return 0;
}

/* room for m items; -1 when memory runs out (no error set: the caller sets it, holding the GIL) */
static int grow(Scratch *s, Py_ssize_t m) {
    if (m <= s->room) return 0;
    if (resize(&s->items, (size_t)m * sizeof(Item)) < 0 || resize(&s->spare, (size_t)m * sizeof(Item)) < 0
        || resize(&s->a, (size_t)m * sizeof(Keyed)) < 0 || resize(&s->b, (size_t)m * sizeof(Keyed)) < 0)
        return -1;
    s->room = m;
    return 0;
}

static void release_scratch(Scratch *s) {
    PyMem_RawFree(s->items);
    PyMem_RawFree(s->spare);
    PyMem_RawFree(s->a);
    PyMem_RawFree(s->b);
}

/* items[0..n) by before(), for long lists: an LSD radix sort of (descending score key, place) by bytes,
   passes whose byte all keys share skipped, then each run of equal scores put in doc-id order by insertion
   (stable: rows equal in both keep their order). n <= s->room. */
static void radix_sort_items(Scratch *s, Item *items, Py_ssize_t n) {
    Keyed *a = s->a, *b = s->b;
    Item *spare = s->spare;
    for (Py_ssize_t i = 0; i < n; i++) {
        a[i].key = descending_key(items[i].score);
        a[i].at = i;
    }
    for (int shift = 0; shift < 64; shift += 8) {
        Py_ssize_t count[256] = {0};
        for (Py_ssize_t i = 0; i < n; i++) count[(a[i].key >> shift) & 0xFF]++;
        if (count[(a[0].key >> shift) & 0xFF] == n) continue; /* every key has this byte */
        Py_ssize_t sum = 0;
        for (int d = 0; d < 256; d++) {
            Py_ssize_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (Py_ssize_t i = 0; i < n; i++) b[count[(a[i].key >> shift) & 0xFF]++] = a[i];
        Keyed *t = a;
        a = b;
        b = t;
    }
    for (Py_ssize_t i = 0; i < n; i++) spare[i] = items[a[i].at];
    memcpy(items, spare, (size_t)n * sizeof(Item));
    for (Py_ssize_t i = 1; i < n; i++) { /* equal scores: doc id descending */
        if (items[i].score != items[i - 1].score) continue;
        Item x = items[i];
        Py_ssize_t j = i;
        for (; j > 0 && items[j - 1].score == x.score && before(&x, &items[j - 1]); j--) items[j] = items[j - 1];
        items[j] = x;
    }
}

/* items[0..n) by before() (n <= s->room): from 64 items a radix sort (its passes do not branch on the data,
   a merge sort mispredicts about every other comparison), below a merge sort */
static void rank_items(Scratch *s, Item *items, Py_ssize_t n) {
    if (n >= 64)
        radix_sort_items(s, items, n);
    else
        sort_items(items, s->spare, n);
}

/* the list items[0..n) in rank order: checked first (most lists come ranked), sorted only when out of it */
static void put_in_rank(Scratch *s, Item *items, Py_ssize_t n) {
    for (Py_ssize_t i = 1; i < n; i++) {
        if (before(&items[i], &items[i - 1])) {
            rank_items(s, items, n);
            return;
        }
    }
}

typedef struct {
    PyObject *chars;   /* bytearray, grown as keys come */
    Py_ssize_t used;
    int32_t *offsets;  /* total + 1 */
    double *scores;    /* total, or NULL */
    uint64_t *hashes;  /* total */
    Py_ssize_t row, total;
    int rank;            /* lay each dict out in rank order */
    Scratch scratch;     /* rank: one dict's items, and room to sort them */
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
    if (grow(&w->scratch, m) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    Item *items = w->scratch.items;
    PyObject *key, *value;
    while (PyDict_Next(group, &pos, &key, &value)) {
        Item *it = &items[i++];
        it->s = key_bytes(key, &it->len);
        if (it->s == NULL || !value_of(value, &it->score) || !isfinite(it->score)) return 0;
    }
    put_in_rank(&w->scratch, items, m);
    for (i = 0; i < m; i++) {
        if (w->row >= w->total) return 0;
        w->scores[w->row] = items[i].score;
        int ok = append_bytes(w, items[i].s, items[i].len);
        if (ok != 1) return ok;
    }
    return 1;
}

static int walk_group(Walk *w, PyObject *group) {
    if (w->rank && PyDict_CheckExact(group)) return append_ranked(w, group);
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
    w.rank = rank;
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
    release_scratch(&w.scratch);
    Py_XDECREF(hashes);
    Py_XDECREF(chars);
    Py_XDECREF(offsets);
    Py_XDECREF(scores);
    return result;
}

/* a read-only buffer of at least `need` bytes, or -1 with an error set */
static int get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t need) {
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) return -1;
    if (view->len < need) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "ranked_rows: a buffer is shorter than its array");
        return -1;
    }
    return 0;
}

typedef struct {
    const int32_t *offsets; /* the chunk's own offsets, from its first row */
    const char *data;
    int64_t first;          /* the table row of its first row */
} Chunk;

/* a string column's chunks, each (offsets buffer, data buffer, offset, length), into chunks[0..n) with
   chunks[n].first the rows in all; their buffers held in cb (two a chunk, *held of them taken) and their
   bytes in all added to *size. -1 with an error set. */
static int read_chunks(PyObject *list, Py_buffer *cb, Py_ssize_t *held, Chunk *chunks, int64_t *size) {
    Py_ssize_t n_chunks = PyList_GET_SIZE(list);
    int64_t rows = 0;
    for (Py_ssize_t c = 0; c < n_chunks; c++) {
        PyObject *obuf, *dbuf;
        Py_ssize_t off, len;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(list, c), "OOnn", &obuf, &dbuf, &off, &len)) return -1;
        if (off < 0 || len < 0) {
            PyErr_SetString(PyExc_ValueError, "a chunk's offset or length is negative");
            return -1;
        }
        if (get_buffer(obuf, &cb[*held], (off + len + 1) * (Py_ssize_t)sizeof(int32_t)) < 0) return -1;
        chunks[c].offsets = (const int32_t *)cb[(*held)++].buf + off;
        if (PyObject_GetBuffer(dbuf, &cb[*held], PyBUF_SIMPLE) < 0) return -1;
        chunks[c].data = cb[(*held)++].buf;
        if (chunks[c].offsets[len] > cb[*held - 1].len || chunks[c].offsets[0] < 0) {
            PyErr_SetString(PyExc_ValueError, "offsets past a chunk's data");
            return -1;
        }
        chunks[c].first = rows;
        rows += len;
        *size += chunks[c].offsets[len] - chunks[c].offsets[0];
    }
    chunks[n_chunks].first = rows;
    return 0;
}

/* what every range of queries reads and writes */
typedef struct {
    const int64_t *offsets; /* the first row of each query once grouped, and the total */
    const double *scores;
    const Chunk *chunks;
    const int32_t *block_chunk; /* the chunk of every 4096th row */
    int32_t *order;         /* in: the rows grouped by query; out: the row each ranked one came from */
    char *chars;
    int32_t *str_offsets;
    double *out_scores;
    uint64_t *hashes;
} Table;

/* the queries [q_lo, q_hi) of a table, ranked by one thread into its own part of the outputs */
typedef struct {
    const Table *t;
    Py_ssize_t q_lo, q_hi;
    int64_t used;           /* where its doc ids' bytes start */
    int failed;             /* memory ran out */
} Range;

/* rank a range of queries a batch at a time (about 64k rows): each gather a loop of its own over the batch,
   so the machine has many independent reads in flight, then each query sorted where it lies, then written */
static void *rank_range(void *arg) {
    Range *r = arg;
    const Table *t = r->t;
    const int64_t *offsets = t->offsets;
    const Chunk *chunks = t->chunks;
    Scratch s = {0};
    int64_t used = r->used;
    for (Py_ssize_t q0 = r->q_lo, q1; q0 < r->q_hi; q0 = q1) {
        q1 = q0 + 1;
        while (q1 < r->q_hi && offsets[q1 + 1] - offsets[q0] <= 65536) q1++;
        Py_ssize_t lo = offsets[q0], m = offsets[q1] - lo;
        if (grow(&s, m) < 0) {
            r->failed = 1;
            break;
        }
        Item *items = s.items;
        const int32_t *rows = t->order + lo;
        for (Py_ssize_t i = 0; i < m; i++) {
            if (i + AHEAD < m) __builtin_prefetch(&t->scores[rows[i + AHEAD]]);
            items[i].row = rows[i];
            items[i].score = t->scores[rows[i]];
        }
        for (Py_ssize_t i = 0; i < m; i++) {
            int64_t row = items[i].row;
            if (i + AHEAD < m) { /* (the chunk of the row's block: nearly always the row's own) */
                int64_t ahead = items[i + AHEAD].row;
                const Chunk *guess = &chunks[t->block_chunk[ahead >> 12]];
                __builtin_prefetch(guess->offsets + (ahead - guess->first));
            }
            Py_ssize_t c = t->block_chunk[row >> 12];
            while (chunks[c + 1].first <= row) c++;
            const int32_t *o = chunks[c].offsets + (row - chunks[c].first);
            items[i].s = chunks[c].data + o[0];
            items[i].len = o[1] - o[0];
        }
        for (Py_ssize_t q = q0; q < q1; q++) put_in_rank(&s, items + (offsets[q] - lo), offsets[q + 1] - offsets[q]);
        for (Py_ssize_t i = 0; i < m; i++) {
            Item *it = &items[i];
            if (i + AHEAD < m) __builtin_prefetch(items[i + AHEAD].s);
            memcpy(t->chars + used, it->s, (size_t)it->len);
            t->hashes[lo + i] = hash_of(it->s, it->len);
            used += it->len;
            t->str_offsets[lo + i + 1] = (int32_t)used;
            t->out_scores[lo + i] = it->score;
            t->order[lo + i] = (int32_t)it->row;
        }
    }
    release_scratch(&s);
    return NULL;
}

/* work(parts[i]) for i < n: parts 1.. on threads of their own where there are threads, part 0 on this one (a
   part whose thread could not be started too) */
static void on_threads(void *(*work)(void *), void *parts, size_t size, int n) {
    char *at = parts;
#ifdef RANKWISE_THREADS
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int i = 1; i < n; i++) started[i] = pthread_create(&ids[i], NULL, work, at + i * size) == 0;
    work(at);
    for (int i = 1; i < n; i++) {
        if (started[i])
            pthread_join(ids[i], NULL);
        else
            work(at + i * size);
    }
#else
    for (int i = 0; i < n; i++) work(at + i * size);
#endif
}

/* rank the ranges, each on a thread of its own; -1 when memory ran out in one */
static int rank_ranges(Range *ranges, int n_ranges) {
    on_threads(rank_range, ranges, sizeof(Range), n_ranges);
    for (int i = 0; i < n_ranges; i++)
        if (ranges[i].failed) return -1;
    return 0;
}

/* group the rows by query (a counting sort into t->order, stable: the file's order within a query), and
   split the queries into n_ranges ranges of about equal rows, each told where its doc ids' bytes start;
   -1 on a query code outside the offsets */
static int group_by_code(const Table *t, const int32_t *qcodes, Py_ssize_t n, Py_ssize_t n_queries, Py_ssize_t n_chunks,
                      int64_t *cursor, int64_t *qbytes, Range *ranges, int n_ranges) {
    const int64_t *offsets = t->offsets;
    memcpy(cursor, offsets, (size_t)(n_queries + 1) * sizeof(int64_t));
    for (Py_ssize_t c = 0; c < n_chunks; c++) {
        const int32_t *o = t->chunks[c].offsets;
        int64_t first = t->chunks[c].first, len = t->chunks[c + 1].first - first;
        for (int64_t j = 0; j < len; j++) {
            int32_t q = qcodes[first + j];
            if (q < 0 || q >= n_queries || cursor[q] >= offsets[q + 1]) return -1;
            t->order[cursor[q]++] = (int32_t)(first + j);
            if (qbytes != NULL) qbytes[q] += o[j + 1] - o[j];
        }
    }
    Py_ssize_t q = 0;
    int64_t used = 0;
    for (int i = 0; i < n_ranges; i++) {
        ranges[i].t = t;
        ranges[i].q_lo = q;
        ranges[i].used = used;
        int64_t end = i + 1 == n_ranges ? n : n * (i + 1) / n_ranges;
        for (; q < n_queries && (i + 1 == n_ranges || offsets[q + 1] <= end); q++)
            if (qbytes != NULL) used += qbytes[q];
        ranges[i].q_hi = q;
    }
    return 0;
}

static PyObject *ranked_rows(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *qcodes_obj, *offsets_obj, *chunks_obj, *scores_obj;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "OOO!O|i", &qcodes_obj, &offsets_obj, &PyList_Type, &chunks_obj, &scores_obj,
                          &threads))
        return NULL;
    Py_ssize_t n_chunks = PyList_GET_SIZE(chunks_obj);
    Py_buffer qb = {0}, ob = {0}, sb = {0};
    Py_buffer *cb = PyMem_Calloc((size_t)(2 * n_chunks + 1), sizeof(Py_buffer));
    Chunk *chunks = PyMem_Calloc((size_t)(n_chunks + 1), sizeof(Chunk));
    int64_t *cursor = NULL, *qbytes = NULL;
    int32_t *block_chunk = NULL;
    PyObject *chars = NULL, *str_offsets = NULL, *scores_out = NULL, *hashes = NULL, *order = NULL, *result = NULL;
    Py_ssize_t held = 0;
    if (cb == NULL || chunks == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (PyObject_GetBuffer(qcodes_obj, &qb, PyBUF_SIMPLE) < 0) goto done;
    if (PyObject_GetBuffer(offsets_obj, &ob, PyBUF_SIMPLE) < 0) goto done;
    Py_ssize_t n = qb.len / (Py_ssize_t)sizeof(int32_t), n_queries = ob.len / (Py_ssize_t)sizeof(int64_t) - 1;
    if (get_buffer(scores_obj, &sb, n * (Py_ssize_t)sizeof(double)) < 0) goto done;
    const int64_t *offsets = ob.buf;
    int64_t size = 0; /* the doc ids' bytes in all */
    if (read_chunks(chunks_obj, cb, &held, chunks, &size) < 0) goto done;
    int64_t rows = chunks[n_chunks].first;
    if (rows != n || n_queries < 0 || offsets[n_queries] != n) {
        PyErr_SetString(PyExc_ValueError, "ranked_rows: columns of different lengths");
        goto done;
    }
    if (size > INT32_MAX || n > INT32_MAX) { /* (32-bit offsets and row numbers) */
        result = Py_NewRef(Py_None);
        goto done;
    }
    int n_ranges = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
    chars = PyByteArray_FromStringAndSize(NULL, size);
    str_offsets = PyByteArray_FromStringAndSize(NULL, (n + 1) * (Py_ssize_t)sizeof(int32_t));
    scores_out = PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(double));
    hashes = PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(uint64_t));
    order = PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
    if (chars == NULL || str_offsets == NULL || scores_out == NULL || hashes == NULL || order == NULL) goto done;
    cursor = PyMem_Malloc((size_t)(n_queries + 1) * sizeof(int64_t));
    qbytes = n_ranges > 1 ? PyMem_Calloc((size_t)n_queries + 1, sizeof(int64_t)) : NULL;
    Py_ssize_t n_blocks = (n >> 12) + 1;
    block_chunk = PyMem_Malloc((size_t)n_blocks * sizeof(int32_t));
    if (cursor == NULL || block_chunk == NULL || (n_ranges > 1 && qbytes == NULL)) {
        PyErr_NoMemory();
        goto done;
    }
    /* which chunk holds a row: the chunk of every 4096th row, then a step or two forward */
    for (Py_ssize_t b = 0, c = 0; b < n_blocks; b++) {
        while (c + 1 < n_chunks && chunks[c + 1].first <= ((int64_t)b << 12)) c++;
        block_chunk[b] = (int32_t)c;
    }
    Table table = {offsets, sb.buf, chunks, block_chunk, (int32_t *)PyByteArray_AS_STRING(order),
                   PyByteArray_AS_STRING(chars), (int32_t *)PyByteArray_AS_STRING(str_offsets),
                   (double *)PyByteArray_AS_STRING(scores_out), (uint64_t *)PyByteArray_AS_STRING(hashes)};
    table.str_offsets[0] = 0;
    Range ranges[MAX_THREADS];
    memset(ranges, 0, sizeof(ranges));
    int grouped, ranked = 0;
    Py_BEGIN_ALLOW_THREADS
    grouped = group_by_code(&table, qb.buf, n, n_queries, n_chunks, cursor, qbytes, ranges, n_ranges);
    if (grouped == 0) ranked = rank_ranges(ranges, n_ranges);
    Py_END_ALLOW_THREADS
    if (grouped < 0) {
        PyErr_SetString(PyExc_ValueError, "ranked_rows: a query code outside the offsets");
        goto done;
    }
    if (ranked < 0) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_BuildValue("OOOOO", chars, str_offsets, scores_out, hashes, order);
done:
    for (Py_ssize_t i = 0; i < held; i++) PyBuffer_Release(&cb[i]);
    if (qb.obj) PyBuffer_Release(&qb);
    if (ob.obj) PyBuffer_Release(&ob);
    if (sb.obj) PyBuffer_Release(&sb);
    PyMem_Free(cb);
    PyMem_Free(chunks);
    PyMem_Free(cursor);
    PyMem_Free(qbytes);
    PyMem_Free(block_chunk);
    Py_XDECREF(chars);
    Py_XDECREF(str_offsets);
    Py_XDECREF(scores_out);
    Py_XDECREF(hashes);
    Py_XDECREF(order);
    return result;
}

/* encode_ids: a string column coded by a hash table, each id numbered in order of first appearance */

/* an id as the table keeps it */
typedef struct {
    uint64_t word; /* 8 bytes or fewer: the id's bytes, zero-padded (little-endian, as hash_of reads them); longer:
                      its hash */
    uint32_t len;
    uint32_t at;   /* longer than 8 bytes: where its bytes start in the arena */
} Key;

/* a slot of the table: a code's key beside it (one read finds an id of 8 bytes or fewer) */
typedef struct {
    uint64_t word;
    uint32_t len;
    uint32_t code1;   /* code + 1, or 0 for an empty slot */
} Slot;

/* the distinct ids of a column (or of a part of it), each with its first row and its rows */
typedef struct {
    Slot *slots;      /* 2**bits of them, at most half full */
    int bits;
    Key *keys;        /* per code */
    int64_t *first, *count;
    Py_ssize_t n, room;
    char *arena;      /* the bytes of the ids longer than 8 */
    size_t used, arena_room;
} Memo;

static void release_memo(Memo *m) {
    PyMem_RawFree(m->slots);
    PyMem_RawFree(m->keys);
    PyMem_RawFree(m->first);
    PyMem_RawFree(m->count);
    PyMem_RawFree(m->arena);
}

/* an id of 8 bytes or fewer, zero-padded */
static inline uint64_t short_word(const char *s, Py_ssize_t len) {
    if (len == 8) return word_at(s);
    uint64_t w = 0;
    for (Py_ssize_t i = 0; i < len; i++) w |= (uint64_t)(unsigned char)s[i] << (8 * i);
    return w;
}

static inline uint64_t key_hash(const Key *k) { return k->len <= 8 ? k->word * K1 : k->word; }

/* the slot of a hash in a table of 2**bits: its bits mixed again first (a --stream partition holds ids whose
   hashes share their top bits, string_hashes' bits it was cut by) */
static inline uint64_t slot_of(uint64_t h, int bits) { return (h * 0xD6E8FEB86659FD93ULL) >> (64 - bits); }

/* the table's slots made anew at 2**bits; -1 when memory runs out (the old ones kept) */
static int resize_slots(Memo *m, int bits) {
    Slot *slots = PyMem_RawCalloc((size_t)1 << bits, sizeof(Slot));
    if (slots == NULL) return -1;
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    for (Py_ssize_t c = 0; c < m->n; c++) {
        uint64_t i = slot_of(key_hash(&m->keys[c]), bits);
        while (slots[i].code1 != 0) i = (i + 1) & mask;
        slots[i] = (Slot){m->keys[c].word, m->keys[c].len, (uint32_t)(c + 1)};
    }
    PyMem_RawFree(m->slots);
    m->slots = slots;
    m->bits = bits;
    return 0;
}

/* room for one more code (and `len` more arena bytes); -1 when memory runs out */
static int memo_room(Memo *m, Py_ssize_t len) {
    if (m->n + 1 > m->room) {
        Py_ssize_t room = m->room ? 2 * m->room : 1024;
        if (resize(&m->keys, (size_t)room * sizeof(Key)) < 0 || resize(&m->first, (size_t)room * sizeof(int64_t)) < 0
            || resize(&m->count, (size_t)room * sizeof(int64_t)) < 0)
            return -1;
        m->room = room;
    }
    if (len > 8 && m->used + (size_t)len > m->arena_room) {
        size_t room = m->arena_room ? 2 * m->arena_room : 65536;
        while (room < m->used + (size_t)len) room *= 2;
        if (resize(&m->arena, room) < 0) return -1;
        m->arena_room = room;
    }
    if ((m->n + 1) * 2 > ((Py_ssize_t)1 << m->bits)) return resize_slots(m, m->bits + 1);
    return 0;
}

/* the code of an id (added, first seen at `row`, when new), its rows counted `count` more; -1 when memory runs
   out */
/* an id's hash, as string_hashes computes it (an id of 8 bytes or fewer: its zero-padded word times K1) */
static inline uint64_t id_hash(const char *s, Py_ssize_t len) { return len <= 8 ? short_word(s, len) * K1 : hash_of(s, len); }

static int64_t memo_code(Memo *m, const char *s, Py_ssize_t len, uint64_t h, int64_t row, int64_t count) {
    uint64_t word = len <= 8 ? short_word(s, len) : h;
    uint64_t mask = ((uint64_t)1 << m->bits) - 1, i = slot_of(h, m->bits);
    for (;; i = (i + 1) & mask) {
        const Slot *slot = &m->slots[i];
        uint32_t c1 = slot->code1;
        if (c1 == 0) break;
        if (slot->word == word && slot->len == (uint32_t)len
            && (len <= 8 || memcmp(m->arena + m->keys[c1 - 1].at, s, (size_t)len) == 0)) {
            m->count[c1 - 1] += count;
            return c1 - 1;
        }
    }
    if (memo_room(m, len) < 0) return -1;
    mask = ((uint64_t)1 << m->bits) - 1; /* (the slots may have been made anew: the empty one found again) */
    for (i = slot_of(h, m->bits); m->slots[i].code1 != 0; i = (i + 1) & mask) {}
    Py_ssize_t c = m->n++;
    m->keys[c] = (Key){word, (uint32_t)len, (uint32_t)m->used};
    if (len > 8) {
        memcpy(m->arena + m->used, s, (size_t)len);
        m->used += (size_t)len;
    }
    m->first[c] = row;
    m->count[c] = count;
    m->slots[i] = (Slot){word, (uint32_t)len, (uint32_t)(c + 1)};
    return c;
}

/* rows [lo, hi) of a column, coded against a memo of their own by one thread */
typedef struct {
    const Chunk *chunks;
    int64_t lo, hi;
    int32_t *codes;
    Memo memo;
    int failed;
} Part;

static void *encode_part(void *arg) {
    Part *p = arg;
    const Chunk *ch = p->chunks;
    if (resize_slots(&p->memo, 12) < 0) {
        p->failed = 1;
        return NULL;
    }
    if (p->lo >= p->hi) return NULL;
    Py_ssize_t c = 0;
    while (ch[c + 1].first <= p->lo) c++;
    const char *prev = NULL;
    int32_t prev_len = -1, code = -1;
    for (int64_t row = p->lo; row < p->hi; c++) {
        int64_t end = ch[c + 1].first < p->hi ? ch[c + 1].first : p->hi;
        const int32_t *o = ch[c].offsets;
        /* each row's hash made once, AHEAD rows early, and its slot asked for then */
        int64_t j0 = row - ch[c].first, last = end - ch[c].first;
        uint64_t ahead[AHEAD];
        for (int64_t j = j0; j < j0 + AHEAD && j < last; j++) ahead[j % AHEAD] = id_hash(ch[c].data + o[j], o[j + 1] - o[j]);
        for (; row < end; row++) {
            int64_t j = row - ch[c].first;
            uint64_t h = ahead[j % AHEAD];
            if (j + AHEAD < last) {
                uint64_t later = id_hash(ch[c].data + o[j + AHEAD], o[j + AHEAD + 1] - o[j + AHEAD]);
                ahead[j % AHEAD] = later;
                __builtin_prefetch(&p->memo.slots[slot_of(later, p->memo.bits)]);
            }
            const char *s = ch[c].data + o[j];
            int32_t len = o[j + 1] - o[j];
            if (len == prev_len && memcmp(s, prev, (size_t)len) == 0) { /* (a run of one id: grouped rows) */
                p->memo.count[code]++;
            } else {
                int64_t got = memo_code(&p->memo, s, len, h, row, 1);
                if (got < 0) {
                    p->failed = 1;
                    return NULL;
                }
                code = (int32_t)got;
                prev = s;
                prev_len = len;
            }
            p->codes[row] = code;
        }
    }
    return NULL;
}

/* the parts' memos merged into the first's, in order (so codes stay in order of first appearance), and each
   later part's codes put in its terms; -1 when memory runs out */
static int merge_parts(Part *parts, int n_parts) {
    Memo *into = &parts[0].memo;
    for (int p = 1; p < n_parts; p++) {
        Memo *m = &parts[p].memo;
        int32_t *map = PyMem_RawMalloc((size_t)(m->n > 0 ? m->n : 1) * sizeof(int32_t));
        if (map == NULL) return -1;
        for (Py_ssize_t c = 0; c < m->n; c++) {
            const Key *k = &m->keys[c];
            char bytes[8];
            for (uint32_t b = 0; b < 8; b++) bytes[b] = (char)(k->word >> (8 * b));
            int64_t got = memo_code(into, k->len <= 8 ? bytes : m->arena + k->at, k->len, key_hash(k), m->first[c],
                                    m->count[c]);
            if (got < 0) {
                PyMem_RawFree(map);
                return -1;
            }
            map[c] = (int32_t)got;
        }
        for (int64_t row = parts[p].lo; row < parts[p].hi; row++) parts[p].codes[row] = map[parts[p].codes[row]];
        PyMem_RawFree(map);
    }
    return 0;
}

/* encode_ids(chunks, threads=1) -> (codes, firsts, counts) | None */
static PyObject *encode_ids(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *chunks_obj;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "O!|i", &PyList_Type, &chunks_obj, &threads)) return NULL;
    Py_ssize_t n_chunks = PyList_GET_SIZE(chunks_obj), held = 0;
    Py_buffer *cb = PyMem_Calloc((size_t)(2 * n_chunks + 1), sizeof(Py_buffer));
    Chunk *chunks = PyMem_Calloc((size_t)(n_chunks + 1), sizeof(Chunk));
    PyObject *codes = NULL, *result = NULL;
    int n_parts = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
    Part parts[MAX_THREADS];
    memset(parts, 0, sizeof(parts));
    if (cb == NULL || chunks == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t size = 0;
    if (read_chunks(chunks_obj, cb, &held, chunks, &size) < 0) goto done;
    int64_t n = chunks[n_chunks].first;
    if (n > INT32_MAX || size > UINT32_MAX) { /* (int32 codes, 32-bit arena places) */
        result = Py_NewRef(Py_None);
        goto done;
    }
    codes = PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
    if (codes == NULL) goto done;
    for (int p = 0; p < n_parts; p++)
        parts[p] = (Part){.chunks = chunks, .lo = n * p / n_parts, .hi = n * (p + 1) / n_parts,
                          .codes = (int32_t *)PyByteArray_AS_STRING(codes)};
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    on_threads(encode_part, parts, sizeof(Part), n_parts);
    for (int p = 0; p < n_parts; p++) failed |= parts[p].failed;
    if (!failed) failed = merge_parts(parts, n_parts) < 0;
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    Memo *m = &parts[0].memo;
    result = Py_BuildValue("Oy#y#", codes, m->n ? (const char *)m->first : "", m->n * (Py_ssize_t)sizeof(int64_t),
                           m->n ? (const char *)m->count : "", m->n * (Py_ssize_t)sizeof(int64_t));
done:
    for (Py_ssize_t i = 0; i < held; i++) PyBuffer_Release(&cb[i]);
    for (int p = 0; p < n_parts; p++) release_memo(&parts[p].memo);
    PyMem_Free(cb);
    PyMem_Free(chunks);
    Py_XDECREF(codes);
    return result;
}

/* join_grades: a run's judged rows found and graded, query by query, into the relevance matrix */

/* what every range of queries reads and writes */
typedef struct {
    const uint64_t *keys;      /* the run's sorted row keys: [query | doc hash bits | row in query] */
    const int64_t *offsets;    /* the run's first row of each query, and the total */
    int query_bits, row_bits;
    const Chunk *run_docs;     /* the run's doc ids (one chunk), in rank order */
    const int64_t *run_row;    /* per run query: its matrix row, or -1 (not evaluated) */
    const int64_t *to_qrels;   /* per run query: its qrels query, or -1 */
    const int64_t *lengths;    /* per matrix row: the columns it may fill */
    const int64_t *q_offsets;  /* the qrels' first row of each query, and the total */
    const uint64_t *q_hashes;  /* each judgement's doc hash */
    const Chunk *q_docs;       /* the judgements' doc ids (one chunk) */
    const int64_t *q_grades;
    int64_t *grades;           /* the matrix, rows x width */
    unsigned char *judged, *pooled;
    int64_t width;
    Py_ssize_t lo, hi;         /* this range's run queries */
} Join;

static inline int same_doc(const Chunk *a, int64_t i, const Chunk *b, int64_t j) {
    int32_t la = a->offsets[i + 1] - a->offsets[i], lb = b->offsets[j + 1] - b->offsets[j];
    return la == lb && memcmp(a->data + a->offsets[i], b->data + b->offsets[j], (size_t)la) == 0;
}

/* each judgement of the range's queries looked up among its query's keys (a binary search in a few hundred
   bytes), its doc id confirmed, its grade written */
static void *join_range(void *arg) {
    const Join *j = arg;
    const int row_bits = j->row_bits, hash_shift = j->query_bits + j->row_bits;
    const uint64_t row_mask = ((uint64_t)1 << row_bits) - 1;
    for (Py_ssize_t q = j->lo; q < j->hi; q++) {
        int64_t t = j->run_row[q], qq = j->to_qrels[q], k0 = j->offsets[q], k1 = j->offsets[q + 1];
        if (t < 0 || qq < 0 || k0 == k1) continue;
        uint64_t query = (uint64_t)q << (64 - j->query_bits);
        int64_t limit = j->lengths[t];
        for (int64_t e = j->q_offsets[qq]; e < j->q_offsets[qq + 1]; e++) {
            uint64_t needle = query | ((j->q_hashes[e] >> hash_shift) << row_bits);
            int64_t lo = k0, hi = k1;
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                if (j->keys[mid] < needle) lo = mid + 1; else hi = mid;
            }
            for (; lo < k1 && (j->keys[lo] & ~row_mask) == needle; lo++) { /* (more than one: hashes that collide) */
                int64_t row = (int64_t)(j->keys[lo] & row_mask);
                if (row >= limit || row >= k1 - k0 || !same_doc(j->run_docs, k0 + row, j->q_docs, e)) continue;
                int64_t g = j->q_grades[e], at = t * j->width + row;
                j->grades[at] = g >= 0 ? g : 0;
                j->judged[at] = g >= 0;
                j->pooled[at] = 1;
            }
        }
    }
    return NULL;
}

/* a buffer of exactly `count` items of `size` bytes (writable if asked), or -1 with an error set */
static int sized_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t count, Py_ssize_t size, int writable) {
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0) return -1;
    if (view->len != count * size) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "join_grades: a buffer of the wrong length");
        return -1;
    }
    return 0;
}

/* join_grades((keys, offsets, query_bits, row_bits, run_docs), (run_row, to_qrels, lengths),
               (q_offsets, q_hashes, q_docs, q_grades), (grades, judged, pooled), threads) -> bool */
static PyObject *join_grades(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *run_docs, *q_docs, *objs[11];
    int threads = 1;
    Join j = {0};
    if (!PyArg_ParseTuple(args, "(OOiiO!)(OOO)(OOO!O)(OOO)|i", &objs[0], &objs[1], &j.query_bits, &j.row_bits,
                          &PyList_Type, &run_docs, &objs[2], &objs[3], &objs[4], &objs[5], &objs[6], &PyList_Type,
                          &q_docs, &objs[7], &objs[8], &objs[9], &objs[10], &threads))
        return NULL;
    if (PyList_GET_SIZE(run_docs) != 1 || PyList_GET_SIZE(q_docs) != 1 || j.query_bits < 1 || j.row_bits < 1
        || j.query_bits + j.row_bits >= 64)
        Py_RETURN_FALSE; /* (the numpy join takes it) */
    Py_buffer views[11] = {{0}}, cb[4] = {{0}};
    Py_ssize_t held = 0;
    Chunk chunks[4];
    int64_t size = 0;
    PyObject *result = NULL;
    if (read_chunks(run_docs, cb, &held, chunks, &size) < 0 || read_chunks(q_docs, cb, &held, chunks + 2, &size) < 0)
        goto done;
    Py_ssize_t n_run = chunks[1].first, n_q = chunks[3].first;
    if (PyObject_GetBuffer(objs[1], &views[1], PyBUF_SIMPLE) < 0 || PyObject_GetBuffer(objs[5], &views[5], PyBUF_SIMPLE) < 0)
        goto done;
    Py_ssize_t nq_run = views[1].len / 8 - 1, nq_q = views[5].len / 8 - 1;
    if (PyObject_GetBuffer(objs[4], &views[4], PyBUF_SIMPLE) < 0) goto done;
    Py_ssize_t n_rows = views[4].len / 8;
    if (PyObject_GetBuffer(objs[8], &views[8], PyBUF_WRITABLE) < 0) goto done;
    j.width = n_rows > 0 ? views[8].len / 8 / n_rows : 0;
    if (nq_run < 0 || nq_q < 0 || sized_buffer(objs[0], &views[0], n_run, 8, 0) < 0
        || sized_buffer(objs[2], &views[2], nq_run, 8, 0) < 0 || sized_buffer(objs[3], &views[3], nq_run, 8, 0) < 0
        || sized_buffer(objs[6], &views[6], n_q, 8, 0) < 0 || sized_buffer(objs[7], &views[7], n_q, 8, 0) < 0
        || views[8].len != n_rows * j.width * 8 || sized_buffer(objs[9], &views[9], n_rows * j.width, 1, 1) < 0
        || sized_buffer(objs[10], &views[10], n_rows * j.width, 1, 1) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "join_grades: buffers of different lengths");
        goto done;
    }
    j.keys = views[0].buf;
    j.offsets = views[1].buf;
    j.run_row = views[2].buf;
    j.to_qrels = views[3].buf;
    j.lengths = views[4].buf;
    j.q_offsets = views[5].buf;
    j.q_hashes = views[6].buf;
    j.q_grades = views[7].buf;
    j.grades = views[8].buf;
    j.judged = views[9].buf;
    j.pooled = views[10].buf;
    j.run_docs = &chunks[0];
    j.q_docs = &chunks[2];
    /* every index the pass follows is checked here once */
    if (j.offsets[0] != 0 || j.offsets[nq_run] != n_run || j.q_offsets[0] != 0 || j.q_offsets[nq_q] != n_q) {
        PyErr_SetString(PyExc_ValueError, "join_grades: offsets that do not span their rows");
        goto done;
    }
    for (Py_ssize_t q = 0; q < nq_run; q++) {
        if (j.offsets[q + 1] < j.offsets[q] || j.run_row[q] >= n_rows || j.to_qrels[q] >= nq_q
            || (j.run_row[q] >= 0 && (j.lengths[j.run_row[q]] > j.width || j.lengths[j.run_row[q]] < 0))) {
            PyErr_SetString(PyExc_ValueError, "join_grades: a query's row, qrels query or length out of range");
            goto done;
        }
    }
    for (Py_ssize_t q = 0; q < nq_q; q++) {
        if (j.q_offsets[q + 1] < j.q_offsets[q]) {
            PyErr_SetString(PyExc_ValueError, "join_grades: qrels offsets out of order");
            goto done;
        }
    }
    int n_parts = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
    Join parts[MAX_THREADS];
    for (int p = 0; p < n_parts; p++) { /* ranges of about equal run rows */
        parts[p] = j;
        parts[p].lo = p == 0 ? 0 : parts[p - 1].hi;
        int64_t end = n_run * (p + 1) / n_parts;
        Py_ssize_t q = parts[p].lo;
        while (q < nq_run && (p + 1 == n_parts || j.offsets[q + 1] <= end)) q++;
        parts[p].hi = q;
    }
    Py_BEGIN_ALLOW_THREADS
    on_threads(join_range, parts, sizeof(Join), n_parts);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_True);
done:
    for (Py_ssize_t i = 0; i < held; i++) PyBuffer_Release(&cb[i]);
    for (int i = 0; i < 11; i++)
        if (views[i].obj) PyBuffer_Release(&views[i]);
    return result;
}

/* census: which bytes and pairs of bytes a file holds, in one pass on two threads */
enum {
    HAS_CR = 1, HAS_HIGH = 2, HAS_TAB = 4, HAS_SPACE = 8, HAS_VT_FF = 16, /* bytes */
    SPACE_PAIR = 32, TAB_PAIR = 64 /* a space (tab) beside another or beside an LF */
};

typedef struct {
    const unsigned char *p;
    Py_ssize_t n;       /* bytes to scan; the pair at the end looks one byte past, when there is one */
    Py_ssize_t room;    /* bytes readable from p */
    unsigned flags;
    Py_ssize_t lines;   /* LF bytes */
} Scan;

static inline unsigned pair_flags(unsigned char c, unsigned char next) {
    unsigned out = 0;
    if ((c == ' ' && (next == ' ' || next == 10)) || (c == 10 && next == ' ')) out |= SPACE_PAIR;
    if ((c == '\t' && (next == '\t' || next == 10)) || (c == 10 && next == '\t')) out |= TAB_PAIR;
    return out;
}

static void *census_part(void *arg) {
    Scan *sc = arg;
    const unsigned char *p = sc->p;
    unsigned out = 0;
    Py_ssize_t i = 0, n = sc->n, lines = 0;
#ifdef __SSE2__
    const __m128i ksp = _mm_set1_epi8(' '), ktab = _mm_set1_epi8('\t'), knl = _mm_set1_epi8(10),
                  kcr = _mm_set1_epi8(13), kvt = _mm_set1_epi8(11), kff = _mm_set1_epi8(12);
    __m128i cr = _mm_setzero_si128(), high = cr, tab = cr, sp = cr, vtff = cr, sp_pair = cr, tab_pair = cr;
    for (; i + 16 <= n && i + 17 <= sc->room; i += 16) {
        __m128i w = _mm_loadu_si128((const __m128i *)(p + i)), next = _mm_loadu_si128((const __m128i *)(p + i + 1));
        __m128i is_sp = _mm_cmpeq_epi8(w, ksp), is_tab = _mm_cmpeq_epi8(w, ktab), is_nl = _mm_cmpeq_epi8(w, knl);
        __m128i next_sp = _mm_cmpeq_epi8(next, ksp), next_tab = _mm_cmpeq_epi8(next, ktab),
                next_nl = _mm_cmpeq_epi8(next, knl);
        lines += __builtin_popcount((unsigned)_mm_movemask_epi8(is_nl));
        cr = _mm_or_si128(cr, _mm_cmpeq_epi8(w, kcr));
        high = _mm_or_si128(high, w);
        tab = _mm_or_si128(tab, is_tab);
        sp = _mm_or_si128(sp, is_sp);
        vtff = _mm_or_si128(vtff, _mm_or_si128(_mm_cmpeq_epi8(w, kvt), _mm_cmpeq_epi8(w, kff)));
        sp_pair = _mm_or_si128(sp_pair, _mm_or_si128(_mm_and_si128(is_sp, _mm_or_si128(next_sp, next_nl)),
                                                     _mm_and_si128(is_nl, next_sp)));
        tab_pair = _mm_or_si128(tab_pair, _mm_or_si128(_mm_and_si128(is_tab, _mm_or_si128(next_tab, next_nl)),
                                                       _mm_and_si128(is_nl, next_tab)));
    }
    out |= (_mm_movemask_epi8(cr) ? HAS_CR : 0) | (_mm_movemask_epi8(high) ? HAS_HIGH : 0)
           | (_mm_movemask_epi8(tab) ? HAS_TAB : 0) | (_mm_movemask_epi8(sp) ? HAS_SPACE : 0)
           | (_mm_movemask_epi8(vtff) ? HAS_VT_FF : 0) | (_mm_movemask_epi8(sp_pair) ? SPACE_PAIR : 0)
           | (_mm_movemask_epi8(tab_pair) ? TAB_PAIR : 0);
#endif
    for (; i < n; i++) {
        unsigned char c = p[i];
        out |= (c == 13 ? HAS_CR : 0) | (c >= 0x80 ? HAS_HIGH : 0) | (c == '\t' ? HAS_TAB : 0)
               | (c == ' ' ? HAS_SPACE : 0) | (c == 11 || c == 12 ? HAS_VT_FF : 0)
               | pair_flags(c, i + 1 < sc->room ? p[i + 1] : 0);
        lines += c == 10;
    }
    sc->flags = out;
    sc->lines = lines;
    return NULL;
}

/* census(data, threads=1) -> (flags, lines): the flags of the bytes, and of the pairs of bytes, data holds, and
   its LF bytes */
static PyObject *census(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer view;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "y*|i", &view, &threads)) return NULL;
    const unsigned char *p = view.buf;
    Py_ssize_t n = view.len, mid = threads > 1 && n >= (1 << 20) ? n / 2 : n;
    /* two halves from 1 MiB (the first reads one byte past its end: a pair across the cut is its) */
    Scan parts[2] = {{p, mid, n, 0, 0}, {p + mid, n - mid, n - mid, 0, 0}};
    Py_BEGIN_ALLOW_THREADS
    on_threads(census_part, parts, sizeof(Scan), mid < n ? 2 : 1);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("(kn)", (unsigned long)(parts[0].flags | parts[1].flags), parts[0].lines + parts[1].lines);
}

static PyMethodDef methods[] = {
    {"items", items, METH_VARARGS,
     "items(groups, total, values, rank) -> (chars, offsets, scores, hashes) | None: the keys (and values) of every group."},
    {"census", census, METH_VARARGS,
     "census(data, threads=1) -> (flags, lines): flags 1 a CR, 2 a byte from 0x80, 4 a tab, 8 a space, 16 a VT or FF, 32 a space "
     "beside a space or an LF, 64 a tab beside a tab or an LF; lines: the LF bytes."},
    {"encode_ids", encode_ids, METH_VARARGS,
     "encode_ids(chunks, threads=1) -> (codes, firsts, counts) | None: a string column's ids numbered in order of "
     "first appearance."},
    {"join_grades", join_grades, METH_VARARGS,
     "join_grades(run, per_query, qrels, matrix, threads=1) -> bool: a run's judged rows graded into the relevance "
     "matrix."},
    {"ranked_rows", ranked_rows, METH_VARARGS,
     "ranked_rows(qcodes, offsets, chunks, scores, threads=1) -> (chars, offsets, scores, hashes, order) | None: "
     "a table's rows grouped by query and ranked."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_walk", "C passes over dicts of dicts, a run's rows, its join with the qrels and a file's bytes.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__walk(void) { return PyModule_Create(&module); }
