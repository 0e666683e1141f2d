/*
 * measure.c — per-thread YCSB measurements: one latency histogram (hist.h) per operation type
 * and outcome (ok, not found, not supported, failed), allocated on first use so a thread that
 * never scans carries no scan histogram. A thread records into its own rs_ycsb_measure without
 * locks; the driver merges them after the threads have joined.
 */
#include <stdlib.h>

#include "recstore/ycsb.h"

static const char *const op_names[RS_YCSB_OP_COUNT] = {
    "INSERT", "READ", "UPDATE", "SCAN", "READ-MODIFY-WRITE", "BATCH-READ", "DELETE", "ALL",
};
static const char *const st_suffix[RS_YCSB_ST_COUNT] = {"", "-NOTFOUND", "-NOTSUPPORTED",
                                                        "-FAILED"};

const char *rs_ycsb_op_name(rs_ycsb_op op) {
    return op < RS_YCSB_OP_COUNT ? op_names[op] : "UNKNOWN";
}

const char *rs_ycsb_status_suffix(rs_ycsb_status s) {
    return s < RS_YCSB_ST_COUNT ? st_suffix[s] : "-FAILED";
}

rs_ycsb_status rs_ycsb_status_of(int rc) {
    switch (rc) {
    case RS_OK: return RS_YCSB_ST_OK;
    case RS_ENOTFOUND: return RS_YCSB_ST_NOTFOUND;
    case RS_ENOTSUP: return RS_YCSB_ST_NOTSUP;
    default: return RS_YCSB_ST_ERROR;
    }
}

void rs_ycsb_measure_init(rs_ycsb_measure *m) {
    *m = (rs_ycsb_measure){0};
}

void rs_ycsb_measure_free(rs_ycsb_measure *m) {
    for (int o = 0; o < RS_YCSB_OP_COUNT; o++)
        for (int s = 0; s < RS_YCSB_ST_COUNT; s++)
            free(m->h[o][s]);
    *m = (rs_ycsb_measure){0};
}

static rs_hist *hist_of(rs_ycsb_measure *m, rs_ycsb_op op, rs_ycsb_status st) {
    rs_hist *h = m->h[op][st];
    if (!h) {
        h = malloc(sizeof *h);
        if (!h) return NULL;
        rs_hist_reset(h);
        m->h[op][st] = h;
    }
    return h;
}

int rs_ycsb_measure_record(rs_ycsb_measure *m, rs_ycsb_op op, rs_ycsb_status st, uint64_t ns) {
    rs_hist *h = hist_of(m, op, st);
    if (!h) return RS_ENOMEM;
    rs_hist_record(h, ns);
    return RS_OK;
}

int rs_ycsb_measure_merge(rs_ycsb_measure *dst, const rs_ycsb_measure *src) {
    for (int o = 0; o < RS_YCSB_OP_COUNT; o++)
        for (int s = 0; s < RS_YCSB_ST_COUNT; s++) {
            if (!src->h[o][s]) continue;
            rs_hist *h = hist_of(dst, (rs_ycsb_op)o, (rs_ycsb_status)s);
            if (!h) return RS_ENOMEM;
            rs_hist_merge(h, src->h[o][s]);
        }
    dst->ops_done += src->ops_done;
    return RS_OK;
}
