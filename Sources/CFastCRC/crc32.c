// CRC-32 by folding (Gopal et al., "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction",
// Intel, 2009), for the bit-reflected polynomial 0xEDB88320 that zlib uses.
//
// The message, with the initial CRC's complement XORed into its first four bytes, is a polynomial M over GF(2).
// Folding replaces its leading 128 bits by their product with x^(distance) mod P, XORed into the 128 bits that
// follow, which keeps M's remainder mod P. Four 128-bit lanes are folded 64 bytes ahead at a time, then merged
// into one lane that is folded 16 bytes at a time. What is left is a 16-byte block with the same remainder as
// the whole message, ending where the message ends, so zlib's CRC of that block (from a zero register) is the
// message's CRC; zlib then continues over the bytes after the last whole 16-byte block.
//
// The 512-bit version (AVX-512 VPCLMULQDQ) does the same on four 128-bit lanes per register: four registers
// are folded 256 bytes ahead, merged into one that is folded 64 bytes at a time, whose four lanes are merged
// as above. Each fold by d bits multiplies the lane's low half by x^(d+32) mod P and its high half by
// x^(d-32) mod P; the constants are those remainders bit-reflected and shifted left by one, as carry-less
// multiplication of reflected operands requires: d = 2048 (0x11542778a, 0x1322d1430), d = 512 (0x154442bd4,
// 0x1c6e41596) and d = 128 (0x1751997d0, 0x0ccaa009e). Checked against zlib by CRC32Tests for every length and alignment up to several KiB.

#include "CFastCRC.h"

#include <zlib.h>

uint32_t mediacache_crc32_zlib(uint32_t crc, const unsigned char *buf, size_t len) {
  return (uint32_t)crc32_z(crc, buf, len);
}

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#include <cpuid.h>
#include <immintrin.h>

#define MEDIACACHE_HAVE_CLMUL 1

// 0: zlib; 1: PCLMULQDQ on 128-bit lanes; 2: VPCLMULQDQ on 512-bit lanes (AVX-512F, with the OS saving the
// zmm registers).
static int detect_level(void) {
  unsigned int eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
  if ((ecx & bit_PCLMUL) == 0 || (edx & bit_SSE2) == 0) return 0;
  const unsigned int osxsave = 1u << 27;
  if ((ecx & osxsave) == 0) return 1;
  unsigned int ebx7, ecx7;
  if (!__get_cpuid_count(7, 0, &eax, &ebx7, &ecx7, &edx)) return 1;
  const unsigned int avx512f = 1u << 16, vpclmulqdq = 1u << 10;
  if ((ebx7 & avx512f) == 0 || (ecx7 & vpclmulqdq) == 0) return 1;
  unsigned int xcr0, xcr0High;
  __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(xcr0High) : "c"(0));
  // SSE, AVX, opmask, upper halves of zmm0-15, zmm16-31.
  return (xcr0 & 0xE6) == 0xE6 ? 2 : 1;
}

// -1 unknown; a benign race (every thread computes the same value).
static volatile int detected_level = -1;

static int cpu_level(void) {
  int level = detected_level;
  if (level < 0) {
    level = detect_level();
    detected_level = level;
  }
  return level;
}

__attribute__((target("pclmul,sse2"))) static inline __m128i fold(__m128i x, __m128i k, __m128i next) {
  __m128i low = _mm_clmulepi64_si128(x, k, 0x00);
  __m128i high = _mm_clmulepi64_si128(x, k, 0x11);
  return _mm_xor_si128(_mm_xor_si128(low, high), next);
}

// Folds the 16-byte blocks left (`len` a multiple of 16) into `x`, then reduces its 128 bits to the CRC: zlib's
// CRC of them, started from 0xffffffff, is that reduction. The end of both folding loops below.
__attribute__((target("pclmul,sse2"))) static inline uint32_t fold_rest(__m128i x, __m128i k3k4,
                                                                        const unsigned char *buf, size_t len) {
  while (len >= 16) {
    x = fold(x, k3k4, _mm_loadu_si128((const __m128i *)(const void *)buf));
    buf += 16;
    len -= 16;
  }
  unsigned char block[16];
  _mm_storeu_si128((__m128i *)(void *)block, x);
  return (uint32_t)crc32_z(0xffffffffUL, block, 16);
}

// `len` is a multiple of 16, at least 64.
__attribute__((target("pclmul,sse2"))) static uint32_t crc32_clmul(uint32_t crc, const unsigned char *buf,
                                                                    size_t len) {
  const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
  const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
  __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)buf);
  __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(buf + 16));
  __m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(buf + 32));
  __m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(buf + 48));
  x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)~crc));
  buf += 64;
  len -= 64;
  while (len >= 64) {
    x0 = fold(x0, k1k2, _mm_loadu_si128((const __m128i *)(const void *)buf));
    x1 = fold(x1, k1k2, _mm_loadu_si128((const __m128i *)(const void *)(buf + 16)));
    x2 = fold(x2, k1k2, _mm_loadu_si128((const __m128i *)(const void *)(buf + 32)));
    x3 = fold(x3, k1k2, _mm_loadu_si128((const __m128i *)(const void *)(buf + 48)));
    buf += 64;
    len -= 64;
  }
  x0 = fold(x0, k3k4, x1);
  x0 = fold(x0, k3k4, x2);
  x0 = fold(x0, k3k4, x3);
  return fold_rest(x0, k3k4, buf, len);
}
__attribute__((target("avx512f,vpclmulqdq"))) static inline __m512i fold512(__m512i x, __m512i k, __m512i next) {
  __m512i low = _mm512_clmulepi64_epi128(x, k, 0x00);
  __m512i high = _mm512_clmulepi64_epi128(x, k, 0x11);
  return _mm512_ternarylogic_epi64(low, high, next, 0x96);
}

// `len` is a multiple of 16, at least 256.
__attribute__((target("avx512f,vpclmulqdq,pclmul,sse2"))) static uint32_t crc32_vpclmul(uint32_t crc,
    const unsigned char *buf, size_t len) {
  const __m512i k2048 = _mm512_broadcast_i32x4(_mm_set_epi64x(0x1322d1430LL, 0x11542778aLL));
  const __m512i k512 = _mm512_broadcast_i32x4(_mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL));
  const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
  __m512i x0 = _mm512_loadu_si512((const void *)buf);
  __m512i x1 = _mm512_loadu_si512((const void *)(buf + 64));
  __m512i x2 = _mm512_loadu_si512((const void *)(buf + 128));
  __m512i x3 = _mm512_loadu_si512((const void *)(buf + 192));
  x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)~crc)));
  buf += 256;
  len -= 256;
  while (len >= 256) {
    x0 = fold512(x0, k2048, _mm512_loadu_si512((const void *)buf));
    x1 = fold512(x1, k2048, _mm512_loadu_si512((const void *)(buf + 64)));
    x2 = fold512(x2, k2048, _mm512_loadu_si512((const void *)(buf + 128)));
    x3 = fold512(x3, k2048, _mm512_loadu_si512((const void *)(buf + 192)));
    buf += 256;
    len -= 256;
  }
  x0 = fold512(x0, k512, x1);
  x0 = fold512(x0, k512, x2);
  x0 = fold512(x0, k512, x3);
  while (len >= 64) {
    x0 = fold512(x0, k512, _mm512_loadu_si512((const void *)buf));
    buf += 64;
    len -= 64;
  }
  __m128i y = _mm512_extracti32x4_epi32(x0, 0);
  y = fold(y, k3k4, _mm512_extracti32x4_epi32(x0, 1));
  y = fold(y, k3k4, _mm512_extracti32x4_epi32(x0, 2));
  y = fold(y, k3k4, _mm512_extracti32x4_epi32(x0, 3));
  return fold_rest(y, k3k4, buf, len);
}
#endif

int mediacache_crc32_level(void) {
#ifdef MEDIACACHE_HAVE_CLMUL
  return cpu_level();
#else
  return 0;
#endif
}

uint32_t mediacache_crc32_at_level(int level, uint32_t crc, const unsigned char *buf, size_t len) {
#ifdef MEDIACACHE_HAVE_CLMUL
  if (level > cpu_level()) level = cpu_level();
  // Below a few hundred bytes zlib's tables are as fast, and the folds need 64 or 256 bytes to start.
  if (level >= 1 && len >= 256) {
    size_t folded = len & ~(size_t)15;
    crc = level >= 2 ? crc32_vpclmul(crc, buf, folded) : crc32_clmul(crc, buf, folded);
    buf += folded;
    len -= folded;
  }
#else
  (void)level;
#endif
  return len == 0 ? crc : (uint32_t)crc32_z(crc, buf, len);
}

uint32_t mediacache_crc32(uint32_t crc, const unsigned char *buf, size_t len) {
  return mediacache_crc32_at_level(2, crc, buf, len);
}
