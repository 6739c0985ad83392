/* SPDX-License-Identifier: MIT */
/*
 * Lower-case hex, both ways (libc only): how `profctl run` hands the agents'
 * config down through the environment (PROFD_AGENT_CONFIG), written by
 * profctl, read by profctl and by the agent. Decoding trusts nothing.
 */
#ifndef PROFD_HEX_H
#define PROFD_HEX_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* bytes[0..len) as 2 * len digits and a NUL; NULL for len 0 or no memory. */
static inline char *hex_encode(const uint8_t *bytes, size_t len)
{
	static const char digits[] = "0123456789abcdef";
	char *hex = len ? malloc(2 * len + 1) : NULL;

	for (size_t i = 0; hex && i < len; i++) {
		hex[2 * i] = digits[bytes[i] >> 4];
		hex[2 * i + 1] = digits[bytes[i] & 15];
	}
	if (hex)
		hex[2 * len] = '\0';
	return hex;
}

static inline int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/*
 * hex (an even number of lower-case digits, nothing else) as malloc'ed
 * bytes, their count in *len; NULL when it is not that, empty, or no memory.
 */
static inline uint8_t *hex_decode(const char *hex, size_t *len)
{
	size_t n = 0, i;
	uint8_t *bytes;

	while (hex[n])
		n++;
	if (n == 0 || n % 2 || !(bytes = malloc(n / 2)))
		return NULL;
	for (i = 0; i < n / 2; i++) {
		int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			free(bytes);
			return NULL;
		}
		bytes[i] = (uint8_t)(hi << 4 | lo);
	}
	*len = n / 2;
	return bytes;
}

#endif
