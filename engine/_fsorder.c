/* The compiled twin of the fair-share order's hot loops (issue 16): the usage windows of every account
 * (``tenants.Ledger.window_all``), their sums up each account's chain of tree nodes, the tree descent to the
 * under-served bucket and the bucket walk up to the next job to hand over (borrowing-cap room, the pass's hint)
 * of ``policies.fairshare.FairShareQueue.funded_order``.
 *
 * No state of its own: functions over the engine's own Python objects (the ledger's ``hist``/``cum``/``rate``/
 * ``last``/``ptr``, a plan's ``acct_chain``, a ``Tenants``' ``children``/``frac``/``paths``, the bucket's job
 * iterator, the wait reasons, the class index's ``dirty`` sets), reading them and writing what the Python code
 * writes (the ledger's pointers, ``dirty``, notes through the engine's own ``note``), in the same order. ``engine/fsorder.py``
 * selects them (``QUOTALOOP_ENGINE``); the Python code stays the readable reference and the oracle
 * (tests/engine/test_compiled_fairshare.py).
 *
 * Invariants kept equal to the Python code:
 * - the same float arithmetic in the same order (IEEE doubles, no fused multiply-add: setup.py passes
 *   ``-ffp-contract=off``): window = c + r * (t - last) - (c0 + r0 * (lo - t0)), usage summed account by account
 *   in account order, each account's window added up its chain bucket first;
 * - the same ties: the descent compares the tuple keys ``(0, usage / frac, path)`` (``(1, usage, path)`` for a
 *   zero fraction) as Python does: the first element that is not ``==`` decides by ``<`` (so a NaN never wins),
 *   paths by code point (``PyUnicode_Compare``); the first child wins a full tie;
 * - the walk calls back into Python (``note``, the pass's ``hint``) for every job the Python loop would, with the
 *   same arguments, in the same order; it never yields: it returns the job to hand over, and the order (Python)
 *   yields it, so the pass still drives the order lazily.
 * - ``Funded`` (the cursor: ``funded_order``'s whole loop for an order without the class index, set-up included:
 *   the pending counts' copy, ``tree_usage``'s sums and the total, from the budget version's arguments that the
 *   order keeps on its ``_Plan``) keeps the Python loop's state (remaining counts, projected usage, one iterator
 *   per bucket) in the same Python lists and does their arithmetic as Python does (ints for counts, doubles for
 *   usage); it is an iterator (``yield from`` in the order) as well as ``next()``; with the pass's ``hint.examine`` it runs
 *   ``easy._backfill``'s examination of each handed-over job (placement through the pool's own methods,
 *   ``sim.start``, ``nothing_fits``, the failure by shape), so only starts call back into the simulator.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

#ifndef QL_SOURCE_SHA256  /* setup.py passes the source's sha256: tests tell a stale build from a current one */
#define QL_SOURCE_SHA256 "unknown"
#endif

static int as_double(PyObject *o, double *out)
{
    *out = PyFloat_AsDouble(o);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static int need_list(PyObject *o, const char *what)
{
    if (!PyList_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a list, got %.80s", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    return 0;
}

/* window_all(hist, cum, rate, last, ptr, t, lookback_s) -> list of floats; advances ptr in place */
static PyObject *window_all(PyObject *self, PyObject *args)
{
    PyObject *hist, *cum, *rate, *last, *ptr;
    double t, L;
    if (!PyArg_ParseTuple(args, "OOOOOdd", &hist, &cum, &rate, &last, &ptr, &t, &L))
        return NULL;
    if (need_list(hist, "hist") || need_list(cum, "cum") || need_list(rate, "rate") || need_list(last, "last")
        || need_list(ptr, "ptr"))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(hist);
    if (PyList_GET_SIZE(cum) < n || PyList_GET_SIZE(rate) < n || PyList_GET_SIZE(last) < n
        || PyList_GET_SIZE(ptr) < n) {
        PyErr_SetString(PyExc_ValueError, "window_all: per-account lists of different lengths");
        return NULL;
    }
    double lo = t - L;
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t a = 0; a < n; a++) {
        PyObject *h = PyList_GET_ITEM(hist, a);
        if (need_list(h, "hist[a]"))
            goto fail;
        Py_ssize_t k = PyLong_AsSsize_t(PyList_GET_ITEM(ptr, a));
        if (k == -1 && PyErr_Occurred())
            goto fail;
        Py_ssize_t top = PyList_GET_SIZE(h) - 1;
        if (k < 0 || k > top) {
            PyErr_SetString(PyExc_IndexError, "window_all: pointer outside the history");
            goto fail;
        }
        double t0, c0, r0, c, r, last_t;
        for (;;) {
            PyObject *e = PyList_GET_ITEM(h, k);
            if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 3) {
                PyErr_SetString(PyExc_TypeError, "window_all: history entries are (t, cum, rate) tuples");
                goto fail;
            }
            if (as_double(PyTuple_GET_ITEM(e, 0), &t0))
                goto fail;
            if (k >= top)
                break;
            double tn;
            PyObject *nx = PyList_GET_ITEM(h, k + 1);
            if (!PyTuple_Check(nx) || PyTuple_GET_SIZE(nx) != 3) {
                PyErr_SetString(PyExc_TypeError, "window_all: history entries are (t, cum, rate) tuples");
                goto fail;
            }
            if (as_double(PyTuple_GET_ITEM(nx, 0), &tn))
                goto fail;
            if (!(tn <= lo))
                break;
            k++;
        }
        PyObject *pk = PyLong_FromSsize_t(k);
        if (pk == NULL)
            goto fail;
        if (PyList_SetItem(ptr, a, pk) < 0)  /* steals pk */
            goto fail;
        PyObject *e = PyList_GET_ITEM(h, k);
        if (as_double(PyTuple_GET_ITEM(e, 1), &c0) || as_double(PyTuple_GET_ITEM(e, 2), &r0)
            || as_double(PyList_GET_ITEM(cum, a), &c) || as_double(PyList_GET_ITEM(rate, a), &r)
            || as_double(PyList_GET_ITEM(last, a), &last_t))
            goto fail;
        double before = t0 > -INFINITY ? c0 + r0 * (lo - t0) : 0.0;
        PyObject *w = PyFloat_FromDouble(c + r * (t - last_t) - before);
        if (w == NULL)
            goto fail;
        PyList_SET_ITEM(out, a, w);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* tree_usage(window, acct_chain, n_nodes) -> list of n_nodes floats: every account's window added to each node
 * of its chain (accounts in order, a chain bucket first), nodes without usage 0.0 */
static PyObject *tree_usage_core(PyObject *window, PyObject *chains, Py_ssize_t n);

static PyObject *tree_usage(PyObject *self, PyObject *args)
{
    PyObject *window, *chains;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOn", &window, &chains, &n))
        return NULL;
    return tree_usage_core(window, chains, n);
}

static PyObject *tree_usage_core(PyObject *window, PyObject *chains, Py_ssize_t n)
{
    if (need_list(window, "window") || need_list(chains, "acct_chain"))
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "tree_usage: negative node count");
        return NULL;
    }
    double *usage = PyMem_Calloc(n ? n : 1, sizeof(double));
    if (usage == NULL)
        return PyErr_NoMemory();
    Py_ssize_t m = PyList_GET_SIZE(window) < PyList_GET_SIZE(chains) ? PyList_GET_SIZE(window)
                                                                      : PyList_GET_SIZE(chains);  /* zip */
    for (Py_ssize_t a = 0; a < m; a++) {
        double u;
        if (as_double(PyList_GET_ITEM(window, a), &u))
            goto fail;
        if (u == 0.0)  /* Python's ``if u:`` (a NaN is true there and here) */
            continue;
        PyObject *chain = PyList_GET_ITEM(chains, a);
        if (!PyTuple_Check(chain)) {
            PyErr_SetString(PyExc_TypeError, "tree_usage: chains are tuples of node indexes");
            goto fail;
        }
        for (Py_ssize_t q = 0; q < PyTuple_GET_SIZE(chain); q++) {
            Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(chain, q));
            if (i == -1 && PyErr_Occurred())
                goto fail;
            if (i < 0 || i >= n) {
                PyErr_SetString(PyExc_IndexError, "tree_usage: node index out of range");
                goto fail;
            }
            usage[i] += u;
        }
    }
    PyObject *out = PyList_New(n);
    if (out == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyFloat_FromDouble(usage[i]);
        if (x == NULL) {
            Py_DECREF(out);
            goto fail;
        }
        PyList_SET_ITEM(out, i, x);
    }
    PyMem_Free(usage);
    return out;
fail:
    PyMem_Free(usage);
    return NULL;
}

/* descend(children, rem, frac, usage, paths) -> the bucket the descent reaches from the root (node 0): at each
 * node the child with pending jobs (rem > 0) and the lowest key (0, usage / frac, path), zero-fraction children
 * (1, usage, path) after the others */
static Py_ssize_t descend_core(PyObject *children, PyObject *rem, PyObject *frac, PyObject *usage, PyObject *paths);

static PyObject *descend(PyObject *self, PyObject *args)
{
    PyObject *children, *rem, *frac, *usage, *paths;
    if (!PyArg_ParseTuple(args, "OOOOO", &children, &rem, &frac, &usage, &paths))
        return NULL;
    Py_ssize_t node = descend_core(children, rem, frac, usage, paths);
    return node < 0 ? NULL : PyLong_FromSsize_t(node);
}

/* descend's walk over checked lists: the bucket's index, or -1 with an exception set */
static Py_ssize_t descend_core(PyObject *children, PyObject *rem, PyObject *frac, PyObject *usage, PyObject *paths)
{
    if (need_list(children, "children") || need_list(rem, "rem") || need_list(frac, "frac")
        || need_list(usage, "usage") || need_list(paths, "paths"))
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(children);
    if (PyList_GET_SIZE(rem) < n || PyList_GET_SIZE(frac) < n || PyList_GET_SIZE(usage) < n
        || PyList_GET_SIZE(paths) < n) {
        PyErr_SetString(PyExc_ValueError, "descend: per-node lists of different lengths");
        return -1;
    }
    Py_ssize_t node = 0;
    for (;;) {
        if (n <= node) {
            PyErr_SetString(PyExc_IndexError, "descend: node index out of range");
            return -1;
        }
        PyObject *kids = PyList_GET_ITEM(children, node);
        if (need_list(kids, "children[node]"))
            return -1;
        Py_ssize_t nk = PyList_GET_SIZE(kids);
        if (nk == 0)
            return node;
        Py_ssize_t best = -1;
        int bcls = 0;
        double bval = 0.0;
        PyObject *bpath = NULL;
        for (Py_ssize_t q = 0; q < nk; q++) {
            Py_ssize_t c = PyLong_AsSsize_t(PyList_GET_ITEM(kids, q));
            if (c == -1 && PyErr_Occurred())
                return -1;
            if (c < 0 || c >= n) {
                PyErr_SetString(PyExc_IndexError, "descend: child index out of range");
                return -1;
            }
            long r = PyLong_AsLong(PyList_GET_ITEM(rem, c));
            if (r == -1 && PyErr_Occurred())
                return -1;
            if (r <= 0)
                continue;
            double f, u;
            if (as_double(PyList_GET_ITEM(frac, c), &f) || as_double(PyList_GET_ITEM(usage, c), &u))
                return -1;
            int cls = f > 0 ? 0 : 1;
            double val = f > 0 ? u / f : u;
            PyObject *path = PyList_GET_ITEM(paths, c);
            int less;
            if (best < 0)
                less = 1;
            else if (cls != bcls)
                less = cls < bcls;
            else if (val != bval)  /* tuple order: the first unequal element decides */
                less = val < bval;
            else {
                int cmp = PyUnicode_Compare(path, bpath);
                if (cmp == -1 && PyErr_Occurred())
                    return -1;
                less = cmp < 0;
            }
            if (less) {
                best = c;
                bcls = cls;
                bval = val;
                bpath = path;
            }
        }
        if (best < 0) {
            PyErr_SetString(PyExc_ValueError, "descend: no child with pending jobs");
            return -1;
        }
        node = best;
    }
}


/* seq[j] as a new reference (lists directly, anything else by its __getitem__) */
static PyObject *item(PyObject *seq, PyObject *j, Py_ssize_t ji)
{
    if (PyList_CheckExact(seq) && ji >= 0 && ji < PyList_GET_SIZE(seq)) {
        PyObject *x = PyList_GET_ITEM(seq, ji);
        Py_INCREF(x);
        return x;
    }
    return PyObject_GetItem(seq, j);
}

static PyObject *s_quota, *s_long, *s_n_failed_short;

/* note(j, r, now) unless reason[j] already is r */
static int note_if_new(PyObject *reason, PyObject *note, PyObject *j, Py_ssize_t ji, PyObject *r, PyObject *now)
{
    PyObject *old = item(reason, j, ji);
    if (old == NULL)
        return -1;
    int ne = PyObject_RichCompareBool(old, r, Py_NE);
    Py_DECREF(old);
    if (ne <= 0)
        return ne;
    PyObject *res = PyObject_CallFunctionObjArgs(note, j, r, now, NULL);
    if (res == NULL)
        return -1;
    Py_DECREF(res);
    return 0;
}

static PyObject *s_reservation, *s_fragmentation, *s_resources, *s_spec, *s_T;

/* truth of seq[j] */
static int item_true(PyObject *seq, PyObject *j, Py_ssize_t ji)
{
    PyObject *x = item(seq, j, ji);
    if (x == NULL)
        return -1;
    int t = PyObject_IsTrue(x);
    Py_DECREF(x);
    return t;
}

/* seq[j] as a C long long / double */
static int item_ll(PyObject *seq, PyObject *j, Py_ssize_t ji, long long *out)
{
    PyObject *x = item(seq, j, ji);
    if (x == NULL)
        return -1;
    *out = PyLong_AsLongLong(x);
    Py_DECREF(x);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* The pass's hint (``easy.node_pass``'s ``hint``) evaluated here from its ``spec`` tuple (now, est, inv, capped,
 * needs_cap, over_cap, limited, over_user, req_g, req_c, req_m, group, gang, bounds, procs, user_limit): the same
 * answers in the same order, the same writes (``failed[sh]``, ``state.n_failed_short``), the borrowing-cap and
 * user-limit checks and the pool's ``bounds`` called as the Python hint calls them. Called where the walk would
 * call the hint: the stop count already checked, ``failed[sh]`` absent or "long" (``was_long``). Returns a new
 * reference: the reason, None (examine j), or NULL on error. */
static PyObject *hint_inline(PyObject *spec, PyObject *state, PyObject *failed, PyObject *sh, PyObject *j,
                             Py_ssize_t ji, int was_long)
{
    PyObject **x = &PyTuple_GET_ITEM(spec, 0);
    PyObject *now = x[0], *est = x[1], *inv = x[2], *capped = x[3], *needs_cap = x[4], *over_cap = x[5];
    PyObject *limited = x[6], *over_user = x[7], *req_g = x[8], *req_c = x[9], *req_m = x[10], *group = x[11];
    PyObject *gangs = x[12], *bounds = x[13], *procs = x[14], *user_limit = x[15];
    int t;
    if (was_long) {  /* now + est[j] * inv > state.T: a "long" shape outside the hole */
        PyObject *e = item(est, j, ji), *T;
        if (e == NULL)
            return NULL;
        double ed = PyFloat_AsDouble(e), nd = PyFloat_AsDouble(now), id = PyFloat_AsDouble(inv), Td;
        Py_DECREF(e);
        if (PyErr_Occurred() || (T = PyObject_GetAttr(state, s_T)) == NULL)
            return NULL;
        Td = PyFloat_AsDouble(T);
        Py_DECREF(T);
        if (Td == -1.0 && PyErr_Occurred())
            return NULL;
        if (nd + ed * id > Td)
            return Py_NewRef(s_reservation);
    }
    if ((t = PyObject_IsTrue(capped)) < 0)
        return NULL;
    if (t) {
        if ((t = item_true(needs_cap, j, ji)) < 0)
            return NULL;
        if (t) {
            PyObject *o = PyObject_CallFunctionObjArgs(over_cap, j, now, NULL);
            if (o == NULL)
                return NULL;
            t = PyObject_IsTrue(o);
            Py_DECREF(o);
            if (t < 0)
                return NULL;
            if (t)
                return Py_NewRef(s_quota);
        }
    }
    if ((t = PyObject_IsTrue(limited)) < 0)
        return NULL;
    if (t) {
        PyObject *o = PyObject_CallOneArg(over_user, j);
        if (o == NULL)
            return NULL;
        t = PyObject_IsTrue(o);
        Py_DECREF(o);
        if (t < 0)
            return NULL;
        if (t)
            return Py_NewRef(user_limit);
    }
    long long g, c, m, bv[9];
    int big[9];  /* bounds beyond 64 bits (memory sums of nodes without a memory figure): +1 above, -1 below */
    if (item_ll(req_g, j, ji, &g) || item_ll(req_c, j, ji, &c) || item_ll(req_m, j, ji, &m))
        return NULL;
    int gang = item_true(gangs, j, ji);
    if (gang < 0)
        return NULL;
    PyObject *grp = item(group, j, ji);
    if (grp == NULL)
        return NULL;
    PyObject *b = PyObject_CallOneArg(bounds, grp);
    Py_DECREF(grp);
    if (b == NULL)
        return NULL;
    if (!PyTuple_Check(b) || PyTuple_GET_SIZE(b) != 9) {
        Py_DECREF(b);
        PyErr_SetString(PyExc_TypeError, "hint: bounds are a 9-tuple");
        return NULL;
    }
    for (int i = 0; i < 9; i++) {
        bv[i] = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(b, i), &big[i]);
        if (bv[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(b);
            return NULL;
        }
    }
    Py_DECREF(b);
#define GT(x, i) (big[i] ? big[i] < 0 : (x) > bv[i])  /* x > bounds[i], exactly */
    if (!(gang ? (GT(g, 3) || GT(c, 4) || GT(m, 5)) : (GT(g, 0) || GT(c, 1) || GT(m, 2))))
        return Py_NewRef(Py_None);
    if ((t = PyObject_IsTrue(procs)) < 0)
        return NULL;
    PyObject *r = !t && !GT(g, 6) && !GT(c, 7) && !GT(m, 8) ? s_fragmentation : s_resources;
#undef GT
    if (PyDict_SetItem(failed, sh, r) < 0)
        return NULL;
    PyObject *nfs = PyObject_GetAttr(state, s_n_failed_short), *one = NULL, *nn = NULL;
    if (nfs == NULL)
        return NULL;
    one = PyLong_FromLong(1);
    nn = one == NULL ? NULL : PyNumber_Add(nfs, one);
    Py_DECREF(nfs);
    Py_XDECREF(one);
    if (nn == NULL)
        return NULL;
    t = PyObject_SetAttr(state, s_n_failed_short, nn);
    Py_DECREF(nn);
    if (t < 0)
        return NULL;
    return Py_NewRef(r);
}

/* state.n_failed_short as a C integer */
static int read_count(PyObject *state, Py_ssize_t *out)
{
    PyObject *o = PyObject_GetAttr(state, s_n_failed_short);
    if (o == NULL)
        return -1;
    *out = PyLong_AsSsize_t(o);
    Py_DECREF(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* walk(it, st, room, dirty, acct, req_g, reason, note, now, hint, failed, shape, state, n_shapes): the bucket walk
 * of ``funded_order`` up to the next job to hand over. Consumes ``it`` until a job is neither held back by the
 * room (milli-GPUs under the tightest cap; None = uncapped: noted "quota") nor skipped by the pass's ``hint``
 * (noted with the hint's reason); returns that job, None when ``it`` is exhausted, or False when the hint stops the
 * order. ``st`` = [jobs taken, held-back jobs not yet counted], updated in place; ``dirty`` (None: the class index is
 * not tracked) gets every job taken. With ``hint`` None, ``failed`` ... ``n_shapes`` are not read. */
static PyObject *walk_core(PyObject *it, Py_ssize_t *taken_p, Py_ssize_t *held_p, PyObject *room, PyObject *dirty,
                           PyObject *acct, PyObject *req_g, PyObject *reason, PyObject *note, PyObject *now,
                           PyObject *hint, PyObject *failed, PyObject *shape, PyObject *state, PyObject *n_shapes);

static PyObject *walk(PyObject *self, PyObject *args)
{
    PyObject *it, *st, *room, *dirty, *acct, *req_g, *reason, *note, *now, *hint, *failed, *shape, *state, *n_shapes;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOO", &it, &st, &room, &dirty, &acct, &req_g, &reason, &note, &now,
                          &hint, &failed, &shape, &state, &n_shapes))
        return NULL;
    if (need_list(st, "st") || PyList_GET_SIZE(st) != 2) {
        PyErr_SetString(PyExc_TypeError, "walk: st is a list [taken, held]");
        return NULL;
    }
    if (hint != Py_None && !PyDict_Check(failed)) {
        PyErr_SetString(PyExc_TypeError, "walk: failed is a dict");
        return NULL;
    }
    Py_ssize_t taken = PyLong_AsSsize_t(PyList_GET_ITEM(st, 0));
    if (taken == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t held = PyLong_AsSsize_t(PyList_GET_ITEM(st, 1));
    if (held == -1 && PyErr_Occurred())
        return NULL;
    PyObject *result = walk_core(it, &taken, &held, room, dirty, acct, req_g, reason, note, now, hint, failed, shape,
                                 state, n_shapes);
    PyObject *pt = PyLong_FromSsize_t(taken), *ph = PyLong_FromSsize_t(held);
    if (pt == NULL || ph == NULL) {
        Py_XDECREF(pt);
        Py_XDECREF(ph);
        Py_XDECREF(result);
        return NULL;
    }
    PyList_SetItem(st, 0, pt);  /* steal; lists checked above */
    PyList_SetItem(st, 1, ph);
    return result;
}

/* walk's loop: ``taken`` and ``held`` counted in place (also on error) */
static PyObject *walk_core(PyObject *it, Py_ssize_t *taken_p, Py_ssize_t *held_p, PyObject *room, PyObject *dirty,
                           PyObject *acct, PyObject *req_g, PyObject *reason, PyObject *note, PyObject *now,
                           PyObject *hint, PyObject *failed, PyObject *shape, PyObject *state, PyObject *n_shapes)
{
    Py_ssize_t taken = *taken_p, held = *held_p;
    if (hint != Py_None && !PyDict_Check(failed)) {
        PyErr_SetString(PyExc_TypeError, "walk: failed is a dict");
        return NULL;
    }
    PyObject *spec = NULL;  /* the hint's inlinable form (``hint.spec``), if it has one */
    if (hint != Py_None) {
        spec = PyObject_GetAttr(hint, s_spec);
        if (spec == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                return NULL;
            PyErr_Clear();  /* a hint without a spec (tests' hints): called back */
        }
        if (spec != NULL && (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 16)) {
            Py_DECREF(spec);
            PyErr_SetString(PyExc_TypeError, "walk: hint.spec is a 16-tuple");
            return NULL;
        }
    }
    /* the stop test ``state.n_failed_short >= n_shapes`` on C integers: only the hint's answers (below) count a
     * shape failed, so the count is read again after each of them, not per job */
    Py_ssize_t nfs = 0, ns = 0;
    if (hint != Py_None) {
        ns = PyLong_AsSsize_t(n_shapes);
        if ((ns == -1 && PyErr_Occurred()) || read_count(state, &nfs) < 0) {
            Py_XDECREF(spec);
            return NULL;
        }
    }
    PyObject *result = NULL;  /* new reference, or NULL on error */
    for (;;) {
        PyObject *j = PyIter_Next(it);
        if (j == NULL) {
            if (!PyErr_Occurred()) {
                result = Py_None;
                Py_INCREF(result);
            }
            break;
        }
        taken++;
        Py_ssize_t ji = PyLong_AsSsize_t(j);
        if (ji == -1 && PyErr_Occurred())
            goto drop_j;
        if (room == Py_None && dirty == Py_None)
            goto hinted;  /* nothing below reads the request */
        PyObject *g = item(req_g, j, ji);
        if (g == NULL)
            goto drop_j;
        if (dirty != Py_None) {  /* dirty[acct[j]][req_g[j]].add(j) */
            PyObject *a = item(acct, j, ji), *da = NULL, *dg = NULL;
            int bad = a == NULL || (da = PyObject_GetItem(dirty, a)) == NULL || (dg = PyObject_GetItem(da, g)) == NULL
                      || PySet_Add(dg, j) < 0;
            Py_XDECREF(a);
            Py_XDECREF(da);
            Py_XDECREF(dg);
            if (bad) {
                Py_DECREF(g);
                goto drop_j;
            }
        }
        if (room != Py_None) {
            int over = PyObject_RichCompareBool(g, room, Py_GT);
            if (over < 0) {
                Py_DECREF(g);
                goto drop_j;
            }
            if (over) {  /* held back by a borrowing cap: left out of this pass's order */
                Py_DECREF(g);
                held++;
                if (note_if_new(reason, note, j, ji, s_quota, now) < 0)
                    goto drop_j;
                Py_DECREF(j);
                continue;
            }
        }
        Py_DECREF(g);
    hinted:
        if (hint != Py_None) {  /* the pass already knows this job cannot start: skip it cheaply */
            if (nfs >= ns) {
                Py_DECREF(j);
                result = Py_False;
                Py_INCREF(result);
                break;
            }
            PyObject *sh = item(shape, j, ji);
            if (sh == NULL)
                goto drop_j;
            PyObject *r = PyDict_GetItemWithError(failed, sh);  /* borrowed */
            if (r == NULL && PyErr_Occurred()) {
                Py_DECREF(sh);
                goto drop_j;
            }
            Py_XINCREF(r);
            int ask = r == NULL || r == Py_None, was_long = 0;
            if (!ask) {
                ask = was_long = PyObject_RichCompareBool(r, s_long, Py_EQ);
                if (ask < 0) {
                    Py_DECREF(r);
                    Py_DECREF(sh);
                    goto drop_j;
                }
            }
            if (ask && spec != NULL) {  /* the hint's answer without its Python frame */
                Py_XDECREF(r);
                r = hint_inline(spec, state, failed, sh, j, ji, was_long);
                Py_DECREF(sh);
                if (r == NULL)
                    goto drop_j;
                if (read_count(state, &nfs) < 0) {
                    Py_DECREF(r);
                    goto drop_j;
                }
            } else if (ask) {
                Py_DECREF(sh);
                Py_XDECREF(r);
                r = PyObject_CallOneArg(hint, j);
                if (r == NULL)
                    goto drop_j;
                if (read_count(state, &nfs) < 0) {
                    Py_DECREF(r);
                    goto drop_j;
                }
                if (r == Py_False) {
                    Py_DECREF(j);
                    result = r;  /* the reference the call returned */
                    break;
                }
            } else {
                Py_DECREF(sh);
            }
            if (r != Py_None) {
                int bad = note_if_new(reason, note, j, ji, r, now) < 0;
                Py_DECREF(r);
                if (bad)
                    goto drop_j;
                Py_DECREF(j);
                continue;
            }
            Py_DECREF(r);
        }
        result = j;  /* handed over: the iterator's reference */
        break;
    drop_j:
        Py_DECREF(j);
        break;
    }
    Py_XDECREF(spec);
    *taken_p = taken;
    *held_p = held;
    return result;
}

/* ------------------------------------------------------------------------------------------------------------
 * Funded: the whole of ``FairShareQueue.funded_order``'s loop for an order without the class index (descents,
 * borrowing-cap room, the buckets' iterators, the walk, the counts and the projected usage after a start), as a
 * cursor: ``next()`` returns the next job to hand over, None when the order is exhausted, False when the pass's
 * hint stops it. The Python generator yields what it returns, so the pass still drives the order lazily; the
 * job it handed over last is looked at (``status[j] == RUNNING``) when ``next()`` is called again, where the
 * Python loop looks at it after its ``yield``. Held-back jobs are added to ``queue.held_seen`` where the Python
 * loop adds them (before a hand-over and when the order ends).
 */
typedef struct {
    PyObject_HEAD
    PyObject *queue, *children, *rem, *frac, *usage, *paths, *capped, *held_g, *capf, *chains, *bucket_accts;
    PyObject *funded, *charge, *est, *status, *running, *acct, *req_g, *reason, *note, *now, *heads, *merge;
    PyObject *it, *room, *pending;  /* the bucket walked (borrowed from heads), its room, the job handed over */
    double horizon;
    Py_ssize_t total, node, taken, n_held;
    int done;
} Funded;

static PyObject *s_hint, *s_failed, *s_shape, *s_state, *s_n_shapes, *s_held_seen, *s_inf;

static void funded_dealloc(Funded *f)
{
    PyObject **fields[] = {&f->queue, &f->children, &f->rem, &f->frac, &f->usage, &f->paths, &f->capped, &f->held_g,
                           &f->capf, &f->chains, &f->bucket_accts, &f->funded, &f->charge, &f->est, &f->status,
                           &f->running, &f->acct, &f->req_g, &f->reason, &f->note, &f->now, &f->heads, &f->merge,
                           &f->room, &f->pending};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        Py_CLEAR(*fields[i]);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

/* Funded(queue, cursor, pending, window, now), ``cursor`` the budget version's arguments kept on the order's
 * ``_Plan`` (``plan.cursor``): (children, frac, paths, capped_chain, held_g, cap_floor, depth_chain, bucket_accts,
 * funded, charge, est, horizon, status, RUNNING, acct, req_g, reason, note, heapq_merge, acct_chain, n_nodes).
 * The order's set-up is done here as the Python loop does it: ``rem = list(pending)`` (the plan's live counts,
 * copied: this order consumes its copy), the usage sums up each account's chain (``tree_usage``) from the
 * ledger's ``window`` and ``total = sum(rem[c] for c in children[0])``. */
static PyObject *funded_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *queue, *cursor, *pending, *window, *now, *acct_chain;
    Py_ssize_t n_nodes;
    if (!PyArg_ParseTuple(args, "OO!OOO", &queue, &PyTuple_Type, &cursor, &pending, &window, &now))
        return NULL;
    if (need_list(pending, "pending"))
        return NULL;
    Funded *f = (Funded *)type->tp_alloc(type, 0);
    if (f == NULL)
        return NULL;
    if (!PyArg_ParseTuple(cursor, "OOOOOOOOOOOdOOOOOOOOn", &f->children, &f->frac, &f->paths, &f->capped,
                          &f->held_g, &f->capf, &f->chains, &f->bucket_accts, &f->funded, &f->charge, &f->est,
                          &f->horizon, &f->status, &f->running, &f->acct, &f->req_g, &f->reason, &f->note, &f->merge,
                          &acct_chain, &n_nodes)) {
        f->children = f->frac = f->paths = f->capped = f->held_g = f->capf = NULL;
        f->chains = f->bucket_accts = f->funded = f->charge = f->est = f->status = f->running = f->acct = NULL;
        f->req_g = f->reason = f->note = f->merge = NULL;
        Py_DECREF(f);
        return NULL;
    }
    f->queue = queue;
    f->now = now;
    PyObject *fields[] = {f->queue, f->children, f->frac, f->paths, f->capped, f->held_g, f->capf, f->chains,
                          f->bucket_accts, f->funded, f->charge, f->est, f->status, f->running, f->acct, f->req_g,
                          f->reason, f->note, f->now, f->merge};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        Py_INCREF(fields[i]);
    if (need_list(f->chains, "depth_chain") || need_list(f->capped, "capped_chain")
        || need_list(f->children, "children")) {
        Py_DECREF(f);
        return NULL;
    }
    f->rem = PyList_GetSlice(pending, 0, PyList_GET_SIZE(pending));  /* rem = list(plan.pending) */
    if (f->rem == NULL || (f->usage = tree_usage_core(window, acct_chain, n_nodes)) == NULL) {
        Py_DECREF(f);
        return NULL;
    }
    /* total = sum(rem[c] for c in children[0]) */
    if (PyList_GET_SIZE(f->children) < 1) {
        PyErr_SetString(PyExc_ValueError, "Funded: a budget tree has a root (children[0])");
        Py_DECREF(f);
        return NULL;
    }
    PyObject *top = PyList_GET_ITEM(f->children, 0);
    if (need_list(top, "children[0]")) {
        Py_DECREF(f);
        return NULL;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t q = 0; q < PyList_GET_SIZE(top); q++) {
        PyObject *v = PyObject_GetItem(f->rem, PyList_GET_ITEM(top, q));
        Py_ssize_t x = v == NULL ? -1 : PyLong_AsSsize_t(v);
        Py_XDECREF(v);
        if (x == -1 && PyErr_Occurred()) {
            Py_DECREF(f);
            return NULL;
        }
        total += x;
    }
    f->total = total;
    f->heads = PyDict_New();
    if (f->heads == NULL) {
        Py_DECREF(f);
        return NULL;
    }
    f->node = -1;
    return (PyObject *)f;
}

/* queue.held_seen += n_held (the Python loop's flush) */
static int flush_held(Funded *f)
{
    if (!f->n_held)
        return 0;
    PyObject *h = PyObject_GetAttr(f->queue, s_held_seen), *k = NULL, *s = NULL;
    if (h == NULL)
        return -1;
    k = PyLong_FromSsize_t(f->n_held);
    s = k == NULL ? NULL : PyNumber_Add(h, k);
    Py_DECREF(h);
    Py_XDECREF(k);
    if (s == NULL)
        return -1;
    int r = PyObject_SetAttr(f->queue, s_held_seen, s);
    Py_DECREF(s);
    if (r == 0)
        f->n_held = 0;
    return r;
}

/* rem[i] -= k for i in the node's chain (Python ints) */
static int sub_chain(Funded *f, PyObject *chain, Py_ssize_t k)
{
    PyObject *seq = PySequence_Fast(chain, "depth_chain[node]");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *i = PySequence_Fast_GET_ITEM(seq, q), *v, *kk, *nv;
        if ((v = PyObject_GetItem(f->rem, i)) == NULL || (kk = PyLong_FromSsize_t(k)) == NULL) {
            Py_XDECREF(v);
            Py_DECREF(seq);
            return -1;
        }
        nv = PyNumber_Subtract(v, kk);
        Py_DECREF(v);
        Py_DECREF(kk);
        if (nv == NULL || PyObject_SetItem(f->rem, i, nv) < 0) {
            Py_XDECREF(nv);
            Py_DECREF(seq);
            return -1;
        }
        Py_DECREF(nv);
    }
    Py_DECREF(seq);
    return 0;
}

/* the bucket walked is done: ``total -= taken``, the chain's counts, then either the bucket is exhausted
 * (``rem[node] = 0``) or job j started (its projected charge added up the chain) */
static int end_bucket(Funded *f, PyObject *j)
{
    PyObject *node = PyLong_FromSsize_t(f->node), *chain = NULL;
    if (node == NULL)
        return -1;
    chain = PyObject_GetItem(f->chains, node);
    int bad = chain == NULL;
    f->total -= f->taken;
    if (!bad)
        bad = sub_chain(f, chain, f->taken) < 0;
    if (!bad && j == NULL) {
        PyObject *zero = PyLong_FromLong(0);
        bad = zero == NULL || PyObject_SetItem(f->rem, node, zero) < 0;
        Py_XDECREF(zero);
    } else if (!bad) {  /* proj = charge[j] * (est[j] if est[j] < horizon else horizon), added up the chain */
        Py_ssize_t ji = PyLong_AsSsize_t(j);
        PyObject *c = NULL, *e = NULL;
        double cd = 0.0, ed = 0.0;
        bad = (ji == -1 && PyErr_Occurred()) || (c = item(f->charge, j, ji)) == NULL
              || (e = item(f->est, j, ji)) == NULL || as_double(c, &cd) || as_double(e, &ed);
        Py_XDECREF(c);
        Py_XDECREF(e);
        if (!bad) {
            double proj = cd * (ed < f->horizon ? ed : f->horizon);
            PyObject *seq = PySequence_Fast(chain, "depth_chain[node]");
            bad = seq == NULL;
            for (Py_ssize_t q = 0; !bad && q < PySequence_Fast_GET_SIZE(seq); q++) {
                PyObject *i = PySequence_Fast_GET_ITEM(seq, q), *u = PyObject_GetItem(f->usage, i), *nu = NULL;
                double ud = 0.0;
                bad = u == NULL || as_double(u, &ud) || (nu = PyFloat_FromDouble(ud + proj)) == NULL
                      || PyObject_SetItem(f->usage, i, nu) < 0;
                Py_XDECREF(u);
                Py_XDECREF(nu);
            }
            Py_XDECREF(seq);
        }
    }
    Py_XDECREF(chain);
    Py_DECREF(node);
    f->node = -1;
    f->it = NULL;
    Py_CLEAR(f->room);
    return bad ? -1 : 0;
}

/* descend to the next bucket: its room under the tightest borrowing cap (None: uncapped) and its iterator */
static int begin_bucket(Funded *f)
{
    Py_ssize_t node = descend_core(f->children, f->rem, f->frac, f->usage, f->paths);
    if (node < 0)
        return -1;
    f->node = node;
    f->taken = 0;
    PyObject *key = PyLong_FromSsize_t(node);
    if (key == NULL)
        return -1;
    PyObject *cn = PyObject_GetItem(f->capped, key), *seq = NULL;
    if (cn == NULL)
        goto fail;
    int t = PyObject_IsTrue(cn);
    if (t < 0)
        goto fail;
    if (!t) {
        f->room = Py_NewRef(Py_None);
    } else {  /* room = INF; for i in cn: r = capf[i] - held[i]; if r < room: room = r */
        f->room = Py_NewRef(s_inf);
        seq = PySequence_Fast(cn, "capped_chain[node]");
        if (seq == NULL)
            goto fail;
        for (Py_ssize_t q = 0; q < PySequence_Fast_GET_SIZE(seq); q++) {
            PyObject *i = PySequence_Fast_GET_ITEM(seq, q), *cf = NULL, *h = NULL, *r = NULL;
            int lt = -1;
            if ((cf = PyObject_GetItem(f->capf, i)) != NULL && (h = PyObject_GetItem(f->held_g, i)) != NULL
                && (r = PyNumber_Subtract(cf, h)) != NULL)
                lt = PyObject_RichCompareBool(r, f->room, Py_LT);
            Py_XDECREF(cf);
            Py_XDECREF(h);
            if (lt < 0) {
                Py_XDECREF(r);
                goto fail;
            }
            if (lt)
                Py_SETREF(f->room, r);
            else
                Py_DECREF(r);
        }
        Py_CLEAR(seq);
    }
    Py_CLEAR(cn);
    PyObject *it = PyDict_GetItemWithError(f->heads, key);  /* borrowed */
    if (it == NULL) {
        if (PyErr_Occurred())
            goto fail;
        /* the bucket's FIFOs: one account's dict, or an index-ordered merge of several */
        PyObject *accts = PyObject_GetItem(f->bucket_accts, key), *qs = NULL;
        if (accts == NULL)
            goto fail;
        seq = PySequence_Fast(accts, "bucket_accts[node]");
        Py_DECREF(accts);
        if (seq == NULL || (qs = PyList_New(0)) == NULL)
            goto fail;
        for (Py_ssize_t q = 0; q < PySequence_Fast_GET_SIZE(seq); q++) {
            PyObject *d = PyDict_GetItemWithError(f->funded, PySequence_Fast_GET_ITEM(seq, q));
            if (d == NULL && PyErr_Occurred()) {
                Py_DECREF(qs);
                goto fail;
            }
            int tr = d == NULL ? 0 : PyObject_IsTrue(d);
            if (tr < 0 || (tr && PyList_Append(qs, d) < 0)) {
                Py_DECREF(qs);
                goto fail;
            }
        }
        Py_CLEAR(seq);
        PyObject *made;
        if (PyList_GET_SIZE(qs) == 1) {
            made = PyObject_GetIter(PyList_GET_ITEM(qs, 0));
        } else {
            PyObject *tup = PyList_AsTuple(qs);
            made = tup == NULL ? NULL : PyObject_Call(f->merge, tup, NULL);
            Py_XDECREF(tup);
        }
        Py_DECREF(qs);
        if (made == NULL)
            goto fail;
        int r = PyDict_SetItem(f->heads, key, made);
        Py_DECREF(made);
        if (r < 0)
            goto fail;
        it = made;  /* heads holds it */
    }
    f->it = it;
    Py_DECREF(key);
    return 0;
fail:
    Py_XDECREF(seq);
    Py_XDECREF(cn);
    Py_DECREF(key);
    return -1;
}

static PyObject *s_examine, *s_limit, *s_halted;

/* truth of a new reference, released */
static int truth_of(PyObject *o)
{
    if (o == NULL)
        return -1;
    int t = PyObject_IsTrue(o);
    Py_DECREF(o);
    return t;
}

/* state.n_failed_short += 1 */
static int bump_failed_short(PyObject *state)
{
    PyObject *nfs = PyObject_GetAttr(state, s_n_failed_short), *one = NULL, *nn = NULL;
    if (nfs == NULL)
        return -1;
    one = PyLong_FromLong(1);
    nn = one == NULL ? NULL : PyNumber_Add(nfs, one);
    Py_DECREF(nfs);
    Py_XDECREF(one);
    if (nn == NULL)
        return -1;
    int t = PyObject_SetAttr(state, s_n_failed_short, nn);
    Py_DECREF(nn);
    return t;
}

/* ``easy._backfill``'s examination of a job the hint handed over (the hint already answered None: no known
 * failure of its shape outside the hole, no cap, no user limit, within the group's bounds), from the hint's
 * ``spec`` and ``examine`` = (start, started, place_in, nothing_fits, pool, reservation_time, sim): the
 * reservation T when first needed, the placement (within EASY's extra resources for a job ending after T), the
 * start (``sim.start``, the started list, the extra resources left), or the shape's failure and the job's reason;
 * the same calls in the same order as the Python loop. Returns 0 (not started), 1 (started), 2 (started and
 * nothing fits any more: the pass ends), -1 on error. */
static int examine(Funded *f, PyObject *ex, PyObject *spec, PyObject *failed, PyObject *shape, PyObject *state,
                   PyObject *j)
{
    PyObject **x = &PyTuple_GET_ITEM(spec, 0), **e = &PyTuple_GET_ITEM(ex, 0);
    PyObject *now = x[0], *est = x[1], *inv = x[2], *req_g = x[8], *req_c = x[9], *req_m = x[10], *group = x[11];
    PyObject *gangs = x[12], *bounds = x[13], *procs = x[14];
    PyObject *start = e[0], *started = e[1], *place_in = e[2], *nothing_fits = e[3], *pool = e[4];
    PyObject *reservation_time = e[5], *sim = e[6];
    Py_ssize_t ji = PyLong_AsSsize_t(j);
    if (ji == -1 && PyErr_Occurred())
        return -1;
    PyObject *T = PyObject_GetAttr(state, s_T);  /* ``if T is None: T = reservation_time(sim, state)`` */
    if (T == NULL)
        return -1;
    if (T == Py_None) {
        Py_DECREF(T);
        if ((T = PyObject_CallFunctionObjArgs(reservation_time, sim, state, NULL)) == NULL)
            return -1;
    }
    double Td = PyFloat_AsDouble(T), nd = PyFloat_AsDouble(now), id = PyFloat_AsDouble(inv), ed;
    Py_DECREF(T);
    PyObject *eo = item(est, j, ji);
    if (eo == NULL || as_double(eo, &ed)) {
        Py_XDECREF(eo);
        return -1;
    }
    Py_DECREF(eo);
    if (PyErr_Occurred())
        return -1;
    int is_short = nd + ed * id <= Td;
    int ret = -1;
    PyObject *grp = NULL, *gang = NULL, *g = NULL, *c = NULL, *m = NULL, *limit = NULL, *pl = NULL, *fits = NULL;
    PyObject *sh = NULL;
    if ((grp = item(group, j, ji)) == NULL || (gang = item(gangs, j, ji)) == NULL || (g = item(req_g, j, ji)) == NULL
        || (c = item(req_c, j, ji)) == NULL || (m = item(req_m, j, ji)) == NULL
        || (limit = PyObject_GetAttr(state, s_limit)) == NULL)
        goto done;
    /* a job ending after T may use only EASY's extra resources on the reserved job's nodes (the limit) */
    pl = PyObject_CallFunctionObjArgs(place_in, grp, gang, g, c, m, is_short ? Py_None : limit, NULL);
    if (pl == NULL)
        goto done;
    if (pl != Py_None) {
        PyObject *r = PyObject_CallFunctionObjArgs(start, j, now, pl, NULL);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
        if (PyList_Append(started, j) < 0)
            goto done;
        if (!is_short) {  /* the extra resources left on the reserved job's nodes */
            PyObject *lm = PyObject_GetAttr(state, s_limit);
            int t = lm == NULL ? -1 : PyObject_IsTrue(lm);
            if (t > 0) {
                PyObject *seq = PySequence_Fast(pl, "a placement");
                t = seq == NULL ? -1 : 1;
                for (Py_ssize_t q = 0; t > 0 && q < PySequence_Fast_GET_SIZE(seq); q++) {
                    PyObject *it = PySequence_Fast(PySequence_Fast_GET_ITEM(seq, q), "(node, g, c, m)");
                    if (it == NULL || PySequence_Fast_GET_SIZE(it) != 4) {
                        if (it != NULL)
                            PyErr_SetString(PyExc_ValueError, "a placement is (node, g, c, m) tuples");
                        Py_XDECREF(it);
                        t = -1;
                        break;
                    }
                    PyObject **v = PySequence_Fast_ITEMS(it);
                    int has = PyDict_Contains(lm, v[0]);
                    if (has > 0) {
                        PyObject *old = PyObject_GetItem(lm, v[0]), *n0 = NULL, *n1 = NULL, *n2 = NULL, *nt = NULL;
                        if (old != NULL) {
                            PyObject *o0 = PySequence_GetItem(old, 0), *o1 = PySequence_GetItem(old, 1);
                            PyObject *o2 = PySequence_GetItem(old, 2);
                            if (o0 && o1 && o2 && (n0 = PyNumber_Subtract(o0, v[1])) && (n1 = PyNumber_Subtract(o1, v[2]))
                                && (n2 = PyNumber_Subtract(o2, v[3])))
                                nt = PyTuple_Pack(3, n0, n1, n2);
                            Py_XDECREF(o0);
                            Py_XDECREF(o1);
                            Py_XDECREF(o2);
                        }
                        if (nt == NULL || PyObject_SetItem(lm, v[0], nt) < 0)
                            t = -1;
                        Py_XDECREF(old);
                        Py_XDECREF(n0);
                        Py_XDECREF(n1);
                        Py_XDECREF(n2);
                        Py_XDECREF(nt);
                    } else if (has < 0) {
                        t = -1;
                    }
                    Py_DECREF(it);
                }
                Py_XDECREF(seq);
            }
            Py_XDECREF(lm);
            if (t < 0)
                goto done;
        }
        int nf = truth_of(PyObject_CallOneArg(nothing_fits, pool));
        if (nf < 0)
            goto done;
        ret = nf ? 2 : 1;
        goto done;
    }
    if (is_short) {
        fits = Py_NewRef(Py_None);
    } else if ((fits = PyObject_CallFunctionObjArgs(place_in, grp, gang, g, c, m, NULL)) == NULL) {
        goto done;
    }
    if ((sh = item(shape, j, ji)) == NULL)
        goto done;
    PyObject *r;
    if (fits == Py_None) {  /* "fragmentation" when the group's free resources add up to the request */
        PyObject *b = PyObject_CallOneArg(bounds, grp);
        if (b == NULL)
            goto done;
        int frag = PyObject_IsTrue(procs);
        frag = frag < 0 ? -1 : !frag;
        PyObject *req[3] = {g, c, m};
        for (int i = 0; frag > 0 && i < 3; i++) {
            PyObject *bi = PySequence_GetItem(b, 6 + i);
            frag = bi == NULL ? -1 : PyObject_RichCompareBool(req[i], bi, Py_LE);
            Py_XDECREF(bi);
        }
        Py_DECREF(b);
        if (frag < 0)
            goto done;
        r = frag ? s_fragmentation : s_resources;
        if (PyDict_SetItem(failed, sh, r) < 0 || bump_failed_short(state) < 0)
            goto done;
    } else {
        if (PyDict_SetItem(failed, sh, s_long) < 0)
            goto done;
        r = s_reservation;
    }
    if (note_if_new(f->reason, f->note, j, ji, r, now) < 0)
        goto done;
    ret = 0;
done:
    Py_XDECREF(grp);
    Py_XDECREF(gang);
    Py_XDECREF(g);
    Py_XDECREF(c);
    Py_XDECREF(m);
    Py_XDECREF(limit);
    Py_XDECREF(pl);
    Py_XDECREF(fits);
    Py_XDECREF(sh);
    return ret;
}

static PyObject *funded_next(Funded *f, PyObject *unused)
{
    if (f->done)
        Py_RETURN_NONE;
    if (f->pending != NULL) {  /* after the Python loop's ``yield j``: did the pass start j? */
        PyObject *j = f->pending;
        f->pending = NULL;
        Py_ssize_t ji = PyLong_AsSsize_t(j);
        PyObject *st = ji == -1 && PyErr_Occurred() ? NULL : item(f->status, j, ji);
        int run = st == NULL ? -1 : PyObject_RichCompareBool(st, f->running, Py_EQ);
        Py_XDECREF(st);
        if (run > 0 && end_bucket(f, j) < 0)
            run = -1;
        Py_DECREF(j);
        if (run < 0)
            return NULL;
    }
    for (;;) {
        if (f->node < 0) {
            if (f->total <= 0) {
                f->done = 1;
                if (flush_held(f) < 0)
                    return NULL;
                Py_RETURN_NONE;
            }
            if (begin_bucket(f) < 0)
                return NULL;
        }
        PyObject *hint = PyObject_GetAttr(f->queue, s_hint), *failed = NULL, *shape = NULL, *state = NULL;
        PyObject *n_shapes = NULL, *j, *ex = NULL, *spec = NULL;
        if (hint == NULL)
            return NULL;
        if (hint != Py_None && ((failed = PyObject_GetAttr(hint, s_failed)) == NULL
                                || (shape = PyObject_GetAttr(hint, s_shape)) == NULL
                                || (state = PyObject_GetAttr(hint, s_state)) == NULL
                                || (n_shapes = PyObject_GetAttr(hint, s_n_shapes)) == NULL))
            j = NULL;
        else
            j = walk_core(f->it, &f->taken, &f->n_held, f->room, Py_None, f->acct, f->req_g, f->reason, f->note,
                          f->now, hint, hint == Py_None ? Py_None : failed, hint == Py_None ? Py_None : shape,
                          hint == Py_None ? Py_None : state, hint == Py_None ? Py_None : n_shapes);
        if (j != NULL && j != Py_None && j != Py_False && hint != Py_None) {
            /* the pass's examination, when it publishes one (``hint.examine``): the job is examined here instead
             * of handed over, and the walk goes on unless it started */
            ex = PyObject_GetAttr(hint, s_examine);
            if (ex == NULL && PyErr_ExceptionMatches(PyExc_AttributeError))
                PyErr_Clear();
            else if (ex != NULL && ex != Py_None)
                spec = PyObject_GetAttr(hint, s_spec);
            if (PyErr_Occurred() || (ex != NULL && ex != Py_None
                                     && (spec == NULL || !PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 16
                                         || !PyTuple_Check(ex) || PyTuple_GET_SIZE(ex) != 7))) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "next: hint.examine is a 7-tuple beside a 16-tuple spec");
                Py_CLEAR(j);
            }
        }
        int res = -2;  /* not examined */
        if (j != NULL && ex != NULL && ex != Py_None) {
            res = flush_held(f) < 0 ? -1 : examine(f, ex, spec, failed, shape, state, j);
            if (res < 0)
                Py_CLEAR(j);
        }
        Py_XDECREF(ex);
        Py_XDECREF(spec);
        Py_DECREF(hint);
        Py_XDECREF(failed);
        Py_XDECREF(shape);
        Py_XDECREF(state);
        Py_XDECREF(n_shapes);
        if (j == NULL)
            return NULL;
        if (res == 0) {  /* examined, not started: the bucket offers its next job */
            Py_DECREF(j);
            continue;
        }
        if (res == 1) {  /* started: the keys changed, descend again */
            int bad = end_bucket(f, j) < 0;
            Py_DECREF(j);
            if (bad)
                return NULL;
            continue;
        }
        if (res == 2) {  /* nothing fits any more: the pass ends here, the order with it (``queue.halted``) */
            Py_DECREF(j);
            f->done = 1;
            if (PyObject_SetAttr(f->queue, s_halted, Py_True) < 0)
                return NULL;
            Py_RETURN_FALSE;
        }
        if (j == Py_None) {  /* the bucket is exhausted */
            Py_DECREF(j);
            if (end_bucket(f, NULL) < 0)
                return NULL;
            continue;
        }
        if (j == Py_False) {  /* the hint stops the order */
            f->done = 1;
            if (flush_held(f) < 0) {
                Py_DECREF(j);
                return NULL;
            }
            return j;
        }
        if (flush_held(f) < 0) {
            Py_DECREF(j);
            return NULL;
        }
        f->pending = Py_NewRef(j);
        return j;
    }
}

/* iterating the cursor (``yield from``) hands over the same jobs as calling ``next()`` until None or False */
static PyObject *funded_iternext(Funded *f)
{
    PyObject *j = funded_next(f, NULL);
    if (j == Py_None || j == Py_False) {
        Py_DECREF(j);
        return NULL;  /* exhausted, no error set: StopIteration */
    }
    return j;
}

static PyMethodDef funded_methods[] = {
    {"next", (PyCFunction)funded_next, METH_NOARGS,
     "next(): the next job to hand over (None: the order is exhausted; False: the pass's hint stops it)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FundedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "engine._fsorder.Funded",
    .tp_basicsize = sizeof(Funded),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "funded_order's loop for one order without the class index (engine/policies/fairshare.py)",
    .tp_new = funded_new,
    .tp_dealloc = (destructor)funded_dealloc,
    .tp_methods = funded_methods,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)funded_iternext,
};

static PyMethodDef methods[] = {
    {"window_all", window_all, METH_VARARGS,
     "window_all(hist, cum, rate, last, ptr, t, lookback_s): Ledger.window_all's loop (advances ptr in place)"},
    {"tree_usage", tree_usage, METH_VARARGS,
     "tree_usage(window, acct_chain, n_nodes): window usage summed up every account's chain"},
    {"descend", descend, METH_VARARGS,
     "descend(children, rem, frac, usage, paths): the fair-share descent from the root to a bucket"},
    {"walk", walk, METH_VARARGS,
     "walk(it, st, room, dirty, acct, req_g, reason, note, now, hint, failed, shape, state, n_shapes): a bucket's "
     "walk up to the next job to hand over (None: exhausted; False: the hint stops the order)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fsorder",
    "The fair-share order's per-pass arithmetic in C (engine/fsorder.py selects it; the Python code is the oracle).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__fsorder(void)
{
    s_quota = PyUnicode_InternFromString("quota");
    s_long = PyUnicode_InternFromString("long");
    s_n_failed_short = PyUnicode_InternFromString("n_failed_short");
    s_reservation = PyUnicode_InternFromString("reservation");
    s_fragmentation = PyUnicode_InternFromString("fragmentation");
    s_resources = PyUnicode_InternFromString("resources");
    s_spec = PyUnicode_InternFromString("spec");
    s_T = PyUnicode_InternFromString("T");
    if (s_quota == NULL || s_long == NULL || s_n_failed_short == NULL || s_reservation == NULL
        || s_fragmentation == NULL || s_resources == NULL || s_spec == NULL || s_T == NULL)
        return NULL;
    s_hint = PyUnicode_InternFromString("hint");
    s_failed = PyUnicode_InternFromString("failed");
    s_shape = PyUnicode_InternFromString("shape");
    s_state = PyUnicode_InternFromString("state");
    s_n_shapes = PyUnicode_InternFromString("n_shapes");
    s_held_seen = PyUnicode_InternFromString("held_seen");
    s_inf = PyFloat_FromDouble(INFINITY);
    s_examine = PyUnicode_InternFromString("examine");
    s_limit = PyUnicode_InternFromString("limit");
    s_halted = PyUnicode_InternFromString("halted");
    if (s_examine == NULL || s_limit == NULL || s_halted == NULL)
        return NULL;
    if (s_hint == NULL || s_failed == NULL || s_shape == NULL || s_state == NULL || s_n_shapes == NULL
        || s_held_seen == NULL || s_inf == NULL || PyType_Ready(&FundedType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Funded", (PyObject *)&FundedType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", QL_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
