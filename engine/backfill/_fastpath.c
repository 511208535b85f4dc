/* The compiled twin of ``engine.backfill.fastpath.run_python`` (processor-count FCFS, no backfill or EASY in
 * queue order, every other feature idle). See fastpath.py for the algorithm, the contract and why this is plain
 * C rather than Cython; the Python function is the readable reference and the oracle
 * (tests/engine/test_compiled_kernel.py compares both, byte for byte).
 *
 * Invariants kept equal to the Python kernel, statement by statement:
 * - the same arithmetic in the same order on IEEE doubles (built with -ffp-contract=off: a fused multiply-add in
 *   ``t + est * inv`` would round differently from Python);
 * - ends pop in (end, seq) order and the running set is kept sorted by (estimated end, seq): seq is unique, so
 *   any correct heap pops what heapq pops;
 * - the queue is the jobs in index order (FCFS appends in submission order), a linked list;
 * - wait-reason sums are kept per job and reason and written into ``waits.acc`` at the end, with the keys in the
 *   insertion order ``WaitReasons`` would give them; the per-job lists are written once at the end, only where
 *   the Python kernel writes them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

#ifndef QL_SOURCE_SHA256  /* setup.py passes the source's sha256: tests tell a stale build from a current one */
#define QL_SOURCE_SHA256 "unknown"
#endif

enum { R_RESOURCES = 0, R_RESERVATION = 1, R_PRIORITY = 2, N_REASONS = 3 };

typedef struct {
    double key;
    long long seq;
    Py_ssize_t j;
} Entry;

static inline int entry_lt(const Entry *a, const Entry *b)
{
    return a->key < b->key || (a->key == b->key && a->seq < b->seq);
}

/* ---------------------------------------------------------------- ends: binary min-heap on (end, seq) */
static void heap_push(Entry *h, Py_ssize_t *n, Entry e)
{
    Py_ssize_t k = (*n)++;
    while (k > 0) {
        Py_ssize_t p = (k - 1) / 2;
        if (!entry_lt(&e, &h[p]))
            break;
        h[k] = h[p];
        k = p;
    }
    h[k] = e;
}

static Entry heap_pop(Entry *h, Py_ssize_t *n)
{
    Entry top = h[0];
    Entry last = h[--(*n)];
    Py_ssize_t k = 0, m = *n;
    for (;;) {
        Py_ssize_t c = 2 * k + 1;
        if (c >= m)
            break;
        if (c + 1 < m && entry_lt(&h[c + 1], &h[c]))
            c++;
        if (!entry_lt(&h[c], &last))
            break;
        h[k] = h[c];
        k = c;
    }
    if (m > 0)
        h[k] = last;
    return top;
}

/* ---------------------------------------------------------------- running: sorted array on (estimated end, seq) */
static Py_ssize_t lower_bound(const Entry *a, Py_ssize_t n, const Entry *e)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (entry_lt(&a[mid], e))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void sorted_insert(Entry *a, Py_ssize_t *n, Entry e)
{
    Py_ssize_t k = lower_bound(a, *n, &e);
    memmove(a + k + 1, a + k, (size_t)(*n - k) * sizeof(Entry));
    a[k] = e;
    (*n)++;
}

static void sorted_remove(Entry *a, Py_ssize_t *n, Entry e)
{
    Py_ssize_t k = lower_bound(a, *n, &e);
    memmove(a + k, a + k + 1, (size_t)(*n - k - 1) * sizeof(Entry));
    (*n)--;
}

/* ---------------------------------------------------------------- inputs */
static int read_doubles(PyObject *obj, Py_ssize_t n, double *out, const char *name)
{
    PyObject *seq = PySequence_Fast(obj, name);
    if (seq == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_ValueError, "%s: %zd values for %zd jobs", name, PySequence_Fast_GET_SIZE(seq), n);
        Py_DECREF(seq);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t k = 0; k < n; k++) {
        out[k] = PyFloat_AsDouble(items[k]);
        if (out[k] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

static int read_sizes(PyObject *obj, Py_ssize_t n, long long *out)
{
    PyObject *seq = PySequence_Fast(obj, "size");
    if (seq == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_ValueError, "size: %zd values for %zd jobs", PySequence_Fast_GET_SIZE(seq), n);
        Py_DECREF(seq);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t k = 0; k < n; k++) {
        out[k] = PyLong_AsLongLong(items[k]);  /* sizes are integers (milli-units): a float is a TypeError */
        if (out[k] == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

static int check_list(PyObject *obj, Py_ssize_t n, const char *name)
{
    if (!PyList_Check(obj) || PyList_GET_SIZE(obj) != n) {
        PyErr_Format(PyExc_TypeError, "%s: a list of one value per job expected", name);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- wait reasons (WaitReasons.note / close) */
/* The sums are kept in C (one slot per job and reason) and turned into ``waits.acc`` at the end with the keys in
 * the order WaitReasons would have inserted them: jobs by their first sum, reasons within a job by their first
 * sum (attempts are all 0 in this kernel, so a job's key is the job). */
typedef struct {
    PyObject *names[N_REASONS];
    signed char *code;   /* current reason per job */
    double *since;
    double *sum;         /* [j * N_REASONS + r] */
    signed char *rank;   /* [j * N_REASONS + r]: 0 absent, else the order of r's first sum within job j (1..3) */
    Py_ssize_t *order;   /* jobs in the order of their first sum */
    Py_ssize_t norder;
} Waits;

static inline void w_add(Waits *w, Py_ssize_t j, int r, double d)
{
    Py_ssize_t k = j * N_REASONS;
    if (!w->rank[k + r]) {
        int n = (w->rank[k] != 0) + (w->rank[k + 1] != 0) + (w->rank[k + 2] != 0);
        if (n == 0)
            w->order[w->norder++] = j;
        w->rank[k + r] = (signed char)(n + 1);
    }
    w->sum[k + r] += d;  /* from 0.0: the first sum is 0.0 + d, as acc.get(old, 0.0) + d */
}

static inline void w_note(Waits *w, Py_ssize_t j, int r, double now)
{
    if (w->code[j] == r)
        return;
    double d = now - w->since[j];
    if (d > 0)
        w_add(w, j, w->code[j], d);
    w->since[j] = now;
    w->code[j] = (signed char)r;
}

static inline void w_close(Waits *w, Py_ssize_t j, double now)
{
    double d = now - w->since[j];
    if (d > 0)
        w_add(w, j, w->code[j], d);
}

static int w_flush(Waits *w, PyObject *acc)
{
    for (Py_ssize_t q = 0; q < w->norder; q++) {
        Py_ssize_t j = w->order[q], k = j * N_REASONS;
        PyObject *inner = PyDict_New(), *key = PyLong_FromSsize_t(j);
        int rc = (inner && key) ? 0 : -1;
        for (int pos = 1; pos <= N_REASONS && rc == 0; pos++)
            for (int r = 0; r < N_REASONS && rc == 0; r++)
                if (w->rank[k + r] == pos) {
                    PyObject *v = PyFloat_FromDouble(w->sum[k + r]);
                    rc = v ? PyDict_SetItem(inner, w->names[r], v) : -1;
                    Py_XDECREF(v);
                }
        if (rc == 0)
            rc = PyDict_SetItem(acc, key, inner);
        Py_XDECREF(inner);
        Py_XDECREF(key);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- the kernel */
typedef struct {
    int full;          /* iterate the whole queue (linked list) or the range [cur, stop) of new jobs */
    Py_ssize_t cur, stop;
} Iter;

static inline int it_next(Iter *it, const Py_ssize_t *qnext, Py_ssize_t *j)
{
    if (it->cur == it->stop)
        return 0;
    *j = it->cur;
    it->cur = it->full ? qnext[it->cur] : it->cur + 1;
    return 1;
}

static const char run_doc[] =
    "run(submit, est, rem, size, free, depth, inv, now, default, names, start, end, seq_of, reason, reserved,\n"
    "    since, acc) -> (now, seq, passes, full_passes)\n\n"
    "The whole FCFS (+ EASY) run of fastpath.run_python on the same per-job lists: reads submit, est (limit left),\n"
    "rem (run left) and size; writes start, end, seq_of, reason, reserved and since in place and the wait-reason\n"
    "sums into acc. names: the reason strings (resources, reservation, priority); default: the index of\n"
    "waits.default among them.";

static PyObject *fp_run(PyObject *self, PyObject *args)
{
    PyObject *o_submit, *o_est, *o_rem, *o_size, *o_now, *o_names;
    PyObject *l_start, *l_end, *l_seq, *l_reason, *l_reserved, *l_since, *acc;
    long long free_;
    int depth, dflt;
    double inv;
    if (!PyArg_ParseTuple(args, "OOOOLidOiOOOOOOOO!:run", &o_submit, &o_est, &o_rem, &o_size, &free_, &depth, &inv,
                          &o_now, &dflt, &o_names, &l_start, &l_end, &l_seq, &l_reason, &l_reserved, &l_since,
                          &PyDict_Type, &acc))
        return NULL;
    (void)self;
    Py_ssize_t n = PyList_Check(l_start) ? PyList_GET_SIZE(l_start) : -1;
    if (check_list(l_start, n, "start") || check_list(l_end, n, "end") || check_list(l_seq, n, "seq_of") ||
        check_list(l_reason, n, "reason") || check_list(l_reserved, n, "reserved") || check_list(l_since, n, "since"))
        return NULL;
    if (!PyTuple_Check(o_names) || PyTuple_GET_SIZE(o_names) != N_REASONS || dflt < 0 || dflt >= N_REASONS) {
        PyErr_SetString(PyExc_ValueError, "names: a tuple (resources, reservation, priority); default: an index");
        return NULL;
    }

    PyObject *result = NULL;
    size_t nn = (size_t)n + 1;
    double *submit = PyMem_Malloc(nn * sizeof(double)), *est = PyMem_Malloc(nn * sizeof(double));
    double *rem = PyMem_Malloc(nn * sizeof(double)), *start = PyMem_Malloc(nn * sizeof(double));
    double *end = PyMem_Malloc(nn * sizeof(double)), *since = PyMem_Malloc(nn * sizeof(double));
    double *resv = PyMem_Malloc(nn * sizeof(double));
    long long *size = PyMem_Malloc(nn * sizeof(long long)), *seq_of = PyMem_Malloc(nn * sizeof(long long));
    Py_ssize_t *qnext = PyMem_Malloc(nn * sizeof(Py_ssize_t)), *qprev = PyMem_Malloc(nn * sizeof(Py_ssize_t));
    Entry *ends = PyMem_Malloc(nn * sizeof(Entry)), *running = PyMem_Malloc(nn * sizeof(Entry));
    signed char *code = PyMem_Malloc(nn), *state = PyMem_Calloc(nn, 1);
    double *sums = PyMem_Calloc(nn * N_REASONS, sizeof(double));
    signed char *ranks = PyMem_Calloc(nn * N_REASONS, 1);
    Py_ssize_t *order = PyMem_Malloc(nn * sizeof(Py_ssize_t));  /* state bits: 1 started, 2 ended, 4 reserved now, 8 reserved before */
    if (!submit || !est || !rem || !start || !end || !since || !resv || !size || !seq_of || !qnext || !qprev || !ends ||
        !running || !code || !state || !sums || !ranks || !order) {
        PyErr_NoMemory();
        goto done;
    }
    if (read_doubles(o_submit, n, submit, "submit") || read_doubles(o_est, n, est, "est") ||
        read_doubles(o_rem, n, rem, "rem") || read_sizes(o_size, n, size))
        goto done;
    for (Py_ssize_t k = 0; k < n; k++)
        if (PyList_GET_ITEM(l_reserved, k) != Py_None)
            state[k] |= 8;

    if (PyDict_GET_SIZE(acc) != 0) {
        PyErr_SetString(PyExc_ValueError, "acc: the kernel starts a run, with no wait recorded yet");
        goto done;
    }
    Waits w = {{PyTuple_GET_ITEM(o_names, 0), PyTuple_GET_ITEM(o_names, 1), PyTuple_GET_ITEM(o_names, 2)},
               code, since, sums, ranks, order, 0};
    const Py_ssize_t NIL = n;  /* the queue's sentinel */
    qnext[NIL] = qprev[NIL] = NIL;
    Py_ssize_t qlen = 0, nends = 0, nrun = 0;
    long long seq = (long long)n, passes = 0, full_passes = 0;
    Py_ssize_t i = 0;
    int blocked = 0, stopped = 0, moved = 0;
    double T = INFINITY, t = 0.0;
    long long extra = 0;

/* start job j at t (the Python kernel's block after "free -= s"), leaving the queue at once: the iterator has
 * already stepped past j and the Python kernel's deferred ``del queue[j]`` is not observable within the pass */
#define START_JOB(j_, s_)                                                                  \
    do {                                                                                   \
        free_ -= (s_);                                                                     \
        seq++;                                                                             \
        start[j_] = t;                                                                     \
        seq_of[j_] = seq;                                                                  \
        state[j_] |= 1;                                                                    \
        if (t != submit[j_])                                                               \
            w_close(&w, j_, t);                                                            \
        heap_push(ends, &nends, (Entry){t + (rem[j_] < est[j_] ? rem[j_] : est[j_]), seq, j_}); \
        sorted_insert(running, &nrun, (Entry){t + est[j_], seq, j_});                      \
        qnext[qprev[j_]] = qnext[j_];                                                      \
        qprev[qnext[j_]] = qprev[j_];                                                      \
        qlen--;                                                                            \
    } while (0)

    while (i < n || nends) {
        moved = 1;
        t = i < n ? submit[i] : INFINITY;
        int full = 0;
        if (nends && ends[0].key <= t) {
            t = ends[0].key;
            while (nends && ends[0].key == t) {
                Entry e = heap_pop(ends, &nends);
                Py_ssize_t j = e.j;
                free_ += size[j];
                end[j] = t;
                state[j] |= 2;
                sorted_remove(running, &nrun, (Entry){start[j] + est[j], e.seq, j});
                full = 1;
            }
        }
        Py_ssize_t first_new = i;
        while (i < n && submit[i] == t) {
            qprev[i] = qprev[NIL];
            qnext[i] = NIL;
            qnext[qprev[NIL]] = i;
            qprev[NIL] = i;
            qlen++;
            code[i] = (signed char)dflt;
            since[i] = t;
            i++;
        }
        if (!qlen)
            continue;
        passes++;
        Iter it;
        if (full) {
            full_passes++;
            blocked = stopped = 0;
            it = (Iter){1, qnext[NIL], NIL};
        } else {
            it = (Iter){0, first_new, i};
        }
        if (stopped)
            continue;
        Py_ssize_t j;
        if (!blocked) {
            while (it_next(&it, qnext, &j)) {
                long long s = size[j];
                if (s <= free_) {
                    START_JOB(j, s);
                    continue;
                }
                w_note(&w, j, R_RESOURCES, t);
                if (depth == 0) {
                    stopped = 1;
                    break;
                }
                blocked = 1;
                long long avail = free_;
                T = INFINITY;
                Py_ssize_t k = 0;
                while (k < nrun) {
                    double e = running[k].key;
                    while (k < nrun && running[k].key == e) {
                        avail += size[running[k].j];
                        k++;
                    }
                    if (avail >= s) {
                        T = e;
                        break;
                    }
                }
                extra = avail - s;
                if (T < INFINITY && !(state[j] & 12)) {
                    resv[j] = T;
                    state[j] |= 4;
                }
                break;
            }
        }
        if (blocked && !stopped) {
            while (it_next(&it, qnext, &j)) {
                if (free_ <= 0)
                    break;
                long long s = size[j];
                if (s > free_) {
                    w_note(&w, j, R_RESOURCES, t);
                    continue;
                }
                if (t + est[j] * inv <= T) {
                    /* ends before the reservation */
                } else if (s <= extra) {
                    extra -= s;
                } else {
                    w_note(&w, j, R_RESERVATION, t);
                    continue;
                }
                START_JOB(j, s);
            }
        }
    }
#undef START_JOB

    if (w_flush(&w, acc) < 0)
        goto done;
    int reuse_submit = PyList_CheckExact(o_submit);
    for (Py_ssize_t k = 0; reuse_submit && k < n; k++)
        reuse_submit = PyFloat_CheckExact(PyList_GET_ITEM(o_submit, k));
    /* write back where the Python kernel writes: every submitted job's reason and since, the started jobs'
     * start / seq, the ended jobs' end, the new reservations */
    for (Py_ssize_t k = 0; k < i; k++) {
        PyObject *r = w.names[(int)code[k]], *x;
        Py_INCREF(r);
        PyList_SetItem(l_reason, k, r);
        /* a time equal to the job's submit time is the submit float itself (as in the Python kernel, where it is
         * the same object): no new float */
        PyObject *sub = reuse_submit ? PyList_GET_ITEM(o_submit, k) : NULL;
        if (sub && since[k] == submit[k])
            Py_INCREF(x = sub);
        else if ((x = PyFloat_FromDouble(since[k])) == NULL)
            goto done;
        PyList_SetItem(l_since, k, x);
        if (state[k] & 1) {
            if (sub && start[k] == submit[k])
                Py_INCREF(x = sub);
            else if ((x = PyFloat_FromDouble(start[k])) == NULL)
                goto done;
            PyList_SetItem(l_start, k, x);
            if ((x = PyLong_FromLongLong(seq_of[k])) == NULL)
                goto done;
            PyList_SetItem(l_seq, k, x);
        }
        if (state[k] & 2) {
            if ((x = PyFloat_FromDouble(end[k])) == NULL)
                goto done;
            PyList_SetItem(l_end, k, x);
        }
        if (state[k] & 4) {
            if ((x = PyFloat_FromDouble(resv[k])) == NULL)
                goto done;
            PyList_SetItem(l_reserved, k, x);
        }
    }
    if (moved)
        result = Py_BuildValue("(dLLL)", t, seq, passes, full_passes);
    else
        result = Py_BuildValue("(OLLL)", o_now, seq, passes, full_passes);

done:
    PyMem_Free(submit);
    PyMem_Free(est);
    PyMem_Free(rem);
    PyMem_Free(start);
    PyMem_Free(end);
    PyMem_Free(since);
    PyMem_Free(resv);
    PyMem_Free(size);
    PyMem_Free(seq_of);
    PyMem_Free(qnext);
    PyMem_Free(qprev);
    PyMem_Free(ends);
    PyMem_Free(running);
    PyMem_Free(code);
    PyMem_Free(state);
    PyMem_Free(sums);
    PyMem_Free(ranks);
    PyMem_Free(order);
    return result;
}

static PyMethodDef methods[] = {
    {"run", fp_run, METH_VARARGS, run_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastpath",
    "The compiled twin of engine.backfill.fastpath.run_python (see fastpath.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastpath(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_SHA256", QL_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
