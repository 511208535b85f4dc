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
static PyObject *tree_usage(PyObject *self, PyObject *args)
{
    PyObject *window, *chains;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOn", &window, &chains, &n))
        return NULL;
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
static PyObject *descend(PyObject *self, PyObject *args)
{
    PyObject *children, *rem, *frac, *usage, *paths;
    if (!PyArg_ParseTuple(args, "OOOOO", &children, &rem, &frac, &usage, &paths))
        return NULL;
    if (need_list(children, "children") || need_list(rem, "rem") || need_list(frac, "frac")
        || need_list(usage, "usage") || need_list(paths, "paths"))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(children);
    if (PyList_GET_SIZE(rem) < n || PyList_GET_SIZE(frac) < n || PyList_GET_SIZE(usage) < n
        || PyList_GET_SIZE(paths) < n) {
        PyErr_SetString(PyExc_ValueError, "descend: per-node lists of different lengths");
        return NULL;
    }
    Py_ssize_t node = 0;
    for (;;) {
        if (n <= node) {
            PyErr_SetString(PyExc_IndexError, "descend: node index out of range");
            return NULL;
        }
        PyObject *kids = PyList_GET_ITEM(children, node);
        if (need_list(kids, "children[node]"))
            return NULL;
        Py_ssize_t nk = PyList_GET_SIZE(kids);
        if (nk == 0)
            return PyLong_FromSsize_t(node);
        Py_ssize_t best = -1;
        int bcls = 0;
        double bval = 0.0;
        PyObject *bpath = NULL;
        for (Py_ssize_t q = 0; q < nk; q++) {
            Py_ssize_t c = PyLong_AsSsize_t(PyList_GET_ITEM(kids, q));
            if (c == -1 && PyErr_Occurred())
                return NULL;
            if (c < 0 || c >= n) {
                PyErr_SetString(PyExc_IndexError, "descend: child index out of range");
                return NULL;
            }
            long r = PyLong_AsLong(PyList_GET_ITEM(rem, c));
            if (r == -1 && PyErr_Occurred())
                return NULL;
            if (r <= 0)
                continue;
            double f, u;
            if (as_double(PyList_GET_ITEM(frac, c), &f) || as_double(PyList_GET_ITEM(usage, c), &u))
                return NULL;
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
                    return NULL;
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
            return NULL;
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

/* walk(it, st, room, dirty, acct, req_g, reason, note, now, hint, failed, shape, state, n_shapes): the bucket walk
 * of ``funded_order`` up to the next job to hand over. Consumes ``it`` until a job is neither held back by the
 * room (milli-GPUs under the tightest cap; None = uncapped: noted "quota") nor skipped by the pass's ``hint``
 * (noted with the hint's reason); returns that job, None when ``it`` is exhausted, or False when the hint stops the
 * order. ``st`` = [jobs taken, held-back jobs not yet counted], updated in place; ``dirty`` (None: the class index is
 * not tracked) gets every job taken. With ``hint`` None, ``failed`` ... ``n_shapes`` are not read. */
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
        if (hint != Py_None) {  /* the pass already knows this job cannot start: skip it cheaply */
            PyObject *nfs = PyObject_GetAttr(state, s_n_failed_short);
            if (nfs == NULL)
                goto drop_j;
            int stop = PyObject_RichCompareBool(nfs, n_shapes, Py_GE);
            Py_DECREF(nfs);
            if (stop < 0)
                goto drop_j;
            if (stop) {
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
            } else if (ask) {
                Py_DECREF(sh);
                Py_XDECREF(r);
                r = PyObject_CallOneArg(hint, j);
                if (r == NULL)
                    goto drop_j;
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
    PyObject *pt = PyLong_FromSsize_t(taken), *ph = PyLong_FromSsize_t(held);
    if (pt == NULL || ph == NULL) {
        Py_XDECREF(spec);
        Py_XDECREF(pt);
        Py_XDECREF(ph);
        Py_XDECREF(result);
        return NULL;
    }
    Py_XDECREF(spec);
    PyList_SetItem(st, 0, pt);  /* steal; lists checked above */
    PyList_SetItem(st, 1, ph);
    return result;
}

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
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", QL_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
