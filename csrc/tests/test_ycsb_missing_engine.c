/*
 * test_ycsb_missing_engine.c — an engine whose library was missing at build time is refused with
 * a message naming the Debian package. The registry is compiled here as if WiredTiger and RocksDB
 * had not been found (this object then provides the registry symbols, so the core library's copy
 * is not linked in).
 */
#undef RS_HAVE_WIREDTIGER
#define RS_HAVE_WIREDTIGER 0
#undef RS_HAVE_ROCKSDB
#define RS_HAVE_ROCKSDB 0
#include "ycsb/db_registry.c"

#include "rs_test.h"

static void test_missing_engine_names_package(void) {
    const rs_ycsb_db_ops *ops = NULL;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ycsb_db_find("wiredtiger", &ops, &err), RS_ENOTSUP);
    RS_CHECK(strstr(err.msg, "libwiredtiger-dev") != NULL);
    RS_CHECK_EQ(rs_ycsb_db_find("rocksdb", &ops, &err), RS_ENOTSUP);
    RS_CHECK(strstr(err.msg, "librocksdb-dev") != NULL);
    RS_CHECK(strstr(rs_ycsb_db_names(), "wiredtiger") == NULL);
    RS_CHECK(strstr(rs_ycsb_db_names(), "kvdb") != NULL);
    RS_CHECK_EQ(rs_ycsb_db_find("kvdb", &ops, &err), RS_OK);
}

RS_TEST_MAIN(RS_TEST(test_missing_engine_names_package))
