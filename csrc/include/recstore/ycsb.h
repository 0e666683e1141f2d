/*
 * ycsb.h — recbench's YCSB driver: properties, the core workload (a–f), key/field generators,
 * per-thread measurements, the DB binding interface and the thread driver.
 *
 * The driver follows YCSB's CoreWorkload: a load phase inserts `recordcount` records, a run phase
 * performs `operationcount` operations drawn from the read/update/insert/scan/read-modify-write
 * proportions. Keys are "user" + zero-padded decimal of keynum (hashed with fnv64 unless
 * insertorder=ordered). Each thread owns its generators (seeded `seed` + thread index) and its
 * histograms; nothing shared is written on the hot path except the insert key counter of the run
 * phase (YCSB's acknowledged counter), which is one atomic increment per insert.
 *
 * DB bindings implement rs_ycsb_db_ops. open() runs once per process and returns a shared handle;
 * thread_init() makes one per-thread context; every operation returns RS_OK, RS_ENOTFOUND,
 * RS_ENOTSUP (the engine cannot do it, e.g. scan on a hash index) or another RS_E* code with
 * detail in the thread's rs_error. Records are lists of fields (name, value); bindings that keep a
 * record as one blob use the record codec below.
 */
#ifndef RECSTORE_YCSB_H
#define RECSTORE_YCSB_H

#include <stddef.h>
#include <stdint.h>

#include "recstore/error.h"
#include "recstore/hist.h"
#include "recstore/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------- properties (props.c) ---------- */

/* An ordered key -> value map; a later set of the same key wins. Each entry remembers where its
 * value came from ("workloada:12", "-p") so errors can name it. */
typedef struct rs_ycsb_props rs_ycsb_props;

int rs_ycsb_props_new(rs_ycsb_props **out);
void rs_ycsb_props_free(rs_ycsb_props *p);
/* Load a Java-properties-style file: `key=value` or `key: value`, `#`/`!` comments, blank lines.
 * RS_EIO if unreadable, RS_EINVAL naming file:line for a line without '=' or ':'. */
int rs_ycsb_props_load_file(rs_ycsb_props *p, const char *path, rs_error *err);
/* Set one property; `source` is copied (e.g. "-p"). */
int rs_ycsb_props_set(rs_ycsb_props *p, const char *key, const char *value, const char *source);
/* Parse "key=value" (a -p argument). RS_EINVAL naming the argument if there is no '='. */
int rs_ycsb_props_set_arg(rs_ycsb_props *p, const char *arg, rs_error *err);
/* The value or def (may be NULL). */
const char *rs_ycsb_props_get(const rs_ycsb_props *p, const char *key, const char *def);
/* Where the value of key came from, or "default". */
const char *rs_ycsb_props_source(const rs_ycsb_props *p, const char *key);
/* Typed getters: RS_EINVAL naming key, value and source on a malformed value. */
int rs_ycsb_props_u64(const rs_ycsb_props *p, const char *key, uint64_t def, uint64_t *out,
                      rs_error *err);
int rs_ycsb_props_double(const rs_ycsb_props *p, const char *key, double def, double *out,
                         rs_error *err);
int rs_ycsb_props_bool(const rs_ycsb_props *p, const char *key, int def, int *out, rs_error *err);
/* Value must be one of the NULL-terminated `choices` (case-insensitive); *out = its index. */
int rs_ycsb_props_choice(const rs_ycsb_props *p, const char *key, const char *def,
                         const char *const *choices, int *out, rs_error *err);

/* ---------- fields, records, results (record.c) ---------- */

typedef struct rs_ycsb_field {
    const char *name;
    uint32_t name_len;
    const char *value;
    uint32_t value_len;
} rs_ycsb_field;

/* Read results: fields copied into an arena owned by the result; `rec` is the record index of
 * each field (scan and batch read return several records). Reused across operations by reset. */
typedef struct rs_ycsb_result {
    rs_ycsb_field *fields;
    uint32_t *rec;
    size_t n, cap;
    char *arena;
    size_t used, arena_cap;
    uint32_t nrec; /* records begun */
} rs_ycsb_result;

void rs_ycsb_result_init(rs_ycsb_result *r);
void rs_ycsb_result_free(rs_ycsb_result *r);
void rs_ycsb_result_reset(rs_ycsb_result *r);
/* Start a new record (scan/batch read); fields added after belong to it. */
void rs_ycsb_result_begin(rs_ycsb_result *r);
int rs_ycsb_result_add(rs_ycsb_result *r, const char *name, size_t name_len, const char *value,
                       size_t value_len);

/* Which fields an operation wants: all (names == NULL) or the listed ones. */
typedef struct rs_ycsb_fieldset {
    const rs_ycsb_field *names; /* only name/name_len used */
    size_t n;
} rs_ycsb_fieldset;

int rs_ycsb_fieldset_wants(const rs_ycsb_fieldset *fs, const char *name, size_t name_len);

/* Record codec: repeated {u32le name_len, name, u32le value_len, value}. */
size_t rs_ycsb_record_size(const rs_ycsb_field *f, size_t n);
size_t rs_ycsb_record_encode(const rs_ycsb_field *f, size_t n, char *out);
/* Append the wanted fields of an encoded record to out. RS_EPROTO on malformed bytes. */
int rs_ycsb_record_decode(const char *buf, size_t len, const rs_ycsb_fieldset *fs,
                          rs_ycsb_result *out);
/* Encode (old record with fields `upd` replaced or added) into *out (malloc'd, caller frees). */
int rs_ycsb_record_merge(const char *old, size_t old_len, const rs_ycsb_field *upd, size_t n,
                         char **out, size_t *out_len);

/* Key mapping for hash engines: a purely decimal key string is its u64 value; any other key is
 * rs_fnv1a64 of its bytes. */
uint64_t rs_ycsb_key_u64(const char *key, size_t len);

/* ---------- DB bindings (db_*.c, registry in db_registry.c) ---------- */

typedef struct rs_ycsb_db_ops {
    const char *name;
    /* Once per process, before any thread_init; props holds every property. */
    int (*open)(const rs_ycsb_props *props, void **shared, rs_error *err);
    int (*thread_init)(void *shared, int thread_id, void **tctx, rs_error *err);
    int (*read)(void *tctx, const char *table, const char *key, size_t klen,
                const rs_ycsb_fieldset *fields, rs_ycsb_result *out, rs_error *err);
    /* Up to count records with keys >= key, in key order. RS_ENOTSUP where the engine has no order.
     */
    int (*scan)(void *tctx, const char *table, const char *key, size_t klen, uint32_t count,
                const rs_ycsb_fieldset *fields, rs_ycsb_result *out, rs_error *err);
    /* Replace the given fields of an existing record (others kept). RS_ENOTFOUND if missing. */
    int (*update)(void *tctx, const char *table, const char *key, size_t klen,
                  const rs_ycsb_field *values, size_t n, rs_error *err);
    int (*insert)(void *tctx, const char *table, const char *key, size_t klen,
                  const rs_ycsb_field *values, size_t n, rs_error *err);
    int (*del)(void *tctx, const char *table, const char *key, size_t klen, rs_error *err);
    /* n keys; found[i] set to 1/0; every found record is begun in `out` in key order. */
    int (*batch_read)(void *tctx, const char *table, const char *const *keys, const size_t *klens,
                      size_t n, const rs_ycsb_fieldset *fields, rs_ycsb_result *out, uint8_t *found,
                      rs_error *err);
    void (*thread_cleanup)(void *tctx);
    void (*close)(void *shared);
} rs_ycsb_db_ops;

/* Find a binding by name. RS_EINVAL listing the known names for an unknown one; RS_ENOTSUP
 * naming the Debian package when the engine's library was missing at build time. */
int rs_ycsb_db_find(const char *name, const rs_ycsb_db_ops **out, rs_error *err);
/* Comma-separated names of the bindings compiled in. */
const char *rs_ycsb_db_names(void);

/* A batch read done key by key through ops->read (for engines without a batch API). */
int rs_ycsb_db_batch_read_loop(const rs_ycsb_db_ops *ops, void *tctx, const char *table,
                               const char *const *keys, const size_t *klens, size_t n,
                               const rs_ycsb_fieldset *fields, rs_ycsb_result *out, uint8_t *found,
                               rs_error *err);

/* ---------- measurements (measure.c) ---------- */

typedef enum rs_ycsb_op {
    RS_YCSB_OP_INSERT,
    RS_YCSB_OP_READ,
    RS_YCSB_OP_UPDATE,
    RS_YCSB_OP_SCAN,
    RS_YCSB_OP_RMW,
    RS_YCSB_OP_BATCH_READ,
    RS_YCSB_OP_DELETE,
    RS_YCSB_OP_ALL, /* every operation the driver issued, once each (an RMW or a batch is one) */
    RS_YCSB_OP_COUNT
} rs_ycsb_op;

typedef enum rs_ycsb_status {
    RS_YCSB_ST_OK,
    RS_YCSB_ST_NOTFOUND,
    RS_YCSB_ST_NOTSUP,
    RS_YCSB_ST_ERROR,
    RS_YCSB_ST_COUNT
} rs_ycsb_status;

const char *rs_ycsb_op_name(rs_ycsb_op op); /* "READ", "READ-MODIFY-WRITE", ... */
const char *
rs_ycsb_status_suffix(rs_ycsb_status s); /* "", "-NOTFOUND", "-NOTSUPPORTED", "-FAILED" */
rs_ycsb_status rs_ycsb_status_of(int rc);

/* Histograms per op × status, allocated on first use. Owned by one thread while running. */
typedef struct rs_ycsb_measure {
    rs_hist *h[RS_YCSB_OP_COUNT][RS_YCSB_ST_COUNT];
    uint64_t ops_done; /* operations counted toward throughput (a batch counts its keys) */
} rs_ycsb_measure;

void rs_ycsb_measure_init(rs_ycsb_measure *m);
void rs_ycsb_measure_free(rs_ycsb_measure *m);
int rs_ycsb_measure_record(rs_ycsb_measure *m, rs_ycsb_op op, rs_ycsb_status st, uint64_t ns);
int rs_ycsb_measure_merge(rs_ycsb_measure *dst, const rs_ycsb_measure *src);

/* ---------- generators (generators.c) ---------- */

/* YCSB's AcknowledgedCounterGenerator: next() hands out insert keynums; last() is the highest
 * keynum below which every handed-out keynum has been acknowledged (inserted). */
typedef struct rs_ycsb_ack_counter rs_ycsb_ack_counter;
int rs_ycsb_ack_counter_new(uint64_t start, rs_ycsb_ack_counter **out);
void rs_ycsb_ack_counter_free(rs_ycsb_ack_counter *c);
uint64_t rs_ycsb_ack_counter_next(rs_ycsb_ack_counter *c);
void rs_ycsb_ack_counter_ack(rs_ycsb_ack_counter *c, uint64_t v);
uint64_t rs_ycsb_ack_counter_last(const rs_ycsb_ack_counter *c);

/* YCSB's SkewedLatestGenerator over a growing count: a zipfian rank r over [0, last) whose zeta is
 * extended incrementally as `last` grows; the value is last - r (recent keys most popular). */
typedef struct rs_ycsb_latest {
    double theta, zeta2, zetan;
    uint64_t count_for_zeta;
} rs_ycsb_latest;
void rs_ycsb_latest_init(rs_ycsb_latest *g, double theta);
uint64_t rs_ycsb_latest_next(rs_ycsb_latest *g, uint64_t last, rs_rng *r);

/* YCSB's HotspotIntegerGenerator over [lo, hi]: with probability hot_opn_fraction a value from the
 * first hot_data_fraction of the interval, otherwise from the rest. */
typedef struct rs_ycsb_hotspot {
    uint64_t lo, hot_interval, cold_interval;
    double hot_opn_fraction;
} rs_ycsb_hotspot;
int rs_ycsb_hotspot_init(rs_ycsb_hotspot *g, uint64_t lo, uint64_t hi, double hot_data_fraction,
                         double hot_opn_fraction, rs_error *err);
uint64_t rs_ycsb_hotspot_next(const rs_ycsb_hotspot *g, rs_rng *r);

/* ---------- the driver (workload.c, driver.c) ---------- */

/* The most records a load + run of these properties can leave in a store: recordcount, plus
 * operationcount when insertproportion > 0 (every run operation could be an insert). Engines with
 * a fixed capacity size themselves from it by default. */
int rs_ycsb_max_records(const rs_ycsb_props *p, uint64_t *out, rs_error *err);

/* measurement.interval: which latency each operation records. op: from the actual start (YCSB's
 * default); intended: from the start the -target timetable intended (coordinated omission
 * corrected; equal to op when no target is set); both. */
enum { RS_YCSB_INTERVAL_OP = 0, RS_YCSB_INTERVAL_INTENDED = 1, RS_YCSB_INTERVAL_BOTH = 2 };

typedef struct rs_ycsb_phase_report {
    int ran;
    double runtime_s;
    uint64_t operations;
    double throughput;
    double cpu_user_s, cpu_sys_s;
    rs_ycsb_measure merged;
    rs_ycsb_measure intended; /* latency from the intended start ("Intended-READ", ...) */
    uint64_t late_sends;      /* -target: operations started after their intended time because
                               * the thread was still busy with the previous one */
    uint64_t errors;          /* operations with status ERROR */
    char first_error[RS_ERROR_MSG_MAX];
} rs_ycsb_phase_report;

typedef struct rs_ycsb_report {
    int threads;
    uint64_t seed;
    int hdr; /* measurementtype: 1 = percentiles (hdrhistogram), 0 = basic (count/min/max/avg) */
    double target;       /* -target operations/s (0 = none) */
    const char *arrival; /* "uniform" | "poisson" (ycsb.arrival) */
    int interval;        /* RS_YCSB_INTERVAL_* (measurement.interval) */
    rs_ycsb_phase_report load, run;
} rs_ycsb_report;

typedef struct rs_ycsb_options {
    const char *db;
    int do_load, do_run;
    int status; /* -s: status lines on stdout every status.interval seconds */
    const rs_ycsb_props *props;
} rs_ycsb_options;

/* Load and/or run one workload against one binding. Configuration errors (bad property, unknown
 * DB, engine open failure) return non-zero with err set; operation failures are counted in the
 * report, not returned. */
int rs_ycsb_execute(const rs_ycsb_options *opt, rs_ycsb_report *rep, rs_error *err);
void rs_ycsb_report_free(rs_ycsb_report *rep);

#ifdef __cplusplus
}
#endif
#endif
