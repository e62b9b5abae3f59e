#include "proto.h"

uint16_t proto_crc16(const char *s, uint8_t len)
{
	uint16_t crc = 0xFFFF;
	for (uint8_t i = 0; i < len; i++) {
		crc ^= (uint16_t)((uint8_t)s[i]) << 8;
		for (uint8_t b = 0; b < 8; b++)
			crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
	}
	return crc;
}

bool proto_parse_hex4(const char *s, uint16_t *out)
{
	uint16_t v = 0;
	for (uint8_t i = 0; i < 4; i++) {
		char c = s[i];
		uint8_t d;
		if (c >= '0' && c <= '9')
			d = (uint8_t)(c - '0');
		else if (c >= 'A' && c <= 'F')
			d = (uint8_t)(c - 'A' + 10);
		else
			return false;
		v = (uint16_t)((v << 4) | d);
	}
	*out = v;
	return true;
}

bool proto_parse_u32(const char *s, uint8_t len, uint32_t *out)
{
	if (len == 0 || len > 10)
		return false;
	uint64_t v = 0;
	for (uint8_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint8_t)(s[i] - '0');
	}
	if (v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

uint8_t proto_format_u64(char *dst, uint64_t v)
{
	/* Powers of ten by shift-and-add: no 64-bit division, which is large and slow on the AVR. */
	uint64_t pow10[20];
	pow10[0] = 1;
	for (uint8_t i = 1; i < 20; i++)
		pow10[i] = (pow10[i - 1] << 3) + (pow10[i - 1] << 1);
	uint8_t n = 0;
	for (int8_t i = 19; i >= 0; i--) {
		uint8_t digit = 0;
		while (v >= pow10[i]) {
			v -= pow10[i];
			digit++;
		}
		if (digit || n || i == 0)
			dst[n++] = (char)('0' + digit);
	}
	return n;
}
