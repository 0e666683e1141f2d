/*
 * recstore_msg.h — RecStore's ParameterService messages (csrc/proto/recstore_ps.proto) and one
 * call of the service on a shard, shared by the gRPC and baidu_std transports (recstore_msg.c).
 */
#ifndef RECSTORE_RECSTORE_MSG_H
#define RECSTORE_RECSTORE_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "recstore/recstore_wire.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rs_rsmsg_method {
    RS_RSMSG_GET = 0,     /* GetParameter */
    RS_RSMSG_PUT = 1,     /* PutParameter */
    RS_RSMSG_UPDATE = 2,  /* UpdateParameter */
    RS_RSMSG_INIT = 3,    /* InitEmbeddingTable */
    RS_RSMSG_COMMAND = 4, /* Command */
    RS_RSMSG_NUM_METHODS = 5,
} rs_rsmsg_method;

const char *rs_rsmsg_method_name(rs_rsmsg_method m);
/* "GetParameter" ... -> method; RS_EINVAL for other names. */
int rs_rsmsg_method_from_name(const char *name, size_t len, rs_rsmsg_method *out);

/* A decoded request: views into the message. payload is the method's bytes field (Get keys,
 * Put/Update row block, Init config_payload). */
typedef struct rs_rsmsg_request {
    const uint8_t *payload;
    size_t payload_len;
    int has_payload;
    const char *table; /* Update, Init */
    size_t table_len;
    rs_rsps_command_args cmd; /* Command */
} rs_rsmsg_request;

/* RS_EPROTO naming the message and field on malformed protobuf. */
int rs_rsmsg_decode(rs_rsmsg_method m, const uint8_t *msg, size_t len, rs_rsmsg_request *out,
                    rs_error *err);

/* The transport's buffer for a reply payload of up to cap bytes; NULL when out of memory. */
typedef struct rs_rsmsg_alloc {
    uint8_t *(*fn)(void *ctx, size_t cap);
    void *ctx;
} rs_rsmsg_alloc;

typedef struct rs_rsmsg_reply {
    rs_rsps_result res; /* code != OK: answer with an error status naming res.msg */
    int refused;        /* Update/Init answered success=false (res.msg says why) */
    uint8_t head[32];   /* the reply message, or its bytes before the payload */
    size_t head_len;
    size_t payload_len; /* bytes written into the alloc()ed buffer (Get block, fake data) */
} rs_rsmsg_reply;

/* Execute one call. attachment (may be NULL/0) replaces the request's bytes field when non-empty;
 * reply_in_attachment: the GetParameter block becomes the payload with an empty message (else it
 * follows head as field 1). Always returns 0; the outcome is in r. */
int rs_rsmsg_call(rs_rsps *s, rs_rsmsg_method m, const uint8_t *msg, size_t len,
                  const uint8_t *attachment, size_t attachment_len, int reply_in_attachment,
                  unsigned thread_slot, const rs_rsmsg_alloc *alloc, rs_rsmsg_reply *r);

/* ---- client side: recbench's requests on RecStore's wire ------------------------------------ */

/* RecStore's clients send at most this many keys per request (max_keys_per_request). */
#define RS_RSMSG_MAX_KEYS_PER_REQUEST 500

/* The RecStore method and message for keys [from, from + m) of a native request (GET -> keys,
 * PUT -> row block of rows, UPDATE -> UpdateParameter on `table` with the rows as gradients,
 * COMMAND "ping"/"ready" -> LOAD_FAKE_DATA of 0 bytes, "clear" -> CLEAR_PS). With attach != 0
 * the bytes field is left out and its bytes go to the attachment (baidu_std). size() gives the
 * message and attachment sizes; encode() writes them (msg_out, att_out). RS_EINVAL naming the
 * command for commands RecStore has no equivalent of. */
typedef struct rs_rsmsg_client_req {
    rs_rsmsg_method method;
    size_t msg_len, att_len;
} rs_rsmsg_client_req;
int rs_rsmsg_client_size(const rs_ps_request *req, size_t from, size_t m, const char *table,
                         int attach, rs_rsmsg_client_req *out, rs_error *err);
void rs_rsmsg_client_encode(const rs_ps_request *req, size_t from, size_t m, const char *table,
                            int attach, uint8_t *msg_out, uint8_t *att_out);

/* Decode the reply to such a request into resp (GET: m rows of value_size bytes at rows_out:
 * items of dim 0 become zero rows, other dims are cut or zero-padded to the row, as RecStore's
 * clients do; num_found counts items with dim > 0). UpdateParameter's success=false becomes
 * status RS_PS_INVALID_PAYLOAD with the reason. RS_EPROTO naming the fault on malformed replies
 * (a block that does not validate or has another item count). */
int rs_rsmsg_client_decode(rs_rsmsg_method method, const uint8_t *msg, size_t len,
                           const uint8_t *att, size_t att_len, size_t m, uint32_t value_size,
                           void *rows_out, rs_ps_response *resp, rs_error *err);

#ifdef __cplusplus
}
#endif
#endif
