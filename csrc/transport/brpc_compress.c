/*
 * brpc_compress.c — RpcMeta.compress_type of baidu_std: bRPC compresses the serialized protobuf
 * message of a frame (never the attachment) with snappy (1, the raw snappy block format), gzip (2,
 * deflate in a gzip wrapper) or zlib (3, deflate in a zlib wrapper). recbench's server inflates
 * compressed requests and answers uncompressed (compress_type 0, which bRPC clients accept);
 * recbench's client inflates compressed responses. Any other value, and a codec this build lacks
 * (libsnappy-dev / zlib1g-dev at build time), is refused with a reason naming the value; nothing
 * is ever parsed as if it were uncompressed.
 *
 * The output never exceeds max_out bytes (the body limit), checked before and while inflating.
 */
#if RS_HAVE_PROTOBUF_C

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if RS_HAVE_SNAPPY
#include <snappy-c.h>
#endif
#if RS_HAVE_ZLIB
#include <zlib.h>
#endif

#include "transport/brpc_frame.h"

const char *rs_brpc_compress_name(int type) {
    switch (type) {
    case RS_BRPC_COMPRESS_NONE: return "none";
    case RS_BRPC_COMPRESS_SNAPPY: return "snappy";
    case RS_BRPC_COMPRESS_GZIP: return "gzip";
    case RS_BRPC_COMPRESS_ZLIB: return "zlib";
    case 4: return "lz4";
    }
    return "unknown";
}

static int grow(uint8_t **buf, size_t *cap, size_t need) {
    if (*cap >= need) return 0;
    size_t c = *cap ? *cap : 4096;
    while (c < need)
        c *= 2;
    uint8_t *p = realloc(*buf, c);
    if (!p) return -1;
    *buf = p;
    *cap = c;
    return 0;
}

int rs_brpc_decompress(int type, const uint8_t *in, size_t len, uint64_t max_out, uint8_t **buf,
                       size_t *cap, size_t *out_len, rs_error *err) {
    *out_len = 0;
    switch (type) {
    case RS_BRPC_COMPRESS_SNAPPY: {
#if RS_HAVE_SNAPPY
        size_t n = 0;
        if (snappy_uncompressed_length((const char *)in, len, &n) != SNAPPY_OK)
            return rs_error_set(err, RS_EPROTO, "snappy message of %zu bytes has no valid length",
                                len);
        if (n > max_out)
            return rs_error_set(err, RS_EPROTO,
                                "snappy message inflates to %zu bytes, over the %llu-byte limit", n,
                                (unsigned long long)max_out);
        if (grow(buf, cap, n ? n : 1)) return rs_error_set(err, RS_ENOMEM, "snappy: %zu bytes", n);
        if (snappy_uncompress((const char *)in, len, (char *)*buf, &n) != SNAPPY_OK)
            return rs_error_set(err, RS_EPROTO, "snappy message of %zu bytes is corrupt", len);
        *out_len = n;
        return 0;
#else
        return rs_error_set(err, RS_ENOTSUP,
                            "compress_type 1 (snappy): recbench was built without libsnappy-dev");
#endif
    }
    case RS_BRPC_COMPRESS_GZIP:
    case RS_BRPC_COMPRESS_ZLIB: {
#if RS_HAVE_ZLIB
        const char *name = type == RS_BRPC_COMPRESS_GZIP ? "gzip" : "zlib";
        z_stream z;
        memset(&z, 0, sizeof z);
        if (inflateInit2(&z, type == RS_BRPC_COMPRESS_GZIP ? 15 + 16 : 15) != Z_OK)
            return rs_error_set(err, RS_ENOMEM, "%s: inflateInit2 failed", name);
        z.next_in = (Bytef *)in;
        z.avail_in = (uInt)len;
        size_t n = 0;
        int zr = Z_OK;
        while (zr != Z_STREAM_END) {
            if (n == *cap && grow(buf, cap, n + (len > 4096 ? 2 * len : 4096))) {
                inflateEnd(&z);
                return rs_error_set(err, RS_ENOMEM, "%s: out of memory", name);
            }
            size_t room = *cap - n;
            if (room > max_out - n + 1) room = max_out - n + 1; /* one byte past: detect over */
            if (room > UINT32_MAX) room = UINT32_MAX;
            z.next_out = *buf + n;
            z.avail_out = (uInt)room;
            zr = inflate(&z, Z_NO_FLUSH);
            n += room - z.avail_out;
            if (n > max_out) {
                inflateEnd(&z);
                return rs_error_set(err, RS_EPROTO, "%s message inflates past the %llu-byte limit",
                                    name, (unsigned long long)max_out);
            }
            if (zr == Z_STREAM_END) break;
            if (zr != Z_OK && zr != Z_BUF_ERROR) {
                inflateEnd(&z);
                return rs_error_set(err, RS_EPROTO, "%s message of %zu bytes is corrupt (%s)", name,
                                    len, z.msg ? z.msg : "inflate failed");
            }
            if (zr == Z_BUF_ERROR && z.avail_in == 0) {
                inflateEnd(&z);
                return rs_error_set(err, RS_EPROTO, "%s message of %zu bytes is truncated", name,
                                    len);
            }
        }
        int trailing = z.avail_in != 0;
        inflateEnd(&z);
        if (trailing)
            return rs_error_set(err, RS_EPROTO, "%s message has bytes after its end", name);
        *out_len = n;
        return 0;
#else
        return rs_error_set(err, RS_ENOTSUP,
                            "compress_type %d (%s): recbench was built without "
                            "zlib1g-dev",
                            type, rs_brpc_compress_name(type));
#endif
    }
    }
    return rs_error_set(err, RS_ENOTSUP,
                        "compress_type %d (%s) is not supported (recbench reads none=0, snappy=1, "
                        "gzip=2, zlib=3)",
                        type, rs_brpc_compress_name(type));
}

#endif /* RS_HAVE_PROTOBUF_C */
