/* The compiled twin of ``queries.ingest.swf._numbers``' Polars CSV read: the 18 numbers of every SWF record.
 *
 * ``numbers(text, n)``: ``text`` is the records (comments and blank lines already removed) joined by "\n", ASCII;
 * returns the 18 fields as float64, column-major (field k of record i at k * n + i), as ``bytes``, or None when
 * any doubt arises, and the caller falls back to the Polars paths it had before (which stay the oracle):
 * - a line whose tokens are not exactly 18 runs of non-space bytes separated by runs of spaces;
 * - a byte other than 0-9 . - space (a tab, a CR, a letter, an exponent, "inf");
 * - a token not of the form -?D+ or -?D+.D* or -?.D+ (D a digit): "-", ".", "1-2", "1.2.3";
 * - a line count different from ``n``.
 * Values: a token of at most 15 digits is M / 10^k with M its digits as an integer and k the digits after
 * the ".", both exact doubles, so one correctly rounded division (Clinger's fast path); any other goes
 * through ``PyOS_string_to_double`` (David Gay's correctly rounded strtod, locale-free), as Polars' reader
 * rounds correctly too: the same double for every accepted token, "-0" included (-0.0).
 * tests/queries/ingest/test_swf_compiled.py compares it with the Polars paths on every trace of ../shared/data.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#ifndef QL_SOURCE_SHA256  /* setup.py passes the source's sha256: tests tell a stale build from a current one */
#define QL_SOURCE_SHA256 "unknown"
#endif

#define N_FIELDS 18

/* One token [p, end): 1 and *out set when it is of the accepted form, 0 otherwise. */
static int token_value(const char *p, const char *end, double *out)
{
    const char *q = p;
    int neg = 0, digits = 0, int_digits = 0, dot = 0;
    if (q < end && *q == '-') {
        neg = 1;
        q++;
    }
    for (const char *r = q; r < end; r++) {
        if (*r >= '0' && *r <= '9') {
            digits++;
            if (!dot)
                int_digits++;
        } else if (*r == '.' && !dot) {
            dot = 1;
        } else {
            return 0;  /* a second "-" or ".", or any other byte */
        }
    }
    if (digits == 0)
        return 0;
    if (digits <= 15) {
        /* Clinger's fast path: the digits as an integer M < 10^15 < 2^53 and the fraction's 10^k (k <= 15) are
         * both exact doubles, so M / 10^k is one correctly rounded IEEE division: strtod's result */
        static const double pow10[16] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
                                         1e13, 1e14, 1e15};
        double v = 0.0;
        for (; q < end; q++)
            if (*q != '.')
                v = v * 10.0 + (double)(*q - '0');
        v = v / pow10[digits - int_digits];
        *out = neg ? -v : v;
        return 1;
    }
    /* the token is followed by a space, a newline or the buffer's terminating NUL: strtod stops there */
    char *stop = NULL;
    double v = PyOS_string_to_double(p, &stop, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (stop != end)
        return 0;
    *out = v;
    return 1;
}

static PyObject *numbers(PyObject *self, PyObject *args)
{
    const char *text;
    Py_ssize_t len, n;
    if (!PyArg_ParseTuple(args, "y#n", &text, &len, &n))
        return NULL;
    if (n <= 0 || n > PY_SSIZE_T_MAX / (N_FIELDS * (Py_ssize_t)sizeof(double)))
        Py_RETURN_NONE;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * N_FIELDS * (Py_ssize_t)sizeof(double));
    if (out == NULL)
        return NULL;
    double *vals = (double *)PyBytes_AS_STRING(out);
    const char *p = text, *end = text + len;
    Py_ssize_t row = 0;
    int ok = 1;
    while (ok) {
        if (row >= n) {
            ok = 0;
            break;
        }
        int field = 0;
        for (;;) {
            while (p < end && *p == ' ')
                p++;
            if (p >= end || *p == '\n')
                break;
            const char *t = p;
            while (p < end && *p != ' ' && *p != '\n')
                p++;
            if (field >= N_FIELDS || !token_value(t, p, &vals[field * n + row])) {
                ok = 0;
                break;
            }
            field++;
        }
        if (!ok || field != N_FIELDS) {
            ok = 0;
            break;
        }
        row++;
        if (p >= end)
            break;
        p++;  /* the newline */
    }
    if (!ok || row != n) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

static PyMethodDef methods[] = {
    {"numbers", numbers, METH_VARARGS,
     "numbers(text: bytes, n: int) -> bytes | None: the 18 fields of n SWF records, float64 column-major"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_swfparse",
    "The SWF records' numbers in C (see queries/ingest/_swfparse.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__swfparse(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_SHA256", QL_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
