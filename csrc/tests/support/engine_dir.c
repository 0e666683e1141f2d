/*
 * engine_dir.c — removing a test engine's scratch directory (engine_dir.h).
 */
#include "engine_dir.h"

#include <stdio.h>
#include <unistd.h>

void rs_test_rm_engine_dir(const char *dir) {
    static const char *const files[] = {"cceh.index", "cceh.values"};
    char p[4096];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}
