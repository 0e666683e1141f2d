/*
 * workload.c — YCSB's CoreWorkload: standard properties with YCSB's defaults, operation choice,
 * key choice (uniform, scrambled zipfian, latest, hotspot), key names, field values and scan
 * lengths. Parsing rejects bad values with the key, the value and where it came from.
 *
 * Key choice follows CoreWorkload.nextKeynum: the zipfian chooser covers recordcount plus twice
 * the expected run-phase inserts, and any draw above the highest acknowledged insert is redrawn,
 * so reads never target a record that is still being inserted. Key names are "user" followed by
 * the keynum (fnv64-hashed unless insertorder=ordered) left-padded with zeros to `zeropadding`.
 */
#include "workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recstore/hash.h"

static const char *const dist_names[] = {"uniform", "zipfian",  "latest",
                                         "hotspot", "constant", NULL};

static int proportion(const rs_ycsb_props *p, const char *key, double def, double *out,
                      rs_error *err) {
    int rc = rs_ycsb_props_double(p, key, def, out, err);
    if (rc) return rc;
    if (!(*out >= 0.0 && *out <= 1.0))
        return rs_error_set(err, RS_EINVAL, "property %s=%s (from %s): must be in [0, 1]", key,
                            rs_ycsb_props_get(p, key, ""), rs_ycsb_props_source(p, key));
    return RS_OK;
}

static int u32_prop(const rs_ycsb_props *p, const char *key, uint64_t def, uint64_t lo, uint64_t hi,
                    uint32_t *out, rs_error *err) {
    uint64_t v;
    int rc = rs_ycsb_props_u64(p, key, def, &v, err);
    if (rc) return rc;
    if (v < lo || v > hi)
        return rs_error_set(err, RS_EINVAL, "property %s=%llu (from %s): must be in [%llu, %llu]",
                            key, (unsigned long long)v, rs_ycsb_props_source(p, key),
                            (unsigned long long)lo, (unsigned long long)hi);
    *out = (uint32_t)v;
    return RS_OK;
}

int rs_ycsb_workload_parse(const rs_ycsb_props *p, rs_ycsb_workload *w, rs_error *err) {
    int rc;
    memset(w, 0, sizeof *w);
    w->table = rs_ycsb_props_get(p, "table", "usertable");
    if ((rc = rs_ycsb_props_u64(p, "recordcount", 1000, &w->recordcount, err))) return rc;
    if ((rc = rs_ycsb_props_u64(p, "operationcount", 1000, &w->operationcount, err))) return rc;
    if ((rc = u32_prop(p, "fieldcount", 10, 1, 1024, &w->fieldcount, err))) return rc;
    if ((rc = u32_prop(p, "fieldlength", 100, 1, 1u << 20, &w->fieldlength, err))) return rc;
    if ((rc = u32_prop(p, "minfieldlength", 1, 1, w->fieldlength, &w->minfieldlength, err)))
        return rc;
    static const char *const flen_names[] = {"constant", "uniform", "zipfian", NULL};
    if ((rc = rs_ycsb_props_choice(p, "fieldlengthdistribution", "constant", flen_names,
                                   &w->fieldlen_dist, err)))
        return rc;
    if ((rc = rs_ycsb_props_double(p, "zipfianconstant", RS_YCSB_ZIPFIAN_CONSTANT,
                                   &w->zipf_constant, err)))
        return rc;
    if (!(w->zipf_constant > 0 && w->zipf_constant < 1))
        return rs_error_set(err, RS_EINVAL, "property zipfianconstant=%g: must be in (0, 1)",
                            w->zipf_constant);
    if (w->fieldlen_dist == 2 &&
        (rc = rs_zipf_init(&w->fieldlen_zipf, w->fieldlength - w->minfieldlength + 1,
                           w->zipf_constant, err)))
        return rc;

    double pr[5];
    static const char *const pkeys[5] = {"readproportion", "updateproportion", "insertproportion",
                                         "scanproportion", "readmodifywriteproportion"};
    static const double pdef[5] = {0.95, 0.05, 0, 0, 0};
    double sum = 0;
    for (int i = 0; i < 5; i++) {
        if ((rc = proportion(p, pkeys[i], pdef[i], &pr[i], err))) return rc;
        sum += pr[i];
    }
    if (sum <= 0)
        return rs_error_set(err, RS_EINVAL,
                            "every operation proportion is 0: set readproportion, "
                            "updateproportion, insertproportion, scanproportion or "
                            "readmodifywriteproportion");
    double c = 0;
    for (int i = 0; i < 5; i++) {
        c += pr[i] / sum;
        w->cum[i] = c;
    }
    w->cum[4] = 1.0;

    if ((rc = rs_ycsb_props_choice(p, "requestdistribution", "uniform", dist_names,
                                   &w->request_dist, err)))
        return rc;
    if (w->request_dist == RS_DIST_CONSTANT)
        return rs_error_set(err, RS_EINVAL,
                            "property requestdistribution=constant (from %s): expected one of "
                            "uniform|zipfian|latest|hotspot",
                            rs_ycsb_props_source(p, "requestdistribution"));
    if (w->recordcount == 0 && pr[0] + pr[1] + pr[3] + pr[4] > 0)
        return rs_error_set(err, RS_EINVAL,
                            "recordcount=0 leaves no record to read, update or scan");
    uint64_t expected_new = (uint64_t)((double)w->operationcount * (pr[2] / sum) * 2.0);
    if (w->request_dist == RS_DIST_ZIPFIAN &&
        (rc = rs_zipf_scrambled_init(&w->zipf, w->recordcount + expected_new + 1, w->zipf_constant,
                                     err)))
        return rc;
    if (w->request_dist == RS_DIST_HOTSPOT) {
        double hd, ho;
        if ((rc = rs_ycsb_props_double(p, "hotspotdatafraction", 0.2, &hd, err))) return rc;
        if ((rc = rs_ycsb_props_double(p, "hotspotopnfraction", 0.8, &ho, err))) return rc;
        if ((rc = rs_ycsb_hotspot_init(&w->hotspot, 0, w->recordcount ? w->recordcount - 1 : 0, hd,
                                       ho, err)))
            return rc;
    }
    if ((rc = u32_prop(p, "minscanlength", 1, 1, 1u << 24, &w->minscanlength, err))) return rc;
    if ((rc = u32_prop(p, "maxscanlength", 1000, w->minscanlength, 1u << 24, &w->maxscanlength,
                       err)))
        return rc;
    static const char *const scan_names[] = {"uniform", "zipfian", NULL};
    if ((rc = rs_ycsb_props_choice(p, "scanlengthdistribution", "uniform", scan_names,
                                   &w->scan_dist, err)))
        return rc;
    if (w->scan_dist == 1 &&
        (rc = rs_zipf_init(&w->scan_zipf, w->maxscanlength - w->minscanlength + 1, w->zipf_constant,
                           err)))
        return rc;
    static const char *const order_names[] = {"hashed", "ordered", NULL};
    if ((rc = rs_ycsb_props_choice(p, "insertorder", "hashed", order_names, &w->ordered, err)))
        return rc;
    if ((rc = u32_prop(p, "zeropadding", 1, 1, 40, &w->zeropadding, err))) return rc;
    if ((rc = rs_ycsb_props_bool(p, "readallfields", 1, &w->readallfields, err))) return rc;
    if ((rc = rs_ycsb_props_bool(p, "writeallfields", 0, &w->writeallfields, err))) return rc;
    if ((rc = rs_ycsb_props_bool(p, "ycsb.batch", 0, &w->batch, err))) return rc;
    if ((rc = u32_prop(p, "ycsb.batch_size", 128, 1, 1u << 20, &w->batch_size, err))) return rc;
    if ((rc = rs_ycsb_props_u64(p, "ycsb.seed", 0x5eed, &w->seed, err))) return rc;
    if ((rc = rs_ycsb_props_u64(p, "status.interval", 10, &w->status_interval_s, err))) return rc;
    if (w->status_interval_s == 0) w->status_interval_s = 1;
    uint32_t threads;
    if ((rc = u32_prop(p, "threadcount", 1, 1, 4096, &threads, err))) return rc;
    w->threads = (int)threads;
    static const char *const mt_names[] = {"basic", "hdrhistogram", "histogram", NULL};
    int mt;
    if ((rc = rs_ycsb_props_choice(p, "measurementtype", "hdrhistogram", mt_names, &mt, err)))
        return rc;
    w->hdr = mt != 0;
    if ((rc = rs_ycsb_props_double(p, "target", 0, &w->target, err))) return rc;
    if (w->target < 0 || w->target > RS_PACING_MAX_RATE || w->target != w->target)
        return rs_error_set(err, RS_EINVAL, "target=%s (%s) is not in [0, %g] operations/s",
                            rs_ycsb_props_get(p, "target", ""), rs_ycsb_props_source(p, "target"),
                            RS_PACING_MAX_RATE);
    if (w->target > 0 && w->target / w->threads < RS_PACING_MIN_THREAD_RATE)
        return rs_error_set(err, RS_EINVAL,
                            "target=%s (%s) over threadcount=%d is below %g operations/s per "
                            "thread",
                            rs_ycsb_props_get(p, "target", ""), rs_ycsb_props_source(p, "target"),
                            w->threads, RS_PACING_MIN_THREAD_RATE);
    static const char *const arrival_names[] = {"uniform", "poisson", NULL};
    if ((rc = rs_ycsb_props_choice(p, "ycsb.arrival", "uniform", arrival_names, &w->arrival, err)))
        return rc;
    static const char *const interval_names[] = {"op", "intended", "both", NULL};
    if ((rc = rs_ycsb_props_choice(p, "measurement.interval", w->target > 0 ? "both" : "op",
                                   interval_names, &w->interval, err)))
        return rc;

    const char *prefix = rs_ycsb_props_get(p, "fieldnameprefix", "field");
    size_t plen = strlen(prefix);
    w->field_name_buf = malloc((plen + 12) * w->fieldcount);
    w->field_names = calloc(w->fieldcount, sizeof *w->field_names);
    if (!w->field_name_buf || !w->field_names) {
        rs_ycsb_workload_free(w);
        return rs_error_set(err, RS_ENOMEM, "out of memory for %u field names", w->fieldcount);
    }
    char *q = w->field_name_buf;
    for (uint32_t i = 0; i < w->fieldcount; i++) {
        int n = sprintf(q, "%s%u", prefix, i);
        w->field_names[i] = (rs_ycsb_field){q, (uint32_t)n, NULL, 0};
        q += n + 1;
    }
    return RS_OK;
}

int rs_ycsb_max_records(const rs_ycsb_props *p, uint64_t *out, rs_error *err) {
    uint64_t rec, ops;
    double ins;
    int rc;
    if ((rc = rs_ycsb_props_u64(p, "recordcount", 1000, &rec, err))) return rc;
    if ((rc = rs_ycsb_props_u64(p, "operationcount", 1000, &ops, err))) return rc;
    if ((rc = rs_ycsb_props_double(p, "insertproportion", 0, &ins, err))) return rc;
    *out = rec + (ins > 0 ? ops : 0);
    return RS_OK;
}

void rs_ycsb_workload_free(rs_ycsb_workload *w) {
    free(w->field_name_buf);
    free(w->field_names);
    w->field_name_buf = NULL;
    w->field_names = NULL;
}

int rs_ycsb_wthread_init(rs_ycsb_wthread *t, const rs_ycsb_workload *w, int thread_id) {
    memset(t, 0, sizeof *t);
    t->w = w;
    rs_rng_seed(&t->rng, w->seed * 0x9e3779b97f4a7c15ull + (uint64_t)thread_id + 1);
    rs_ycsb_latest_init(&t->latest, w->zipf_constant);
    t->valbuf = malloc((size_t)w->fieldcount * w->fieldlength);
    t->values = calloc(w->fieldcount, sizeof *t->values);
    if (!t->valbuf || !t->values) {
        rs_ycsb_wthread_free(t);
        return RS_ENOMEM;
    }
    for (uint32_t i = 0; i < w->fieldcount; i++) {
        t->values[i] = w->field_names[i];
        t->values[i].value = t->valbuf + (size_t)i * w->fieldlength;
    }
    return RS_OK;
}

void rs_ycsb_wthread_free(rs_ycsb_wthread *t) {
    free(t->valbuf);
    free(t->values);
    t->valbuf = NULL;
    t->values = NULL;
}

rs_ycsb_wop rs_ycsb_next_op(rs_ycsb_wthread *t) {
    double u = rs_rng_double(&t->rng);
    const double *c = t->w->cum;
    if (u < c[0]) return RS_WOP_READ;
    if (u < c[1]) return RS_WOP_UPDATE;
    if (u < c[2]) return RS_WOP_INSERT;
    if (u < c[3]) return RS_WOP_SCAN;
    return RS_WOP_RMW;
}

uint64_t rs_ycsb_next_keynum(rs_ycsb_wthread *t, uint64_t last) {
    const rs_ycsb_workload *w = t->w;
    if (w->request_dist == RS_DIST_LATEST) return rs_ycsb_latest_next(&t->latest, last, &t->rng);
    for (;;) {
        uint64_t k;
        switch (w->request_dist) {
        case RS_DIST_ZIPFIAN: k = rs_zipf_scrambled_next(&w->zipf, &t->rng); break;
        case RS_DIST_HOTSPOT: k = rs_ycsb_hotspot_next(&w->hotspot, &t->rng); break;
        default: k = rs_rng_below(&t->rng, w->recordcount ? w->recordcount : 1); break;
        }
        if (k <= last || last == UINT64_MAX) return k;
    }
}

void rs_ycsb_build_key_into(const rs_ycsb_workload *w, uint64_t keynum, char *out, size_t *len) {
    static const char pairs[201] =
        "00010203040506070809101112131415161718192021222324252627282930313233"
        "34353637383940414243444546474849505152535455565758596061626364656667"
        "6869707172737475767778798081828384858687888990919293949596979899";
    if (!w->ordered) keynum = rs_fnv64_u64(keynum);
    char digits[24];
    int pos = 24;
    while (keynum >= 100) { /* two digits per division */
        uint64_t q = keynum / 100;
        uint32_t r = (uint32_t)(keynum - q * 100);
        pos -= 2;
        memcpy(digits + pos, pairs + 2 * r, 2);
        keynum = q;
    }
    if (keynum >= 10) {
        pos -= 2;
        memcpy(digits + pos, pairs + 2 * keynum, 2);
    } else {
        digits[--pos] = (char)('0' + keynum);
    }
    int nd = 24 - pos;
    memcpy(out, "user", 4);
    size_t o = 4;
    for (int i = nd; i < (int)w->zeropadding; i++)
        out[o++] = '0';
    memcpy(out + o, digits + pos, (size_t)nd);
    o += (size_t)nd;
    out[o] = 0;
    *len = o;
}

void rs_ycsb_build_key(rs_ycsb_wthread *t, uint64_t keynum) {
    rs_ycsb_build_key_into(t->w, keynum, t->key, &t->klen);
}

static uint32_t field_length(rs_ycsb_wthread *t) {
    const rs_ycsb_workload *w = t->w;
    switch (w->fieldlen_dist) {
    case 1:
        return w->minfieldlength +
               (uint32_t)rs_rng_below(&t->rng, w->fieldlength - w->minfieldlength + 1);
    case 2: return w->minfieldlength + (uint32_t)rs_zipf_next(&w->fieldlen_zipf, &t->rng);
    default: return w->fieldlength;
    }
}

/* Printable random bytes, 8 per rng draw (YCSB's RandomByteIterator is printable ASCII too). */
static void fill_random(rs_rng *r, char *p, uint32_t len) {
    uint32_t i = 0;
    while (i < len) {
        uint64_t x = rs_rng_next(r);
        for (int b = 0; b < 8 && i < len; b++, x >>= 8)
            p[i++] = (char)(' ' + 1 + (x & 0xff) % 94);
    }
}

void rs_ycsb_build_values(rs_ycsb_wthread *t, int all, const rs_ycsb_field **out, size_t *n) {
    const rs_ycsb_workload *w = t->w;
    if (all) {
        for (uint32_t i = 0; i < w->fieldcount; i++) {
            t->values[i].value_len = field_length(t);
            fill_random(&t->rng, (char *)t->values[i].value, t->values[i].value_len);
        }
        *out = t->values;
        *n = w->fieldcount;
        return;
    }
    uint32_t f = (uint32_t)rs_rng_below(&t->rng, w->fieldcount);
    t->values[f].value_len = field_length(t);
    fill_random(&t->rng, (char *)t->values[f].value, t->values[f].value_len);
    *out = &t->values[f];
    *n = 1;
}

void rs_ycsb_read_fields(rs_ycsb_wthread *t, int all, rs_ycsb_fieldset *fs) {
    if (all) {
        fs->names = NULL;
        fs->n = 0;
        return;
    }
    fs->names = &t->w->field_names[rs_rng_below(&t->rng, t->w->fieldcount)];
    fs->n = 1;
}

uint32_t rs_ycsb_next_scan_length(rs_ycsb_wthread *t) {
    const rs_ycsb_workload *w = t->w;
    if (w->scan_dist == 1) return w->minscanlength + (uint32_t)rs_zipf_next(&w->scan_zipf, &t->rng);
    return w->minscanlength +
           (uint32_t)rs_rng_below(&t->rng, w->maxscanlength - w->minscanlength + 1);
}
