/*
 * auth.h — the shared-secret token of a PS deployment (ps_server --auth_token_file, clients'
 * auth_token_file): loaded from a file, never from a command line, never printed, compared in
 * constant time. brpc carries it in baidu_std's RpcMeta.authentication_data, gRPC in the
 * `authorization: Bearer <token>` metadata, the RC control plane in its attach request. A server
 * with a token refuses a request without it or with another one (an authentication error, counted
 * in the transport's auth_failures), and closes a connection after RS_AUTH_MAX_FAILURES of them.
 */
#ifndef RECSTORE_AUTH_H
#define RECSTORE_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "recstore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_AUTH_TOKEN_MAX    256 /* bytes */
#define RS_AUTH_MAX_FAILURES 3   /* refused requests after which a connection is closed */

typedef struct rs_auth_token {
    uint32_t len; /* 0 = no token */
    uint8_t bytes[RS_AUTH_TOKEN_MAX];
} rs_auth_token;

/* Read the token from `file`: its bytes without trailing whitespace; 1..RS_AUTH_TOKEN_MAX bytes,
 * printable ASCII (it travels in HTTP/2 metadata). Errors name the file, never its content. */
int rs_auth_token_load(const char *file, rs_auth_token *out, rs_error *err);

/* 1 if got[0..len) equals the token; the time taken depends only on the token's length. */
int rs_auth_token_equal(const rs_auth_token *t, const void *got, size_t len);

#ifdef __cplusplus
}
#endif
#endif
