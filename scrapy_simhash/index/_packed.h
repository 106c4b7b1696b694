/* The packed 4-byte table entries (scrapy_simhash/index/packed_buckets.py) in C: lookups, the
 * simhash tables' single-query probe over them, and their sort values for a merge. Included by
 * _probe.c after its helpers, which these use (ints_t, hits_t, hit_if_near, hits_to_list, dir_at,
 * lower32, PREFETCH). */
#ifndef SCRAPY_SIMHASH_PACKED_H
#define SCRAPY_SIMHASH_PACKED_H

/* One packed table as the lookups read it: uint32 entries ``tag << id_bits | id``, sorted within each
 * cell, and the directory of the cells' starts (``dsize`` 4 or 8 bytes an offset, ``ndir`` offsets). A
 * key's top ``prefix`` bits name its cell (high bits) and its tag (the low ``tag_bits``). */
typedef struct {
    const uint32_t *ev;
    Py_ssize_t n;
    const void *directory;
    int dsize;
    Py_ssize_t ndir;
    int prefix, id_bits, tag_bits;
} packed_t;

static packed_t packed_view(const void *entries, Py_ssize_t n, const void *directory, int dsize, Py_ssize_t ndir,
                            int prefix, int id_bits) {
    packed_t p = {entries, n, directory, dsize, ndir, prefix, id_bits, 32 - id_bits < prefix ? 32 - id_bits : prefix};
    return p;
}

static inline uint64_t packed_cell(const packed_t *p, uint64_t key) {
    return (key >> (64 - p->prefix)) >> p->tag_bits;
}

/* Lookups of a batch are independent random reads of two large arrays (the directory, then the cell's
 * entries), each a cache and TLB miss: one after the other, each waits ~100-300 ns. packed_scan_many
 * asks for the directory offsets PACKED_CELL_AHEAD keys ahead and for the entries those offsets point to
 * PACKED_ENTRIES_AHEAD keys ahead, so that the misses of several keys overlap (as bucket_lookup does).
 * A prefetch is only a hint and never faults: every read is checked as before. */
#define PACKED_CELL_AHEAD PREFETCH_AHEAD
#define PACKED_ENTRIES_AHEAD (PREFETCH_AHEAD / 2)

static inline void packed_prefetch_cell(const packed_t *p, uint64_t key) {
    uint64_t cell = packed_cell(p, key);
    if ((Py_ssize_t)cell + 1 < p->ndir) PREFETCH((const char *)p->directory + cell * (uint64_t)p->dsize);
}

static inline void packed_prefetch_entries(const packed_t *p, uint64_t key) {
    uint64_t cell = packed_cell(p, key);
    if ((Py_ssize_t)cell + 1 >= p->ndir) return;
    Py_ssize_t lo = dir_at(p->directory, p->dsize, cell), hi = dir_at(p->directory, p->dsize, cell + 1);
    if (lo < 0 || hi > p->n || lo >= hi) return;
    PREFETCH(p->ev + lo);
    PREFETCH(p->ev + hi - 1); /* a cell of ~16 entries may cross a cache line */
}

/* The ids of the entries under ``key`` (a full uint64 key, left-aligned): a binary search of the key's
 * cell finds the first entry with its tag. Appended to ``out_ids`` (and ``position`` to ``out_pos``
 * for each, when given). Returns 0, -1 when the directory does not fit the entries, -2 out of memory. */
static int packed_scan(const packed_t *p, uint64_t key, ints_t *out_pos, int64_t position, ints_t *out_ids) {
    uint64_t pre = key >> (64 - p->prefix);
    uint64_t cell = pre >> p->tag_bits, tag = pre & ((1ULL << p->tag_bits) - 1), id_mask = (1ULL << p->id_bits) - 1;
    if ((Py_ssize_t)cell + 1 >= p->ndir) return -1;
    Py_ssize_t lo = dir_at(p->directory, p->dsize, cell), hi = dir_at(p->directory, p->dsize, cell + 1);
    if (lo < 0 || hi > p->n || lo > hi) return -1;
    const uint32_t *ev = p->ev;
    uint32_t first = (uint32_t)(tag << p->id_bits);
    for (Py_ssize_t at = lo + lower32(ev + lo, hi - lo, first); at < hi && ((uint64_t)ev[at] >> p->id_bits) == tag; at++) {
        if (out_pos && ints_push(out_pos, position) < 0) return -2;
        if (ints_push(out_ids, (int64_t)(ev[at] & id_mask)) < 0) return -2;
    }
    return 0;
}

/* packed_scan of each of the ``m`` keys (``out_pos``, when given, receives the key's index), the reads
 * of later keys asked for ahead (see PACKED_CELL_AHEAD). Returns as packed_scan. */
static int packed_scan_many(const packed_t *p, const uint64_t *keys, Py_ssize_t m, ints_t *out_pos, ints_t *out_ids) {
    if (!p->n) return 0;
    for (Py_ssize_t j = 0; j < m && j < PACKED_CELL_AHEAD; j++) packed_prefetch_cell(p, keys[j]);
    for (Py_ssize_t j = 0; j < m && j < PACKED_ENTRIES_AHEAD; j++) packed_prefetch_entries(p, keys[j]);
    for (Py_ssize_t j = 0; j < m; j++) {
        if (j + PACKED_CELL_AHEAD < m) packed_prefetch_cell(p, keys[j + PACKED_CELL_AHEAD]);
        if (j + PACKED_ENTRIES_AHEAD < m) packed_prefetch_entries(p, keys[j + PACKED_ENTRIES_AHEAD]);
        int rc = packed_scan(p, keys[j], out_pos, j, out_ids);
        if (rc < 0) return rc;
    }
    return 0;
}

/* Whether (prefix, id_bits) describe packed entries of 32 bits that a directory of ``ndir``
 * cells can index: what packed_scan relies on. */
static int packed_ok(int prefix, int id_bits, Py_ssize_t ndir) {
    if (id_bits < 1 || id_bits > 32 || prefix < 1 || prefix + id_bits > 64) return 0;
    int tag_bits = 32 - id_bits < prefix ? 32 - id_bits : prefix;
    return ndir == ((Py_ssize_t)1 << (prefix - tag_bits)) + 1;
}

/* packed_lookup(entries, directory, dir_itemsize, prefix, id_bits, keys) -> (positions bytes, ids bytes)
 *
 * packed_buckets.PackedBuckets.lookup in one call: for each uint64 band key of ``keys``, the
 * ids of the uint32 entries with its prefix. Both outputs are int64 arrays' bytes: the key's
 * position in ``keys``, the id. */
static PyObject *packed_lookup(PyObject *self, PyObject *args) {
    Py_buffer entries, directory, keys;
    int dsize, prefix, id_bits;
    PyObject *result = NULL;
    ints_t pos = {NULL, 0, 0}, ids = {NULL, 0, 0};
    if (!PyArg_ParseTuple(args, "y*y*iiiy*", &entries, &directory, &dsize, &prefix, &id_bits, &keys)) return NULL;
    Py_ssize_t n = entries.len / 4, ndir = (dsize == 4 || dsize == 8) ? directory.len / dsize : 0;
    if ((dsize != 4 && dsize != 8) || entries.len % 4 || keys.len % 8 || directory.len != ndir * dsize ||
        !packed_ok(prefix, id_bits, ndir)) {
        PyErr_SetString(PyExc_ValueError, "packed_lookup: inconsistent array sizes");
        goto done;
    }
    {
        packed_t p = packed_view(entries.buf, n, directory.buf, dsize, ndir, prefix, id_bits);
        int rc = packed_scan_many(&p, keys.buf, keys.len / 8, &pos, &ids);
        if (rc == -2) { PyErr_NoMemory(); goto done; }
        if (rc < 0) { PyErr_SetString(PyExc_ValueError, "packed_lookup: the directory does not fit the entries"); goto done; }
        static const char empty[1] = {0};
        result = Py_BuildValue("(y#y#)", pos.items ? (const char *)pos.items : empty, pos.len * 8,
                               ids.items ? (const char *)ids.items : empty, ids.len * 8);
    }
done:
    free(pos.items);
    free(ids.items);
    PyBuffer_Release(&entries);
    PyBuffer_Release(&directory);
    PyBuffer_Release(&keys);
    return result;
}

/* packed_probe(entries, directory, dir_itemsize, prefix, id_bits, hashes, seqs, shifts, masks, outs,
 *              tables, depth, key_bits, key_width, query, k) -> list of (seq, simhash, distance)
 *
 * probe() over the simhash tables' packed base (tables/packed_tables.py): each table's combined
 * key, left-aligned (``key_width`` bits), looked up as packed_lookup does; each row found kept when
 * within ``k`` of the query, once. */
static PyObject *packed_probe(PyObject *self, PyObject *args) {
    Py_buffer entries, directory, hashes, seqs, shifts, masks, outs;
    int dsize, prefix, id_bits, ntables, depth, key_bits, width, k;
    unsigned long long query;
    PyObject *result = NULL;
    hits_t hits = {NULL, 0, 0};
    ints_t rows = {NULL, 0, 0};
    uint64_t *keys = NULL;
    if (!PyArg_ParseTuple(args, "y*y*iiiy*y*y*y*y*iiiiKi", &entries, &directory, &dsize, &prefix, &id_bits, &hashes,
                          &seqs, &shifts, &masks, &outs, &ntables, &depth, &key_bits, &width, &query, &k))
        return NULL;
    Py_ssize_t n = entries.len / 4, ndir = (dsize == 4 || dsize == 8) ? directory.len / dsize : 0;
    Py_ssize_t nrows = hashes.len / 8;
    if ((dsize != 4 && dsize != 8) || entries.len % 4 || directory.len != ndir * dsize ||
        !packed_ok(prefix, id_bits, ndir) || seqs.len != nrows * 8 || shifts.len != (Py_ssize_t)ntables * depth * 8 ||
        masks.len != shifts.len || outs.len != shifts.len || key_bits < 0 || key_bits > 64 || width < 1 ||
        width > 64 || ntables < 1 || depth < 1) {
        PyErr_SetString(PyExc_ValueError, "packed_probe: inconsistent array sizes");
        goto done;
    }
    const uint64_t *sh = shifts.buf, *mk = masks.buf, *ou = outs.buf, *hv = hashes.buf;
    const uint64_t q = (uint64_t)query;
    keys = malloc(sizeof(uint64_t) * (size_t)ntables);
    if (!keys) goto nomem;
    for (int t = 0; t < ntables; t++) { /* every table's key first: their lookups then overlap */
        uint64_t key = 0;
        for (int s = 0; s < depth; s++) {
            Py_ssize_t i = (Py_ssize_t)t * depth + s;
            key |= ((q >> sh[i]) & mk[i]) << ou[i];
        }
        if (key_bits < 64) key |= (uint64_t)t << key_bits;
        if (width < 64) key <<= (64 - width);
        keys[t] = key;
    }
    {
        packed_t p = packed_view(entries.buf, n, directory.buf, dsize, ndir, prefix, id_bits);
        int rc = packed_scan_many(&p, keys, ntables, NULL, &rows);
        if (rc == -2) goto nomem;
        if (rc < 0) goto corrupt;
    }
    for (Py_ssize_t j = 0; j < rows.len; j++) {
        int rc = hit_if_near(&hits, hv, nrows, rows.items[j], q, k);
        if (rc == -1) goto corrupt;
        if (rc == -2) goto nomem;
    }
    result = hits_to_list(&hits, seqs.buf, hv);
    goto done;
corrupt:
    PyErr_SetString(PyExc_ValueError, "packed_probe: the directory or a row does not fit (damaged table)");
    goto done;
nomem:
    PyErr_NoMemory();
done:
    free(hits.items);
    free(rows.items);
    free(keys);
    PyBuffer_Release(&entries);
    PyBuffer_Release(&directory);
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&seqs);
    PyBuffer_Release(&shifts);
    PyBuffer_Release(&masks);
    PyBuffer_Release(&outs);
    return result;
}

/* packed_sort_form(entries, directory, dir_itemsize, prefix, id_bits, new_id_bits, out[, first, last]):
 * each packed entry of the cells ``first`` to ``last`` (default: all) as ``key prefix << new_id_bits | id``
 * (uint64 ``out``, one per entry of those cells, in stored order): what
 * packed_buckets.PackedBuckets.sort_form computes, in one pass (a merge writes every entry again, a
 * slice of cells at a time when it streams into files). */
static PyObject *packed_sort_form(PyObject *self, PyObject *args) {
    Py_buffer entries, directory, out;
    int dsize, prefix, id_bits, new_bits;
    Py_ssize_t first = 0, last = -1;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*y*iiiiw*|nn", &entries, &directory, &dsize, &prefix, &id_bits, &new_bits, &out,
                          &first, &last))
        return NULL;
    Py_ssize_t n = entries.len / 4, ndir = (dsize == 4 || dsize == 8) ? directory.len / dsize : 0;
    if (last < 0) last = ndir - 1;
    if ((dsize != 4 && dsize != 8) || entries.len % 4 || directory.len != ndir * dsize ||
        !packed_ok(prefix, id_bits, ndir) || new_bits < id_bits || new_bits > 32 || prefix + new_bits > 64 ||
        first < 0 || first > last || last > ndir - 1) {
        PyErr_SetString(PyExc_ValueError, "packed_sort_form: inconsistent array sizes");
        goto done;
    }
    {
        int tag_bits = 32 - id_bits < prefix ? 32 - id_bits : prefix;
        const uint32_t *ev = entries.buf;
        uint64_t *ov = out.buf, id_mask = (1ULL << id_bits) - 1;
        Py_ssize_t start = dir_at(directory.buf, dsize, (uint64_t)first), end = start, bad = 0;
        if (start > n || out.len != (dir_at(directory.buf, dsize, (uint64_t)last) - start) * 8) {
            PyErr_SetString(PyExc_ValueError, "packed_sort_form: inconsistent array sizes");
            goto done;
        }
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t c = first; c < last; c++) {
            Py_ssize_t lo = dir_at(directory.buf, dsize, (uint64_t)c), hi = dir_at(directory.buf, dsize, (uint64_t)c + 1);
            if (lo != end || hi < lo || hi > n) {
                bad = 1;
                break;
            }
            for (Py_ssize_t at = lo; at < hi; at++) {
                uint64_t e = ev[at], p = ((uint64_t)c << tag_bits) | (e >> id_bits);
                ov[at - start] = (p << new_bits) | (e & id_mask);
            }
            end = hi;
        }
        Py_END_ALLOW_THREADS
        if (bad || (last == ndir - 1 && end != n)) {
            PyErr_SetString(PyExc_ValueError, "packed_sort_form: the directory does not fit the entries");
            goto done;
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&entries);
    PyBuffer_Release(&directory);
    PyBuffer_Release(&out);
    return result;
}

#endif
