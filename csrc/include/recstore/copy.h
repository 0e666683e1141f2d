/*
 * copy.h — copying GET rows into a caller's buffers (copy_stream.c): a bulk copy whose stores
 * bypass the caches, and the choice between it and memcpy by how many rows the process has in
 * flight (the RC and gRPC clients' client_copy; docs/scale.md, "The client's copy at 16 threads").
 */
#ifndef RECSTORE_COPY_H
#define RECSTORE_COPY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* memcpy(dst, src, n) for non-overlapping buffers, with streaming (non-temporal) stores for the
 * 64-byte lines of dst it covers whole (AVX-512, AVX2 or SSE2, whichever the CPU has), plain
 * copies for the ragged head and tail, and a store fence at the end: the bytes are visible to
 * other threads as after memcpy once a later release store is. */
void rs_copy_stream(void *dst, const void *src, size_t n);

/* rs_copy_stream with the line kernel of vector level `vec` (rs_cpu_vec, cpu.h; rs_copy_stream
 * takes the CPU's best), so every kernel can be checked on a CPU that runs it: RS_ENOTSUP (and
 * nothing copied) when this CPU does not. */
int rs_copy_stream_on(int vec, void *dst, const void *src, size_t n);

/* How rows are copied into a caller's buffer: auto streams while the process's pending row bytes
 * (below) reach rs_copy_rows_stream_from(), else copies plainly; plain and stream always do. */
typedef enum rs_copy_mode {
    RS_COPY_AUTO = 0,
    RS_COPY_PLAIN = 1,
    RS_COPY_STREAM = 2,
} rs_copy_mode;
#define RS_COPY_MODES 3
/* The modes' option words, in the enum's order: "auto", "plain", "stream". */
extern const char *const rs_copy_mode_names[RS_COPY_MODES];

/* Row bytes the process's clients will copy into callers' buffers when their answers come (a
 * GET's buffer size, added at submit and subtracted at collection, all threads together). */
void rs_copy_rows_pending(int64_t delta);
/* Their sum now (what auto compares with rs_copy_rows_stream_from). */
uint64_t rs_copy_rows_pending_bytes(void);
/* Where auto starts to stream: a quarter of the last-level cache (rs_cpu_llc_bytes); SIZE_MAX
 * when the LLC size is unknown (auto then never streams). */
size_t rs_copy_rows_stream_from(void);
/* Copy n bytes of rows as mode says; 1 when the copy streamed, else 0. */
int rs_copy_rows(void *dst, const void *src, size_t n, rs_copy_mode mode);
/* The same for rows that arrive in pieces (a message in several buffers), decided once and
 * fenced once: stream = rs_copy_rows_streams(mode) (1 when that copy streams now), every piece
 * with rs_copy_rows_piece(..., stream), then rs_copy_rows_end(stream). rs_copy_rows is these
 * three for one piece. */
int rs_copy_rows_streams(rs_copy_mode mode);
void rs_copy_rows_piece(void *dst, const void *src, size_t n, int stream);
void rs_copy_rows_end(int stream);

#ifdef __cplusplus
}
#endif
#endif
