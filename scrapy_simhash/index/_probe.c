/* Single-query probe of the index's sorted tables, in C.
 *
 * The numpy path costs ~15 array calls per query (a few microseconds each); one query is
 * small, so call overhead, not work, dominates its latency. This does the same steps in
 * one call: compute the query's key in every table, binary-search the combined sorted key
 * array, scan the run of equal keys, keep rows within distance k, drop rows found by
 * several tables. Optional: scrapy_simhash.index.tables falls back to numpy without it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define POPCOUNT64(x) __builtin_popcountll(x)
#else
static int POPCOUNT64(uint64_t x) {
    int c = 0;
    while (x) { x &= x - 1; c++; }
    return c;
}
#endif

typedef struct {
    uint32_t row;
    uint32_t dist;
} hit_t;

typedef struct {
    hit_t *items;
    Py_ssize_t len, cap;
} hits_t;

static int hits_push(hits_t *h, uint32_t row, uint32_t dist) {
    if (h->len == h->cap) {
        Py_ssize_t cap = h->cap ? h->cap * 2 : 64;
        hit_t *items = realloc(h->items, (size_t)cap * sizeof(hit_t));
        if (!items) return -1;
        h->items = items;
        h->cap = cap;
    }
    h->items[h->len].row = row;
    h->items[h->len].dist = dist;
    h->len++;
    return 0;
}

static int cmp_row(const void *a, const void *b) {
    uint32_t x = ((const hit_t *)a)->row, y = ((const hit_t *)b)->row;
    return (x > y) - (x < y);
}

static Py_ssize_t lower32(const uint32_t *a, Py_ssize_t n, uint32_t v) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (a[mid] < v) lo = mid + 1; else hi = mid;
    }
    return lo;
}

static Py_ssize_t lower64(const uint64_t *a, Py_ssize_t n, uint64_t v) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (a[mid] < v) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* probe(keys, rows, hashes, seqs, shifts, masks, outs, key_itemsize, tables, depth, key_bits, query, k)
 * -> list of (seq, simhash, distance), one per distinct row within k. */
static PyObject *probe(PyObject *self, PyObject *args) {
    Py_buffer keys, rows, hashes, seqs, shifts, masks, outs;
    int itemsize, ntables, depth, key_bits, k;
    unsigned long long query;
    PyObject *result = NULL;
    hits_t hits = {NULL, 0, 0};
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*iiiiKi", &keys, &rows, &hashes, &seqs, &shifts, &masks, &outs,
                          &itemsize, &ntables, &depth, &key_bits, &query, &k))
        return NULL;
    Py_ssize_t n = itemsize > 0 ? keys.len / itemsize : 0;
    Py_ssize_t nrows = hashes.len / 8;
    if ((itemsize != 4 && itemsize != 8) || keys.len != n * itemsize || rows.len != n * 4 ||
        seqs.len != nrows * 8 || shifts.len != (Py_ssize_t)ntables * depth * 8 || masks.len != shifts.len ||
        outs.len != shifts.len || key_bits < 0 || key_bits > 64 || ntables < 1 || depth < 1) {
        PyErr_SetString(PyExc_ValueError, "probe: inconsistent array sizes");
        goto done;
    }
    const uint64_t *sh = shifts.buf, *mk = masks.buf, *ou = outs.buf, *hv = hashes.buf;
    const uint32_t *rv = rows.buf;
    const uint64_t q = (uint64_t)query;
    for (int t = 0; t < ntables; t++) {
        uint64_t key = 0;
        for (int s = 0; s < depth; s++) {
            Py_ssize_t i = (Py_ssize_t)t * depth + s;
            key |= ((q >> sh[i]) & mk[i]) << ou[i];
        }
        if (key_bits < 64) key |= (uint64_t)t << key_bits;
        Py_ssize_t at;
        if (itemsize == 4) {
            const uint32_t *kv = keys.buf;
            uint32_t key32 = (uint32_t)key;
            for (at = lower32(kv, n, key32); at < n && kv[at] == key32; at++) {
                uint32_t row = rv[at];
                if ((Py_ssize_t)row >= nrows) goto corrupt;
                uint32_t d = (uint32_t)POPCOUNT64(hv[row] ^ q);
                if ((int)d <= k && hits_push(&hits, row, d) < 0) goto nomem;
            }
        } else {
            const uint64_t *kv = keys.buf;
            for (at = lower64(kv, n, key); at < n && kv[at] == key; at++) {
                uint32_t row = rv[at];
                if ((Py_ssize_t)row >= nrows) goto corrupt;
                uint32_t d = (uint32_t)POPCOUNT64(hv[row] ^ q);
                if ((int)d <= k && hits_push(&hits, row, d) < 0) goto nomem;
            }
        }
    }
    if (hits.len > 1) qsort(hits.items, (size_t)hits.len, sizeof(hit_t), cmp_row);
    result = PyList_New(0);
    if (!result) goto done;
    {
        const int64_t *sv = seqs.buf;
        for (Py_ssize_t i = 0; i < hits.len; i++) {
            if (i > 0 && hits.items[i].row == hits.items[i - 1].row) continue;
            uint32_t row = hits.items[i].row;
            PyObject *item = Py_BuildValue("(LKI)", (long long)sv[row], (unsigned long long)hv[row],
                                           (unsigned int)hits.items[i].dist);
            if (!item || PyList_Append(result, item) < 0) {
                Py_XDECREF(item);
                Py_CLEAR(result);
                goto done;
            }
            Py_DECREF(item);
        }
    }
    goto done;
corrupt:
    PyErr_SetString(PyExc_ValueError, "probe: a row number is out of range (damaged table)");
    goto done;
nomem:
    PyErr_NoMemory();
done:
    free(hits.items);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&seqs);
    PyBuffer_Release(&shifts);
    PyBuffer_Release(&masks);
    PyBuffer_Release(&outs);
    return result;
}

/* brute(hashes, seqs, query, k) -> list of (seq, simhash, distance) for every entry within k. */
static PyObject *brute(PyObject *self, PyObject *args) {
    Py_buffer hashes, seqs;
    unsigned long long query;
    int k;
    if (!PyArg_ParseTuple(args, "y*y*Ki", &hashes, &seqs, &query, &k)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = hashes.len / 8;
    if (hashes.len != n * 8 || seqs.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "brute: inconsistent array sizes");
        goto done;
    }
    result = PyList_New(0);
    if (!result) goto done;
    const uint64_t *hv = hashes.buf;
    const int64_t *sv = seqs.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        int d = POPCOUNT64(hv[i] ^ (uint64_t)query);
        if (d > k) continue;
        PyObject *item = Py_BuildValue("(LKi)", (long long)sv[i], (unsigned long long)hv[i], d);
        if (!item || PyList_Append(result, item) < 0) {
            Py_XDECREF(item);
            Py_CLEAR(result);
            goto done;
        }
        Py_DECREF(item);
    }
done:
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&seqs);
    return result;
}

/* lower_bound_sorted(keys, wanted, itemsize, out): out[i] = first position in sorted ``keys``
 * whose key is >= wanted[i], for ``wanted`` sorted ascending. An exponential search from the
 * previous answer walks the big array forward like a merge, touching memory in order,
 * instead of one cache-missing binary search from the top per key. */
static PyObject *lower_bound_sorted(PyObject *self, PyObject *args) {
    Py_buffer keys, wanted, out;
    int itemsize;
    if (!PyArg_ParseTuple(args, "y*y*iw*", &keys, &wanted, &itemsize, &out)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = (itemsize == 4 || itemsize == 8) ? keys.len / itemsize : -1;
    Py_ssize_t m = n >= 0 ? wanted.len / itemsize : -1;
    if (n < 0 || keys.len != n * itemsize || wanted.len != m * itemsize || out.len != m * 8) {
        PyErr_SetString(PyExc_ValueError, "lower_bound_sorted: inconsistent array sizes");
        goto done;
    }
    int64_t *o = out.buf;
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        uint64_t v = itemsize == 4 ? ((const uint32_t *)wanted.buf)[i] : ((const uint64_t *)wanted.buf)[i];
#define KEY(j) (itemsize == 4 ? (uint64_t)((const uint32_t *)keys.buf)[j] : ((const uint64_t *)keys.buf)[j])
        if (i > 0 && v < (itemsize == 4 ? ((const uint32_t *)wanted.buf)[i - 1] : ((const uint64_t *)wanted.buf)[i - 1]))
            pos = 0; /* not ascending after all: restart (still correct, just slower) */
        Py_ssize_t lo = pos, hi = pos, step = 1;
        while (hi < n && KEY(hi) < v) {
            lo = hi + 1;
            hi = lo + step;
            step <<= 1;
        }
        if (hi > n) hi = n;
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (KEY(mid) < v) lo = mid + 1; else hi = mid;
        }
#undef KEY
        o[i] = (int64_t)lo;
        pos = lo;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&keys);
    PyBuffer_Release(&wanted);
    PyBuffer_Release(&out);
    return result;
}

typedef struct {
    int64_t *items;
    Py_ssize_t len, cap;
} ints_t;

static int ints_push(ints_t *v, int64_t x) {
    if (v->len == v->cap) {
        Py_ssize_t cap = v->cap ? v->cap * 2 : 256;
        int64_t *items = realloc(v->items, (size_t)cap * sizeof(int64_t));
        if (!items) return -1;
        v->items = items;
        v->cap = cap;
    }
    v->items[v->len++] = x;
    return 0;
}

/* bucket_lookup(entries, directory, dir_itemsize, shift, prefixes) -> (positions bytes, ids bytes)
 *
 * The LSH buckets' lookup (lsh_buckets.SortedBuckets.lookup) in one call: for each 32-bit key
 * prefix (as ``prefix << 32``), the directory gives its cell; a binary search within the cell
 * finds the first entry with that prefix, and the run of equal prefixes gives the ids (low 32
 * bits). Both outputs are int64 arrays' bytes: the prefix's position in ``prefixes``, the id. */
static PyObject *bucket_lookup(PyObject *self, PyObject *args) {
    Py_buffer entries, directory, prefixes;
    int dsize, shift;
    PyObject *result = NULL;
    ints_t pos = {NULL, 0, 0}, ids = {NULL, 0, 0};
    if (!PyArg_ParseTuple(args, "y*y*iiy*", &entries, &directory, &dsize, &shift, &prefixes)) return NULL;
    Py_ssize_t n = entries.len / 8, ndir = dsize > 0 ? directory.len / dsize : 0, m = prefixes.len / 8;
    if ((dsize != 4 && dsize != 8) || entries.len % 8 || prefixes.len % 8 || directory.len != ndir * dsize ||
        ndir < 2 || shift < 1 || shift > 63) {
        PyErr_SetString(PyExc_ValueError, "bucket_lookup: inconsistent array sizes");
        goto done;
    }
    const uint64_t *ev = entries.buf, *pv = prefixes.buf;
    const uint64_t HI = 0xFFFFFFFF00000000ULL;
    for (Py_ssize_t j = 0; j < m; j++) {
        uint64_t p = pv[j] & HI;
        uint64_t cell = p >> shift;
        if ((Py_ssize_t)cell + 1 >= ndir) goto corrupt;
        Py_ssize_t lo, hi;
        if (dsize == 4) {
            lo = ((const uint32_t *)directory.buf)[cell];
            hi = ((const uint32_t *)directory.buf)[cell + 1];
        } else {
            lo = (Py_ssize_t)((const int64_t *)directory.buf)[cell];
            hi = (Py_ssize_t)((const int64_t *)directory.buf)[cell + 1];
        }
        if (lo < 0 || hi > n || lo > hi) goto corrupt;
        for (Py_ssize_t at = lo + lower64(ev + lo, hi - lo, p); at < hi && (ev[at] & HI) == p; at++) {
            if (ints_push(&pos, (int64_t)j) < 0 || ints_push(&ids, (int64_t)(ev[at] & 0xFFFFFFFFULL)) < 0) {
                PyErr_NoMemory();
                goto done;
            }
        }
    }
    {
        static const char empty[1] = {0}; /* y# turns a NULL pointer into None: no hits are b"" */
        result = Py_BuildValue("(y#y#)", pos.items ? (const char *)pos.items : empty, pos.len * 8,
                               ids.items ? (const char *)ids.items : empty, ids.len * 8);
    }
    goto done;
corrupt:
    PyErr_SetString(PyExc_ValueError, "bucket_lookup: the directory does not fit the entries");
done:
    free(pos.items);
    free(ids.items);
    PyBuffer_Release(&entries);
    PyBuffer_Release(&directory);
    PyBuffer_Release(&prefixes);
    return result;
}

static PyMethodDef methods[] = {
    {"lower_bound_sorted", lower_bound_sorted, METH_VARARGS, "searchsorted for ascending needles, galloping."},
    {"probe", probe, METH_VARARGS, "Probe one query against a segment's sorted tables."},
    {"brute", brute, METH_VARARGS, "Compare one query with every fingerprint of a buffer."},
    {"bucket_lookup", bucket_lookup, METH_VARARGS, "Look up LSH band key prefixes in sorted buckets."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_probe", "Single-query index probe.", -1, methods};

PyMODINIT_FUNC PyInit__probe(void) { return PyModule_Create(&module); }
