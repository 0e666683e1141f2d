/*
 * crc32c.c — CRC-32C (recstore/crc32c.h) two ways, picked at run time: the SSE4.2 `crc32`
 * instruction (8 bytes per instruction, three independent streams interleaved over large buffers
 * so the instruction's 3-cycle latency is hidden) and a portable slicing-by-8 table for CPUs
 * without it.
 *
 * Three streams: a buffer of at least 3 * RS_CRC_LANE bytes is cut into three lanes of LANE bytes
 * that are checksummed independently, then combined: crc(A || B) = shift(crc(A), |B|) ^ crc(B),
 * where shift multiplies by x^(8|B|) modulo the polynomial. With a fixed lane length the shift is
 * a fixed linear map of 32 bits, applied through a 4 x 256 table built once (the zlib
 * crc32_combine idea with a precomputed operator). Both paths are checked against the RFC 3720
 * vectors and against each other in csrc/tests/test_crc32c.c.
 */
#include <pthread.h>
#include <string.h>

#include "recstore/crc32c.h"

#define POLY        0x82F63B78u
#define RS_CRC_LANE 4096u

static uint32_t table[8][256];
static uint32_t lane_shift[4][256]; /* crc -> crc advanced over RS_CRC_LANE zero bytes */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int have_sse42;
static int force_table;

/* Multiply crc by x^(8 * nbytes) modulo POLY: run the CRC register over nbytes zero bytes. */
static uint32_t shift_zeros(uint32_t crc, size_t nbytes) {
    for (size_t i = 0; i < nbytes; i++)
        crc = (crc >> 8) ^ table[0][crc & 0xff];
    return crc;
}

static void init_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (POLY & (0u - (c & 1)));
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
    /* the shift is linear in the crc bits: shift each of the 32 bits once, then every table
     * entry is the xor of the images of its bits */
    uint32_t bit_image[32];
    for (int k = 0; k < 32; k++)
        bit_image[k] = shift_zeros(1u << k, RS_CRC_LANE);
    for (int b = 0; b < 4; b++)
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t v = 0;
            for (int k = 0; k < 8; k++)
                if (i >> k & 1) v ^= bit_image[8 * b + k];
            lane_shift[b][i] = v;
        }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t table_update(uint32_t c, const uint8_t *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
        n--;
    }
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c;
        c = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
            table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
            table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
    }
    while (n--)
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
    return c;
}

static uint32_t lane_advance(uint32_t c) {
    return lane_shift[0][c & 0xff] ^ lane_shift[1][(c >> 8) & 0xff] ^
           lane_shift[2][(c >> 16) & 0xff] ^ lane_shift[3][c >> 24];
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t sse42_update(uint32_t c, const uint8_t *p,
                                                               size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8(c, *p++);
        n--;
    }
    uint64_t c0 = c;
    while (n >= 3 * RS_CRC_LANE) {
        uint64_t c1 = 0, c2 = 0;
        const uint8_t *p1 = p + RS_CRC_LANE, *p2 = p + 2 * RS_CRC_LANE;
        for (size_t i = 0; i < RS_CRC_LANE; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p1 + i, 8);
            memcpy(&w2, p2 + i, 8);
            c0 = _mm_crc32_u64(c0, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        /* lanes 1 and 2 started from 0, i.e. without the running register: combine them */
        c0 = lane_advance((uint32_t)c0) ^ (uint32_t)c1;
        c0 = lane_advance((uint32_t)c0) ^ (uint32_t)c2;
        p += 3 * RS_CRC_LANE;
        n -= 3 * RS_CRC_LANE;
    }
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c0 = _mm_crc32_u64(c0, w);
    }
    c = (uint32_t)c0;
    while (n--)
        c = _mm_crc32_u8(c, *p++);
    return c;
}
#endif

uint32_t rs_crc32c(uint32_t crc, const void *buf, size_t len) {
    pthread_once(&once, init_tables);
    uint32_t c = ~crc;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (have_sse42 && !__atomic_load_n(&force_table, __ATOMIC_RELAXED))
        return ~sse42_update(c, buf, len);
#endif
    return ~table_update(c, buf, len);
}

const char *rs_crc32c_impl(void) {
    pthread_once(&once, init_tables);
    return have_sse42 && !__atomic_load_n(&force_table, __ATOMIC_RELAXED) ? "sse4.2" : "table";
}

void rs_crc32c_force_table(int on) {
    __atomic_store_n(&force_table, on, __ATOMIC_RELAXED);
}
