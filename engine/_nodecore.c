/* The compiled twin of ``engine.pool.Pool``'s node-mode hot routines (issue 16): ``bounds``, the best-fit scan of
 * ``place``, the free-GPU-index fit of ``place_in``, the whole-node gang of ``_gang`` and the bookkeeping of
 * ``_move`` (free resources, epochs, running bounds, the free-GPU index, stranded GPUs), and the preemption
 * search of ``preempt._victims`` (``release_fits``, ``victims``: read only, on C copies of the free lists).
 *
 * No state of its own: a ``NodeOps`` holds references to the pool's own Python lists and dicts (``free_g`` ...,
 * ``_agg``, ``_index``, ``_node_groups``, ``gepoch``, ``_stranded``) and reads and writes them in place, so the
 * rest of the engine (EASY's reservation, the preemption search, health, warm starts, qstats) sees exactly what
 * the Python methods would have left. ``engine/nodepool.py`` binds these on a node-mode pool; the Python methods
 * in ``engine/pool.py`` are the readable reference and the oracle (tests/engine/test_compiled_pool.py).
 *
 * Invariants kept equal to the Python methods, statement by statement:
 * - the same integer arithmetic: per-node values fit in 64 bits (``UNLIMITED`` is 2**60); the running sums of a
 *   group (``_agg[k][0..5]``) may not (memory sums of several unlimited nodes), so they are updated with Python
 *   integer arithmetic whenever 64 bits would overflow, and gang sums are compared in 128 bits;
 * - the same tie-breaks: best fit by (g, c, m left) then the first node in the given order; the index fit by
 *   the smallest free-GPU class that holds a fit, then (c, m left, node index); gangs in the given order;
 * - a failed assertion raises ``AssertionError`` with the Python message, after the same partial effects
 *   (the epoch bump only).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#ifndef QL_SOURCE_SHA256  /* setup.py passes the source's sha256: tests tell a stale build from a current one */
#define QL_SOURCE_SHA256 "unknown"
#endif

#define UNLIMITED (1LL << 60)

typedef long long ll;

typedef struct {
    PyObject_HEAD
    PyObject *pool;
    PyObject *fg, *fc, *fm, *cg, *cc, *cm, *avail;  /* lists, per node */
    PyObject *node_groups, *agg, *index, *gepoch, *stranded;
    int track_stranded;
} NodeOps;

static PyObject *s_epoch, *s_stranded_g;

/* ------------------------------------------------------------------------------------------- helpers */
static inline int get_ll(PyObject *o, ll *out)
{
    *out = PyLong_AsLongLong(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static inline int as_dbl(PyObject *o, double *out)
{
    *out = PyFloat_AsDouble(o);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static inline int item_ll(PyObject *list, Py_ssize_t i, ll *out)
{
    return get_ll(PyList_GET_ITEM(list, i), out);
}

static inline int set_item_ll(PyObject *list, Py_ssize_t i, ll v)
{
    PyObject *o = PyLong_FromLongLong(v);
    if (o == NULL)
        return -1;
    return PyList_SetItem(list, i, o);  /* steals o, drops the old item */
}

static inline int truthy(PyObject *o)
{
    if (o == Py_True)
        return 1;
    if (o == Py_False)
        return 0;
    return PyObject_IsTrue(o);
}

/* list[i] += delta, exactly: 64 bits when it fits, else Python integers */
static int add_item(PyObject *list, Py_ssize_t i, ll delta)
{
    if (delta == 0)
        return 0;
    PyObject *cur = PyList_GET_ITEM(list, i);
    int overflow = 0;
    ll v = PyLong_AsLongLongAndOverflow(cur, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    ll r;
    if (!overflow && !__builtin_add_overflow(v, delta, &r))
        return set_item_ll(list, i, r);
    PyObject *d = PyLong_FromLongLong(delta);
    if (d == NULL)
        return -1;
    PyObject *sum = PyNumber_Add(cur, d);
    Py_DECREF(d);
    if (sum == NULL)
        return -1;
    return PyList_SetItem(list, i, sum);
}

/* dict[key] += 1 (an existing int entry) */
static int dict_incr(PyObject *dict, PyObject *key)
{
    PyObject *cur = PyDict_GetItemWithError(dict, key);
    if (cur == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, key);
        return -1;
    }
    PyObject *one = PyLong_FromLong(1);
    PyObject *nv = PyNumber_Add(cur, one);
    Py_DECREF(one);
    if (nv == NULL)
        return -1;
    int rc = PyDict_SetItem(dict, key, nv);
    Py_DECREF(nv);
    return rc;
}

/* the node's (g, c, m) cap from ``limit`` (a dict node -> 3-sequence), if it has one: 1, 0 absent, -1 error */
static int limit_of(PyObject *limit, PyObject *node, ll *lg, ll *lc, ll *lm)
{
    if (limit == NULL || limit == Py_None)
        return 0;
    PyObject *v = PyDict_GetItemWithError(limit, node);
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *seq = PySequence_Fast(v, "limit values are (g, c, m)");
    if (seq == NULL)
        return -1;
    int rc = -1;
    if (PySequence_Fast_GET_SIZE(seq) == 3) {
        PyObject **it = PySequence_Fast_ITEMS(seq);
        if (get_ll(it[0], lg) == 0 && get_ll(it[1], lc) == 0 && get_ll(it[2], lm) == 0)
            rc = 1;
    } else {
        PyErr_SetString(PyExc_ValueError, "limit values are (g, c, m)");
    }
    Py_DECREF(seq);
    return rc;
}

static inline ll min_ll(ll a, ll b) { return a < b ? a : b; }

/* ------------------------------------------------------------------------------------------- type */
/* The pool holds its NodeOps (``pool.ops`` and the bound methods) and the NodeOps holds the pool: a cycle, so the
 * type takes part in the cyclic GC (else every simulated pool would leak). */
static int NodeOps_traverse(NodeOps *self, visitproc visit, void *arg)
{
    Py_VISIT(self->pool);
    Py_VISIT(self->fg); Py_VISIT(self->fc); Py_VISIT(self->fm);
    Py_VISIT(self->cg); Py_VISIT(self->cc); Py_VISIT(self->cm);
    Py_VISIT(self->avail); Py_VISIT(self->node_groups); Py_VISIT(self->agg);
    Py_VISIT(self->index); Py_VISIT(self->gepoch); Py_VISIT(self->stranded);
    return 0;
}

static int NodeOps_clear(NodeOps *self)
{
    Py_CLEAR(self->pool);
    Py_CLEAR(self->fg); Py_CLEAR(self->fc); Py_CLEAR(self->fm);
    Py_CLEAR(self->cg); Py_CLEAR(self->cc); Py_CLEAR(self->cm);
    Py_CLEAR(self->avail); Py_CLEAR(self->node_groups); Py_CLEAR(self->agg);
    Py_CLEAR(self->index); Py_CLEAR(self->gepoch); Py_CLEAR(self->stranded);
    return 0;
}

static void NodeOps_dealloc(NodeOps *self)
{
    PyObject_GC_UnTrack(self);
    NodeOps_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int grab(PyObject *pool, const char *name, PyObject **slot, PyTypeObject *type)
{
    PyObject *o = PyObject_GetAttrString(pool, name);
    if (o == NULL)
        return -1;
    if (!PyObject_TypeCheck(o, type)) {
        PyErr_Format(PyExc_TypeError, "Pool.%s: expected %s", name, type->tp_name);
        Py_DECREF(o);
        return -1;
    }
    *slot = o;
    return 0;
}

static int NodeOps_init(NodeOps *self, PyObject *args, PyObject *kw)
{
    PyObject *pool;
    if (!PyArg_ParseTuple(args, "O", &pool))
        return -1;
    Py_INCREF(pool);
    self->pool = pool;
    if (grab(pool, "free_g", &self->fg, &PyList_Type) || grab(pool, "free_c", &self->fc, &PyList_Type)
        || grab(pool, "free_m", &self->fm, &PyList_Type) || grab(pool, "cap_g", &self->cg, &PyList_Type)
        || grab(pool, "cap_c", &self->cc, &PyList_Type) || grab(pool, "cap_m", &self->cm, &PyList_Type)
        || grab(pool, "avail", &self->avail, &PyList_Type)
        || grab(pool, "_node_groups", &self->node_groups, &PyList_Type)
        || grab(pool, "_agg", &self->agg, &PyDict_Type) || grab(pool, "_index", &self->index, &PyDict_Type)
        || grab(pool, "gepoch", &self->gepoch, &PyDict_Type) || grab(pool, "_stranded", &self->stranded, &PyList_Type))
        return -1;
    PyObject *t = PyObject_GetAttrString(pool, "track_stranded");
    if (t == NULL)
        return -1;
    self->track_stranded = PyObject_IsTrue(t);
    Py_DECREF(t);
    return self->track_stranded < 0 ? -1 : 0;
}

/* a node index object -> Py_ssize_t within the pool */
static int node_index(NodeOps *self, PyObject *o, Py_ssize_t *n)
{
    Py_ssize_t v = PyLong_AsSsize_t(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0 || v >= PyList_GET_SIZE(self->fg)) {
        PyErr_SetString(PyExc_IndexError, "node index out of range");
        return -1;
    }
    *n = v;
    return 0;
}

/* ------------------------------------------------------------------------------------------- bounds */
/* Pool.bounds(grp): recompute a maximum whose count is -1, then the 9-tuple */
static PyObject *NodeOps_bounds(NodeOps *self, PyObject *grp)
{
    if (!PyTuple_Check(grp) || PyTuple_GET_SIZE(grp) < 2) {
        PyErr_SetString(PyExc_TypeError, "bounds: a group tuple");
        return NULL;
    }
    PyObject *A = PyDict_GetItemWithError(self->agg, PyTuple_GET_ITEM(grp, 0));
    if (A == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, PyTuple_GET_ITEM(grp, 0));
        return NULL;
    }
    if (!PyList_Check(A) || PyList_GET_SIZE(A) != 12) {
        PyErr_SetString(PyExc_TypeError, "bounds: _agg entries are 12-lists");
        return NULL;
    }
    PyObject **items = ((PyListObject *)A)->ob_item;
    for (int vi = 6; vi < 9; vi++) {
        ll cnt;
        if (get_ll(items[vi + 3], &cnt))
            return NULL;
        if (cnt >= 0)
            continue;
        PyObject *nodes = PyTuple_GET_ITEM(grp, 1);
        PyObject *free = vi == 6 ? self->fg : vi == 7 ? self->fc : self->fm;
        PyObject *seq = PySequence_Fast(nodes, "bounds: group nodes");
        if (seq == NULL)
            return NULL;
        ll best = 0, count = 0;
        Py_ssize_t k, nn = PySequence_Fast_GET_SIZE(seq);
        PyObject **ns = PySequence_Fast_ITEMS(seq);
        for (k = 0; k < nn; k++) {
            Py_ssize_t n;
            ll v;
            if (node_index(self, ns[k], &n)) {
                Py_DECREF(seq);
                return NULL;
            }
            int av = truthy(PyList_GET_ITEM(self->avail, n));
            if (av < 0 || (av && item_ll(free, n, &v))) {
                Py_DECREF(seq);
                return NULL;
            }
            if (!av)
                continue;
            if (v > best) {
                best = v;
                count = 1;
            } else if (v == best) {
                count++;
            }
        }
        Py_DECREF(seq);
        if (set_item_ll(A, vi, best) || set_item_ll(A, vi + 3, count))
            return NULL;
        items = ((PyListObject *)A)->ob_item;
    }
    static const int order[9] = {6, 7, 8, 3, 4, 5, 0, 1, 2};
    PyObject *out = PyTuple_New(9);
    if (out == NULL)
        return NULL;
    for (int i = 0; i < 9; i++) {
        PyObject *o = items[order[i]];
        Py_INCREF(o);
        PyTuple_SET_ITEM(out, i, o);
    }
    return out;
}

/* ------------------------------------------------------------------------------------------- placement */
static int free_lists(NodeOps *self, PyObject *free, PyObject **fg, PyObject **fc, PyObject **fm)
{
    if (free == NULL || free == Py_None) {
        *fg = self->fg, *fc = self->fc, *fm = self->fm;
        return 0;
    }
    if (!PyTuple_Check(free) || PyTuple_GET_SIZE(free) != 3) {
        PyErr_SetString(PyExc_TypeError, "free: a (free_g, free_c, free_m) tuple of lists");
        return -1;
    }
    *fg = PyTuple_GET_ITEM(free, 0), *fc = PyTuple_GET_ITEM(free, 1), *fm = PyTuple_GET_ITEM(free, 2);
    if (!PyList_Check(*fg) || !PyList_Check(*fc) || !PyList_Check(*fm)
        || PyList_GET_SIZE(*fg) < PyList_GET_SIZE(self->fg) || PyList_GET_SIZE(*fc) < PyList_GET_SIZE(self->fg)
        || PyList_GET_SIZE(*fm) < PyList_GET_SIZE(self->fg)) {
        PyErr_SetString(PyExc_TypeError, "free: a (free_g, free_c, free_m) tuple of lists");
        return -1;
    }
    return 0;
}

/* best_fit(nodes, g, c, m, free=None, limit=None) -> node or None: ``Pool.place``'s single-node scan */
static PyObject *NodeOps_best_fit(NodeOps *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 4 || nargs > 6) {
        PyErr_SetString(PyExc_TypeError, "best_fit(nodes, g, c, m, free=None, limit=None)");
        return NULL;
    }
    ll g, c, m;
    if (get_ll(args[1], &g) || get_ll(args[2], &c) || get_ll(args[3], &m))
        return NULL;
    PyObject *fg, *fc, *fm;
    if (free_lists(self, nargs > 4 ? args[4] : NULL, &fg, &fc, &fm))
        return NULL;
    PyObject *limit = nargs > 5 ? args[5] : NULL;
    if (limit == Py_None)
        limit = NULL;
    if (limit != NULL && !PyDict_Check(limit)) {
        PyErr_SetString(PyExc_TypeError, "limit: a dict");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(args[0], "best_fit: nodes");
    if (seq == NULL)
        return NULL;
    Py_ssize_t k, nn = PySequence_Fast_GET_SIZE(seq);
    PyObject **ns = PySequence_Fast_ITEMS(seq);
    PyObject *best = NULL;
    ll k0 = 0, k1 = 0, k2 = 0;
    for (k = 0; k < nn; k++) {
        Py_ssize_t n;
        ll a, b, d;
        if (node_index(self, ns[k], &n) || item_ll(fg, n, &a) || item_ll(fc, n, &b) || item_ll(fm, n, &d))
            goto fail;
        if (limit != NULL) {
            ll lg, lc, lm;
            int has = limit_of(limit, ns[k], &lg, &lc, &lm);
            if (has < 0)
                goto fail;
            if (has) {
                a = min_ll(a, lg), b = min_ll(b, lc), d = min_ll(d, lm);
            }
        }
        if (a >= g && b >= c && d >= m) {
            int av = truthy(PyList_GET_ITEM(self->avail, n));
            if (av < 0)
                goto fail;
            if (!av)
                continue;
            ll x0 = a - g, x1 = b - c, x2 = d - m;
            if (best == NULL || x0 < k0 || (x0 == k0 && (x1 < k1 || (x1 == k1 && x2 < k2)))) {
                best = ns[k];
                k0 = x0, k1 = x1, k2 = x2;
            }
        }
    }
    if (best == NULL) {
        Py_DECREF(seq);
        Py_RETURN_NONE;
    }
    Py_INCREF(best);
    Py_DECREF(seq);
    return best;
fail:
    Py_DECREF(seq);
    return NULL;
}

/* gang(order, g, c, m, free=None, limit=None) -> tuple of (n, g, c, m) rows or None: ``Pool._gang`` */
static PyObject *NodeOps_gang(NodeOps *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 4 || nargs > 6) {
        PyErr_SetString(PyExc_TypeError, "gang(order, g, c, m, free=None, limit=None)");
        return NULL;
    }
    ll g, c, m;
    if (get_ll(args[1], &g) || get_ll(args[2], &c) || get_ll(args[3], &m))
        return NULL;
    PyObject *fg, *fc, *fm;
    if (free_lists(self, nargs > 4 ? args[4] : NULL, &fg, &fc, &fm))
        return NULL;
    PyObject *limit = nargs > 5 ? args[5] : NULL;
    if (limit == Py_None)
        limit = NULL;
    if (limit != NULL && !PyDict_Check(limit)) {
        PyErr_SetString(PyExc_TypeError, "limit: a dict");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(args[0], "gang: order");
    if (seq == NULL)
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t k, nn = PySequence_Fast_GET_SIZE(seq);
    PyObject **ns = PySequence_Fast_ITEMS(seq);
    __int128 sg = 0, sc = 0, sm = 0;
    for (k = 0; k < nn; k++) {
        Py_ssize_t n;
        ll a, b, d, xg, xc, xm;
        if (node_index(self, ns[k], &n))
            goto fail;
        int av = truthy(PyList_GET_ITEM(self->avail, n));
        if (av < 0)
            goto fail;
        if (!av)
            continue;
        if (item_ll(fg, n, &a) || item_ll(self->cg, n, &xg))
            goto fail;
        if (a != xg)
            continue;
        if (item_ll(fc, n, &b) || item_ll(self->cc, n, &xc))
            goto fail;
        if (b != xc)
            continue;
        if (item_ll(fm, n, &d) || item_ll(self->cm, n, &xm))
            goto fail;
        if (d != xm)
            continue;
        if (limit != NULL) {
            ll lg, lc, lm;
            int has = limit_of(limit, ns[k], &lg, &lc, &lm);
            if (has < 0)
                goto fail;
            if (has && (lg != xg || lc != xc || lm != xm))
                continue;
        }
        PyObject *row = PyTuple_Pack(4, ns[k], PyList_GET_ITEM(self->cg, n), PyList_GET_ITEM(self->cc, n),
                                     PyList_GET_ITEM(self->cm, n));
        if (row == NULL || PyList_Append(out, row)) {
            Py_XDECREF(row);
            goto fail;
        }
        Py_DECREF(row);
        sg += xg, sc += xc, sm += min_ll(xm, UNLIMITED);
        if (sg >= g && sc >= c && sm >= m) {
            PyObject *t = PyList_AsTuple(out);
            Py_DECREF(out);
            Py_DECREF(seq);
            return t;
        }
    }
    Py_DECREF(out);
    Py_DECREF(seq);
    Py_RETURN_NONE;
fail:
    Py_DECREF(out);
    Py_DECREF(seq);
    return NULL;
}

/* index_fit(key, g, c, m, limit=None) -> node or None: ``Pool.place_in``'s single-node search over the free-GPU index,
 * the nodes ``limit`` caps (a dict node -> (g, c, m)) left out of it and compared one by one on their capped resources */
static PyObject *NodeOps_index_fit(NodeOps *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 && nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "index_fit(key, g, c, m, limit=None)");
        return NULL;
    }
    ll g, c, m;
    if (get_ll(args[1], &g) || get_ll(args[2], &c) || get_ll(args[3], &m))
        return NULL;
    PyObject *limit = nargs == 5 ? args[4] : NULL;
    if (limit != NULL && limit != Py_None && !PyDict_Check(limit)) {
        PyErr_SetString(PyExc_TypeError, "limit: a dict");
        return NULL;
    }
    if (limit == Py_None || (limit != NULL && PyDict_GET_SIZE(limit) == 0))
        limit = NULL;
    PyObject *idx = PyDict_GetItemWithError(self->index, args[0]);
    if (idx == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, args[0]);
        return NULL;
    }
    PyObject *keys = PyDict_Keys(idx);
    if (keys == NULL || PyList_Sort(keys)) {
        Py_XDECREF(keys);
        return NULL;
    }
    /* the best (g, c, m left, node) so far: the index's smallest class with a fit, then the capped nodes */
    ll k0 = 0, k1 = 0, k2 = 0, kn = 0;
    int found = 0;
    Py_ssize_t i, nk = PyList_GET_SIZE(keys);
    for (i = 0; i < nk && !found; i++) {
        ll v;
        if (item_ll(keys, i, &v))
            goto fail;
        if (v < g)
            continue;
        PyObject *st = PyDict_GetItemWithError(idx, PyList_GET_ITEM(keys, i));
        if (st == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "index changed during index_fit");
            goto fail;
        }
        PyObject *it = PyObject_GetIter(st), *o;
        if (it == NULL)
            goto fail;
        while ((o = PyIter_Next(it)) != NULL) {
            Py_ssize_t n;
            ll b, d;
            int capped = limit == NULL ? 0 : PyDict_Contains(limit, o);
            if (capped || node_index(self, o, &n) || item_ll(self->fc, n, &b) || item_ll(self->fm, n, &d)) {
                Py_DECREF(o);
                if (capped > 0)  /* a node the limit caps: compared below, on its capped resources */
                    continue;
                Py_DECREF(it);
                goto fail;
            }
            Py_DECREF(o);
            if (b >= c && d >= m) {
                ll x0 = v - g, x1 = b - c, x2 = d - m, xn = (ll)n;
                if (!found || x1 < k1 || (x1 == k1 && (x2 < k2 || (x2 == k2 && xn < kn)))) {
                    found = 1;
                    k0 = x0, k1 = x1, k2 = x2, kn = xn;
                }
            }
        }
        Py_DECREF(it);
        if (PyErr_Occurred())
            goto fail;
    }
    Py_DECREF(keys);
    if (limit != NULL) {
        Py_ssize_t pos = 0;
        PyObject *o, *val;
        while (PyDict_Next(limit, &pos, &o, &val)) {
            Py_ssize_t n;
            ll a, b, d, lg, lc, lm;
            if (node_index(self, o, &n))
                return NULL;
            int av = truthy(PyList_GET_ITEM(self->avail, n));
            if (av < 0)
                return NULL;
            if (!av)
                continue;
            int in = PySequence_Contains(PyList_GET_ITEM(self->node_groups, n), args[0]);
            if (in < 0)
                return NULL;
            if (!in)
                continue;
            if (limit_of(limit, o, &lg, &lc, &lm) < 0 || item_ll(self->fg, n, &a) || item_ll(self->fc, n, &b)
                || item_ll(self->fm, n, &d))
                return NULL;
            a = min_ll(a, lg), b = min_ll(b, lc), d = min_ll(d, lm);
            if (a >= g && b >= c && d >= m) {
                ll x0 = a - g, x1 = b - c, x2 = d - m, xn = (ll)n;
                if (!found || x0 < k0 || (x0 == k0 && (x1 < k1 || (x1 == k1 && (x2 < k2 || (x2 == k2 && xn < kn)))))) {
                    found = 1;
                    k0 = x0, k1 = x1, k2 = x2, kn = xn;
                }
            }
        }
    }
    if (found)
        return PyLong_FromLongLong(kn);
    Py_RETURN_NONE;
fail:
    Py_DECREF(keys);
    return NULL;
}

/* the one-row allocation ((n, g, c, m),) for a single-node fit, or None */
static PyObject *one_row(PyObject *n, PyObject *const *gcm)
{
    if (n == NULL)
        return NULL;
    if (n == Py_None)
        return n;
    PyObject *row = PyTuple_Pack(4, n, gcm[0], gcm[1], gcm[2]);
    Py_DECREF(n);
    if (row == NULL)
        return NULL;
    PyObject *out = PyTuple_Pack(1, row);
    Py_DECREF(row);
    return out;
}

/* place(nodes, gang, g, c, m, free=None, limit=None): ``Pool.place`` */
static PyObject *NodeOps_place(NodeOps *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *a[6] = {NULL, NULL, NULL, NULL, Py_None, Py_None};
    Py_ssize_t i, nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs < 5 || nargs > 7) {
        PyErr_SetString(PyExc_TypeError, "place(nodes, gang, g, c, m, free=None, limit=None)");
        return NULL;
    }
    int gang = PyObject_IsTrue(args[1]);
    if (gang < 0)
        return NULL;
    a[0] = args[0], a[1] = args[2], a[2] = args[3], a[3] = args[4];
    for (i = 5; i < nargs; i++)
        a[i - 1] = args[i];
    for (i = 0; i < nkw; i++) {
        const char *k = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
        if (k == NULL)
            return NULL;
        if (strcmp(k, "free") == 0)
            a[4] = args[nargs + i];
        else if (strcmp(k, "limit") == 0)
            a[5] = args[nargs + i];
        else {
            PyErr_Format(PyExc_TypeError, "place: unexpected keyword %s", k);
            return NULL;
        }
    }
    if (gang)
        return NodeOps_gang(self, a, 6);
    return one_row(NodeOps_best_fit(self, a, 6), args + 2);
}

/* place_in(grp, gang, g, c, m, limit=None): ``Pool.place_in`` on the live free lists */
static PyObject *NodeOps_place_in(NodeOps *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 5 || nargs > 6 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) < 3) {
        PyErr_SetString(PyExc_TypeError, "place_in(grp, gang, g, c, m, limit=None)");
        return NULL;
    }
    int gang = PyObject_IsTrue(args[1]);
    if (gang < 0)
        return NULL;
    PyObject *limit = nargs == 6 ? args[5] : Py_None;
    int lim = PyObject_IsTrue(limit);  /* an empty limit caps nothing (``limit or None``) */
    if (lim < 0)
        return NULL;
    PyObject *a[6] = {NULL, args[2], args[3], args[4], Py_None, lim ? limit : Py_None};
    if (gang) {
        a[0] = PyTuple_GET_ITEM(args[0], 2);
        return NodeOps_gang(self, a, 6);
    }
    PyObject *b[5] = {PyTuple_GET_ITEM(args[0], 0), args[2], args[3], args[4], a[5]};
    return one_row(NodeOps_index_fit(self, b, 5), args + 2);
}

/* ------------------------------------------------------------------------------------------- EASY reservation */
/* reservation(run, alloc, elig, gang_order, gang, g, c, m) -> (T, limit) or (inf, None): ``easy._reservation``.
 * Free resources are copied into C arrays, released job by job at their estimated ends (``run``: the running
 * jobs sorted by (estimated end, seq, job)); after each distinct end with an eligible node touched, the job is
 * placed on the copies: a single-node job by best fit over the touched nodes in index order, a gang once the idle
 * eligible capacity covers it, over ``gang_order``. A single-node job copies a node on its first touch only, so a
 * call costs the running jobs walked, not the cluster's size; a gang needs every idle eligible node's capacity. */
static int cmp_ssize(const void *a, const void *b)
{
    Py_ssize_t x = *(const Py_ssize_t *)a, y = *(const Py_ssize_t *)b;
    return x < y ? -1 : x > y;
}

static PyObject *NodeOps_reservation(NodeOps *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8 || !PyList_Check(args[0]) || !PyList_Check(args[1]) || !PyAnySet_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "reservation(run, alloc, elig, gang_order, gang, g, c, m)");
        return NULL;
    }
    PyObject *run = args[0], *alloc = args[1], *elig = args[2];
    int gang = PyObject_IsTrue(args[4]);
    ll g, c, m;
    if (gang < 0 || get_ll(args[5], &g) || get_ll(args[6], &c) || get_ll(args[7], &m))
        return NULL;
    Py_ssize_t N = PyList_GET_SIZE(self->fg), i;
    ll *fg = NULL, *fc = NULL, *fm = NULL, *cg = NULL, *cc = NULL, *cm = NULL;
    char *av = NULL, *el = NULL, *mark = NULL, *loaded = NULL;
    Py_ssize_t *touched = NULL, nt = 0;
    PyObject *gseq = NULL, *out = NULL;
    fg = PyMem_Malloc(sizeof(ll) * 6 * (N + 1));
    av = PyMem_Malloc(3 * (N + 1));
    touched = PyMem_Malloc(sizeof(Py_ssize_t) * (N + 1));
    if (fg == NULL || av == NULL || touched == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    fc = fg + N + 1, fm = fc + N + 1, cg = fm + N + 1, cc = cg + N + 1, cm = cc + N + 1;
    el = av + N + 1, mark = el + N + 1;
    if (!gang) {
        /* a single-node job reads only the nodes its released jobs touch: load those on first touch (below), not
         * all N nodes and the whole eligible set per call (the per-call cost grew with the cluster) */
        loaded = PyMem_Calloc((size_t)N + 1, 1);
        if (loaded == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    for (i = 0; gang && i < N; i++) {
        int a = truthy(PyList_GET_ITEM(self->avail, i));
        if (a < 0 || item_ll(self->fg, i, &fg[i]) || item_ll(self->fc, i, &fc[i]) || item_ll(self->fm, i, &fm[i])
            || item_ll(self->cg, i, &cg[i]) || item_ll(self->cc, i, &cc[i]) || item_ll(self->cm, i, &cm[i]))
            goto done;
        av[i] = (char)a;
        el[i] = 0;
        mark[i] = 0;
    }
    if (gang) {
        PyObject *it = PyObject_GetIter(elig), *o;
        if (it == NULL)
            goto done;
        while ((o = PyIter_Next(it)) != NULL) {
            Py_ssize_t n;
            int bad = node_index(self, o, &n);
            Py_DECREF(o);
            if (bad) {
                Py_DECREF(it);
                goto done;
            }
            el[n] = 1;
        }
        Py_DECREF(it);
        if (PyErr_Occurred())
            goto done;
    }
    Py_ssize_t ng = 0;
    PyObject **gs = NULL;
    __int128 ig = 0, ic = 0, im = 0;
    if (gang) {
        gseq = PySequence_Fast(args[3], "reservation: gang_order");
        if (gseq == NULL)
            goto done;
        ng = PySequence_Fast_GET_SIZE(gseq);
        gs = PySequence_Fast_ITEMS(gseq);
        for (i = 0; i < N; i++)
            if (el[i] && av[i] && fg[i] == cg[i] && fc[i] == cc[i] && fm[i] == cm[i])
                ig += cg[i], ic += cc[i], im += min_ll(cm[i], UNLIMITED);
    }
    Py_ssize_t k = 0, nr = PyList_GET_SIZE(run);
    while (k < nr) {
        PyObject *tobj = PyTuple_GET_ITEM(PyList_GET_ITEM(run, k), 0);
        double t = PyFloat_AsDouble(tobj);
        if (t == -1.0 && PyErr_Occurred())
            goto done;
        nt = 0;
        while (k < nr) {
            PyObject *e = PyList_GET_ITEM(run, k);
            double te = PyFloat_AsDouble(PyTuple_GET_ITEM(e, 0));
            if (te == -1.0 && PyErr_Occurred())
                goto done;
            if (te != t)
                break;
            Py_ssize_t j = PyLong_AsSsize_t(PyTuple_GET_ITEM(e, 2));
            if (j == -1 && PyErr_Occurred())
                goto done;
            PyObject *rows = PySequence_Fast(PyList_GET_ITEM(alloc, j), "alloc rows");
            if (rows == NULL)
                goto done;
            Py_ssize_t r, nrw = PySequence_Fast_GET_SIZE(rows);
            PyObject **rw = PySequence_Fast_ITEMS(rows);
            for (r = 0; r < nrw; r++) {
                PyObject *row = rw[r];
                Py_ssize_t n;
                ll a, b, d;
                if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 4 || node_index(self, PyTuple_GET_ITEM(row, 0), &n)
                    || get_ll(PyTuple_GET_ITEM(row, 1), &a) || get_ll(PyTuple_GET_ITEM(row, 2), &b)
                    || get_ll(PyTuple_GET_ITEM(row, 3), &d)) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_TypeError, "alloc rows are (node, g, c, m) tuples");
                    Py_DECREF(rows);
                    goto done;
                }
                if (loaded != NULL && !loaded[n]) {
                    int ok = truthy(PyList_GET_ITEM(self->avail, n));
                    int in = ok < 0 ? -1 : PySet_Contains(elig, PyTuple_GET_ITEM(row, 0));
                    if (in < 0 || item_ll(self->fg, n, &fg[n]) || item_ll(self->fc, n, &fc[n])
                        || item_ll(self->fm, n, &fm[n])) {
                        Py_DECREF(rows);
                        goto done;
                    }
                    av[n] = (char)ok, el[n] = (char)in, mark[n] = 0, loaded[n] = 1;
                }
                if (av[n]) {
                    fg[n] += a, fc[n] += b, fm[n] += d;
                    if (el[n] && !mark[n]) {
                        mark[n] = 1;
                        touched[nt++] = n;
                    }
                }
            }
            Py_DECREF(rows);
            k++;
        }
        if (nt == 0)
            continue;
        Py_ssize_t found[1] = {-1};
        int placed = 0;
        PyObject *nodes_out = NULL;  /* gang: the list of chosen node objects */
        if (gang) {
            int became = 0;
            for (i = 0; i < nt; i++) {
                Py_ssize_t n = touched[i];
                if (cg[n] == fg[n] && cc[n] == fc[n] && cm[n] == fm[n]) {
                    became = 1;
                    ig += cg[n], ic += cc[n], im += min_ll(cm[n], UNLIMITED);
                }
            }
            for (i = 0; i < nt; i++)
                mark[touched[i]] = 0;
            if (!became || ig < g || ic < c || im < m)
                continue;
            __int128 sg = 0, sc = 0, sm = 0;
            nodes_out = PyList_New(0);
            if (nodes_out == NULL)
                goto done;
            for (i = 0; i < ng; i++) {
                Py_ssize_t n;
                if (node_index(self, gs[i], &n)) {
                    Py_DECREF(nodes_out);
                    goto done;
                }
                if (!av[n] || fg[n] != cg[n] || fc[n] != cc[n] || fm[n] != cm[n])
                    continue;
                if (PyList_Append(nodes_out, gs[i])) {
                    Py_DECREF(nodes_out);
                    goto done;
                }
                sg += cg[n], sc += cc[n], sm += min_ll(cm[n], UNLIMITED);
                if (sg >= g && sc >= c && sm >= m) {
                    placed = 1;
                    break;
                }
            }
            if (!placed) {
                Py_DECREF(nodes_out);
                continue;
            }
        } else {
            /* best fit over sorted(touched): ascending index, first minimal (g, c, m) left */
            ll k0 = 0, k1 = 0, k2 = 0;
            qsort(touched, (size_t)nt, sizeof(Py_ssize_t), cmp_ssize);  /* sorted(touched) */
            for (i = 0; i < nt; i++) {
                Py_ssize_t n = touched[i];
                mark[n] = 0;
                if (fg[n] >= g && fc[n] >= c && fm[n] >= m && av[n]) {
                    ll x0 = fg[n] - g, x1 = fc[n] - c, x2 = fm[n] - m;
                    if (found[0] < 0 || x0 < k0 || (x0 == k0 && (x1 < k1 || (x1 == k1 && x2 < k2)))) {
                        found[0] = n;
                        k0 = x0, k1 = x1, k2 = x2;
                    }
                }
            }
            if (found[0] < 0)
                continue;
            placed = 1;
        }
        /* (t, {n: (free left after the job) for its rows}) */
        PyObject *limit = PyDict_New();
        if (limit == NULL) {
            Py_XDECREF(nodes_out);
            goto done;
        }
        Py_ssize_t nn = gang ? PyList_GET_SIZE(nodes_out) : 1;
        for (i = 0; i < nn; i++) {
            PyObject *nobj;
            Py_ssize_t n;
            ll a, b, d;
            if (gang) {
                nobj = PyList_GET_ITEM(nodes_out, i);
                Py_INCREF(nobj);
                if (node_index(self, nobj, &n)) {
                    Py_DECREF(nobj);
                    goto limit_fail;
                }
                a = cg[n], b = cc[n], d = cm[n];
            } else {
                n = found[0];
                nobj = PyLong_FromSsize_t(n);
                if (nobj == NULL)
                    goto limit_fail;
                a = g, b = c, d = m;
            }
            PyObject *v = Py_BuildValue("(LLL)", fg[n] - a, fc[n] - b, fm[n] - d);
            int rc = v == NULL ? -1 : PyDict_SetItem(limit, nobj, v);
            Py_XDECREF(v);
            Py_DECREF(nobj);
            if (rc)
                goto limit_fail;
        }
        Py_XDECREF(nodes_out);
        out = PyTuple_Pack(2, tobj, limit);
        Py_DECREF(limit);
        goto done;
    limit_fail:
        Py_DECREF(limit);
        Py_XDECREF(nodes_out);
        goto done;
    }
    {
        PyObject *inf = PyFloat_FromDouble(Py_HUGE_VAL);
        if (inf != NULL) {
            out = PyTuple_Pack(2, inf, Py_None);
            Py_DECREF(inf);
        }
    }
done:
    Py_XDECREF(gseq);
    PyMem_Free(fg);
    PyMem_Free(av);
    PyMem_Free(loaded);
    PyMem_Free(touched);
    return out;
}

/* ------------------------------------------------------------------------------------------- bookkeeping */
static int index_move(PyObject *idx, PyObject *node, ll from, ll to)
{
    PyObject *kf = PyLong_FromLongLong(from), *kt = NULL;
    if (kf == NULL)
        return -1;
    PyObject *st = PyDict_GetItemWithError(idx, kf);
    if (st == NULL && PyErr_Occurred())
        goto fail;
    if (st != NULL) {
        int has = PySet_Contains(st, node);
        if (has < 0)
            goto fail;
        if (has) {
            if (PySet_Discard(st, node) < 0)
                goto fail;
            if (PySet_GET_SIZE(st) == 0 && PyDict_DelItem(idx, kf) < 0)
                goto fail;
        }
    }
    kt = PyLong_FromLongLong(to);
    if (kt == NULL)
        goto fail;
    st = PyDict_GetItemWithError(idx, kt);
    if (st == NULL) {
        if (PyErr_Occurred())
            goto fail;
        PyObject *ns = PySet_New(NULL);
        if (ns == NULL || PySet_Add(ns, node) < 0 || PyDict_SetItem(idx, kt, ns) < 0) {
            Py_XDECREF(ns);
            goto fail;
        }
        Py_DECREF(ns);
    } else if (PySet_Add(st, node) < 0) {
        goto fail;
    }
    Py_DECREF(kf);
    Py_DECREF(kt);
    return 0;
fail:
    Py_DECREF(kf);
    Py_XDECREF(kt);
    return -1;
}

static int bump_epoch(NodeOps *self)
{
    PyObject *e = PyObject_GetAttr(self->pool, s_epoch);
    if (e == NULL)
        return -1;
    PyObject *one = PyLong_FromLong(1);
    PyObject *ne = PyNumber_Add(e, one);
    Py_DECREF(one);
    Py_DECREF(e);
    if (ne == NULL)
        return -1;
    int rc = PyObject_SetAttr(self->pool, s_epoch, ne);
    Py_DECREF(ne);
    return rc;
}

/* move(n, dg, dc, dm): ``Pool._move`` */
static PyObject *NodeOps_move(NodeOps *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "move(n, dg, dc, dm)");
        return NULL;
    }
    Py_ssize_t n;
    ll dg, dc, dm, a0, b0, d0, cg, cc, cm;
    if (node_index(self, args[0], &n) || get_ll(args[1], &dg) || get_ll(args[2], &dc) || get_ll(args[3], &dm))
        return NULL;
    if (bump_epoch(self))
        return NULL;
    if (item_ll(self->fg, n, &a0) || item_ll(self->fc, n, &b0) || item_ll(self->fm, n, &d0)
        || item_ll(self->cg, n, &cg) || item_ll(self->cc, n, &cc) || item_ll(self->cm, n, &cm))
        return NULL;
    ll a1 = a0 + dg, b1 = b0 + dc, d1 = d0 + dm;
    if (!(a1 >= 0 && b1 >= 0 && d1 >= 0)) {
        PyErr_SetString(PyExc_AssertionError, "node over-allocated");
        return NULL;
    }
    if (!(a1 <= cg && b1 <= cc)) {
        PyErr_SetString(PyExc_AssertionError, "node over-released");
        return NULL;
    }
    if (set_item_ll(self->fg, n, a1) || set_item_ll(self->fc, n, b1) || set_item_ll(self->fm, n, d1))
        return NULL;
    PyObject *groups = PyList_GET_ITEM(self->node_groups, n);
    PyObject *gs = PySequence_Fast(groups, "_node_groups entries are lists");
    if (gs == NULL)
        return NULL;
    Py_ssize_t i, ng = PySequence_Fast_GET_SIZE(gs);
    PyObject **ks = PySequence_Fast_ITEMS(gs);
    int av = truthy(PyList_GET_ITEM(self->avail, n));
    if (av < 0)
        goto fail;
    if (!av) {  /* out of the bounds and the index until it returns */
        for (i = 0; i < ng; i++)
            if (dict_incr(self->gepoch, ks[i]))
                goto fail;
    } else {
        int idle0 = a0 == cg && b0 == cc && d0 == cm;
        int idle1 = a1 == cg && b1 == cc && d1 == cm;
        ll m0 = min_ll(d0, UNLIMITED), m1 = min_ll(d1, UNLIMITED);
        PyObject *node = NULL;
        for (i = 0; i < ng; i++) {
            PyObject *k = ks[i];
            if (dict_incr(self->gepoch, k))
                goto fail;
            PyObject *A = PyDict_GetItemWithError(self->agg, k);
            if (A == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetObject(PyExc_KeyError, k);
                goto fail;
            }
            if (!PyList_Check(A) || PyList_GET_SIZE(A) != 12) {
                PyErr_SetString(PyExc_TypeError, "_agg entries are 12-lists");
                goto fail;
            }
            if (add_item(A, 0, a1 - a0) || add_item(A, 1, b1 - b0) || add_item(A, 2, m1 - m0))
                goto fail;
            if (idle0 && (add_item(A, 3, -a0) || add_item(A, 4, -b0) || add_item(A, 5, -m0)))
                goto fail;
            if (idle1 && (add_item(A, 3, a1) || add_item(A, 4, b1) || add_item(A, 5, m1)))
                goto fail;
            const ll v0s[3] = {a0, b0, d0}, v1s[3] = {a1, b1, d1};
            for (int r = 0; r < 3; r++) {
                int vi = 6 + r, ci = vi + 3;
                ll mx, cnt;
                if (item_ll(A, vi, &mx) || item_ll(A, ci, &cnt))
                    goto fail;
                if (cnt > 0 && v0s[r] == mx) {
                    cnt -= 1;
                    if (cnt == 0)
                        cnt = -1;  /* the last node at the maximum left: recomputed when asked */
                    if (set_item_ll(A, ci, cnt))
                        goto fail;
                }
                if (cnt >= 0) {
                    if (v1s[r] > mx) {
                        if (set_item_ll(A, vi, v1s[r]) || set_item_ll(A, ci, 1))
                            goto fail;
                    } else if (v1s[r] == mx) {
                        if (set_item_ll(A, ci, cnt + 1))
                            goto fail;
                    }
                }
            }
            if (dg) {
                PyObject *idx = PyDict_GetItemWithError(self->index, k);
                if (idx == NULL) {
                    if (!PyErr_Occurred())
                        PyErr_SetObject(PyExc_KeyError, k);
                    goto fail;
                }
                if (node == NULL && (node = PyLong_FromSsize_t(n)) == NULL)
                    goto fail;
                if (index_move(idx, node, a0, a1)) {
                    Py_DECREF(node);
                    goto fail;
                }
            }
        }
        Py_XDECREF(node);
    }
    Py_DECREF(gs);
    if (self->track_stranded) {  /* ``_restrand`` */
        ll v = (av && !(a1 == cg && b1 == cc && d1 == cm)) ? a1 : 0, old;
        if (item_ll(self->stranded, n, &old))
            return NULL;
        PyObject *sg = PyObject_GetAttr(self->pool, s_stranded_g);
        if (sg == NULL)
            return NULL;
        PyObject *delta = PyLong_FromLongLong(v - old);
        PyObject *ns = delta ? PyNumber_Add(sg, delta) : NULL;
        Py_DECREF(sg);
        Py_XDECREF(delta);
        if (ns == NULL)
            return NULL;
        int rc = PyObject_SetAttr(self->pool, s_stranded_g, ns);
        Py_DECREF(ns);
        if (rc || set_item_ll(self->stranded, n, v))
            return NULL;
    }
    Py_RETURN_NONE;
fail:
    Py_DECREF(gs);
    return NULL;
}

/* allocate(alloc) / release(alloc): ``move`` per (n, g, c, m) row, taking or giving back */
static PyObject *rows(NodeOps *self, PyObject *alloc, int sign)
{
    PyObject *seq = PySequence_Fast(alloc, "an allocation is a sequence of (node, g, c, m)");
    if (seq == NULL)
        return NULL;
    Py_ssize_t i, nr = PySequence_Fast_GET_SIZE(seq);
    PyObject **rs = PySequence_Fast_ITEMS(seq);
    for (i = 0; i < nr; i++) {
        PyObject *row = PySequence_Fast(rs[i], "an allocation row is (node, g, c, m)");
        if (row == NULL)
            goto fail;
        if (PySequence_Fast_GET_SIZE(row) != 4) {
            Py_DECREF(row);
            PyErr_SetString(PyExc_ValueError, "an allocation row is (node, g, c, m)");
            goto fail;
        }
        PyObject **x = PySequence_Fast_ITEMS(row);
        PyObject *a[4] = {x[0], x[1], x[2], x[3]};
        PyObject *neg[3] = {NULL, NULL, NULL};
        if (sign < 0) {
            for (int r = 0; r < 3; r++) {
                if ((neg[r] = PyNumber_Negative(x[r + 1])) == NULL) {
                    Py_XDECREF(neg[0]); Py_XDECREF(neg[1]);
                    Py_DECREF(row);
                    goto fail;
                }
                a[r + 1] = neg[r];
            }
        }
        PyObject *res = NodeOps_move(self, a, 4);
        Py_XDECREF(neg[0]); Py_XDECREF(neg[1]); Py_XDECREF(neg[2]);
        Py_DECREF(row);
        if (res == NULL)
            goto fail;
        Py_DECREF(res);
    }
    Py_DECREF(seq);
    Py_RETURN_NONE;
fail:
    Py_DECREF(seq);
    return NULL;
}

static PyObject *NodeOps_allocate(NodeOps *self, PyObject *alloc) { return rows(self, alloc, -1); }
static PyObject *NodeOps_release(NodeOps *self, PyObject *alloc) { return rows(self, alloc, 1); }

/* ------------------------------------------------------------------------------------------- preemption */
/* release_fits(near, min_rt, acct, acct_ok, alloc, elig, nodes, gang, g, c, m) -> bool: the first test of the
 * preemption search (``preempt._victims``): would the preemptor fit with every candidate victim released?
 * Candidates are the jobs of ``near`` with min runtime 0, or (``acct_ok`` a list, not None) whose account's flag
 * is true: the over-served buckets' jobs. Their allocations are added to the free lists (as deltas in C; nodes
 * not available too, as the Python copies do); the nodes touched are those in ``elig`` and available. False when
 * there is no candidate, no touched node, or no fit: a single-node job by ``place(sorted(touched))``'s rule (some
 * touched node holds g, c, m), a gang by ``_gang`` over ``nodes`` (idle available nodes until their capacities
 * cover it). Fitting is monotone in what is released, so the order of ``near`` does not matter. */
static PyObject *NodeOps_release_fits(NodeOps *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 11 || !PyList_Check(args[1]) || !PyList_Check(args[2]) || !PyList_Check(args[4])
        || !PyAnySet_Check(args[5]) || (args[3] != Py_None && !PyList_Check(args[3]))) {
        PyErr_SetString(PyExc_TypeError, "release_fits(near, min_rt, acct, acct_ok, alloc, elig, nodes, gang, g, c, m)");
        return NULL;
    }
    PyObject *min_rt = args[1], *acct = args[2], *acct_ok = args[3], *alloc = args[4], *elig = args[5];
    int gang = PyObject_IsTrue(args[7]);
    ll g, c, m;
    if (gang < 0 || get_ll(args[8], &g) || get_ll(args[9], &c) || get_ll(args[10], &m))
        return NULL;
    Py_ssize_t N = PyList_GET_SIZE(self->fg), i;
    ll *dg = PyMem_Calloc(3 * (size_t)(N + 1), sizeof(ll));
    char *mark = PyMem_Calloc((size_t)N + 1, 1);
    if (dg == NULL || mark == NULL) {
        PyMem_Free(dg);
        PyMem_Free(mark);
        return PyErr_NoMemory();
    }
    ll *dc = dg + N + 1, *dm = dc + N + 1;
    Py_ssize_t ncand = 0, ntouched = 0;
    int fits = 0, err = 1;
    PyObject *it = PyObject_GetIter(args[0]), *v;
    if (it == NULL)
        goto done;
    while ((v = PyIter_Next(it)) != NULL) {
        Py_ssize_t j = PyLong_AsSsize_t(v);
        Py_DECREF(v);
        if (j == -1 && PyErr_Occurred())
            break;
        if (j < 0 || j >= PyList_GET_SIZE(min_rt) || j >= PyList_GET_SIZE(acct) || j >= PyList_GET_SIZE(alloc)) {
            PyErr_SetString(PyExc_IndexError, "release_fits: job index out of range");
            break;
        }
        double mrt = PyFloat_AsDouble(PyList_GET_ITEM(min_rt, j));
        if (mrt == -1.0 && PyErr_Occurred())
            break;
        int cand = mrt == 0.0;
        if (!cand && acct_ok != Py_None) {
            Py_ssize_t a = PyLong_AsSsize_t(PyList_GET_ITEM(acct, j));
            if (a == -1 && PyErr_Occurred())
                break;
            if (a < 0 || a >= PyList_GET_SIZE(acct_ok)) {
                PyErr_SetString(PyExc_IndexError, "release_fits: account index out of range");
                break;
            }
            cand = truthy(PyList_GET_ITEM(acct_ok, a));
            if (cand < 0)
                break;
        }
        if (!cand)
            continue;
        ncand++;
        PyObject *rs = PySequence_Fast(PyList_GET_ITEM(alloc, j), "alloc rows");
        if (rs == NULL)
            break;
        Py_ssize_t r, nrw = PySequence_Fast_GET_SIZE(rs);
        PyObject **rw = PySequence_Fast_ITEMS(rs);
        int bad = 0;
        for (r = 0; r < nrw && !bad; r++) {
            PyObject *row = rw[r];
            Py_ssize_t n;
            ll a, b, d;
            if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 4 || node_index(self, PyTuple_GET_ITEM(row, 0), &n)
                || get_ll(PyTuple_GET_ITEM(row, 1), &a) || get_ll(PyTuple_GET_ITEM(row, 2), &b)
                || get_ll(PyTuple_GET_ITEM(row, 3), &d)) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "alloc rows are (node, g, c, m) tuples");
                bad = 1;
                break;
            }
            dg[n] += a, dc[n] += b, dm[n] += d;
            if (!mark[n]) {
                int av = truthy(PyList_GET_ITEM(self->avail, n));
                int in = av > 0 ? PySet_Contains(elig, PyTuple_GET_ITEM(row, 0)) : 0;
                if (av < 0 || in < 0) {
                    bad = 1;
                    break;
                }
                if (in) {
                    mark[n] = 1;
                    ntouched++;
                }
            }
        }
        Py_DECREF(rs);
        if (bad)
            break;
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        goto done;
    err = 0;
    if (ncand == 0 || ntouched == 0)
        goto done;
    if (!gang) {
        for (i = 0; i < N && !fits; i++) {
            if (!mark[i])
                continue;
            ll a, b, d;
            if (item_ll(self->fg, i, &a) || item_ll(self->fc, i, &b) || item_ll(self->fm, i, &d)) {
                err = 1;
                goto done;
            }
            fits = a + dg[i] >= g && b + dc[i] >= c && d + dm[i] >= m;  /* touched nodes are available */
        }
        goto done;
    }
    PyObject *seq = PySequence_Fast(args[6], "release_fits: nodes");
    if (seq == NULL) {
        err = 1;
        goto done;
    }
    __int128 sg = 0, sc = 0, sm = 0;
    Py_ssize_t k, nn = PySequence_Fast_GET_SIZE(seq);
    PyObject **ns = PySequence_Fast_ITEMS(seq);
    for (k = 0; k < nn && !fits; k++) {
        Py_ssize_t n;
        ll a, b, d, xg, xc, xm;
        int av;
        if (node_index(self, ns[k], &n) || (av = truthy(PyList_GET_ITEM(self->avail, n))) < 0
            || item_ll(self->fg, n, &a) || item_ll(self->fc, n, &b) || item_ll(self->fm, n, &d)
            || item_ll(self->cg, n, &xg) || item_ll(self->cc, n, &xc) || item_ll(self->cm, n, &xm)) {
            err = 1;
            break;
        }
        if (!av || a + dg[n] != xg || b + dc[n] != xc || d + dm[n] != xm)
            continue;
        sg += xg, sc += xc, sm += min_ll(xm, UNLIMITED);
        fits = sg >= g && sc >= c && sm >= m;
    }
    Py_DECREF(seq);
done:
    PyMem_Free(dg);
    PyMem_Free(mark);
    if (err)
        return NULL;
    return PyBool_FromLong(fits);
}

/* victims(near, min_rt, acct, acct_ok, served, burst, att_start, alloc, elig, nodes, gang, g, c, m, now, ci)
 * -> (need, placement) or None: ``preempt._victims``' search after its first test (``release_fits``), for a
 * search without QoS pairs or guarantee reclaim. Candidates as in ``release_fits``, each keyed as the Python
 * tuple (funded, not burst, -served of its bucket (0.0 for an unfunded job: ``served`` per account), work lost
 * since the last checkpoint (``ci`` 0: the whole attempt), -attempt start, job) and released in that order on
 * copies of the free lists until the preemptor is placed (best fit over the released job's touched nodes in
 * index order; a gang over ``nodes``); ``need``: the chosen jobs holding a placed node, for a single-node
 * placement less those (least preferred first) whose release the live free resources plus the others' cover. */
typedef struct {
    int funded, notburst;
    double negsv, lost, negstart;
    Py_ssize_t v;
} Cand;

static int cmp_cand(const void *pa, const void *pb)
{
    const Cand *a = pa, *b = pb;
    if (a->funded != b->funded)
        return a->funded < b->funded ? -1 : 1;
    if (a->notburst != b->notburst)
        return a->notburst < b->notburst ? -1 : 1;
    if (a->negsv != b->negsv)
        return a->negsv < b->negsv ? -1 : 1;
    if (a->lost != b->lost)
        return a->lost < b->lost ? -1 : 1;
    if (a->negstart != b->negstart)
        return a->negstart < b->negstart ? -1 : 1;
    return a->v < b->v ? -1 : a->v > b->v;
}

/* one allocation row (node, g, c, m) of a job */
static int alloc_row(NodeOps *self, PyObject *row, Py_ssize_t *n, ll *a, ll *b, ll *d)
{
    if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 4 || node_index(self, PyTuple_GET_ITEM(row, 0), n)
        || get_ll(PyTuple_GET_ITEM(row, 1), a) || get_ll(PyTuple_GET_ITEM(row, 2), b)
        || get_ll(PyTuple_GET_ITEM(row, 3), d)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "alloc rows are (node, g, c, m) tuples");
        return -1;
    }
    return 0;
}

static PyObject *NodeOps_victims(NodeOps *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 16 || !PyList_Check(args[1]) || !PyList_Check(args[2]) || (args[3] != Py_None && !PyList_Check(args[3]))
        || (args[4] != Py_None && !PyList_Check(args[4])) || !PyList_Check(args[5]) || !PyList_Check(args[6])
        || !PyList_Check(args[7]) || !PyAnySet_Check(args[8])) {
        PyErr_SetString(PyExc_TypeError, "victims(near, min_rt, acct, acct_ok, served, burst, att_start, alloc, elig, "
                        "nodes, gang, g, c, m, now, ci)");
        return NULL;
    }
    PyObject *min_rt = args[1], *acct = args[2], *acct_ok = args[3], *served = args[4], *burst = args[5];
    PyObject *att = args[6], *alloc = args[7], *elig = args[8];
    int gang = PyObject_IsTrue(args[10]);
    ll g, c, m;
    if (gang < 0 || get_ll(args[11], &g) || get_ll(args[12], &c) || get_ll(args[13], &m))
        return NULL;
    double now = PyFloat_AsDouble(args[14]), ci = PyFloat_AsDouble(args[15]);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t N = PyList_GET_SIZE(self->fg), nc = 0, cap = 16, nmax = PyList_GET_SIZE(min_rt), k, r;
    if (PyList_GET_SIZE(acct) < nmax || PyList_GET_SIZE(burst) < nmax || PyList_GET_SIZE(att) < nmax
        || PyList_GET_SIZE(alloc) < nmax) {
        PyErr_SetString(PyExc_ValueError, "victims: per-job lists of different lengths");
        return NULL;
    }
    Cand *cands = PyMem_Malloc(sizeof(Cand) * (size_t)cap);
    ll *dg = PyMem_Calloc(3 * (size_t)(N + 1), sizeof(ll));
    Py_ssize_t *touched = NULL, ntcap = 0;
    char *used = PyMem_Calloc((size_t)N + 1, 1);
    PyObject *out = NULL, *placement = NULL, *it = NULL, *gseq = NULL;
    if (cands == NULL || dg == NULL || used == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    ll *dc = dg + N + 1, *dm = dc + N + 1;
    it = PyObject_GetIter(args[0]);
    if (it == NULL)
        goto done;
    PyObject *vo;
    while ((vo = PyIter_Next(it)) != NULL) {
        Py_ssize_t v = PyLong_AsSsize_t(vo);
        Py_DECREF(vo);
        if (v == -1 && PyErr_Occurred())
            goto done;
        if (v < 0 || v >= nmax) {
            PyErr_SetString(PyExc_IndexError, "victims: job index out of range");
            goto done;
        }
        double mrt = PyFloat_AsDouble(PyList_GET_ITEM(min_rt, v));
        if (mrt == -1.0 && PyErr_Occurred())
            goto done;
        int unfunded = mrt == 0.0;
        double sv = 0.0;
        if (!unfunded) {
            if (acct_ok == Py_None)
                continue;
            Py_ssize_t a = PyLong_AsSsize_t(PyList_GET_ITEM(acct, v));
            if (a == -1 && PyErr_Occurred())
                goto done;
            if (a < 0 || a >= PyList_GET_SIZE(acct_ok) || served == Py_None || a >= PyList_GET_SIZE(served)) {
                PyErr_SetString(PyExc_IndexError, "victims: account index out of range");
                goto done;
            }
            int ok = truthy(PyList_GET_ITEM(acct_ok, a));
            if (ok < 0)
                goto done;
            if (!ok)
                continue;
            if (as_dbl(PyList_GET_ITEM(served, a), &sv))
                goto done;
        }
        int b = truthy(PyList_GET_ITEM(burst, v));
        double st;
        if (b < 0 || as_dbl(PyList_GET_ITEM(att, v), &st))
            goto done;
        double elapsed = now - st;
        double lost = elapsed - (ci != 0.0 ? floor(elapsed / ci) * ci : 0.0);
        if (nc == cap) {
            Cand *x = PyMem_Realloc(cands, sizeof(Cand) * (size_t)(cap * 2));
            if (x == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            cands = x, cap *= 2;
        }
        cands[nc++] = (Cand){!unfunded, !b, -sv, lost, -st, v};
    }
    Py_CLEAR(it);
    if (PyErr_Occurred())
        goto done;
    qsort(cands, (size_t)nc, sizeof(Cand), cmp_cand);
    if (gang && (gseq = PySequence_Fast(args[9], "victims: nodes")) == NULL)
        goto done;
    Py_ssize_t nchosen = 0;
    for (k = 0; k < nc && placement == NULL; k++) {
        PyObject *rs = PySequence_Fast(PyList_GET_ITEM(alloc, cands[k].v), "alloc rows");
        if (rs == NULL)
            goto done;
        Py_ssize_t nrw = PySequence_Fast_GET_SIZE(rs), nt = 0;
        PyObject **rw = PySequence_Fast_ITEMS(rs);
        if (nrw > ntcap) {
            PyMem_Free(touched);
            ntcap = nrw;
            if ((touched = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)ntcap)) == NULL) {
                Py_DECREF(rs);
                PyErr_NoMemory();
                goto done;
            }
        }
        for (r = 0; r < nrw; r++) {
            Py_ssize_t n;
            ll a, b, d;
            int in = 0, av;
            if (alloc_row(self, rw[r], &n, &a, &b, &d)
                || (in = PySet_Contains(elig, PyTuple_GET_ITEM(rw[r], 0))) < 0) {
                Py_DECREF(rs);
                goto done;
            }
            dg[n] += a, dc[n] += b, dm[n] += d;
            if (in && (av = truthy(PyList_GET_ITEM(self->avail, n))) != 0) {
                if (av < 0) {
                    Py_DECREF(rs);
                    goto done;
                }
                touched[nt++] = n;
            }
        }
        Py_DECREF(rs);
        nchosen = k + 1;
        if (nt == 0)
            continue;
        if (!gang) {  /* place(sorted(touched), False, ...): the first minimal (g, c, m) left */
            Py_ssize_t best = -1;
            ll k0 = 0, k1 = 0, k2 = 0;
            qsort(touched, (size_t)nt, sizeof(Py_ssize_t), cmp_ssize);
            for (r = 0; r < nt; r++) {
                Py_ssize_t n = touched[r];
                ll a, b, d;
                if (item_ll(self->fg, n, &a) || item_ll(self->fc, n, &b) || item_ll(self->fm, n, &d))
                    goto done;
                a += dg[n], b += dc[n], d += dm[n];
                if (a >= g && b >= c && d >= m) {
                    ll x0 = a - g, x1 = b - c, x2 = d - m;
                    if (best < 0 || x0 < k0 || (x0 == k0 && (x1 < k1 || (x1 == k1 && x2 < k2))))
                        best = n, k0 = x0, k1 = x1, k2 = x2;
                }
            }
            if (best < 0)
                continue;
            PyObject *no = PyLong_FromSsize_t(best), *row;
            if (no == NULL)
                goto done;
            row = PyTuple_Pack(4, no, args[11], args[12], args[13]);
            Py_DECREF(no);
            if (row == NULL)
                goto done;
            placement = PyTuple_Pack(1, row);
            Py_DECREF(row);
            if (placement == NULL)
                goto done;
            used[best] = 1;
        } else {  /* _gang(nodes, ...) on the copies: idle available nodes until their capacities cover it */
            Py_ssize_t q, nn = PySequence_Fast_GET_SIZE(gseq);
            PyObject **ns = PySequence_Fast_ITEMS(gseq);
            __int128 sg = 0, sc = 0, sm = 0;
            PyObject *rowsl = PyList_New(0);
            if (rowsl == NULL)
                goto done;
            for (q = 0; q < nn; q++) {
                Py_ssize_t n;
                ll a, b, d, xg, xc, xm;
                int av;
                if (node_index(self, ns[q], &n) || (av = truthy(PyList_GET_ITEM(self->avail, n))) < 0
                    || item_ll(self->fg, n, &a) || item_ll(self->fc, n, &b) || item_ll(self->fm, n, &d)
                    || item_ll(self->cg, n, &xg) || item_ll(self->cc, n, &xc) || item_ll(self->cm, n, &xm)) {
                    Py_DECREF(rowsl);
                    goto done;
                }
                if (!av || a + dg[n] != xg || b + dc[n] != xc || d + dm[n] != xm)
                    continue;
                PyObject *row = PyTuple_Pack(4, ns[q], PyList_GET_ITEM(self->cg, n), PyList_GET_ITEM(self->cc, n),
                                             PyList_GET_ITEM(self->cm, n));
                if (row == NULL || PyList_Append(rowsl, row)) {
                    Py_XDECREF(row);
                    Py_DECREF(rowsl);
                    goto done;
                }
                Py_DECREF(row);
                sg += xg, sc += xc, sm += min_ll(xm, UNLIMITED);
                if (sg >= g && sc >= c && sm >= m) {
                    placement = PyList_AsTuple(rowsl);
                    if (placement == NULL) {
                        Py_DECREF(rowsl);
                        goto done;
                    }
                    for (Py_ssize_t x = 0; x < PyList_GET_SIZE(rowsl); x++)
                        used[PyLong_AsSsize_t(PyTuple_GET_ITEM(PyList_GET_ITEM(rowsl, x), 0))] = 1;
                    break;
                }
            }
            Py_DECREF(rowsl);
        }
    }
    if (placement == NULL) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    /* need: the chosen jobs holding a placed node (chosen order), with their resources on the single node */
    Py_ssize_t n0 = -1, nneed = 0;
    if (!gang)
        n0 = PyLong_AsSsize_t(PyTuple_GET_ITEM(PyTuple_GET_ITEM(placement, 0), 0));
    Py_ssize_t *need = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(nchosen + 1));
    ll *on0 = PyMem_Calloc(3 * (size_t)(nchosen + 1), sizeof(ll));
    char *keep = PyMem_Malloc((size_t)nchosen + 1);
    if (need == NULL || on0 == NULL || keep == NULL) {
        PyMem_Free(need), PyMem_Free(on0), PyMem_Free(keep);
        PyErr_NoMemory();
        goto done;
    }
    int err = 0;
    for (k = 0; k < nchosen && !err; k++) {
        PyObject *rs = PySequence_Fast(PyList_GET_ITEM(alloc, cands[k].v), "alloc rows");
        if (rs == NULL) {
            err = 1;
            break;
        }
        int holds = 0;
        ll sa = 0, sb = 0, sd = 0;
        for (r = 0; r < PySequence_Fast_GET_SIZE(rs); r++) {
            Py_ssize_t n;
            ll a, b, d;
            if (alloc_row(self, PySequence_Fast_GET_ITEM(rs, r), &n, &a, &b, &d)) {
                err = 1;
                break;
            }
            if (used[n])
                holds = 1;
            if (n == n0)
                sa += a, sb += b, sd += d;
        }
        Py_DECREF(rs);
        if (holds) {
            on0[3 * nneed] = sa, on0[3 * nneed + 1] = sb, on0[3 * nneed + 2] = sd;
            keep[nneed] = 1;
            need[nneed++] = cands[k].v;
        }
    }
    if (!err && !gang) {  /* drop victims, least preferred first, whose release the placement does not need */
        ll fa, fb, fd, ta = 0, tb = 0, td = 0;
        if (item_ll(self->fg, n0, &fa) || item_ll(self->fc, n0, &fb) || item_ll(self->fm, n0, &fd))
            err = 1;
        for (k = 0; k < nneed; k++)
            ta += on0[3 * k], tb += on0[3 * k + 1], td += on0[3 * k + 2];
        for (k = nneed - 1; k >= 0 && !err; k--) {
            ll a = fa + ta - on0[3 * k], b = fb + tb - on0[3 * k + 1], d = fd + td - on0[3 * k + 2];
            if (a >= g && b >= c && d >= m) {
                keep[k] = 0;
                ta -= on0[3 * k], tb -= on0[3 * k + 1], td -= on0[3 * k + 2];
            }
        }
    }
    PyObject *needl = err ? NULL : PyList_New(0);
    for (k = 0; needl != NULL && k < nneed; k++) {
        if (!keep[k])
            continue;
        PyObject *vo2 = PyLong_FromSsize_t(need[k]);
        if (vo2 == NULL || PyList_Append(needl, vo2)) {
            Py_XDECREF(vo2);
            Py_CLEAR(needl);
            break;
        }
        Py_DECREF(vo2);
    }
    PyMem_Free(need), PyMem_Free(on0), PyMem_Free(keep);
    if (needl != NULL) {
        out = PyTuple_Pack(2, needl, placement);
        Py_DECREF(needl);
    }
done:
    Py_XDECREF(it);
    Py_XDECREF(gseq);
    Py_XDECREF(placement);
    PyMem_Free(cands);
    PyMem_Free(dg);
    PyMem_Free(touched);
    PyMem_Free(used);
    return out;
}

static PyMethodDef NodeOps_methods[] = {
    {"bounds", (PyCFunction)NodeOps_bounds, METH_O, "Pool.bounds(grp)"},
    {"best_fit", (PyCFunction)(void (*)(void))NodeOps_best_fit, METH_FASTCALL,
     "best_fit(nodes, g, c, m, free=None, limit=None) -> node or None (Pool.place, one node)"},
    {"gang", (PyCFunction)(void (*)(void))NodeOps_gang, METH_FASTCALL,
     "gang(order, g, c, m, free=None, limit=None) -> rows or None (Pool._gang)"},
    {"index_fit", (PyCFunction)(void (*)(void))NodeOps_index_fit, METH_FASTCALL,
     "index_fit(key, g, c, m, limit=None) -> node or None (Pool.place_in, one node)"},
    {"place", (PyCFunction)(void (*)(void))NodeOps_place, METH_FASTCALL | METH_KEYWORDS,
     "place(nodes, gang, g, c, m, free=None, limit=None) (Pool.place)"},
    {"place_in", (PyCFunction)(void (*)(void))NodeOps_place_in, METH_FASTCALL, "place_in(grp, gang, g, c, m, limit=None) (Pool.place_in)"},
    {"reservation", (PyCFunction)(void (*)(void))NodeOps_reservation, METH_FASTCALL,
     "reservation(run, alloc, elig, gang_order, gang, g, c, m) -> (T, limit) (easy._reservation)"},
    {"move", (PyCFunction)(void (*)(void))NodeOps_move, METH_FASTCALL, "move(n, dg, dc, dm) (Pool._move)"},
    {"allocate", (PyCFunction)NodeOps_allocate, METH_O, "Pool.allocate(alloc)"},
    {"release", (PyCFunction)NodeOps_release, METH_O, "Pool.release(alloc)"},
    {"release_fits", (PyCFunction)(void (*)(void))NodeOps_release_fits, METH_FASTCALL,
     "release_fits(near, min_rt, acct, acct_ok, alloc, elig, nodes, gang, g, c, m) -> bool (preempt._victims' first test)"},
    {"victims", (PyCFunction)(void (*)(void))NodeOps_victims, METH_FASTCALL,
     "victims(near, min_rt, acct, acct_ok, served, burst, att_start, alloc, elig, nodes, gang, g, c, m, now, ci) -> "
     "(need, placement) or None (preempt._victims' search)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject NodeOpsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "engine._nodecore.NodeOps",
    .tp_doc = "The compiled node-mode routines of one engine.pool.Pool (its lists, read and written in place).",
    .tp_basicsize = sizeof(NodeOps),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)NodeOps_traverse,
    .tp_clear = (inquiry)NodeOps_clear,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)NodeOps_init,
    .tp_dealloc = (destructor)NodeOps_dealloc,
    .tp_methods = NodeOps_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_nodecore",
    "Compiled node-mode pool routines (see engine/nodepool.py; the Python Pool is the reference).", -1, NULL,
};

PyMODINIT_FUNC PyInit__nodecore(void)
{
    if (PyType_Ready(&NodeOpsType) < 0)
        return NULL;
    s_epoch = PyUnicode_InternFromString("epoch");
    s_stranded_g = PyUnicode_InternFromString("stranded_g");
    if (s_epoch == NULL || s_stranded_g == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&NodeOpsType);
    if (PyModule_AddObject(m, "NodeOps", (PyObject *)&NodeOpsType) < 0
        || PyModule_AddStringConstant(m, "SOURCE_SHA256", QL_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
