/*
 * crc32c.h — CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of checkpoint
 * blocks and headers.
 *
 * rs_crc32c(0, buf, len) is the standard CRC-32C of buf (initial value ~0, final xor ~0, as in
 * iSCSI RFC 3720 and ext4); passing a previous result as `crc` continues it over more bytes, so
 * rs_crc32c(rs_crc32c(0, a, n), b, m) == rs_crc32c(0, a || b, n + m). The SSE4.2 `crc32`
 * instruction is used when the CPU has it (decided once, at run time); otherwise a portable
 * slicing-by-8 table.
 */
#ifndef RECSTORE_CRC32C_H
#define RECSTORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint32_t rs_crc32c(uint32_t crc, const void *buf, size_t len);

/* Which implementation runs in this process: "sse4.2" or "table". */
const char *rs_crc32c_impl(void);

/* Tests: 1 = use the table implementation from now on; 0 = back to what the CPU supports. */
void rs_crc32c_force_table(int on);

#ifdef __cplusplus
}
#endif
#endif
