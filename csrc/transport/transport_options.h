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

/* Upper bound of every *_ms option (an hour): a larger timeout or interval is a typo. */
#define RS_TRANSPORT_OPTION_MAX_MS 3600000u

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

/* Values: one syntax for every transport, so an option string means the same to all of them.
 * Integers are decimal digits only ("-" first for signed ones): "0x10", "+5", " 5", "1e3" and
 * "5k" are errors. Booleans are, case-insensitively, 1 true yes on t y / 0 false no off f n (the
 * spellings of the Python flags' bool parser too). Each fails with RS_EINVAL and
 * "<who> option <key>=<val>: want ..." naming the range or the words. */
int rs_transport_option_u64(const char *who, const char *key, const char *val, uint64_t lo,
                            uint64_t hi, uint64_t *out, rs_error *err);
int rs_transport_option_i64(const char *who, const char *key, const char *val, int64_t lo,
                            int64_t hi, int64_t *out, rs_error *err);
int rs_transport_option_bool(const char *who, const char *key, const char *val, int *out,
                             rs_error *err);
/* One of n words (exact, case-sensitive): *out is its index in names; else RS_EINVAL and
 * "<who> option <key>=<val>: expected a, b or c". */
int rs_transport_option_choice(const char *who, const char *key, const char *val,
                               const char *const *names, int n, int *out, rs_error *err);

#endif
