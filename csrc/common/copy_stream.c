/*
 * copy_stream.c — rs_copy_stream (copy.h): a copy whose stores go around the caches, and
 * rs_copy_rows, which takes it while the process has many rows in flight.
 *
 * A plain store to a line that is not cached first reads the line (read for ownership), and the
 * line then stays in the caches until it is evicted and written back. When the destination will
 * not be read before it would be evicted anyway, streaming stores write whole lines straight to
 * memory: no read, and nothing else evicted. The kernel is chosen once from the CPU's features.
 */
#include "recstore/copy.h"

#include "recstore/cpu.h"
#include "recstore/error.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define LINE 64u

typedef void (*lines_fn)(uint8_t *dst, const uint8_t *src, size_t lines);

__attribute__((target("avx512f"))) static void lines_avx512(uint8_t *dst, const uint8_t *src,
                                                            size_t lines) {
    for (size_t i = 0; i < lines; i++)
        _mm512_stream_si512((void *)(dst + i * LINE),
                            _mm512_loadu_si512((const void *)(src + i * LINE)));
}

__attribute__((target("avx2"))) static void lines_avx2(uint8_t *dst, const uint8_t *src,
                                                       size_t lines) {
    for (size_t i = 0; i < lines; i++) {
        const __m256i *s = (const __m256i *)(src + i * LINE);
        __m256i a = _mm256_loadu_si256(s), b = _mm256_loadu_si256(s + 1);
        _mm256_stream_si256((__m256i *)(dst + i * LINE), a);
        _mm256_stream_si256((__m256i *)(dst + i * LINE) + 1, b);
    }
}

static void lines_sse2(uint8_t *dst, const uint8_t *src, size_t lines) {
    for (size_t i = 0; i < lines; i++) {
        const __m128i *s = (const __m128i *)(src + i * LINE);
        __m128i *d = (__m128i *)(dst + i * LINE);
        __m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1), c = _mm_loadu_si128(s + 2),
                e = _mm_loadu_si128(s + 3);
        _mm_stream_si128(d, a);
        _mm_stream_si128(d + 1, b);
        _mm_stream_si128(d + 2, c);
        _mm_stream_si128(d + 3, e);
    }
}

/* The kernels by rs_cpu_vec level; decided once: the CPU's best, and where auto streams. */
static const lines_fn kernels[] = {lines_sse2, lines_avx2, lines_avx512};
static lines_fn best;
static size_t stream_from;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* A quarter of the LLC: on the Zen 4 host's 32 MiB L3 the plain copy was faster up to 4 MiB of
 * rows in flight (2 and 4 client threads of 4 x 256 KiB) and the streaming one from 8 MiB. */
static void init(void) {
    best = kernels[rs_cpu_best_vec()];
    size_t llc = rs_cpu_llc_bytes();
    stream_from = llc ? llc / 4 : SIZE_MAX;
}

/* The whole lines of d streamed, the ragged head and tail copied plainly; no fence. */
static void copy_lines(lines_fn lines_copy, uint8_t *d, const uint8_t *s, size_t n) {
    size_t head = (LINE - ((uintptr_t)d & (LINE - 1))) & (LINE - 1);
    if (n < head + LINE) { /* no whole line to stream */
        memcpy(d, s, n);
        return;
    }
    memcpy(d, s, head);
    size_t lines = (n - head) / LINE;
    lines_copy(d + head, s + head, lines);
    size_t done = head + lines * LINE;
    memcpy(d + done, s + done, n - done);
}

void rs_copy_stream(void *dst, const void *src, size_t n) {
    pthread_once(&init_once, init);
    copy_lines(best, dst, src, n);
    _mm_sfence();
}

int rs_copy_stream_on(int vec, void *dst, const void *src, size_t n) {
    if (vec < RS_CPU_VEC_BASE || vec > RS_CPU_VEC_AVX512 || !rs_cpu_has_vec(vec)) return RS_ENOTSUP;
    copy_lines(kernels[vec], dst, src, n);
    _mm_sfence();
    return 0;
}

/* Pending row bytes of the whole process (relaxed: a heuristic's input, not a lock). */
static uint64_t rows_pending;

const char *const rs_copy_mode_names[RS_COPY_MODES] = {"auto", "plain", "stream"};

void rs_copy_rows_pending(int64_t delta) {
    __atomic_add_fetch(&rows_pending, (uint64_t)delta, __ATOMIC_RELAXED);
}

uint64_t rs_copy_rows_pending_bytes(void) {
    return __atomic_load_n(&rows_pending, __ATOMIC_RELAXED);
}

size_t rs_copy_rows_stream_from(void) {
    pthread_once(&init_once, init);
    return stream_from;
}

int rs_copy_rows_streams(rs_copy_mode mode) {
    pthread_once(&init_once, init);
    return mode == RS_COPY_STREAM ||
           (mode == RS_COPY_AUTO &&
            __atomic_load_n(&rows_pending, __ATOMIC_RELAXED) >= stream_from);
}

void rs_copy_rows_piece(void *dst, const void *src, size_t n, int stream) {
    if (stream)
        copy_lines(best, dst, src, n); /* best is set: rs_copy_rows_streams ran its init */
    else
        memcpy(dst, src, n);
}

void rs_copy_rows_end(int stream) {
    if (stream) _mm_sfence();
}

int rs_copy_rows(void *dst, const void *src, size_t n, rs_copy_mode mode) {
    int stream = rs_copy_rows_streams(mode);
    rs_copy_rows_piece(dst, src, n, stream);
    rs_copy_rows_end(stream);
    return stream;
}
