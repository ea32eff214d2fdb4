/* SPDX-License-Identifier: MIT */
/*
 * checksum.c - CRC-32C (polynomial 0x1EDC6F41, reflected 0x82F63B78),
 * initial value ~0 and final xor ~0 applied inside, so chaining calls with
 * the previous result gives the CRC of the concatenation.
 *
 * The crc32 instruction takes 3 cycles but can start one a cycle, so one
 * chain of them over an image runs at a third of the speed the CPU has.
 * Long buffers are cut in three equal lanes, each lane's CRC computed in
 * its own chain, and the three joined: the register after lanes a, b, c is
 * shift(shift(crc_a, |b|) ^ crc_b, |c|) ^ crc_c, where crc_b and crc_c
 * start from 0 and shift(r, n) is the register n zero bytes after r,
 * r(x) * x^(8n) mod P.  A carry-less multiply and one crc32 instruction
 * make the shift.
 */
#include "checksum.h"

#include <string.h>

#define CRC32C_POLY 0x82F63B78u

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BONSAI_HAVE_SSE42_PATH 1
#include <nmmintrin.h>
#include <wmmintrin.h>

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

/* Lane lengths, longest first, each with x^(8 * bytes - 33) mod P
 * (reflected): the crc32 instruction multiplies the carry-less product by
 * x^33, so that the two together multiply by x^(8 * bytes). */
static const struct {
    size_t bytes;
    uint32_t shift_by;
} lanes[] = {{1024, 0x170076FAu}, {256, 0xB9E02B86u}, {64, 0x9E4ADDF8u}};

__attribute__((target("sse4.2,pclmul"))) static uint32_t
crc_shift(uint32_t crc, uint32_t shift_by)
{
    __m128i prod = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)crc),
                                        _mm_cvtsi32_si128((int)shift_by), 0);
    return (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(prod));
}

__attribute__((target("sse4.2,pclmul"))) static uint32_t
crc32c_lanes(uint32_t crc, const uint8_t *p, size_t len)
{
    for (size_t l = 0; l < sizeof lanes / sizeof lanes[0]; l++) {
        size_t n = lanes[l].bytes;
        while (len >= 3 * n) {
            uint64_t a = crc, b = 0, c = 0;
            for (size_t i = 0; i < n; i += 8) {
                uint64_t wa, wb, wc;
                memcpy(&wa, p + i, 8);
                memcpy(&wb, p + n + i, 8);
                memcpy(&wc, p + 2 * n + i, 8);
                a = _mm_crc32_u64(a, wa);
                b = _mm_crc32_u64(b, wb);
                c = _mm_crc32_u64(c, wc);
            }
            uint32_t ab = crc_shift((uint32_t)a, lanes[l].shift_by) ^
                          (uint32_t)b;
            crc = crc_shift(ab, lanes[l].shift_by) ^ (uint32_t)c;
            p += 3 * n;
            len -= 3 * n;
        }
    }
    return crc32c_hw(crc, p, len);
}
#endif

static uint32_t crc32c_sw(uint32_t crc, const uint8_t *p, size_t len)
{
    while (len--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (CRC32C_POLY & (0u - (crc & 1u)));
    }
    return crc;
}

uint32_t bonsai_crc32c(uint32_t crc, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    crc = ~crc;
#ifdef BONSAI_HAVE_SSE42_PATH
    if (__builtin_cpu_supports("sse4.2")) {
        if (len >= 3 * 64 && __builtin_cpu_supports("pclmul"))
            return ~crc32c_lanes(crc, p, len);
        return ~crc32c_hw(crc, p, len);
    }
#endif
    return ~crc32c_sw(crc, p, len);
}
