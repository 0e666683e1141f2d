/*
 * grpc_tls.c — gRPC over TLS through gRPC core's SSL credentials: a server with
 * tls_cert=FILE;tls_key=FILE (PEM certificate chain and private key; ps_server
 * --tls_cert/--tls_key) serves only TLS; a client with tls_ca=FILE (PEM roots; ps_bench --tls_ca,
 * PSClient tls_ca=) connects with TLS and verifies the server's certificate against those roots and
 * the host name it dials (an IP address must be in the certificate's subjectAltName). Without the
 * options both ends are insecure, as before. A client without the right roots fails its first call
 * (UNAVAILABLE, handshake failed); a plain client of a TLS server likewise.
 */
#if RS_HAVE_GRPC

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc_security.h>

#include "transport/grpc_transport.h"

#define RS_GRPC_PEM_MAX (1u << 20)

/* The whole file as a NUL-terminated string (PEM is text); errors name the file. */
static int read_pem(const char *what, const char *path, char **out, rs_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return rs_error_errno(err, RS_EINVAL, errno, "grpc %s %s", what, path);
    char *buf = malloc(RS_GRPC_PEM_MAX + 1);
    size_t n = buf ? fread(buf, 1, RS_GRPC_PEM_MAX + 1, f) : 0;
    fclose(f);
    if (!buf) return rs_error_set(err, RS_ENOMEM, "grpc %s %s", what, path);
    if (n == 0 || n > RS_GRPC_PEM_MAX || !strstr(buf, "-----BEGIN ")) {
        free(buf);
        return rs_error_set(err, RS_EINVAL, "grpc %s %s: not a PEM file of at most %u bytes", what,
                            path, RS_GRPC_PEM_MAX);
    }
    buf[n] = '\0';
    *out = buf;
    return 0;
}

int rs_grpc_server_creds(const rs_grpc_options *o, grpc_server_credentials **out, rs_error *err) {
    if (!o->tls_cert[0] && !o->tls_key[0]) {
        *out = grpc_insecure_server_credentials_create();
        return 0;
    }
    if (!o->tls_cert[0] || !o->tls_key[0])
        return rs_error_set(err, RS_EINVAL, "grpc server: TLS needs both tls_cert and tls_key");
    char *cert = NULL, *key = NULL;
    int rc = read_pem("tls_cert", o->tls_cert, &cert, err);
    if (!rc) rc = read_pem("tls_key", o->tls_key, &key, err);
    if (!rc) {
        grpc_ssl_pem_key_cert_pair pair = {.private_key = key, .cert_chain = cert};
        *out = grpc_ssl_server_credentials_create(NULL, &pair, 1, 0, NULL);
        if (!*out)
            rc = rs_error_set(err, RS_EINVAL, "grpc server: gRPC refused the TLS key %s / cert %s",
                              o->tls_key, o->tls_cert);
    }
    if (key) memset(key, 0, strlen(key));
    free(key);
    free(cert);
    return rc;
}

int rs_grpc_channel_creds(const rs_grpc_options *o, grpc_channel_credentials **out, rs_error *err) {
    if (!o->tls_ca[0]) {
        *out = grpc_insecure_credentials_create();
        return 0;
    }
    char *ca = NULL;
    int rc = read_pem("tls_ca", o->tls_ca, &ca, err);
    if (rc) return rc;
    *out = grpc_ssl_credentials_create(ca, NULL, NULL, NULL);
    free(ca);
    if (!*out)
        return rs_error_set(err, RS_EINVAL, "grpc client: gRPC refused the TLS roots %s",
                            o->tls_ca);
    return 0;
}

#endif /* RS_HAVE_GRPC */
