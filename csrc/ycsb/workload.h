/*
 * workload.h — (internal to csrc/ycsb) YCSB's CoreWorkload parsed from properties, and the
 * per-thread generator state that draws operations, keys, field values and scan lengths from it.
 *
 * rs_ycsb_workload is read-only once parsed and shared by all threads; rs_ycsb_wthread holds
 * everything a thread mutates (rng, latest-zeta, key/value buffers).
 */
#ifndef RS_YCSB_WORKLOAD_H
#define RS_YCSB_WORKLOAD_H

#include "recstore/pacing.h"
#include "recstore/rng.h"
#include "recstore/ycsb.h"
#include "recstore/zipf.h"

#define RS_YCSB_KEY_MAX 64

enum { RS_DIST_UNIFORM, RS_DIST_ZIPFIAN, RS_DIST_LATEST, RS_DIST_HOTSPOT, RS_DIST_CONSTANT };

typedef struct rs_ycsb_workload {
    const char *table;
    uint64_t recordcount, operationcount;
    uint32_t fieldcount;
    char *field_name_buf;       /* "field0\0field1\0..." */
    rs_ycsb_field *field_names; /* names only */
    int fieldlen_dist;          /* constant | uniform | zipfian */
    uint32_t fieldlength, minfieldlength;
    rs_zipf fieldlen_zipf;
    double cum[5]; /* cumulative: read, update, insert, scan, rmw (normalised to 1) */
    int request_dist;
    rs_zipf_scrambled zipf;
    rs_ycsb_hotspot hotspot;
    double zipf_constant;
    int scan_dist; /* uniform | zipfian */
    uint32_t minscanlength, maxscanlength;
    rs_zipf scan_zipf;
    int ordered;
    uint32_t zeropadding;
    int readallfields, writeallfields;
    int batch;
    uint32_t batch_size;
    uint64_t seed;
    uint64_t status_interval_s;
    int threads;
    int hdr;       /* measurementtype: 0 basic, 1 hdrhistogram */
    double target; /* total operations/s of the process (-target); 0 = as fast as possible */
    int arrival;   /* ycsb.arrival: rs_pacing_arrival of the timetable (uniform, as YCSB) */
    int interval;  /* measurement.interval: RS_YCSB_INTERVAL_* */
} rs_ycsb_workload;

typedef enum { RS_WOP_READ, RS_WOP_UPDATE, RS_WOP_INSERT, RS_WOP_SCAN, RS_WOP_RMW } rs_ycsb_wop;

typedef struct rs_ycsb_wthread {
    const rs_ycsb_workload *w;
    rs_rng rng;
    rs_ycsb_latest latest;
    char key[RS_YCSB_KEY_MAX];
    size_t klen;
    char *valbuf;          /* fieldcount * max field length */
    rs_ycsb_field *values; /* fieldcount entries pointing into valbuf */
} rs_ycsb_wthread;

int rs_ycsb_workload_parse(const rs_ycsb_props *p, rs_ycsb_workload *w, rs_error *err);
void rs_ycsb_workload_free(rs_ycsb_workload *w);

int rs_ycsb_wthread_init(rs_ycsb_wthread *t, const rs_ycsb_workload *w, int thread_id);
void rs_ycsb_wthread_free(rs_ycsb_wthread *t);

rs_ycsb_wop rs_ycsb_next_op(rs_ycsb_wthread *t);
/* A keynum for read/update/scan/rmw; never above `last` (the highest acknowledged insert). */
uint64_t rs_ycsb_next_keynum(rs_ycsb_wthread *t, uint64_t last);
/* Build "user<padded digits>" into t->key/t->klen (hashed unless insertorder=ordered). */
void rs_ycsb_build_key(rs_ycsb_wthread *t, uint64_t keynum);
void rs_ycsb_build_key_into(const rs_ycsb_workload *w, uint64_t keynum, char *out, size_t *len);
/* Fill random values: all fields (n = fieldcount) or one random field; returns the field array
 * and count through out/n. */
void rs_ycsb_build_values(rs_ycsb_wthread *t, int all, const rs_ycsb_field **out, size_t *n);
/* Fields to read: all (NULL names) or one random field. */
void rs_ycsb_read_fields(rs_ycsb_wthread *t, int all, rs_ycsb_fieldset *fs);
uint32_t rs_ycsb_next_scan_length(rs_ycsb_wthread *t);

#endif
