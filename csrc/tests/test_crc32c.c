/*
 * test_crc32c.c — CRC-32C against the published vectors (RFC 3720 appendix B.4 and the
 * "123456789" check value), both implementations, every alignment and length across the
 * three-lane boundary, and continuation over split buffers.
 */
#include <string.h>

#include "recstore/crc32c.h"
#include "rs_test.h"

static void check_vectors(void) {
    uint8_t b[32];
    memset(b, 0, 32);
    RS_CHECK_EQ(rs_crc32c(0, b, 32), 0x8A9136AAu);
    memset(b, 0xff, 32);
    RS_CHECK_EQ(rs_crc32c(0, b, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)i;
    RS_CHECK_EQ(rs_crc32c(0, b, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)(31 - i);
    RS_CHECK_EQ(rs_crc32c(0, b, 32), 0x113FDB5Cu);
    RS_CHECK_EQ(rs_crc32c(0, "123456789", 9), 0xE3069283u);
    RS_CHECK_EQ(rs_crc32c(0, "", 0), 0);
}

static void test_vectors_both_impls(void) {
    rs_crc32c_force_table(0);
    check_vectors();
    rs_crc32c_force_table(1);
    RS_CHECK(strcmp(rs_crc32c_impl(), "table") == 0);
    check_vectors();
    rs_crc32c_force_table(0);
}

static void test_impls_agree_and_continue(void) {
    enum { N = 3 * 4096 * 2 + 300 };
    static uint8_t buf[N + 16];
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < sizeof buf; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    size_t lens[] = {0, 1, 7, 8, 9, 63, 4096, 3 * 4096 - 1, 3 * 4096, 3 * 4096 + 5, N};
    for (size_t off = 0; off < 9; off++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            size_t n = lens[li];
            rs_crc32c_force_table(1);
            uint32_t t = rs_crc32c(0, buf + off, n);
            rs_crc32c_force_table(0);
            uint32_t h = rs_crc32c(0, buf + off, n);
            RS_CHECK_EQ(t, h);
            size_t cut = n / 3;
            RS_CHECK_EQ(rs_crc32c(rs_crc32c(0, buf + off, cut), buf + off + cut, n - cut), h);
        }
}

RS_TEST_MAIN(RS_TEST(test_vectors_both_impls), RS_TEST(test_impls_agree_and_continue))
