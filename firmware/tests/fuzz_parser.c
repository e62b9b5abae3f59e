/* Mutation fuzz driver for the line parser and dispatch (no libFuzzer needed; build with ASan and
 * UBSan). Feeds mutated valid requests and raw noise for a bounded time, interleaved with timer
 * and ADC activity, and checks that every line the core writes is framed and checksummed, and
 * that a request carrying a byte outside 0x20..0x7E (a \r anywhere but before the \n) is refused
 * and changes nothing.
 * Usage: fuzz_parser <seconds> [seed] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/board.h"
#include "../core/core.h"
#include "../core/proto.h"
#include "fake_board.h"

static const char *const seeds[] = {
	"1 ID",		 "2 SYNC",	     "3 STATE",		 "4 SET 0 0",	 "5 SET 3 1",
	"6 CUT 1 1000 50", "7 CUT 2 0 0",    "8 ABORT 1",	 "9 SAFE 2 0",	 "10 WDOG 50",
	"11 WDOG 0",	 "12 RAIL 1 600 100 5 32", "13 ADC 3",	 "65535 SET 1 1", "14 CUT 0 4000000000 4000000000",
};

static uint32_t rng_state;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 17;
	rng_state ^= rng_state << 5;
	return rng_state;
}

static void check_output(void)
{
	const char *line;
	while ((line = fake_next_line()) != NULL) {
		size_t len = strlen(line);
		uint16_t crc;
		if (len == 0)
			continue; /* the empty line before BOOT */
		if (len > PROTO_MAX_LINE + 5 || len < 5 || line[len - 5] != '*' ||
		    !proto_parse_hex4(line + len - 4, &crc) ||
		    proto_crc16(line, (uint8_t)(len - 5)) != crc) {
			fprintf(stderr, "bad output line: %s\n", line);
			abort();
		}
	}
}

static void mutate_and_send(void)
{
	char buf[256];
	const char *seed = seeds[rnd() % (sizeof seeds / sizeof seeds[0])];
	size_t len = strlen(seed);
	memcpy(buf, seed, len);
	int edits = (int)(rnd() % 4);
	for (int i = 0; i < edits && len > 0; i++) {
		size_t at = rnd() % len;
		switch (rnd() % 4) {
		case 0: buf[at] = (char)rnd(); break;
		case 1: buf[at] = (char)(' ' + rnd() % 95); break;
		case 2: if (len < 200) { memmove(buf + at + 1, buf + at, len - at); buf[at] = (char)rnd(); len++; } break;
		default: memmove(buf + at, buf + at + 1, len - at - 1); len--; break;
		}
	}
	/* Mostly a correct checksum (so dispatch is reached), sometimes a wrong one or none. */
	uint32_t framing = rnd() % 10;
	if (framing < 7)
		len += (size_t)snprintf(buf + len, sizeof buf - len, "*%04X", proto_crc16(buf, (uint8_t)len));
	else if (framing < 9)
		len += (size_t)snprintf(buf + len, sizeof buf - len, "*%04X", (unsigned)(rnd() & 0xFFFF));
	for (size_t i = 0; i < len; i++)
		core_rx_byte((uint8_t)buf[i]);
	if (rnd() % 8)
		core_rx_byte('\n');
}

/* A byte a request line must never carry: outside 0x20..0x7E and not the line's end. Mostly
 * \r, the one control byte the parser handles specially (ignored only right before \n). */
static uint8_t bad_byte(void)
{
	if (rnd() % 2)
		return '\r';
	uint8_t b;
	do
		b = (uint8_t)rnd();
	while ((b >= 0x20 && b <= 0x7E) || b == '\n');
	return b;
}

/* Oracle: a request with bad bytes inside it (its checksum computed without them, as a parser
 * that dropped them would check it) is answered "- ERR frame" (or "- ERR long") and changes
 * nothing; a \r right before the \n, though, is ignored. */
static void send_with_bad_bytes(void)
{
	char body[128], line[160];
	const char *seed = seeds[rnd() % (sizeof seeds / sizeof seeds[0])];
	size_t len = (size_t)snprintf(body, sizeof body, "%s*%04X", seed,
				      proto_crc16(seed, (uint8_t)strlen(seed)));
	core_rx_byte('\n'); /* end whatever partial line an earlier action left */
	check_output();
	size_t at = rnd() % len; /* never at the end: there a \r is allowed */
	int extra = 1 + (int)(rnd() % 2);
	memcpy(line, body, at);
	for (int i = 0; i < extra; i++)
		line[at + (size_t)i] = (char)bad_byte();
	memcpy(line + at + extra, body + at, len - at);
	len += (size_t)extra;
	if (rnd() % 4 == 0)
		line[len++] = '\r';
	unsigned writes = fake.pin_writes;
	uint8_t queued = core_events_queued();
	for (size_t i = 0; i < len; i++)
		core_rx_byte((uint8_t)line[i]);
	core_rx_byte('\n');
	const char *reply = fake_next_line();
	bool refused = reply != NULL && (strncmp(reply, "- ERR frame*", 12) == 0 ||
					 strncmp(reply, "- ERR long*", 11) == 0);
	if (!refused || fake_next_line() != NULL || fake.pin_writes != writes ||
	    core_events_queued() != queued) {
		fprintf(stderr, "a line with a byte outside 0x20..0x7E was not refused: %.*s -> %s\n",
			(int)len, line, reply ? reply : "(no reply)");
		abort();
	}
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5.0;
	rng_state = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 0) : (uint32_t)time(NULL);
	if (rng_state == 0)
		rng_state = 1;
	printf("fuzz_parser: %.0f s, seed %u\n", seconds, rng_state);
	fake_reset();
	fake.tick_on_read = true;
	struct core_board_info info = {"fuzz", "power", 1};
	core_init(&info);
	time_t end = time(NULL) + (time_t)seconds;
	unsigned long iterations = 0;
	uint8_t adc_ch = 0;
	while (time(NULL) < end) {
		for (int i = 0; i < 1000; i++, iterations++) {
			uint32_t action = rnd() % 17;
			if (action < 10) {
				mutate_and_send();
			} else if (action == 16) {
				send_with_bad_bytes();
			} else if (action < 12) {
				for (int n = (int)(rnd() % 100); n > 0; n--)
					core_rx_byte((uint8_t)rnd());
			} else if (action == 12) {
				fake.now_us += rnd() % 100000;
				if (fake.timer_us != BOARD_TIMER_OFF && fake.now_us >= fake.timer_us)
					core_timer_due();
			} else if (action == 13) {
				adc_ch = core_adc_sample(adc_ch, (uint16_t)(rnd() % 1024), fake.now_us);
				if (adc_ch >= CORE_CHANNELS)
					abort();
			} else {
				core_poll();
			}
			if (fake.irq_depth != 0) {
				fprintf(stderr, "unbalanced board_irq_save\n");
				abort();
			}
			check_output();
		}
		if (rnd() % 64 == 0)
			core_init(&info);
	}
	printf("fuzz_parser: %lu iterations, no crash\n", iterations);
	return 0;
}
