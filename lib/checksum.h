/* SPDX-License-Identifier: MIT */
/*
 * checksum.h - CRC-32C (Castagnoli), the checksum of every node image,
 * overflow value and meta slot.  Pure; uses the SSE4.2 instruction when the
 * CPU has it, a bitwise loop otherwise.
 */
#ifndef BONSAI_CHECKSUM_H
#define BONSAI_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of len bytes, continuing from crc (start with 0).
 * bonsai_crc32c(0, "123456789", 9) == 0xe3069283.  Hidden by name: the
 * x86 intrinsics headers checksum.c includes reset the default
 * visibility, so -fvisibility=hidden alone would export it. */
__attribute__((visibility("hidden"))) uint32_t bonsai_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
