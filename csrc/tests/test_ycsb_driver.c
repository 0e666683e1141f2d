/*
 * test_ycsb_driver.c — the thread driver end to end in C (so ASan/UBSan/TSan builds see it):
 * several threads load and run workloads with run-phase inserts, read-modify-writes and batched
 * reads against the in-memory `basic` store and `kvdb`; counts must add up exactly, no operation
 * may fail, and reads must never target a record whose insert has not finished.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recstore/ycsb.h"
#include "rs_test.h"

static uint64_t count_of(const rs_ycsb_phase_report *ph, rs_ycsb_op op, rs_ycsb_status st) {
    const rs_hist *h = ph->merged.h[op][st];
    return h ? h->count : 0;
}

static void run_case(const char *db, const char *const *props, uint64_t recs, uint64_t ops,
                     rs_ycsb_report *rep) {
    rs_ycsb_props *p;
    rs_ycsb_props_new(&p);
    char buf[64];
    snprintf(buf, sizeof buf, "recordcount=%llu", (unsigned long long)recs);
    rs_error err = {0};
    rs_ycsb_props_set_arg(p, buf, &err);
    snprintf(buf, sizeof buf, "operationcount=%llu", (unsigned long long)ops);
    rs_ycsb_props_set_arg(p, buf, &err);
    rs_ycsb_props_set_arg(p, "threadcount=4", &err);
    rs_ycsb_props_set_arg(p, "basic.silent=true", &err);
    rs_ycsb_props_set_arg(p, "fieldcount=4", &err);
    rs_ycsb_props_set_arg(p, "fieldlength=16", &err);
    char dir[] = "/tmp/rs_ycsb_driver_XXXXXX";
    RS_CHECK(mkdtemp(dir) != NULL);
    snprintf(buf, sizeof buf, "hybridkv.path=%s", dir);
    rs_ycsb_props_set_arg(p, buf, &err);
    for (int i = 0; props[i]; i++)
        RS_CHECK_EQ(rs_ycsb_props_set_arg(p, props[i], &err), RS_OK);
    rs_ycsb_options opt = {.db = db, .do_load = 1, .do_run = 1, .status = 0, .props = p};
    int rc = rs_ycsb_execute(&opt, rep, &err);
    if (rc) fprintf(stderr, "%s: %s\n", db, err.msg);
    RS_CHECK_EQ(rc, RS_OK);
    RS_CHECK_EQ(rep->load.operations, recs);
    RS_CHECK_EQ(rep->run.operations, ops);
    RS_CHECK_EQ(rep->load.errors, 0);
    RS_CHECK_EQ(rep->run.errors, 0);
    if (rep->run.errors) fprintf(stderr, "%s: %s\n", db, rep->run.first_error);
    RS_CHECK_EQ(count_of(&rep->load, RS_YCSB_OP_INSERT, RS_YCSB_ST_OK), recs);
    rs_ycsb_props_free(p);
    rmdir(dir);
}

static void test_latest_with_inserts(void) {
    static const char *const props[] = {"readproportion=0.5", "insertproportion=0.5",
                                        "updateproportion=0", "requestdistribution=latest", NULL};
    const char *dbs[] = {"basic", "kvdb"};
    for (int d = 0; d < 2; d++) {
        rs_ycsb_report rep;
        run_case(dbs[d], props, 1000, 20000, &rep);
        uint64_t reads = count_of(&rep.run, RS_YCSB_OP_READ, RS_YCSB_ST_OK);
        uint64_t ins = count_of(&rep.run, RS_YCSB_OP_INSERT, RS_YCSB_ST_OK);
        RS_CHECK_EQ(count_of(&rep.run, RS_YCSB_OP_READ, RS_YCSB_ST_NOTFOUND), 0);
        RS_CHECK_EQ(reads + ins, 20000);
        RS_CHECK(ins > 9000 && ins < 11000);
        rs_ycsb_report_free(&rep);
    }
}

static void test_rmw_and_zipfian_inserts(void) {
    static const char *const props[] = {
        "readproportion=0.3", "readmodifywriteproportion=0.4", "insertproportion=0.3",
        "updateproportion=0", "requestdistribution=zipfian",   NULL};
    rs_ycsb_report rep;
    run_case("kvdb", props, 2000, 20000, &rep);
    uint64_t rmw = count_of(&rep.run, RS_YCSB_OP_RMW, RS_YCSB_ST_OK);
    RS_CHECK_EQ(count_of(&rep.run, RS_YCSB_OP_UPDATE, RS_YCSB_ST_OK), rmw);
    RS_CHECK_EQ(count_of(&rep.run, RS_YCSB_OP_ALL, RS_YCSB_ST_OK), 20000);
    RS_CHECK_EQ(count_of(&rep.run, RS_YCSB_OP_READ, RS_YCSB_ST_NOTFOUND), 0);
    rs_ycsb_report_free(&rep);
}

static void test_batched_reads(void) {
    static const char *const props[] = {
        "readproportion=1",    "updateproportion=0",          "ycsb.batch=true",
        "ycsb.batch_size=100", "requestdistribution=uniform", NULL};
    rs_ycsb_report rep;
    run_case("kvdb", props, 5000, 10000, &rep);
    /* 10000 ops over 4 threads = 2500 each = 25 batches of 100 per thread */
    RS_CHECK_EQ(count_of(&rep.run, RS_YCSB_OP_BATCH_READ, RS_YCSB_ST_OK), 100);
    rs_ycsb_report_free(&rep);
}

RS_TEST_MAIN(RS_TEST(test_latest_with_inserts), RS_TEST(test_rmw_and_zipfian_inserts),
             RS_TEST(test_batched_reads))
