#ifndef MEDIACACHE_CFASTCRC_H
#define MEDIACACHE_CFASTCRC_H

#include <stddef.h>
#include <stdint.h>

/// zlib's CRC-32 (gzip's polynomial and conditioning: `crc32_z(crc, buf, len)` gives the same value), computed
/// by folding with carry-less multiplication on x86-64 CPUs that have PCLMULQDQ (256 bytes at a time with
/// AVX-512 VPCLMULQDQ), and by zlib everywhere else and for short inputs.
uint32_t mediacache_crc32(uint32_t crc, const unsigned char *buf, size_t len);

/// What `mediacache_crc32` uses on this CPU: 0 zlib, 1 PCLMULQDQ (128-bit lanes), 2 VPCLMULQDQ (AVX-512).
int mediacache_crc32_level(void);

/// `mediacache_crc32` limited to `level` (or this CPU's level if lower), so tests can check every path.
uint32_t mediacache_crc32_at_level(int level, uint32_t crc, const unsigned char *buf, size_t len);

/// zlib's own CRC-32, for tests and benchmarks that compare against it.
uint32_t mediacache_crc32_zlib(uint32_t crc, const unsigned char *buf, size_t len);

#endif
