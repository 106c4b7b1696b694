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

/* A request to bring ``address``'s cache line in. On x86-64 an asm volatile: GCC 12 drops a
 * __builtin_prefetch whose address is read from memory in some loops (with -fwrapv, which Python's
 * build flags carry, it dropped every prefetch of a cell's entries), and a prefetch never faults. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define PREFETCH(address) __asm__ __volatile__("prefetcht0 %0" : : "m"(*(const char *)(address)))
#elif defined(__GNUC__) || defined(__clang__)
#define PREFETCH(address) __builtin_prefetch(address)
#else
#define PREFETCH(address) ((void)0)
#endif
#define PREFETCH_AHEAD 16

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

/* Keeps ``row`` when its fingerprint (of ``nrows`` in ``hashes``) is within ``k`` of ``query``.
 * Returns 0, -1 when the row is past the fingerprints (a damaged table), -2 out of memory. */
static int hit_if_near(hits_t *hits, const uint64_t *hashes, Py_ssize_t nrows, int64_t row, uint64_t query, int k) {
    if (row < 0 || row >= nrows) return -1;
    uint32_t d = (uint32_t)POPCOUNT64(hashes[row] ^ query);
    return (int)d <= k && hits_push(hits, (uint32_t)row, d) < 0 ? -2 : 0;
}

/* The kept rows as a new list of (seq, simhash, distance), by row, each row once (a row close to the
 * query is found by several tables): the end of every single-query probe. NULL with an exception set. */
static PyObject *hits_to_list(hits_t *hits, const int64_t *seqs, const uint64_t *hashes) {
    if (hits->len > 1) qsort(hits->items, (size_t)hits->len, sizeof(hit_t), cmp_row);
    PyObject *result = PyList_New(0);
    for (Py_ssize_t i = 0; result && i < hits->len; i++) {
        uint32_t row = hits->items[i].row;
        if (i > 0 && row == hits->items[i - 1].row) continue;
        PyObject *item = Py_BuildValue("(LKI)", (long long)seqs[row], (unsigned long long)hashes[row],
                                       (unsigned int)hits->items[i].dist);
        if (!item || PyList_Append(result, item) < 0) Py_CLEAR(result);
        Py_XDECREF(item);
    }
    return result;
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
        int rc = 0;
        if (itemsize == 4) {
            const uint32_t *kv = keys.buf;
            uint32_t key32 = (uint32_t)key;
            for (at = lower32(kv, n, key32); at < n && kv[at] == key32 && !rc; at++)
                rc = hit_if_near(&hits, hv, nrows, rv[at], q, k);
        } else {
            const uint64_t *kv = keys.buf;
            for (at = lower64(kv, n, key); at < n && kv[at] == key && !rc; at++)
                rc = hit_if_near(&hits, hv, nrows, rv[at], q, k);
        }
        if (rc == -1) goto corrupt;
        if (rc == -2) goto nomem;
    }
    result = hits_to_list(&hits, seqs.buf, hv);
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

/* merge_runs(a, b, itemsize, out, a_vals, b_vals, b_offset, out_vals): sorted keys ``a`` and ``b``
 * (``itemsize`` 4 or 8 bytes each) merged into ``out`` in one pass, ties ``a`` first; with 4-byte
 * values beside the keys (empty buffers: none), ``b``'s raised by ``b_offset`` (rows renumbered).
 * A write merges its sorted runs with this: two reads and one write of each entry, the GIL released. */
#define MERGE_LOOP(T)                                                                              \
    do {                                                                                           \
        const T *ka = a.buf, *kb = b.buf;                                                          \
        T *ko = out.buf;                                                                           \
        while (i < na && j < nb) {                                                                 \
            if (kb[j] < ka[i]) {                                                                   \
                if (vals) vo[i + j] = vb[j] + off;                                                 \
                ko[i + j] = kb[j];                                                                 \
                j++;                                                                               \
            } else {                                                                               \
                if (vals) vo[i + j] = va[i];                                                       \
                ko[i + j] = ka[i];                                                                 \
                i++;                                                                               \
            }                                                                                      \
        }                                                                                          \
        for (; i < na; i++) { if (vals) vo[i + j] = va[i]; ko[i + j] = ka[i]; }                   \
        for (; j < nb; j++) { if (vals) vo[i + j] = vb[j] + off; ko[i + j] = kb[j]; }             \
    } while (0)

static PyObject *merge_runs(PyObject *self, PyObject *args) {
    Py_buffer a, b, out, a_vals, b_vals, out_vals;
    int itemsize;
    unsigned long long b_offset;
    if (!PyArg_ParseTuple(args, "y*y*iw*y*y*Kw*", &a, &b, &itemsize, &out, &a_vals, &b_vals, &b_offset, &out_vals))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t na = (itemsize == 4 || itemsize == 8) ? a.len / itemsize : -1;
    Py_ssize_t nb = na >= 0 ? b.len / itemsize : -1;
    int vals = out_vals.len > 0;
    if (na < 0 || a.len != na * itemsize || b.len != nb * itemsize || out.len != (na + nb) * itemsize ||
        (vals && (a_vals.len != na * 4 || b_vals.len != nb * 4 || out_vals.len != (na + nb) * 4)) ||
        (!vals && (a_vals.len || b_vals.len))) {
        PyErr_SetString(PyExc_ValueError, "merge_runs: inconsistent array sizes");
        goto done;
    }
    {
        const uint32_t *va = a_vals.buf, *vb = b_vals.buf;
        uint32_t *vo = out_vals.buf;
        uint32_t off = (uint32_t)b_offset;
        Py_ssize_t i = 0, j = 0;
        Py_BEGIN_ALLOW_THREADS
        if (itemsize == 4) MERGE_LOOP(uint32_t); else MERGE_LOOP(uint64_t);
        Py_END_ALLOW_THREADS
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    PyBuffer_Release(&out);
    PyBuffer_Release(&a_vals);
    PyBuffer_Release(&b_vals);
    PyBuffer_Release(&out_vals);
    return result;
}
#undef MERGE_LOOP

/* bucket_directory(entries, shift, out): for sorted uint64 ``entries``, ``out[c]`` (int64, one more
 * than the cells) = the first position whose ``entry >> shift`` is >= c: the LSH buckets' directory
 * in one read of the entries (numpy needs a shifted copy, an intp copy and a count). */
static PyObject *bucket_directory(PyObject *self, PyObject *args) {
    Py_buffer entries, out;
    int shift;
    if (!PyArg_ParseTuple(args, "y*iw*", &entries, &shift, &out)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = entries.len / 8, cells = out.len / 8 - 1;
    if (entries.len != n * 8 || out.len != (cells + 1) * 8 || cells < 0 || shift < 0 || shift > 63) {
        PyErr_SetString(PyExc_ValueError, "bucket_directory: inconsistent array sizes");
        goto done;
    }
    {
        const uint64_t *e = entries.buf;
        int64_t *d = out.buf;
        Py_ssize_t c = 0;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t cell = e[i] >> shift;
            while (c <= cells && (uint64_t)c <= cell) d[c++] = i;
        }
        while (c <= cells) d[c++] = n;
        Py_END_ALLOW_THREADS
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&entries);
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

/* Entry ``cell`` of a bucket directory of uint32 (``dsize`` 4) or int64 offsets. */
static inline Py_ssize_t dir_at(const void *directory, int dsize, uint64_t cell) {
    return dsize == 4 ? (Py_ssize_t)((const uint32_t *)directory)[cell] : (Py_ssize_t)((const int64_t *)directory)[cell];
}

#include "_packed.h"

/* The ids of the 8-byte entries (``key prefix << 32 | id``, sorted, ``n`` of them) under each of the
 * ``m`` key prefixes ``pv`` (the high 32 bits count), through the directory over the top bits
 * (``shift``); ``out_pos``, when given, receives the prefix's index for each id. A batch's lookups are
 * random reads of large arrays: the directory cell is asked for PREFETCH_AHEAD prefixes ahead, the
 * entries it points to half as far. Returns 0, -1 when the directory does not fit the entries, -2 out
 * of memory. */
static int bucket_scan_many(const uint64_t *ev, Py_ssize_t n, const void *directory, int dsize, Py_ssize_t ndir,
                            int shift, const uint64_t *pv, Py_ssize_t m, ints_t *out_pos, ints_t *out_ids) {
    const uint64_t HI = 0xFFFFFFFF00000000ULL;
    if (!n) return 0;
    for (Py_ssize_t j = 0; j < m && j < PREFETCH_AHEAD; j++) { /* the first cells: all at once */
        uint64_t cell = (pv[j] & HI) >> shift;
        if ((Py_ssize_t)cell + 1 < ndir) PREFETCH((const char *)directory + cell * dsize);
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        if (j + PREFETCH_AHEAD < m) {
            uint64_t ahead = (pv[j + PREFETCH_AHEAD] & HI) >> shift;
            if ((Py_ssize_t)ahead + 1 < ndir) PREFETCH((const char *)directory + ahead * dsize);
        }
        if (j + PREFETCH_AHEAD / 2 < m) {
            uint64_t ahead = (pv[j + PREFETCH_AHEAD / 2] & HI) >> shift;
            if ((Py_ssize_t)ahead + 1 < ndir) {
                Py_ssize_t at = dir_at(directory, dsize, ahead);
                if (at >= 0 && at < n) PREFETCH(ev + at);
            }
        }
        uint64_t p = pv[j] & HI, cell = p >> shift;
        if ((Py_ssize_t)cell + 1 >= ndir) return -1;
        Py_ssize_t lo = dir_at(directory, dsize, cell), hi = dir_at(directory, dsize, cell + 1);
        if (lo < 0 || hi > n || lo > hi) return -1;
        for (Py_ssize_t at = lo + lower64(ev + lo, hi - lo, p); at < hi && (ev[at] & HI) == p; at++) {
            if (out_pos && ints_push(out_pos, (int64_t)j) < 0) return -2;
            if (ints_push(out_ids, (int64_t)(ev[at] & 0xFFFFFFFFULL)) < 0) return -2;
        }
    }
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
    {
        int rc = bucket_scan_many(entries.buf, n, directory.buf, dsize, ndir, shift, prefixes.buf, m, &pos, &ids);
        if (rc == -2) { PyErr_NoMemory(); goto done; }
        if (rc < 0) goto corrupt;
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

/* The LSH verification of one stored sketch ``a`` against the query ``b``: the number of equal
 * values when at least one of the ``bands`` bands of ``rows`` values is equal in full and the
 * count reaches ``min_matches``, else -1. One body for the two widths an index keeps values in:
 * uint32 (whole values) and uint8 (8-bit values, fingerprint/bbit.py: a quarter of the memory). */
#define VERIFIED_COUNT(NAME, T)                                                                            \
    static inline int NAME(const T *a, const T *b, int nv, int bands, int rows, int min_matches) {          \
        int count = 0, banded = 0;                                                                          \
        for (int band = 0, at = 0; band < bands; band++) {                                                  \
            int equal = 0;                                                                                  \
            for (int r = 0; r < rows; r++, at++) equal += a[at] == b[at];                                   \
            count += equal;                                                                                 \
            banded |= equal == rows;                                                                        \
        }                                                                                                   \
        for (int at = bands * rows; at < nv; at++) count += a[at] == b[at];                                 \
        return (banded && count >= min_matches) ? count : -1;                                               \
    }
VERIFIED_COUNT(verified_count32, uint32_t)
VERIFIED_COUNT(verified_count8, uint8_t)

/* The same count for a row of values kept in their low 2 bits, four a byte (the first in the lowest
 * bits: the sketch LSH segment's filter, lsh_segment.py), against a query of a byte a value (its low
 * 2 bits compared). Values equal in 8 bits are equal in 2, so a row that fails here fails in full. */
#define LOW2_EQUAL(a, b, at) (((((a)[(at) >> 2] >> (((at) & 3) * 2)) ^ (b)[at]) & 3) == 0)
static inline int verified_count2(const uint8_t *a, const uint8_t *b, int nv, int bands, int rows, int min_matches) {
    int count = 0, banded = 0;
    for (int band = 0, at = 0; band < bands; band++) {
        int equal = 0;
        for (int r = 0; r < rows; r++, at++) equal += LOW2_EQUAL(a, b, at);
        count += equal;
        banded |= equal == rows;
    }
    for (int at = bands * rows; at < nv; at++) count += LOW2_EQUAL(a, b, at);
    return (banded && count >= min_matches) ? count : -1;
}

/* Bytes of a stored row of ``nv`` values of ``width`` bytes (0: 2 bits a value, four a byte). */
static inline Py_ssize_t row_size(int width, int nv) {
    return width ? (Py_ssize_t)width * nv : ((Py_ssize_t)nv + 3) / 4;
}

/* Bytes of a query of ``nv`` values for rows of ``width`` (0: a byte a value). */
static inline Py_ssize_t query_size(int width, int nv) { return width ? (Py_ssize_t)width * nv : nv; }

/* verified_count of row ``i`` of the matrix ``S`` against query ``q``, values of ``width`` bytes
 * (0: 2-bit values, four a byte). */
static inline int verified_row(const void *S, Py_ssize_t i, const void *q, int width, int nv, int bands, int rows,
                               int min_matches) {
    if (width == 0)
        return verified_count2((const uint8_t *)S + (size_t)i * row_size(0, nv), q, nv, bands, rows, min_matches);
    if (width == 1)
        return verified_count8((const uint8_t *)S + (size_t)i * nv, q, nv, bands, rows, min_matches);
    return verified_count32((const uint32_t *)S + (size_t)i * nv, q, nv, bands, rows, min_matches);
}

/* sketch_verify(sketches, num_values, ids, query_of, queries, bands, rows, min_matches[, width]) -> counts
 *
 * The LSH index's verification (lsh.MinHashLSH._verify and query_many) in one pass: for each
 * candidate ``ids[j]`` (a row of the ``sketches`` matrix, values of ``width`` bytes: 4, the
 * default, or 1; 0: 2-bit values, four a byte) against query ``query_of[j]`` (a row of
 * ``queries``, the same width; a byte a value for width 0; ``query_of`` empty: query 0 for all), count the equal values and check that at least one of the first
 * ``bands`` bands of ``rows`` values is equal in full. Output: one int32 per candidate (bytes),
 * the count when both hold and ``count >= min_matches``, else -1. */
static PyObject *sketch_verify(PyObject *self, PyObject *args) {
    Py_buffer sk, ids, qof, qs;
    int nv, bands, rows, min_matches, width = 4;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*iy*y*y*iii|i", &sk, &nv, &ids, &qof, &qs, &bands, &rows, &min_matches, &width))
        return NULL;
    Py_ssize_t row_bytes = row_size(width, nv), q_bytes = query_size(width, nv);
    Py_ssize_t m = ids.len / 8, nrows = nv > 0 ? sk.len / row_bytes : 0;
    Py_ssize_t nq = nv > 0 ? qs.len / q_bytes : 0;
    if (nv < 1 || (width != 0 && width != 1 && width != 4) || bands < 1 || rows < 1 || (Py_ssize_t)bands * rows > nv ||
        ids.len % 8 || sk.len % row_bytes || qs.len % q_bytes || nq < 1 || (qof.len != 0 && qof.len != ids.len)) {
        PyErr_SetString(PyExc_ValueError, "sketch_verify: inconsistent array sizes");
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, m * 4);
    if (!result) goto done;
    {
        int32_t *out = (int32_t *)PyBytes_AS_STRING(result);
        const unsigned char *Q = qs.buf;
        const int64_t *I = ids.buf, *QO = qof.len ? (const int64_t *)qof.buf : NULL;
        for (Py_ssize_t j = 0; j < m; j++) {
            int64_t i = I[j], q = QO ? QO[j] : 0;
            if (i < 0 || i >= nrows || q < 0 || q >= nq) {
                Py_DECREF(result);
                result = NULL;
                PyErr_SetString(PyExc_IndexError, "sketch_verify: a candidate or query index is out of range");
                goto done;
            }
            out[j] = verified_row(sk.buf, i, Q + (size_t)q * q_bytes, width, nv, bands, rows, min_matches);
        }
    }
done:
    PyBuffer_Release(&sk);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&qof);
    PyBuffer_Release(&qs);
    return result;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

typedef struct {
    int64_t id;
    int32_t count;
} scored_t;

static int cmp_scored(const void *a, const void *b) {
    const scored_t *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1; /* best first */
    return (x->id > y->id) - (x->id < y->id);                       /* then oldest */
}

static inline uint64_t fmix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 33;
    return h;
}

/* band_keys(sketches, num_values, multipliers, offsets, bands, rows) -> uint64 bytes (n x bands)
 *
 * lsh_bands.BandHasher's keys in one pass: key[t] = fmix64(O[t] + sum_j M[t*rows+j] * v[t*rows+j]). */
static PyObject *band_keys(PyObject *self, PyObject *args) {
    Py_buffer sk, mult, offs;
    int nv, bands, rows;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*iy*y*ii", &sk, &nv, &mult, &offs, &bands, &rows)) return NULL;
    if (nv < 1 || bands < 1 || rows < 1 || (Py_ssize_t)bands * rows > nv || sk.len % (4 * (Py_ssize_t)nv) ||
        mult.len != 8 * (Py_ssize_t)bands * rows || offs.len != 8 * (Py_ssize_t)bands) {
        PyErr_SetString(PyExc_ValueError, "band_keys: inconsistent array sizes");
        goto done;
    }
    {
        Py_ssize_t n = sk.len / (4 * (Py_ssize_t)nv);
        result = PyBytes_FromStringAndSize(NULL, n * bands * 8);
        if (!result) goto done;
        uint64_t *out = (uint64_t *)PyBytes_AS_STRING(result);
        const uint32_t *S = sk.buf;
        const uint64_t *M = mult.buf, *O = offs.buf;
        for (Py_ssize_t i = 0; i < n; i++) {
            const uint32_t *v = S + (size_t)i * nv;
            for (int t = 0, at = 0; t < bands; t++) {
                uint64_t sum = O[t];
                for (int r = 0; r < rows; r++, at++) sum += M[at] * (uint64_t)v[at];
                out[(size_t)i * bands + t] = fmix64(sum);
            }
        }
    }
done:
    PyBuffer_Release(&sk);
    PyBuffer_Release(&mult);
    PyBuffer_Release(&offs);
    return result;
}

/* lsh_query(prefixes, levels, extra_ids, sketches, alive, num_values, query, bands, rows, min_matches[, width])
 *     -> (ids, counts) lists, best first (count descending, then id); values of ``width`` bytes (4 or 1;
 *     0: 2-bit values, four a byte, asked with a byte a value)
 *
 * One MinHash-LSH lookup (lsh.MinHashLSH._query) in one call: the query's band key prefixes
 * looked up in each level of sorted buckets (``levels``: a sequence of (entries, directory,
 * directory itemsize, shift), as bucket_lookup takes, or of packed uint32 entries (entries,
 * directory, directory itemsize, prefix bits, id bits), as packed_lookup takes), plus ``extra_ids`` (the unsorted recent
 * inserts' candidates), deduplicated, removed ids dropped (``alive``: one byte per id), then each
 * candidate verified as sketch_verify does. */
static PyObject *lsh_query(PyObject *self, PyObject *args) {
    PyObject *levels, *result = NULL;
    Py_buffer pre, extra, sk, alive, qv;
    int nv, bands, rows, min_matches, width = 4;
    ints_t cand = {NULL, 0, 0};
    scored_t *scored = NULL;
    if (!PyArg_ParseTuple(args, "y*Oy*y*y*iy*iii|i", &pre, &levels, &extra, &sk, &alive, &nv, &qv, &bands, &rows,
                          &min_matches, &width))
        return NULL;
    Py_ssize_t row_bytes = row_size(width, nv);
    Py_ssize_t nrows = nv > 0 ? sk.len / row_bytes : 0;
    if (nv < 1 || (width != 0 && width != 1 && width != 4) || bands < 1 || rows < 1 || (Py_ssize_t)bands * rows > nv ||
        sk.len % row_bytes || qv.len != query_size(width, nv) || pre.len % 8 || extra.len % 8 || alive.len < nrows || !PySequence_Check(levels)) {
        PyErr_SetString(PyExc_ValueError, "lsh_query: inconsistent array sizes");
        goto done;
    }
    {
        const uint64_t *pv = pre.buf;
        Py_ssize_t m = pre.len / 8, nlevels = PySequence_Size(levels);
        for (Py_ssize_t l = 0; l < nlevels; l++) {
            PyObject *level = PySequence_GetItem(levels, l);
            if (!level) goto done;
            Py_buffer entries, directory;
            int dsize, shift, id_bits = 0;
            if (!PyArg_ParseTuple(level, "y*y*ii|i", &entries, &directory, &dsize, &shift, &id_bits)) {
                Py_DECREF(level);
                goto done;
            }
            Py_DECREF(level);
            if (id_bits) { /* packed entries: (entries, directory, dsize, prefix, id_bits) */
                Py_ssize_t pn = entries.len / 4, pdir = (dsize == 4 || dsize == 8) ? directory.len / dsize : 0;
                int bad = (dsize != 4 && dsize != 8) || entries.len % 4 || directory.len != pdir * dsize ||
                          !packed_ok(shift, id_bits, pdir);
                if (!bad) {
                    packed_t p = packed_view(entries.buf, pn, directory.buf, dsize, pdir, shift, id_bits);
                    int rc = packed_scan_many(&p, pv, m, NULL, &cand);
                    bad = rc == -2 ? 2 : rc < 0;
                }
                PyBuffer_Release(&entries);
                PyBuffer_Release(&directory);
                if (bad == 2) { PyErr_NoMemory(); goto done; }
                if (bad) { PyErr_SetString(PyExc_ValueError, "lsh_query: the directory does not fit the entries"); goto done; }
                continue;
            }
            Py_ssize_t n = entries.len / 8, ndir = dsize > 0 ? directory.len / dsize : 0;
            int bad = (dsize != 4 && dsize != 8) || entries.len % 8 || directory.len != ndir * dsize || ndir < 2 ||
                      shift < 1 || shift > 63;
            if (!bad) {
                int rc = bucket_scan_many(entries.buf, n, directory.buf, dsize, ndir, shift, pv, m, NULL, &cand);
                bad = rc == -2 ? 2 : rc < 0;
            }
            PyBuffer_Release(&entries);
            PyBuffer_Release(&directory);
            if (bad == 2) { PyErr_NoMemory(); goto done; }
            if (bad) { PyErr_SetString(PyExc_ValueError, "lsh_query: the directory does not fit the entries"); goto done; }
        }
        const int64_t *xv = extra.buf;
        for (Py_ssize_t j = 0; j < extra.len / 8; j++)
            if (ints_push(&cand, xv[j]) < 0) { PyErr_NoMemory(); goto done; }
    }
    {
        Py_ssize_t kept = 0;
        if (cand.len > 1) qsort(cand.items, (size_t)cand.len, sizeof(int64_t), cmp_i64);
        scored = malloc(sizeof(scored_t) * (size_t)(cand.len ? cand.len : 1));
        if (!scored) { PyErr_NoMemory(); goto done; }
        const unsigned char *live = alive.buf;
        for (Py_ssize_t j = 0; j < cand.len; j++) {
            int64_t i = cand.items[j];
            if (j && i == cand.items[j - 1]) continue;
            if (i < 0 || i >= nrows) {
                PyErr_SetString(PyExc_IndexError, "lsh_query: a bucket holds an id past the sketches");
                goto done;
            }
            if (!live[i]) continue;
            int count = verified_row(sk.buf, i, qv.buf, width, nv, bands, rows, min_matches);
            if (count >= 0) {
                scored[kept].id = i;
                scored[kept].count = count;
                kept++;
            }
        }
        if (kept > 1) qsort(scored, (size_t)kept, sizeof(scored_t), cmp_scored);
        PyObject *ids = PyList_New(kept), *counts = PyList_New(kept);
        if (!ids || !counts) { Py_XDECREF(ids); Py_XDECREF(counts); goto done; }
        for (Py_ssize_t j = 0; j < kept; j++) {
            PyList_SET_ITEM(ids, j, PyLong_FromLongLong(scored[j].id));
            PyList_SET_ITEM(counts, j, PyLong_FromLong(scored[j].count));
        }
        result = PyTuple_Pack(2, ids, counts);
        Py_DECREF(ids);
        Py_DECREF(counts);
    }
done:
    free(cand.items);
    free(scored);
    PyBuffer_Release(&pre);
    PyBuffer_Release(&extra);
    PyBuffer_Release(&sk);
    PyBuffer_Release(&alive);
    PyBuffer_Release(&qv);
    return result;
}

static PyMethodDef methods[] = {
    {"lower_bound_sorted", lower_bound_sorted, METH_VARARGS, "searchsorted for ascending needles, galloping."},
    {"merge_runs", merge_runs, METH_VARARGS, "Merge two sorted key arrays (and their values) in one pass."},
    {"bucket_directory", bucket_directory, METH_VARARGS, "The LSH buckets' directory of sorted entries."},
    {"probe", probe, METH_VARARGS, "Probe one query against a segment's sorted tables."},
    {"brute", brute, METH_VARARGS, "Compare one query with every fingerprint of a buffer."},
    {"bucket_lookup", bucket_lookup, METH_VARARGS, "Look up LSH band key prefixes in sorted buckets."},
    {"packed_lookup", packed_lookup, METH_VARARGS, "Look up keys in packed 4-byte buckets."},
    {"packed_probe", packed_probe, METH_VARARGS, "Probe one query against the tables' packed base."},
    {"packed_sort_form", packed_sort_form, METH_VARARGS, "Packed entries as their sort values, in one pass."},
    {"band_keys", band_keys, METH_VARARGS, "64-bit LSH band keys of a batch of sketches."},
    {"lsh_query", lsh_query, METH_VARARGS, "One MinHash-LSH lookup: buckets, dedupe, verification."},
    {"sketch_verify", sketch_verify, METH_VARARGS, "Count equal sketch values of LSH candidates, band-checked."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_probe", "Single-query index probe.", -1, methods};

PyMODINIT_FUNC PyInit__probe(void) { return PyModule_Create(&module); }
