/*
 * ps.h — the parameter-server data model every transport shares: operations, status codes, the
 * decoded request/response views, the shard handler, and the payload codec.
 *
 * Data model: key u64; value a fixed-size row of value_size bytes (value_size/4 float32).
 *   GET     keys -> rows (a missing key reads as a zero row)
 *   PUT     keys + rows
 *   UPDATE  keys + float32 deltas, added element-wise (missing key: zero row + delta)
 *   COMMAND "ping" | "ready" | "stats" | "clear" -> reply text
 *           "verify" -> the engine's full consistency check (rs_kv_verify), writers held off
 *           "save <dir>" | "load <dir>" start a checkpoint job on its own thread ("started ...");
 *           "checkpoint_status" -> "idle" | "running: ..." | "done: <summary>" | "failed: <error>"
 * Sharding: shard = rs_shard_of(key, num_shards) (recstore/hash.h), decided by the client; a
 * server rejects keys that are not its shard's with RS_PS_WRONG_SHARD.
 *
 * Payload codec: one PSRequest / PSResponse message (csrc/proto/ps.proto, protobuf wire format),
 * encoded and decoded by ps_codec.c for every transport. Key and row bytes are either inline in the
 * message's bytes fields (gRPC) or in a separate attachment that follows the message (baidu_std,
 * RC slots); decoding never copies them: the request/response structs hold views into the
 * transport's buffer. Keys are little-endian u64 and may be unaligned: read them with rs_ps_key().
 *
 * PSRequest  { 1: uint32 shard, 2: uint32 value_size, 3: bytes keys, 4: bytes rows,
 *              5: string command, 6: uint32 num_keys, 7: uint32 rows_len }
 * PSResponse { 1: int32 status, 2: string error, 3: uint32 value_size, 4: bytes rows,
 *              5: string reply, 6: uint32 num_found, 7: uint32 rows_len }
 * With an attachment, keys/rows fields are absent and num_keys/rows_len give the split of the
 * attachment: request attachment = keys (num_keys*8) then rows (rows_len); response attachment =
 * rows (rows_len).
 */
#ifndef RECSTORE_PS_H
#define RECSTORE_PS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "recstore/error.h"
#include "recstore/kv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* RecStore's defaults, the ones every entry point starts from (exported to Python as
 * recbench._ps.DEFAULT_VALUE_SIZE / DEFAULT_BATCH_KEYS). */
#define RS_PS_DEFAULT_VALUE_SIZE 512u /* row bytes: 128 float32 */
#define RS_PS_DEFAULT_BATCH_KEYS 500u /* keys per request, and a server's max_keys_per_request */

typedef enum rs_ps_op {
    RS_PS_GET = 1,
    RS_PS_PUT = 2,
    RS_PS_UPDATE = 3,
    RS_PS_COMMAND = 4,
} rs_ps_op;

/* RPC method names ("Get", "Put", "Update", "Command"): baidu_std method_name, gRPC path suffix. */
const char *rs_ps_op_method(rs_ps_op op);
/* Method name -> op; RS_EINVAL for an unknown name. */
int rs_ps_op_from_method(const char *name, size_t len, rs_ps_op *out);

typedef enum rs_ps_status {
    RS_PS_OK = 0,
    RS_PS_INVALID_PAYLOAD = 1,     /* sizes inconsistent, bad encoding, unknown command */
    RS_PS_WRONG_SHARD = 2,         /* shard id or a key's shard is not this server's */
    RS_PS_BATCH_TOO_LARGE = 3,     /* num_keys > max_keys_per_request */
    RS_PS_VALUE_SIZE_MISMATCH = 4, /* request value_size differs from the server's */
    RS_PS_UNKNOWN_METHOD = 5,
    RS_PS_CAPACITY = 6, /* the shard's KV engine is full */
    RS_PS_INTERNAL = 7,
    RS_PS_SHUTTING_DOWN = 8,
    RS_PS_CHECKPOINT = 9,       /* a checkpoint save/load failed; the error names file and offset */
    RS_PS_UNAUTHENTICATED = 10, /* no token or a wrong one (recstore/auth.h) */
} rs_ps_status;

const char *rs_ps_status_name(int status);

/* Decoded request: views into a transport-owned buffer. */
typedef struct rs_ps_request {
    rs_ps_op op;
    uint32_t shard;
    uint32_t value_size; /* client's row size; 0 = accept the server's (PUT/UPDATE rows_len must
                          * still be num_keys * the server's value_size) */
    uint32_t num_keys;
    const uint8_t *keys; /* num_keys * 8 bytes */
    const uint8_t *rows; /* PUT rows / UPDATE deltas (rows_len bytes) or NULL */
    size_t rows_len;
    const char *command; /* COMMAND name, not NUL-terminated */
    size_t command_len;
} rs_ps_request;

/* Response metadata; GET rows are written by the handler into a transport-provided buffer. */
typedef struct rs_ps_response {
    int32_t status; /* rs_ps_status */
    uint32_t value_size;
    uint32_t num_found;
    const uint8_t *rows; /* decoded responses: view of rows_len bytes; NULL when none */
    size_t rows_len;
    char error[256];  /* status != OK: readable reason, NUL-terminated */
    char reply[2048]; /* COMMAND reply text, NUL-terminated */
    uint32_t flags;   /* RS_PS_RESP_*: how the transport delivered it (not on the wire) */
} rs_ps_response;
#define RS_PS_RESP_GATHERED 1u /* RC GET: rows scatter-gathered from the server's value store */

static inline uint64_t rs_ps_key(const uint8_t *keys, size_t i) {
    uint64_t k;
    memcpy(&k, keys + i * 8, 8); /* little-endian hosts only (x86_64, aarch64) */
    return k;
}

/* ---- shard handler (ps_shard.c) -------------------------------------------------------------- */

typedef struct rs_ps_shard_config {
    uint32_t shard_id;
    uint32_t num_shards;
    rs_kv_config kv; /* index type, value_size (> 0, multiple of 4), capacity, path */
    uint32_t max_keys_per_request;
    /* The threads the server's transport serves connections with, reported in stats as
     * server_threads (a brpc client shares that many sockets per server); 0 = not reported. */
    uint32_t server_threads;
    /* The directory COMMAND save/load may use (created if missing): a command's directory is
     * taken relative to it, or must lie inside it; NULL = those commands are refused (a client
     * must not make the server write files anywhere it can). */
    const char *checkpoint_root;
} rs_ps_shard_config;

typedef struct rs_ps_shard rs_ps_shard;

/* Per-shard counters (summed over threads when read). */
typedef struct rs_ps_shard_stats {
    uint64_t handled_get, handled_put, handled_update, handled_command, handled_error;
    uint64_t keys_get, keys_put, keys_update, keys_found;
} rs_ps_shard_stats;

int rs_ps_shard_open(const rs_ps_shard_config *cfg, rs_ps_shard **out, rs_error *err);
void rs_ps_shard_close(rs_ps_shard *s);
uint32_t rs_ps_shard_value_size(const rs_ps_shard *s);
uint32_t rs_ps_shard_id(const rs_ps_shard *s);
/* The shard's engine and batch limit, for transports that read rows without the handler (RC
 * direct_sg GET, index_only diagnostics). The engine stays owned by the shard. */
rs_kv *rs_ps_shard_kv(rs_ps_shard *s);
uint32_t rs_ps_shard_max_keys(const rs_ps_shard *s);

/* Bytes of GET rows the response to req needs (num_keys * value_size; 0 for other ops or when
 * the request is invalid). Transports size their output buffer with it. */
size_t rs_ps_shard_reply_rows_bytes(const rs_ps_shard *s, const rs_ps_request *req);

/* Validate and execute one request. GET rows go to rows_out (rows_cap bytes). Fills resp (status,
 * error text, reply, num_found, value_size, rows_len). Returns 0 when resp is ready to send, even
 * for error statuses; a negative code only for failures where no response can be formed.
 * Thread-safe: many transport threads call it concurrently. `thread_slot` (0..63) selects the
 * per-thread counter block so no shared line is written on the hot path. */
int rs_ps_shard_handle(rs_ps_shard *s, const rs_ps_request *req, rs_ps_response *resp,
                       void *rows_out, size_t rows_cap, unsigned thread_slot);

void rs_ps_shard_get_stats(const rs_ps_shard *s, rs_ps_shard_stats *out);

/* The number a COMMAND reply such as stats' gives for key ("key=N", key at the start of the
 * reply or after a space); 0 when the reply does not name key. Clients learn a server's
 * max_keys_per_request and server_threads with it. */
uint64_t rs_ps_reply_u64(const char *reply, const char *key);

/* For wire front-ends that drive the shard's engine themselves (RecStore's ParameterService,
 * recstore_ps.c): enter/leave bracket engine calls (the "clear" guard), count adds to
 * thread_slot's counter block (op RS_PS_GET/PUT/UPDATE/COMMAND, keys, keys found, error != 0
 * counts a handled_error instead), clear empties the shard as the "clear" command does. */
void rs_ps_shard_enter(rs_ps_shard *s, unsigned thread_slot);
void rs_ps_shard_leave(rs_ps_shard *s, unsigned thread_slot);
void rs_ps_shard_count(rs_ps_shard *s, unsigned thread_slot, rs_ps_op op, uint64_t keys,
                       uint64_t found, int error);
int rs_ps_shard_clear(rs_ps_shard *s, uint64_t *removed);

/* Checkpoints, synchronous (the COMMAND job thread and ps_server --load_checkpoint call these):
 * the shard's rows to / from <dir>/shard_<id>.rsckpt (recstore/kv_checkpoint.h). Save runs while
 * requests continue.
 * Load refuses a damaged or mismatched file with the shard unchanged. An empty shard is loaded in
 * one pass with requests held off (a failure clears what that pass inserted); a shard holding
 * rows has the whole file verified first, with requests served, then holds requests off while it
 * replaces its rows from a second pass. reply (cap bytes) gets a one-line summary. */
int rs_ps_shard_save(rs_ps_shard *s, const char *dir, char *reply, size_t cap, rs_error *err);
/* A directory a client named (dir[0..len), not NUL-terminated) resolved inside the shard's
 * checkpoint_root: relative to it, or absolute under it, no ".." component. 0 with the path in
 * out; RS_ENOTSUP when the shard has no root (checkpoint commands are off) or RS_EINVAL when the
 * path leaves it, with the reason in why. */
int rs_ps_shard_checkpoint_dir(const rs_ps_shard *s, const char *dir, size_t len, char *out,
                               size_t cap, char *why, size_t why_cap);
int rs_ps_shard_load(rs_ps_shard *s, const char *dir, char *reply, size_t cap, rs_error *err);

/* ---- payload codec (ps_codec.c) -------------------------------------------------------------- */

/* Encoded size of req's PSRequest; attach != 0 leaves keys/rows out (they go in an attachment). */
size_t rs_ps_request_encoded_size(const rs_ps_request *req, int attach);
/* Encode into out (at least rs_ps_request_encoded_size bytes); returns bytes written. */
size_t rs_ps_request_encode(const rs_ps_request *req, int attach, uint8_t *out);
/* rs_ps_request_decode's op for a request that names its own (PSRequest.method, field 8: what
 * each message of the gRPC Stream method carries). */
#define RS_PS_OP_FROM_MESSAGE ((rs_ps_op)0)
/* Append PSRequest.method = op (field 8) after an encoded request, for the gRPC Stream method;
 * writes at most RS_PS_METHOD_FIELD_BYTES bytes and returns how many. */
#define RS_PS_METHOD_FIELD_BYTES 2
size_t rs_ps_request_encode_method(rs_ps_op op, uint8_t *out);
/* Decode a PSRequest for op from msg; attachment (may be NULL/0) holds keys then rows when the
 * message carries num_keys/rows_len instead of inline bytes. RS_EPROTO with a reason on malformed
 * input; never reads outside [msg, msg+len) or the attachment. */
int rs_ps_request_decode(rs_ps_op op, const uint8_t *msg, size_t len, const uint8_t *attachment,
                         size_t attachment_len, rs_ps_request *out, rs_error *err);

/* Bytes of the PSResponse encoding that precede the rows. With attach == 0 the rows field is
 * encoded last, so a transport writes this header and then the rows_len row bytes right after it
 * (gather-write, no copy); with attach != 0 the rows travel in an attachment. */
size_t rs_ps_response_header_size(const rs_ps_response *resp, int attach);
size_t rs_ps_response_encode_header(const rs_ps_response *resp, int attach, uint8_t *out);
/* Decode a PSResponse; rows view points into msg (inline) or attachment. */
int rs_ps_response_decode(const uint8_t *msg, size_t len, const uint8_t *attachment,
                          size_t attachment_len, rs_ps_response *out, rs_error *err);

#ifdef __cplusplus
}
#endif
#endif
