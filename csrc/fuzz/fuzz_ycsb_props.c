/*
 * fuzz_ycsb_props.c — libFuzzer target for the YCSB driver's user input: workload property files
 * (-P FILE, Java-properties style) and -p KEY=VALUE arguments (csrc/ycsb/props.c), then the core
 * workload's parse of every property (csrc/ycsb/workload.c) and, when it is accepted, the
 * generators it configures (operation choice, key numbers and key strings, field values and
 * lengths, scan lengths: zipfian / latest / hotspot / uniform with fuzzed bounds).
 *
 * Input: the bytes up to the first NUL are the property file (handed over as a real file through
 * memfd); the rest, split at newlines, are -p arguments. The fuzz harness skips building values
 * when fieldcount x fieldlength exceeds 16 MiB (the parser allows up to 1 GiB, which only costs
 * the fuzzer time).
 *
 * Checked beyond "no crash": every rejection is RS_EINVAL (or RS_EIO for the file) with a message;
 * accepted workloads produce keys no longer than RS_YCSB_KEY_MAX, key numbers that respect the
 * acknowledged bound, values within their field lengths and scan lengths within their bounds.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz/fuzz_input.h"
#include "ycsb/workload.h"

static void exercise(const rs_ycsb_workload *w) {
    if ((uint64_t)w->fieldcount * w->fieldlength > (16u << 20)) return;
    rs_ycsb_wthread t;
    if (rs_ycsb_wthread_init(&t, w, 0) != 0) return;
    uint64_t last = w->recordcount ? w->recordcount - 1 : 0;
    for (int i = 0; i < 32; i++) {
        rs_ycsb_wop op = rs_ycsb_next_op(&t);
        FUZZ_CHECK(op >= RS_WOP_READ && op <= RS_WOP_RMW);
        uint64_t k = rs_ycsb_next_keynum(&t, last);
        FUZZ_CHECK(k <= last);
        rs_ycsb_build_key(&t, k);
        FUZZ_CHECK(t.klen > 0 && t.klen <= RS_YCSB_KEY_MAX);
        const rs_ycsb_field *f = NULL;
        size_t n = 0;
        rs_ycsb_build_values(&t, i & 1, &f, &n);
        FUZZ_CHECK(n >= 1 && n <= w->fieldcount);
        for (size_t j = 0; j < n; j++) {
            FUZZ_CHECK(f[j].value_len <= w->fieldlength);
            fuzz_touch(f[j].value, f[j].value_len);
            fuzz_touch(f[j].name, f[j].name_len);
        }
        rs_ycsb_fieldset fs;
        rs_ycsb_read_fields(&t, i & 2, &fs);
        uint32_t sl = rs_ycsb_next_scan_length(&t);
        FUZZ_CHECK(sl >= w->minscanlength && sl <= w->maxscanlength);
    }
    rs_ycsb_wthread_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t file_len = nul ? (size_t)(nul - data) : size;
    rs_ycsb_props *p = NULL;
    if (rs_ycsb_props_new(&p)) abort();
    int fd = memfd_create("fuzz-workload", MFD_CLOEXEC);
    if (fd < 0) abort();
    if (file_len && write(fd, data, file_len) != (ssize_t)file_len) abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    rs_error err = {0};
    int rc = rs_ycsb_props_load_file(p, path, &err);
    close(fd);
    if (rc) {
        FUZZ_CHECK((rc == RS_EINVAL || rc == RS_EIO) && err.msg[0]);
        goto out;
    }
    if (nul) {
        const uint8_t *q = nul + 1, *end = data + size;
        while (q < end) {
            const uint8_t *nl = memchr(q, '\n', (size_t)(end - q));
            size_t len = nl ? (size_t)(nl - q) : (size_t)(end - q);
            char *arg = malloc(len + 1);
            memcpy(arg, q, len);
            arg[len] = 0;
            rs_error e = {0};
            int r = rs_ycsb_props_set_arg(p, arg, &e);
            if (r) FUZZ_CHECK(r == RS_EINVAL && e.msg[0]);
            free(arg);
            q += len + 1;
        }
    }
    rs_ycsb_workload w;
    memset(&w, 0, sizeof w);
    rc = rs_ycsb_workload_parse(p, &w, &err);
    if (rc) {
        FUZZ_CHECK(err.msg[0]);
        rs_ycsb_workload_free(&w);
        goto out;
    }
    exercise(&w);
    rs_ycsb_workload_free(&w);
out:
    rs_ycsb_props_free(p);
    return 0;
}
