/*
 * brpc_checksum.c — RpcMeta's checksum fields of baidu_std (bRPC 1.14+, apache/brpc#2967 and
 * #3407), read and verified by both ends of recbench's brpc transport.
 *
 * What bRPC checksums: the message bytes exactly as they travel (after compression, before
 * inflating), and, when checksum_with_attachment (field 13) is true, those bytes followed by the
 * attachment. The only algorithm is CRC32C (checksum_type 11 = 1): the standard CRC-32C, masked as
 * LevelDB masks stored CRCs (rotate right by 15 bits, add 0xa282ead8), sent as 4 big-endian bytes
 * in checksum_value (12). checksum_type 0 or absent means no checksum.
 *
 * Where bRPC accepts a checksum type it has no handler for without checking anything, recbench
 * refuses it by name; a checksum_value that is not 4 bytes, or does not match, is refused too.
 * recbench never sends checksums itself (its replies carry checksum_type 0, which bRPC accepts).
 */
#if RS_HAVE_PROTOBUF_C
#include "recstore/crc32c.h"
#include "transport/brpc_frame.h"

#define RS_CRC_MASK_DELTA 0xa282ead8u

static uint32_t unmask(uint32_t masked) {
    uint32_t rot = masked - RS_CRC_MASK_DELTA;
    return rot >> 17 | rot << 15;
}

int rs_brpc_checksum_read(const Brpc__Policy__RpcMeta *meta, rs_brpc_checksum *ck, rs_error *err) {
    *ck = (rs_brpc_checksum){0};
    int type = meta->has_checksum_type ? meta->checksum_type : RS_BRPC_CHECKSUM_NONE;
    if (type == RS_BRPC_CHECKSUM_NONE) return 0;
    if (type != RS_BRPC_CHECKSUM_CRC32C)
        return rs_error_set(err, RS_ENOTSUP,
                            "RpcMeta.checksum_type %d is not supported (recbench verifies none=0 "
                            "and crc32c=1)",
                            type);
    if (!meta->has_checksum_value || meta->checksum_value.len != 4)
        return rs_error_set(err, RS_EPROTO,
                            "RpcMeta.checksum_value holds %zu bytes; checksum_type 1 (crc32c) "
                            "needs 4",
                            meta->has_checksum_value ? meta->checksum_value.len : (size_t)0);
    const uint8_t *v = meta->checksum_value.data;
    uint32_t masked = (uint32_t)v[0] << 24 | (uint32_t)v[1] << 16 | (uint32_t)v[2] << 8 | v[3];
    ck->type = type;
    ck->with_attachment = meta->has_checksum_with_attachment && meta->checksum_with_attachment;
    ck->expected = unmask(masked);
    return 0;
}

int rs_brpc_checksum_check(const rs_brpc_checksum *ck, uint32_t crc, size_t msg_len, size_t att_len,
                           rs_error *err) {
    if (ck->type == RS_BRPC_CHECKSUM_NONE || crc == ck->expected) return 0;
    if (ck->with_attachment)
        return rs_error_set(err, RS_EPROTO,
                            "RpcMeta.checksum_value: CRC32C of the message and attachment "
                            "(%zu + %zu bytes) is 0x%08x, the frame says 0x%08x",
                            msg_len, att_len, crc, ck->expected);
    return rs_error_set(err, RS_EPROTO,
                        "RpcMeta.checksum_value: CRC32C of the message (%zu bytes) is 0x%08x, "
                        "the frame says 0x%08x",
                        msg_len, crc, ck->expected);
}

int rs_brpc_checksum_verify(const rs_brpc_checksum *ck, const uint8_t *msg, size_t msg_len,
                            const uint8_t *att, size_t att_len, rs_error *err) {
    if (ck->type == RS_BRPC_CHECKSUM_NONE) return 0;
    uint32_t crc = rs_crc32c(0, msg, msg_len);
    if (ck->with_attachment) crc = rs_crc32c(crc, att, att_len);
    return rs_brpc_checksum_check(ck, crc, msg_len, ck->with_attachment ? att_len : 0, err);
}

int rs_brpc_content_type_check(const Brpc__Policy__RpcMeta *meta, rs_error *err) {
    if (!meta->has_content_type || meta->content_type == 0) return 0;
    static const char *const names[] = {"protobuf", "json", "proto-json", "proto-text"};
    int t = meta->content_type;
    return rs_error_set(err, RS_ENOTSUP,
                        "RpcMeta.content_type %d (%s) is not supported (recbench reads "
                        "protobuf messages, content_type 0)",
                        t, t > 0 && t < 4 ? names[t] : "unknown");
}
#endif
