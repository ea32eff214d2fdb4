/* SPDX-License-Identifier: MIT */
/*
 * test_checksum.c - CRC-32C: the published check values, every length up
 * to 9.4 KiB (at eight alignments in turn) against a bitwise reference,
 * and chaining.  Buffers of 192 bytes and more take the three-lane path
 * where the CPU has PCLMUL, so a wrong join constant shows up here; on
 * one without it, they test the single chain.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "util.h"

TestSuite(checksum, .init = tu_setup, .fini = tu_teardown);

/* The definition, one bit at a time. */
static uint32_t reference_crc(uint32_t crc, const uint8_t *p, size_t len)
{
    crc = ~crc;
    while (len--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

Test(checksum, check_value)
{
    cr_assert_eq(bonsai_crc32c(0, "123456789", 9), 0xE3069283u);
    cr_assert_eq(bonsai_crc32c(0, "", 0), 0u);
    uint8_t zeros[32] = {0};
    /* RFC 3720 B.4: 32 bytes of zeros */
    cr_assert_eq(bonsai_crc32c(0, zeros, sizeof zeros), 0x8A9136AAu);
}

Test(checksum, every_length_and_alignment_matches_reference)
{
    uint64_t seed = tu_seed("checksum", 1);
    tu_rng r = {seed};
    enum { MAX = 3 * 1024 * 3 + 200 };
    uint8_t *buf = malloc(MAX + 8);
    cr_assert_not_null(buf);
    tu_fill(&r, buf, MAX + 8);
    for (size_t len = 0; len <= MAX; len++) {
        size_t off = len % 8;
        uint32_t start = (uint32_t)tu_rand(&r);
        uint32_t want = reference_crc(start, buf + off, len);
        uint32_t got = bonsai_crc32c(start, buf + off, len);
        cr_assert_eq(got, want,
                     "seed %llu, length %zu, offset %zu: %08x, not %08x",
                     (unsigned long long)seed, len, off, got, want);
    }
    free(buf);
}

Test(checksum, chained_calls_give_the_whole_buffers_crc)
{
    uint64_t seed = tu_seed("checksum chain", 2);
    tu_rng r = {seed};
    uint8_t buf[5000];
    tu_fill(&r, buf, sizeof buf);
    uint32_t whole = bonsai_crc32c(0, buf, sizeof buf);
    for (int round = 0; round < 200; round++) {
        size_t cut = tu_below(&r, sizeof buf + 1);
        uint32_t c = bonsai_crc32c(0, buf, cut);
        c = bonsai_crc32c(c, buf + cut, sizeof buf - cut);
        cr_assert_eq(c, whole, "seed %llu, cut at %zu",
                     (unsigned long long)seed, cut);
    }
}
