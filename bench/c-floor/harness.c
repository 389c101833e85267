/*
 * The raw-C floor: QuickJS-ng called directly from C, running the same guest sources as every
 * engine (bench/workloads/guest/) for cases (a)-(f). Built by bench/run.js with cc -O2 against
 * deps/quickjs-ng (the pinned, patched sources the addon uses).
 *
 * usage: harness GUEST_DIR JSON_INPUT_FILE TIME_MS MIN_ITERATIONS
 * Prints one JSON object: { "quickjs": version, "rows": [ { case, medianUs, p99Us, samples,
 * check } ] } where `check` is the last operation's result as JSON text, for the caller to verify.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "quickjs.h"

#define MEMORY_LIMIT (64u * 1024u * 1024u)

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) { fprintf(stderr, "cannot read %s\n", path); exit(2); }
    buf[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static char *read_guest(const char *dir, const char *name, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return read_file(path, len);
}

/* One case's state; `op` runs one measured operation and leaves its result in `check`. */
typedef struct Case {
    const char *id;
    JSRuntime *rt;
    JSContext *ctx;
    const char *src;
    size_t src_len;
    const char *input;
    size_t input_len;
    char check[256];
    void (*op)(struct Case *);
} Case;

static void die_exception(JSContext *ctx, const char *where) {
    JSValue exc = JS_GetException(ctx);
    const char *msg = JS_ToCString(ctx, exc);
    fprintf(stderr, "%s: guest exception: %s\n", where, msg ? msg : "?");
    exit(3);
}

static JSValue eval_or_die(Case *c) {
    JSValue v = JS_Eval(c->ctx, c->src, c->src_len, "<bench>", JS_EVAL_TYPE_GLOBAL);
    if (JS_IsException(v)) die_exception(c->ctx, c->id);
    return v;
}

/* Copies a number result to the host, as every engine's eval does. */
static void check_number(Case *c, JSValue v) {
    double d;
    if (JS_ToFloat64(c->ctx, &d, v)) die_exception(c->ctx, c->id);
    snprintf(c->check, sizeof c->check, "%.17g", d);
}

static void op_session(Case *c) {
    JSRuntime *rt = JS_NewRuntime();
    JS_SetMemoryLimit(rt, MEMORY_LIMIT);
    JSContext *ctx = JS_NewContext(rt);
    JS_FreeContext(ctx);
    JS_FreeRuntime(rt);
    snprintf(c->check, sizeof c->check, "true");
}

static void op_eval_number(Case *c) {
    JSValue v = eval_or_die(c);
    check_number(c, v);
    JS_FreeValue(c->ctx, v);
}

/* The transform result is an object: serialize it, the cheapest full copy out of the engine. */
static void op_transform(Case *c) {
    JSValue v = eval_or_die(c);
    JSValue json = JS_JSONStringify(c->ctx, v, JS_UNDEFINED, JS_UNDEFINED);
    size_t len;
    const char *s = JS_ToCStringLen(c->ctx, &len, json);
    snprintf(c->check, sizeof c->check, "%s", s);
    JS_FreeCString(c->ctx, s);
    JS_FreeValue(c->ctx, json);
    JS_FreeValue(c->ctx, v);
}

static JSValue host_sync(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    double i;
    (void)this_val;
    if (argc < 1 || JS_ToFloat64(ctx, &i, argv[0])) return JS_EXCEPTION;
    return JS_NewNumber(ctx, i + 1);
}

/* Answers with a promise resolved at once; the guest's await resumes through the job queue. */
static JSValue host_async(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    JSValue funcs[2];
    double i;
    (void)this_val;
    if (argc < 1 || JS_ToFloat64(ctx, &i, argv[0])) return JS_EXCEPTION;
    JSValue promise = JS_NewPromiseCapability(ctx, funcs);
    JSValue value = JS_NewNumber(ctx, i + 1);
    JSValue r = JS_Call(ctx, funcs[0], JS_UNDEFINED, 1, &value);
    JS_FreeValue(ctx, r);
    JS_FreeValue(ctx, value);
    JS_FreeValue(ctx, funcs[0]);
    JS_FreeValue(ctx, funcs[1]);
    return promise;
}

static void op_async_host(Case *c) {
    JSValue promise = eval_or_die(c);
    JSContext *job_ctx;
    int r;
    while ((r = JS_ExecutePendingJob(c->rt, &job_ctx)) > 0) {}
    if (r < 0) die_exception(job_ctx, c->id);
    if (JS_PromiseState(c->ctx, promise) != JS_PROMISE_FULFILLED) {
        fprintf(stderr, "%s: promise not fulfilled\n", c->id);
        exit(3);
    }
    JSValue v = JS_PromiseResult(c->ctx, promise);
    check_number(c, v);
    JS_FreeValue(c->ctx, v);
    JS_FreeValue(c->ctx, promise);
}

static void op_json(Case *c) {
    JSValue global = JS_GetGlobalObject(c->ctx);
    JS_SetPropertyStr(c->ctx, global, "input", JS_NewStringLen(c->ctx, c->input, c->input_len));
    JS_FreeValue(c->ctx, global);
    JSValue v = eval_or_die(c);
    size_t len;
    const char *s = JS_ToCStringLen(c->ctx, &len, v);
    int same = s && len == c->input_len && memcmp(s, c->input, len) == 0;
    snprintf(c->check, sizeof c->check, "%s", same ? "true" : "false");
    JS_FreeCString(c->ctx, s);
    JS_FreeValue(c->ctx, v);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Linear-interpolated quantile of sorted samples (the estimator tinybench uses). */
static double quantile(const double *sorted, size_t n, double q) {
    double pos = (n - 1) * q;
    size_t lo = (size_t)pos;
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

static void run_case(Case *c, double time_ms, size_t min_iterations, int first) {
    size_t cap = 1024, n = 0;
    double *samples = malloc(cap * sizeof *samples);
    for (int i = 0; i < 3; i++) c->op(c); /* warm-up: caches, shapes, atoms */
    double started = now_us();
    while (n < min_iterations || now_us() - started < time_ms * 1000) {
        double t0 = now_us();
        c->op(c);
        double t1 = now_us();
        if (n == cap) samples = realloc(samples, (cap *= 2) * sizeof *samples);
        samples[n++] = t1 - t0;
    }
    qsort(samples, n, sizeof *samples, cmp_double);
    printf("%s\n    {\"case\": \"%s\", \"medianUs\": %.3f, \"p99Us\": %.3f, \"samples\": %zu, \"check\": \"",
           first ? "" : ",", c->id, quantile(samples, n, 0.5), quantile(samples, n, 0.99), n);
    for (const char *p = c->check; *p; p++) {
        if (*p == '"' || *p == '\\') putchar('\\');
        putchar(*p);
    }
    printf("\"}");
    fprintf(stderr, "  %-18s %-13s median %.2f us (%zu samples)\n", "c-floor", c->id, quantile(samples, n, 0.5), n);
    free(samples);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s GUEST_DIR JSON_INPUT_FILE TIME_MS MIN_ITERATIONS\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    double time_ms = atof(argv[3]);
    size_t min_iterations = (size_t)atol(argv[4]);
    size_t input_len;
    char *input = read_file(argv[2], &input_len);

    JSRuntime *rt = JS_NewRuntime();
    JS_SetMemoryLimit(rt, MEMORY_LIMIT);
    JSContext *ctx = JS_NewContext(rt);
    JSValue global = JS_GetGlobalObject(ctx);

    struct { const char *id, *guest; void (*op)(Case *); } plan[] = {
        {"session", NULL, op_session},
        {"eval-sync", "one-plus-one.js", op_eval_number},
        {"transform", "transform.js", op_transform},
        {"sync-host", "sync-host-calls.js", op_eval_number},
        {"async-host", "async-host-calls.js", op_async_host},
        {"json", "json-roundtrip.js", op_json},
    };

    printf("{\"quickjs\": \"QuickJS-ng %s\", \"rows\": [", JS_GetVersion());
    for (size_t i = 0; i < sizeof plan / sizeof plan[0]; i++) {
        Case c = {.id = plan[i].id, .rt = rt, .ctx = ctx, .input = input, .input_len = input_len, .op = plan[i].op};
        char *src = NULL;
        if (plan[i].guest) src = read_guest(dir, plan[i].guest, &c.src_len);
        c.src = src;
        /* host(i) is sync for case (d) and promise-returning for case (e). */
        JS_SetPropertyStr(ctx, global, "host",
                          JS_NewCFunction(ctx, strcmp(plan[i].id, "async-host") == 0 ? host_async : host_sync, "host", 1));
        run_case(&c, time_ms, min_iterations, i == 0);
        free(src);
    }
    printf("\n]}\n");

    JS_FreeValue(ctx, global);
    JS_FreeContext(ctx);
    JS_FreeRuntime(rt);
    free(input);
    return 0;
}
