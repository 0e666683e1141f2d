/*
 * auth.c — loading and comparing the deployment token (recstore/auth.h). The comparison touches
 * every byte of the token whatever the input, and folds the length difference into the result, so
 * its time tells an attacker nothing about how much of a guess was right.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "recstore/auth.h"

int rs_auth_token_load(const char *file, rs_auth_token *out, rs_error *err) {
    memset(out, 0, sizeof *out);
    if (!file || !file[0]) return rs_error_set(err, RS_EINVAL, "auth token file name is empty");
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return rs_error_errno(err, RS_EINVAL, errno, "auth token file %s", file);
    uint8_t buf[RS_AUTH_TOKEN_MAX + 2];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, sizeof buf - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return rs_error_errno(err, RS_EIO, e, "auth token file %s: read", file);
        }
        if (r == 0 || (n += (size_t)r) == sizeof buf) break;
    }
    close(fd);
    while (n &&
           (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        n--;
    if (n == 0 || n > RS_AUTH_TOKEN_MAX)
        return rs_error_set(err, RS_EINVAL, "auth token file %s: the token must be 1..%d bytes",
                            file, RS_AUTH_TOKEN_MAX);
    for (size_t i = 0; i < n; i++)
        if (buf[i] < 0x21 || buf[i] > 0x7e)
            return rs_error_set(err, RS_EINVAL,
                                "auth token file %s: byte %zu is not printable ASCII (the token "
                                "travels in gRPC metadata)",
                                file, i);
    memcpy(out->bytes, buf, n);
    out->len = (uint32_t)n;
    memset(buf, 0, sizeof buf);
    return 0;
}

int rs_auth_token_equal(const rs_auth_token *t, const void *got, size_t len) {
    const volatile uint8_t *g = got;
    unsigned diff = (unsigned)(len != t->len);
    for (uint32_t i = 0; i < t->len; i++)
        diff |= (unsigned)(t->bytes[i] ^ (len ? g[i % len] : 0));
    return diff == 0 && t->len > 0;
}
