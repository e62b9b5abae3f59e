/* Command parsing (after Klipper's src/command.c): line assembly, the frame (CRC, sequence
 * number, a retried request answered with the reply kept), tokens, dispatch through the command
 * table of basecmd.c, and the output line that replies and events are built in. Main loop
 * context only. */
#include <string.h>

#include "board.h"
#include "internal.h"
#include "proto.h"

#define LAST_REPLY_MAX 128

/* Line assembly. */
static char line[PROTO_MAX_REQUEST];
static uint8_t line_len;
static bool line_overlong, line_bad_byte;
/* A \r was received and held back: ignored if the \n follows, a framing error otherwise. */
static bool line_cr;

/* The reply or event being written, and the last reply kept for retried requests. */
static char out[PROTO_MAX_LINE + 6];
static uint8_t out_len;
static char last_reply[LAST_REPLY_MAX];
static uint8_t last_reply_len;
static bool have_last;
static uint16_t last_seq, last_crc;
static uint16_t reply_seq;

/* ---- output ---- */

void out_char(char c)
{
	if (out_len < PROTO_MAX_LINE - 5)
		out[out_len++] = c;
}

void out_str(const char *s)
{
	while (*s)
		out_char(*s++);
}

void out_u64(uint64_t v)
{
	char digits[20];
	uint8_t n = proto_format_u64(digits, v);
	for (uint8_t i = 0; i < n; i++)
		out_char(digits[i]);
}

void out_kv(const char *key, uint64_t v)
{
	out_char(' ');
	out_str(key);
	out_char('=');
	out_u64(v);
}

void out_kv_str(const char *key, const char *v)
{
	out_char(' ');
	out_str(key);
	out_char('=');
	out_str(v);
}

void out_begin(void)
{
	out_len = 0;
}

void out_send(void)
{
	static const char hex[] = "0123456789ABCDEF";
	uint16_t crc = proto_crc16(out, out_len);
	out[out_len++] = '*';
	for (int8_t shift = 12; shift >= 0; shift -= 4)
		out[out_len++] = hex[(crc >> shift) & 0xF];
	out[out_len++] = '\n';
	board_uart_write(out, out_len);
}

void out_channel_list(const char *key, const struct channel *table, uint8_t which)
{
	out_char(' ');
	out_str(key);
	out_char('=');
	for (uint8_t ch = 0; ch < CORE_CHANNELS; ch++) {
		const struct channel *c = &table[ch];
		uint8_t v = which == 0   ? c->on
			    : which == 1 ? c->safe
					 : (uint8_t)(c->off_scheduled + c->restore_scheduled);
		if (ch)
			out_char(',');
		out_char((char)('0' + v));
	}
}

static void send_framing_error(const char *code)
{
	out_begin();
	out_str("- ERR ");
	out_str(code);
	out_send();
}

static void reply_begin(void)
{
	out_begin();
	out_u64(reply_seq);
}

void reply_error(const char *code)
{
	reply_begin();
	out_str(" ERR ");
	out_str(code);
}

void reply_ok(void)
{
	reply_begin();
	out_str(" OK");
}

/* ---- dispatch ---- */

/* Splits "CMD a b c" after the sequence number; returns false on an empty token. */
static bool split_tokens(const char *s, uint8_t len, const char **tok, uint8_t *tok_len,
			 uint8_t max, uint8_t *count)
{
	uint8_t n = 0, i = 0;
	while (i <= len) {
		uint8_t start = i;
		while (i < len && s[i] != ' ')
			i++;
		if (i == start || n == max)
			return false;
		tok[n] = s + start;
		tok_len[n] = (uint8_t)(i - start);
		n++;
		i++; /* skip the space (or step past the end) */
	}
	*count = n;
	return true;
}

static const struct command *find_command(const char *name, uint8_t len)
{
	for (uint8_t i = 0; i < command_count; i++) {
		if (len && strlen(commands[i].name) == len && memcmp(commands[i].name, name, len) == 0)
			return &commands[i];
	}
	return NULL;
}

/* An empty or missing token: a known command gets "args", anything else "unknown". */
static void refuse_malformed(const char *body, uint8_t len)
{
	uint8_t name_len = 0;
	while (name_len < len && body[name_len] != ' ')
		name_len++;
	reply_error(find_command(body, name_len) ? "args" : "unknown");
}

static void run_request(const char *body, uint8_t len)
{
	const char *tok[PROTO_MAX_ARGS + 1];
	uint8_t tok_len[PROTO_MAX_ARGS + 1];
	uint8_t count = 0;
	if (len == 0 || !split_tokens(body, len, tok, tok_len, PROTO_MAX_ARGS + 1, &count)) {
		refuse_malformed(body, len);
		return;
	}
	const struct command *cmd = find_command(tok[0], tok_len[0]);
	if (!cmd) {
		reply_error("unknown");
		return;
	}
	uint32_t args[PROTO_MAX_ARGS] = {0};
	if (count - 1 != cmd->nargs) {
		reply_error("args");
		return;
	}
	for (uint8_t a = 0; a < cmd->nargs; a++) {
		if (!proto_parse_u32(tok[a + 1], tok_len[a + 1], &args[a])) {
			reply_error("args");
			return;
		}
	}
	cmd->run(args);
}

/* ---- framing ---- */

static void handle_line(const char *s, uint8_t len)
{
	uint16_t crc;
	if (len < 5 || s[len - 5] != '*' || !proto_parse_hex4(s + len - 4, &crc) ||
	    proto_crc16(s, (uint8_t)(len - 5)) != crc) {
		send_framing_error("crc");
		return;
	}
	uint8_t body_len = (uint8_t)(len - 5);
	uint8_t digits = 0;
	while (digits < body_len && s[digits] >= '0' && s[digits] <= '9')
		digits++;
	uint32_t seq;
	if (digits == 0 || digits >= body_len || s[digits] != ' ' ||
	    !proto_parse_u32(s, digits, &seq) || seq > 0xFFFF) {
		send_framing_error("frame");
		return;
	}
	last_request_us = board_now_us(); /* a valid request feeds the host-silence watchdog */
	if (have_last && seq == last_seq && crc == last_crc) {
		board_uart_write(last_reply, last_reply_len);
		return;
	}
	reply_seq = (uint16_t)seq;
	run_request(s + digits + 1, (uint8_t)(body_len - digits - 1));
	out_send();
	have_last = out_len <= LAST_REPLY_MAX;
	if (have_last) {
		memcpy(last_reply, out, out_len);
		last_reply_len = out_len;
		last_seq = (uint16_t)seq;
		last_crc = crc;
	}
}

void core_rx_byte(uint8_t byte)
{
	if (byte == '\n') {
		if (line_overlong)
			send_framing_error("long");
		else if (line_bad_byte)
			send_framing_error("frame");
		else if (line_len)
			handle_line(line, line_len);
		line_len = 0;
		line_overlong = line_bad_byte = line_cr = false;
		return;
	}
	/* Only a \r right before the \n is ignored (PROTOCOL.md 1): one anywhere else is a byte
	 * outside 0x20..0x7E, and dropping it would execute the rest of the line. */
	if (line_cr)
		line_bad_byte = true;
	line_cr = byte == '\r';
	if (line_cr)
		return;
	if (line_len == PROTO_MAX_REQUEST) {
		line_overlong = true; /* discard up to the newline */
		return;
	}
	if (byte < 0x20 || byte > 0x7E)
		line_bad_byte = true;
	line[line_len++] = (char)byte;
}

void command_reset(void)
{
	line_len = 0;
	line_overlong = line_bad_byte = line_cr = false;
	have_last = false;
}
