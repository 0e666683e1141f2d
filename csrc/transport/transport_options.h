/*
 * transport_options.h — the "k=v;k=v" option strings that reach a transport through
 * rs_ps_server_opts.extra / rs_ps_client_opts.extra (--transport_options on the command line).
 * One splitter for every transport, so each only decides which keys it knows; unknown keys and
 * bad values are errors naming the option, never ignored.
 */
#ifndef RS_TRANSPORT_OPTIONS_H
#define RS_TRANSPORT_OPTIONS_H

#include <stdint.h>

#include "recstore/error.h"

/* Called once per "key=value" item; returns 0 or an RS_E* code with err filled. */
typedef int (*rs_transport_option_fn)(void *ctx, const char *key, const char *val, rs_error *err);

/* Split extra (NULL or "" = no options) on ';' and call fn for each item; empty items are skipped.
 * `who` ("brpc server", ...) prefixes error messages. RS_EINVAL for an item without '=' or longer
 * than 127 bytes. */
int rs_transport_options_each(const char *extra, const char *who, rs_transport_option_fn fn,
                              void *ctx, rs_error *err);
/* The same with any of the characters in seps as separators (the RC transports also take ','),
 * and spaces before a key skipped. */
int rs_transport_options_each_sep(const char *extra, const char *seps, const char *who,
                                  rs_transport_option_fn fn, void *ctx, rs_error *err);

/* Parse a decimal integer in [lo, hi] or fail with "<who> option <key>=<val>: want ...". */
int rs_transport_option_u64(const char *who, const char *key, const char *val, uint64_t lo,
                            uint64_t hi, uint64_t *out, rs_error *err);

#endif
