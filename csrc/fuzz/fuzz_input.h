/*
 * fuzz_input.h — a cursor over one libFuzzer input, used by every target in csrc/fuzz/ to carve
 * the input into choices (small integers) and byte ranges. Taking past the end yields zeros and
 * empty ranges, so every input is a valid sequence of choices.
 *
 * Byte ranges handed to the code under test are copied into their own malloc'd block of exactly
 * their length (fuzz_dup), so AddressSanitizer reports a read even one byte past the end.
 */
#ifndef RS_FUZZ_INPUT_H
#define RS_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct fuzz_input {
    const uint8_t *p;
    size_t left;
} fuzz_input;

static inline uint8_t fuzz_u8(fuzz_input *in) {
    if (!in->left) return 0;
    in->left--;
    return *in->p++;
}

static inline uint16_t fuzz_u16(fuzz_input *in) {
    return (uint16_t)(fuzz_u8(in) | fuzz_u8(in) << 8);
}

/* Up to n bytes (fewer at the end of the input); *got says how many. */
static inline const uint8_t *fuzz_bytes(fuzz_input *in, size_t n, size_t *got) {
    if (n > in->left) n = in->left;
    const uint8_t *p = in->p;
    in->p += n;
    in->left -= n;
    *got = n;
    return p;
}

/* Exact-size heap copy (NULL for n == 0; caller frees). */
static inline uint8_t *fuzz_dup(const uint8_t *p, size_t n) {
    if (!n) return NULL;
    uint8_t *d = malloc(n);
    if (d) memcpy(d, p, n);
    return d;
}

/* Read every byte of a range so ASan checks the whole view a decoder returned. */
static inline unsigned fuzz_touch(const void *p, size_t n) {
    const volatile uint8_t *b = p;
    unsigned s = 0;
    for (size_t i = 0; i < n; i++)
        s += b[i];
    return s;
}

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond);      \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
