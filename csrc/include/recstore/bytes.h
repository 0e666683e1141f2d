/*
 * bytes.h — unaligned loads and stores of fixed-width integers in a byte buffer, in host byte
 * order (every recbench file format and control message is little-endian and written on
 * x86-64/aarch64 hosts, which are). memcpy compiles to one plain load or store.
 */
#ifndef RECSTORE_BYTES_H
#define RECSTORE_BYTES_H

#include <stdint.h>
#include <string.h>

static inline void rs_put32(uint8_t *p, uint32_t v) {
    memcpy(p, &v, 4);
}
static inline void rs_put64(uint8_t *p, uint64_t v) {
    memcpy(p, &v, 8);
}
static inline uint32_t rs_get32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t rs_get64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

#endif
