/*
 * test_transport_options.c — the one syntax of transport option values (transport_options.c):
 * decimal integers only, one set of boolean words, and the same answer from every transport that
 * parses them (RC and gRPC here; brpc's max_pending_bytes in test_ps_brpc.py).
 */
#include <stdlib.h>
#include <string.h>

#include "recstore/rc.h"
#include "rs_test.h"
#include "transport/transport_options.h"
#if RS_HAVE_GRPC
#include "transport/grpc_transport.h"
#endif

static void test_integers_are_decimal_digits(void) {
    rs_error e = {0};
    uint64_t u = 0;
    int64_t i = 0;
    RS_CHECK_EQ(rs_transport_option_u64("t", "k", "16", 0, 100, &u, &e), 0);
    RS_CHECK_EQ(u, 16);
    RS_CHECK_EQ(rs_transport_option_u64("t", "k", "0", 0, 100, &u, &e), 0);
    RS_CHECK_EQ(rs_transport_option_u64("t", "k", "18446744073709551615", 0, UINT64_MAX, &u, &e),
                0);
    RS_CHECK(u == UINT64_MAX);
    const char *bad[] = {"0x10", "+5", " 5", "5 ", "", "-1", "1e3", "5k", "18446744073709551616"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        RS_CHECK_EQ(rs_transport_option_u64("t", "k", bad[k], 0, UINT64_MAX, &u, &e), RS_EINVAL);
        RS_CHECK(strstr(e.msg, "t option k=") && strstr(e.msg, "want an integer in 0.."));
    }
    RS_CHECK_EQ(rs_transport_option_u64("t", "k", "101", 0, 100, &u, &e), RS_EINVAL);
    RS_CHECK(strstr(e.msg, "0..100") != NULL);
    RS_CHECK_EQ(rs_transport_option_i64("t", "k", "-1", -1, 10, &i, &e), 0);
    RS_CHECK_EQ(i, -1);
    RS_CHECK_EQ(rs_transport_option_i64("t", "k", "-2", -1, 10, &i, &e), RS_EINVAL);
    RS_CHECK(strstr(e.msg, "-1..10") != NULL);
    RS_CHECK_EQ(rs_transport_option_i64("t", "k", "-0x1", -10, 10, &i, &e), RS_EINVAL);
    RS_CHECK_EQ(rs_transport_option_i64("t", "k", "-", -10, 10, &i, &e), RS_EINVAL);
    RS_CHECK_EQ(rs_transport_option_i64("t", "k", "--1", -10, 10, &i, &e), RS_EINVAL);
}

static void test_booleans_one_word_set(void) {
    rs_error e = {0};
    const char *yes[] = {"1", "true", "TRUE", "yes", "on", "t", "Y"};
    const char *no[] = {"0", "false", "False", "no", "off", "f", "n"};
    for (size_t k = 0; k < sizeof yes / sizeof *yes; k++) {
        int b = 0;
        RS_CHECK_EQ(rs_transport_option_bool("t", "k", yes[k], &b, &e), 0);
        RS_CHECK_EQ(b, 1);
        b = 1;
        RS_CHECK_EQ(rs_transport_option_bool("t", "k", no[k], &b, &e), 0);
        RS_CHECK_EQ(b, 0);
    }
    int b = 7;
    RS_CHECK_EQ(rs_transport_option_bool("t", "k", "2", &b, &e), RS_EINVAL);
    RS_CHECK_EQ(b, 7);
    RS_CHECK(strstr(e.msg, "t option k=2: want true or false") != NULL);
    RS_CHECK_EQ(rs_transport_option_bool("t", "k", "", &b, &e), RS_EINVAL);
}

/* RC used strtol base 0: "0x10" meant 16 there and was refused by brpc and gRPC. */
static void test_every_transport_refuses_hex(void) {
    rs_error e = {0};
    rs_rc_options o;
    rs_rc_options_default(&o);
    RS_CHECK_EQ(rs_rc_options_parse(&o, "slots_per_qp=0x10", &e), RS_EINVAL);
    RS_CHECK(strstr(e.msg, "RC option slots_per_qp=0x10: want an integer in 1..1024") != NULL);
    RS_CHECK_EQ(rs_rc_options_parse(&o, "slots_per_qp=010", &e), 0); /* decimal, not octal */
    RS_CHECK_EQ(o.slots, 10);
    RS_CHECK_EQ(rs_rc_options_parse(&o, "bind_core_offset=-1;numa_id=0", &e), 0);
    RS_CHECK_EQ(o.bind_core_offset, -1);
    RS_CHECK_EQ(rs_rc_options_parse(&o, "skip_client_copy=on", &e), 0);
    RS_CHECK_EQ(o.skip_client_copy, 1);
    RS_CHECK_EQ(rs_rc_options_parse(&o, "skip_client_copy=2", &e), RS_EINVAL);
#if RS_HAVE_GRPC
    rs_grpc_options g;
    RS_CHECK_EQ(rs_grpc_options_parse("max_frame_size=0x4000", 1, &g, &e), RS_EINVAL);
    RS_CHECK(strstr(e.msg, "grpc server option max_frame_size=0x4000") != NULL);
    RS_CHECK_EQ(rs_grpc_options_parse("malloc_tuning=off", 0, &g, &e), 0);
    RS_CHECK_EQ(g.malloc_tuning, 0);
    RS_CHECK_EQ(rs_grpc_options_parse("malloc_tuning=maybe", 0, &g, &e), RS_EINVAL);
#endif
}

/* RecStore's RECSTORE_BIND_CORE_OFFSET: read like the option, and refused by name, not ignored,
 * when it is not an integer (it used to leave the threads unbound without a word). */
static void test_bind_core_offset_variable(void) {
    rs_error e = {0};
    rs_rc_options o;
    setenv("RECSTORE_BIND_CORE_OFFSET", "3", 1);
    rs_rc_options_default(&o);
    RS_CHECK_EQ(o.bind_core_offset, 3);
    RS_CHECK_EQ(rs_rc_options_parse(&o, "bind_core_offset=5", &e), 0); /* the option wins */
    RS_CHECK_EQ(o.bind_core_offset, 5);
    setenv("RECSTORE_BIND_CORE_OFFSET", "0x3", 1);
    rs_rc_options_default(&o);
    RS_CHECK_EQ(rs_rc_options_parse(&o, NULL, &e), RS_EINVAL);
    RS_CHECK(strstr(e.msg, "RECSTORE_BIND_CORE_OFFSET=0x3") != NULL);
    unsetenv("RECSTORE_BIND_CORE_OFFSET");
    rs_rc_options_default(&o);
    RS_CHECK_EQ(o.bind_core_offset, -1);
    RS_CHECK_EQ(rs_rc_options_parse(&o, NULL, &e), 0);
}

/* a word option: the index of the word, or an error listing every word */
static void test_choice_words(void) {
    static const char *const three[] = {"auto", "plain", "stream"}, *const one[] = {"on"};
    rs_error e = {0};
    int w = -1;
    RS_CHECK_EQ(rs_transport_option_choice("RC", "client_copy", "stream", three, 3, &w, &e), 0);
    RS_CHECK_EQ(w, 2);
    RS_CHECK_EQ(rs_transport_option_choice("RC", "client_copy", "Stream", three, 3, &w, &e),
                RS_EINVAL);
    RS_CHECK(strcmp(e.msg, "RC option client_copy=Stream: expected auto, plain or stream") == 0);
    RS_CHECK_EQ(rs_transport_option_choice("x", "k", "", one, 1, &w, &e), RS_EINVAL);
    RS_CHECK(strcmp(e.msg, "x option k=: expected on") == 0);
    RS_CHECK_EQ(w, 2); /* untouched by the refusals */
}

RS_TEST_MAIN(RS_TEST(test_integers_are_decimal_digits), RS_TEST(test_booleans_one_word_set),
             RS_TEST(test_every_transport_refuses_hex), RS_TEST(test_bind_core_offset_variable),
             RS_TEST(test_choice_words))
