/*
 * engine_dir.h — a KV engine's scratch directory in tests (csrc/tests/support/, compiled into every
 * test binary): CCEH keeps its index and value files there, DRAM indexes nothing.
 */
#ifndef RS_TEST_ENGINE_DIR_H
#define RS_TEST_ENGINE_DIR_H

/* Remove the files a CCEH engine leaves in dir (cceh.index, cceh.values), then dir itself. */
void rs_test_rm_engine_dir(const char *dir);

#endif
