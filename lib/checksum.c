/*
 * checksum.c - CRC-32C (polynomial 0x1EDC6F41, reflected 0x82F63B78),
 * initial value ~0 and final xor ~0 applied inside, so chaining calls with
 * the previous result gives the CRC of the concatenation.
 */
#include "checksum.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BONSAI_HAVE_SSE42_PATH 1
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw(uint32_t crc, const uint8_t *p, size_t len)
{
    uint64_t c = crc;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
#endif

static uint32_t crc32c_sw(uint32_t crc, const uint8_t *p, size_t len)
{
    while (len--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return crc;
}

uint32_t bonsai_crc32c(uint32_t crc, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    crc = ~crc;
#ifdef BONSAI_HAVE_SSE42_PATH
    if (__builtin_cpu_supports("sse4.2"))
        return ~crc32c_hw(crc, p, len);
#endif
    return ~crc32c_sw(crc, p, len);
}
