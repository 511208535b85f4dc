/* Textbook FCFS + EASY backfilling in processor-count mode, in C: the compiled baseline of issue 16.
 *
 * The same algorithm as ``naive_easy`` in bench_engine.py (and so the engine's start times): at each event time,
 * release every job ending then, queue every job submitted then, start queue heads while they fit, then for a
 * blocked head compute the shadow time (running jobs released in order of estimated end until the head fits) and
 * the extra processors, and scan the rest of the queue once: a job starts if it fits now and either ends (by its
 * estimate) by the shadow time or fits in the extra processors.
 *
 * Input (stdin or argv[1]): the first line "N PROCS", then N lines "submit run estimate size" in submit order.
 * Output: N start times, one per line, in input order. Built by the benchmark with ``gcc -O2``.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct { double key; int job; } item;

static item *heap;  /* running jobs by actual end */
static int heap_n;

static void heap_push(double key, int job) {
    int i = heap_n++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (heap[p].key < key || (heap[p].key == key && heap[p].job < job)) break;
        heap[i] = heap[p];
        i = p;
    }
    heap[i].key = key;
    heap[i].job = job;
}

static item heap_pop(void) {
    item top = heap[0], last = heap[--heap_n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= heap_n) break;
        if (c + 1 < heap_n && (heap[c + 1].key < heap[c].key ||
                               (heap[c + 1].key == heap[c].key && heap[c + 1].job < heap[c].job))) c++;
        if (last.key < heap[c].key || (last.key == heap[c].key && last.job < heap[c].job)) break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = last;
    return top;
}

static int by_key(const void *a, const void *b) {
    const item *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->job - y->job;
}

int main(int argc, char **argv) {
    FILE *in = argc > 1 ? fopen(argv[1], "r") : stdin;
    int n;
    long procs;
    if (!in || fscanf(in, "%d %ld", &n, &procs) != 2) return 2;
    double *submit = malloc(n * sizeof *submit), *run = malloc(n * sizeof *run), *est = malloc(n * sizeof *est);
    double *start = malloc(n * sizeof *start);
    long *size = malloc(n * sizeof *size);
    int *queue = malloc(n * sizeof *queue);
    item *ends = malloc(n * sizeof *ends);
    heap = malloc(n * sizeof *heap);
    for (int k = 0; k < n; k++) {
        if (fscanf(in, "%lf %lf %lf %ld", &submit[k], &run[k], &est[k], &size[k]) != 4) return 2;
        start[k] = NAN;
    }
    long free_p = procs;
    int qn = 0, i = 0;
    while (i < n || heap_n) {
        double t = INFINITY;
        if (i < n) t = submit[i];
        if (heap_n && heap[0].key < t) t = heap[0].key;
        while (heap_n && heap[0].key == t) free_p += size[heap_pop().job];
        while (i < n && submit[i] == t) queue[qn++] = i++;
        int h = 0;
        while (h < qn && size[queue[h]] <= free_p) {
            int j = queue[h++];
            start[j] = t;
            free_p -= size[j];
            heap_push(t + run[j], j);
        }
        if (h) {  /* drop the started heads */
            for (int k = h; k < qn; k++) queue[k - h] = queue[k];
            qn -= h;
        }
        if (!qn) continue;
        int head = queue[0], m = 0;
        for (int k = 0; k < heap_n; k++) {
            ends[m].key = start[heap[k].job] + est[heap[k].job];
            ends[m++].job = heap[k].job;
        }
        qsort(ends, m, sizeof *ends, by_key);
        long avail = free_p;
        double shadow = INFINITY;
        for (int k = 0; k < m;) {
            double e = ends[k].key;
            while (k < m && ends[k].key == e) avail += size[ends[k++].job];
            if (avail >= size[head]) { shadow = e; break; }
        }
        long extra = avail - size[head];
        int kept = 1;
        for (int k = 1; k < qn; k++) {
            int j = queue[k];
            long s = size[j];
            if (s <= free_p && (t + est[j] <= shadow || s <= extra)) {
                start[j] = t;
                free_p -= s;
                heap_push(t + run[j], j);
                if (t + est[j] > shadow) extra -= s;
            } else {
                queue[kept++] = j;
            }
        }
        qn = kept;
    }
    for (int k = 0; k < n; k++) printf("%.6f\n", start[k]);
    return 0;
}
