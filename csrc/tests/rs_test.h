/*
 * rs_test.h — the tiny C unit-test harness. A test file defines `static void test_x(void)`
 * functions, lists them in RS_TEST_MAIN, and checks with RS_CHECK / RS_CHECK_EQ. Each test
 * binary ends with the line "<N> passed, <N> failed" and exits non-zero on any failure.
 */
#ifndef RS_TEST_H
#define RS_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static int rs_test_failed_checks;

#define RS_CHECK(cond)                                                                             \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            rs_test_failed_checks++;                                                               \
        }                                                                                          \
    } while (0)

#define RS_CHECK_EQ(a, b)                                                                          \
    do {                                                                                           \
        long long _a = (long long)(a), _b = (long long)(b);                                        \
        if (_a != _b) {                                                                            \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b,  \
                    _a, _b);                                                                       \
            rs_test_failed_checks++;                                                               \
        }                                                                                          \
    } while (0)

typedef struct {
    const char *name;
    void (*fn)(void);
} rs_test_case;

#define RS_TEST(fn)                                                                                \
    { #fn, fn }

#define RS_TEST_MAIN(...)                                                                          \
    int main(void) {                                                                               \
        rs_test_case cases[] = {__VA_ARGS__};                                                      \
        int passed = 0, failed = 0;                                                                \
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {                              \
            int before = rs_test_failed_checks;                                                    \
            cases[i].fn();                                                                         \
            if (rs_test_failed_checks == before) {                                                 \
                passed++;                                                                          \
            } else {                                                                               \
                failed++;                                                                          \
                fprintf(stderr, "FAIL %s\n", cases[i].name);                                       \
            }                                                                                      \
        }                                                                                          \
        printf("%d passed, %d failed\n", passed, failed);                                          \
        return failed ? 1 : 0;                                                                     \
    }

#endif
