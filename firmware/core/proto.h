/* Wire-format helpers of protocol v1 (see PROTOCOL.md): checksum and number parsing/printing.
 * Pure functions, no state. */
#ifndef PROTO_H
#define PROTO_H

#include <stdbool.h>
#include <stdint.h>

#define PROTOCOL_VERSION 3
#define PROTO_MAX_REQUEST 80  /* bytes before "\n", including "*CRC" */
#define PROTO_MAX_LINE 200    /* longest line the MCU writes, before "\n" */
#define PROTO_MAX_ARGS 5

/* CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF; "123456789" -> 0x29B1. */
uint16_t proto_crc16(const char *s, uint8_t len);

/* Parses exactly 4 uppercase hex digits. */
bool proto_parse_hex4(const char *s, uint16_t *out);

/* Parses a decimal number of 1..10 digits that fits in 32 bits; len is the token length. */
bool proto_parse_u32(const char *s, uint8_t len, uint32_t *out);

/* Writes v in decimal at dst (no terminator); returns the number of characters (1..20).
 * Uses subtraction, not 64-bit division, which is large and slow on the AVR. */
uint8_t proto_format_u64(char *dst, uint64_t v);

#endif
