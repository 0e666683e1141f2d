/*
 * brpc_frame.h — baidu_std framing shared by the brpc server (brpc_server.c) and client connection
 * (brpc_conn.c). Internal to csrc/transport.
 *
 * Frame on the wire (bRPC's baidu_std):
 *   +------+-----------------+-----------------+---------+---------------+------------+
 *   | PRPC | body_size u32BE | meta_size u32BE | RpcMeta | PS message    | attachment |
 *   +------+-----------------+-----------------+---------+---------------+------------+
 *    4 B    4 B               4 B               meta_size  body - meta -   attachment_size
 *                                                          attachment
 * The PS message is a PSRequest/PSResponse in attachment form (ps_codec.c); the attachment holds
 * keys then rows (request) or rows (response). Sizes are validated against the body limit before
 * any allocation.
 */
#ifndef RS_TRANSPORT_BRPC_FRAME_H
#define RS_TRANSPORT_BRPC_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "baidu_rpc_meta.pb-c.h"
#include "recstore/error.h"
#include "recstore/recstore_msg.h"

#define RS_BRPC_HEADER_BYTES     12
#define RS_BRPC_SERVICE          "recstore.PSService"
#define RS_BRPC_RECSTORE_SERVICE "recstoreps_brpc.ParameterService"

/* One recstoreps_brpc.ParameterService call (brpc_recstore.c): method name -> the shared RecStore
 * call; *error_code is the RpcResponseMeta error to answer with (0: the reply in r), and
 * *payload_in_attachment says whether r's payload is the response attachment (GetParameter) or
 * follows r->head inside the message. */
int rs_brpc_recstore_call(rs_rsps *s, const char *method, const uint8_t *msg, size_t len,
                          const uint8_t *att, size_t att_len, unsigned thread_slot,
                          const rs_rsmsg_alloc *alloc, rs_rsmsg_reply *r, int *error_code,
                          int *payload_in_attachment);

/* RpcMeta.compress_type values (bRPC's CompressType); brpc_compress.c */
#define RS_BRPC_COMPRESS_NONE   0
#define RS_BRPC_COMPRESS_SNAPPY 1
#define RS_BRPC_COMPRESS_GZIP   2
#define RS_BRPC_COMPRESS_ZLIB   3
const char *rs_brpc_compress_name(int type);
/* Inflate a compressed message into *buf (grown as needed, owned by the caller, freed with
 * free()); *out_len bytes result, at most max_out. RS_ENOTSUP naming the type for values other
 * than 1..3 or codecs this build lacks; RS_EPROTO for corrupt or oversized input. */
int rs_brpc_decompress(int type, const uint8_t *in, size_t len, uint64_t max_out, uint8_t **buf,
                       size_t *cap, size_t *out_len, rs_error *err);

/* RpcMeta.checksum_type values (bRPC's ChecksumType); brpc_checksum.c */
#define RS_BRPC_CHECKSUM_NONE   0
#define RS_BRPC_CHECKSUM_CRC32C 1
typedef struct rs_brpc_checksum {
    int type;            /* RS_BRPC_CHECKSUM_NONE: nothing to verify */
    int with_attachment; /* the CRC covers message || attachment */
    uint32_t expected;   /* the unmasked CRC32C the frame carries */
} rs_brpc_checksum;
/* Read a frame's checksum fields into *ck (copied out of meta). RS_ENOTSUP naming checksum_type
 * for types other than 0 and 1; RS_EPROTO naming checksum_value when it is not 4 bytes. */
int rs_brpc_checksum_read(const Brpc__Policy__RpcMeta *meta, rs_brpc_checksum *ck, rs_error *err);
/* Compare crc (rs_crc32c over the message as sent, continued over the attachment when
 * ck->with_attachment) with the frame's; RS_EPROTO naming checksum_value and both CRCs. */
int rs_brpc_checksum_check(const rs_brpc_checksum *ck, uint32_t crc, size_t msg_len, size_t att_len,
                           rs_error *err);
/* Both steps over a message and attachment in memory. */
int rs_brpc_checksum_verify(const rs_brpc_checksum *ck, const uint8_t *msg, size_t msg_len,
                            const uint8_t *att, size_t att_len, rs_error *err);
/* RS_ENOTSUP naming RpcMeta.content_type when it is not protobuf (0): bRPC can send JSON or text
 * bodies, which recbench does not read. */
int rs_brpc_content_type_check(const Brpc__Policy__RpcMeta *meta, rs_error *err);

/* bRPC error codes used in RpcResponseMeta.error_code */
#define RS_BRPC_ENOSERVICE 1001
#define RS_BRPC_ENOMETHOD  1002
#define RS_BRPC_EREQUEST   1003
#define RS_BRPC_EAUTH      1004 /* bRPC's ERPCAUTH: authentication failed */
#define RS_BRPC_EINTERNAL  2001

typedef struct rs_brpc_header {
    uint32_t body_size;
    uint32_t meta_size;
} rs_brpc_header;

/* Parse and validate a 12-byte header: magic, meta_size <= body_size, body_size <= max_body.
 * RS_EPROTO with the reason (bad magic shows the bytes). */
int rs_brpc_header_parse(const uint8_t *p, uint64_t max_body, rs_brpc_header *h, rs_error *err);
void rs_brpc_header_write(uint8_t *p, uint32_t body_size, uint32_t meta_size);

/* Bump allocator for protobuf-c unpacking of RpcMeta: no malloc on the hot path; falls back to
 * malloc for oversized metas. Reset before each unpack; free_unpacked is never needed for arena
 * memory (but is harmless). */
typedef struct rs_brpc_arena {
    ProtobufCAllocator allocator;
    size_t used;
    _Alignas(16) uint8_t buf[4096];
} rs_brpc_arena;

void rs_brpc_arena_init(rs_brpc_arena *a);
static inline void rs_brpc_arena_reset(rs_brpc_arena *a) {
    a->used = 0;
}

/* Unpack RpcMeta with the arena; RS_EPROTO when the bytes are not a valid RpcMeta. The result
 * lives until the next reset; release with rs_brpc_meta_free. */
int rs_brpc_meta_unpack(rs_brpc_arena *a, const uint8_t *p, size_t len, Brpc__Policy__RpcMeta **out,
                        rs_error *err);
void rs_brpc_meta_free(rs_brpc_arena *a, Brpc__Policy__RpcMeta *m);

#endif
