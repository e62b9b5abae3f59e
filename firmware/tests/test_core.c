/* Unit tests of the portable core against the fake board. Prints one line per failure and a
 * final "N passed, N failed" line; exits non-zero on any failure. */
#include <stdio.h>
#include <string.h>

#include "../core/board.h"
#include "../core/core.h"
#include "../core/proto.h"
#include "fake_board.h"

static int failures_in_test;

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			printf("  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
			failures_in_test++;                                           \
		}                                                                     \
	} while (0)

static const struct core_board_info info = {"test", "power", 16000000UL};

static void boot(void)
{
	fake_reset();
	fake.now_us = 1000;
	core_init(&info);
}

/* Sends one request with its checksum appended. */
static void send(const char *body)
{
	char framed[128];
	snprintf(framed, sizeof framed, "%s*%04X\n", body,
		 proto_crc16(body, (uint8_t)strlen(body)));
	for (const char *p = framed; *p; p++)
		core_rx_byte((uint8_t)*p);
}

static void send_raw(const char *bytes)
{
	for (const char *p = bytes; *p; p++)
		core_rx_byte((uint8_t)*p);
}

static void drain_events(void)
{
	while (core_events_queued())
		core_poll();
}

/* Next UART line with a verified checksum, checksum removed; "" if none or bad. */
static const char *next(void)
{
	static char body[512];
	const char *line = fake_next_line();
	if (!line)
		return "";
	size_t len = strlen(line);
	uint16_t crc;
	if (len < 5 || line[len - 5] != '*' || !proto_parse_hex4(line + len - 4, &crc) ||
	    proto_crc16(line, (uint8_t)(len - 5)) != crc)
		return "<bad checksum>";
	memcpy(body, line, len - 5);
	body[len - 5] = 0;
	return body;
}

static bool next_is(const char *want)
{
	const char *got = next();
	if (strcmp(got, want) == 0)
		return true;
	printf("  want: %s\n  got:  %s\n", want, got);
	return false;
}

static void skip_boot(void)
{
	drain_events();
	next(); /* the empty line before BOOT */
	next();
}

static void test_crc_and_numbers(void)
{
	CHECK(proto_crc16("123456789", 9) == 0x29B1);
	char buf[24];
	uint8_t n = proto_format_u64(buf, 0);
	CHECK(n == 1 && buf[0] == '0');
	n = proto_format_u64(buf, UINT64_MAX);
	CHECK(n == 20 && memcmp(buf, "18446744073709551615", 20) == 0);
	n = proto_format_u64(buf, 1000000);
	CHECK(n == 7 && memcmp(buf, "1000000", 7) == 0);
	uint32_t v;
	CHECK(proto_parse_u32("4294967295", 10, &v) && v == UINT32_MAX);
	CHECK(!proto_parse_u32("4294967296", 10, &v));
	CHECK(!proto_parse_u32("", 0, &v));
	CHECK(!proto_parse_u32("1a", 2, &v));
	CHECK(!proto_parse_u32("-1", 2, &v));
	uint16_t h;
	CHECK(proto_parse_hex4("29B1", &h) && h == 0x29B1);
	CHECK(!proto_parse_hex4("29b1", &h));
}

static void test_boot_puts_channels_in_safe_state(void)
{
	fake_reset();
	fake.nv[0] = 0xA5;
	fake.nv[1] = 0x0B; /* channel 2 safe off */
	fake.now_us = 1234;
	core_init(&info);
	drain_events();
	CHECK(fake_next_line()[0] == 0);
	CHECK(next_is("! 0 BOOT proto=3 reset=power on=1,1,0,1 t=1234"));
	CHECK(fake.pin[0] && fake.pin[1] && !fake.pin[2] && fake.pin[3]);
	/* The pins start driving only once they hold the safe levels. */
	CHECK(fake.outputs_enabled);
	CHECK(fake.pins_at_enable[0] && fake.pins_at_enable[1] && !fake.pins_at_enable[2] &&
	      fake.pins_at_enable[3]);
}

static void test_identify(void)
{
	boot();
	skip_boot();
	send("1 ID");
	CHECK(next_is("1 OK proto=3 fw=" FIRMWARE_VERSION " build=" BUILD_ID
		      " board=test ch=4 clk_hz=16000000 reset=power trips=0 wdog_ms=5000"));
}

static void test_set_reports_one_edge(void)
{
	boot();
	skip_boot();
	fake.now_us = 5000;
	send("1 SET 2 0");
	drain_events();
	CHECK(next_is("1 OK t=5000 ch=2 on=0 edge=1"));
	CHECK(next_is("! 1 EDGE ch=2 on=0 t=5000 why=set"));
	CHECK(!fake.pin[2]);
	send("2 SET 2 0");
	drain_events();
	CHECK(next_is("2 OK t=5000 ch=2 on=0 edge=0"));
	CHECK(next_is(""));
}

static void test_cut_is_timed_by_the_scheduler(void)
{
	boot();
	skip_boot();
	fake.now_us = 10000;
	send("1 CUT 0 20000 500");
	CHECK(next_is("1 OK t=10000 at=30000 ch=0"));
	CHECK(fake.timer_us == 30000);
	CHECK(fake.pin[0]);
	send("2 STATE");
	CHECK(next_is("2 OK t=10000 on=1,1,1,1 safe=1,1,1,1 pend=2,0,0,0"));
	fake.now_us = 30000;
	core_timer_due();
	CHECK(!fake.pin[0]);
	CHECK(fake.timer_us == 30500);
	fake.now_us = 30500;
	core_timer_due();
	CHECK(fake.pin[0]);
	CHECK(fake.timer_us == BOARD_TIMER_OFF);
	drain_events();
	CHECK(next_is("! 1 EDGE ch=0 on=0 t=30000 why=cut"));
	CHECK(next_is("! 2 EDGE ch=0 on=1 t=30500 why=restore"));
}

static void test_close_edges_are_spun_for_not_rearmed(void)
{
	boot();
	skip_boot();
	fake.now_us = 2000;
	send("1 CUT 1 0 40");
	next();
	unsigned writes = fake.pin_writes;
	fake.tick_on_read = true;
	core_timer_due();
	fake.tick_on_read = false;
	CHECK(fake.pin[1]);
	CHECK(fake.pin_writes == writes + 2);
	drain_events();
	const char *off = next();
	CHECK(strstr(off, "on=0") != NULL);
	CHECK(strstr(next(), "why=restore") != NULL);
}

static void test_short_glitch_restores_before_bookkeeping(void)
{
	boot();
	skip_boot();
	fake.now_us = 3000;
	send("1 CUT 2 1000 20");
	next();
	fake.now_us = 4000;
	unsigned writes = fake.pin_writes;
	core_timer_due();
	/* both edges in one timer call, the restore at exactly off + 20 µs */
	CHECK(fake.pin[2]);
	CHECK(fake.pin_writes == writes + 2);
	CHECK(fake.timer_us == BOARD_TIMER_OFF);
	drain_events();
	CHECK(next_is("! 1 EDGE ch=2 on=0 t=4000 why=cut"));
	CHECK(next_is("! 2 EDGE ch=2 on=1 t=4020 why=restore"));
	send("2 STATE");
	drain_events();
	CHECK(next_is("2 OK t=4020 on=1,1,1,1 safe=1,1,1,1 pend=0,0,0,0"));
}

static void test_cut_refusals(void)
{
	boot();
	skip_boot();
	send("1 CUT 3 1000000 0");
	next();
	send("2 CUT 3 1000 0");
	CHECK(next_is("2 ERR busy"));
	send("3 ABORT 3");
	CHECK(next_is("3 OK ch=3 cancelled=1"));
	CHECK(fake.timer_us == BOARD_TIMER_OFF);
	send("4 SET 3 0");
	next();
	send("5 CUT 3 0 0");
	CHECK(next_is("5 ERR state"));
	send("6 CUT 3 4000000001 0");
	CHECK(next_is("6 ERR args"));
}

/* CUTAT takes the off edge's MCU instant (its low 32 bits): the time on the line is not
 * added; an instant already past fires 200 us from now; the nearest instant across a 2^32
 * wrap. */
static void test_cutat_fires_at_the_mcu_instant(void)
{
	boot();
	skip_boot();
	fake.now_us = 10000;
	send("1 CUTAT 0 30000 500");
	CHECK(next_is("1 OK t=10000 at=30000 ch=0"));
	CHECK(fake.timer_us == 30000);
	send("2 CUTAT 0 50000 0");
	CHECK(next_is("2 ERR busy"));
	fake.now_us = 40000;
	send("3 CUTAT 1 35000 0"); /* past: at the least lead */
	CHECK(next_is("3 OK t=40000 at=40200 ch=1"));
	fake.now_us = 0xFFFFF000ULL; /* 4294963200: the low 32 bits wrap 4096 us from now */
	send("4 CUTAT 2 1000 0");
	CHECK(next_is("4 OK t=4294963200 at=4294968296 ch=2"));
	send("5 CUTAT 9 1000 0");
	CHECK(next_is("5 ERR args"));
	send("6 CUTAT 3 1000 4000000001");
	CHECK(next_is("6 ERR args"));
	send("7 ABORT 0");
	next();
	send("8 ABORT 1");
	next();
	send("9 ABORT 2");
	next();
	CHECK(fake.timer_us == BOARD_TIMER_OFF);
}

static void test_errors_are_never_acted_on(void)
{
	boot();
	skip_boot();
	unsigned writes = fake.pin_writes;
	send_raw("1 SET 0 0*0000\n");
	CHECK(next_is("- ERR crc"));
	send_raw("1 SET 0 0\n");
	CHECK(next_is("- ERR crc"));
	send_raw("\x01garbage\xff\n");
	CHECK(next_is("- ERR frame"));
	char longline[200];
	memset(longline, '0', sizeof longline);
	longline[198] = '\n';
	longline[199] = 0;
	send_raw(longline);
	CHECK(next_is("- ERR long"));
	send("x SET 0 0");
	CHECK(next_is("- ERR frame"));
	send("2 FROB");
	CHECK(next_is("2 ERR unknown"));
	send("3 SET 0  0");
	CHECK(next_is("3 ERR args"));
	send("4 SET 0 0 0 0 0 0 0");
	CHECK(next_is("4 ERR args"));
	send("5 SET 4 0");
	CHECK(next_is("5 ERR args"));
	send("6 WDOG 49");
	CHECK(next_is("6 ERR args"));
	send_raw("\n\r\n");
	CHECK(next_is(""));
	CHECK(fake.pin_writes == writes);
	drain_events();
	CHECK(next_is(""));
}

/* Sends `body` with a carriage return inserted before byte `at`, and the checksum of `body`
 * without it (what a parser that silently drops the \r would accept). */
static void send_with_cr_at(const char *body, size_t at)
{
	char framed[128];
	size_t len = strlen(body);
	snprintf(framed, sizeof framed, "%.*s\r%s*%04X\n", (int)at, body, body + at,
		 proto_crc16(body, (uint8_t)len));
	send_raw(framed);
}

static void test_carriage_return_only_before_newline(void)
{
	boot();
	skip_boot();
	unsigned writes = fake.pin_writes;
	/* A \r anywhere but right before the \n is a byte outside 0x20..0x7E: refused. */
	send_with_cr_at("5 SET 0 0", 1);
	CHECK(next_is("- ERR frame"));
	send_with_cr_at("6 WDOG 50", 8);
	CHECK(next_is("- ERR frame"));
	send_with_cr_at("7 SET 1 0", 0);
	CHECK(next_is("- ERR frame"));
	send_raw("8 SET 2 0*\r");
	send_raw("0000\n");
	CHECK(next_is("- ERR frame"));
	send_raw("9 SYNC\r\r\n");
	CHECK(next_is("- ERR frame"));
	send_raw("\r\r\n");
	CHECK(next_is("- ERR frame"));
	CHECK(fake.pin_writes == writes);
	CHECK(!core_events_queued());
	send("10 STATE");
	CHECK(next_is("10 OK t=1000 on=1,1,1,1 safe=1,1,1,1 pend=0,0,0,0"));
	send("11 ID");
	CHECK(strstr(next(), " wdog_ms=5000") != NULL);
	/* Right before the \n it is ignored, on a request and on an empty line. */
	char framed[64];
	snprintf(framed, sizeof framed, "12 SET 3 0*%04X\r\n", proto_crc16("12 SET 3 0", 10));
	send_raw(framed);
	CHECK(next_is("12 OK t=1000 ch=3 on=0 edge=1"));
	send_raw("\r\n");
	drain_events();
	CHECK(next_is("! 1 EDGE ch=3 on=0 t=1000 why=set"));
	CHECK(next_is(""));
}

static void test_retry_replays_without_acting(void)
{
	boot();
	skip_boot();
	fake.now_us = 3000;
	send("9 SET 1 0");
	CHECK(next_is("9 OK t=3000 ch=1 on=0 edge=1"));
	send("10 SET 1 1");
	next();
	unsigned writes = fake.pin_writes;
	fake.now_us = 4000;
	send("10 SET 1 1");
	CHECK(next_is("10 OK t=3000 ch=1 on=1 edge=1"));
	CHECK(fake.pin_writes == writes);
}

static void test_watchdog_restores_safe_state(void)
{
	boot();
	skip_boot();
	send("1 SAFE 3 0");
	CHECK(next_is("1 OK ch=3 safe=0"));
	CHECK(fake.nv[0] == 0xA5 && fake.nv[1] == 0x07);
	send("2 SET 1 0");
	next();
	send("3 CUT 0 900000 0");
	next();
	fake.now_us = 1000;
	send("4 WDOG 200");
	next();
	drain_events();
	next();
	fake.now_us = 1000 + 199999;
	core_poll();
	CHECK(core_events_queued() == 0 && fake.pin[3]);
	fake.now_us = 1000 + 200000;
	core_poll();
	CHECK(fake.pin[1] && !fake.pin[3] && fake.pin[0]);
	CHECK(fake.timer_us == BOARD_TIMER_OFF);
	drain_events();
	CHECK(next_is("! 2 WDOG t=201000 silent_ms=200"));
	CHECK(next_is("! 3 EDGE ch=1 on=1 t=201000 why=wdog"));
	CHECK(next_is("! 4 EDGE ch=3 on=0 t=201000 why=wdog"));
	send("5 ID");
	CHECK(strstr(next(), "trips=1 wdog_ms=200") != NULL);
}

/* A clock that reads behind the last request (the simavr 1.6 Timer1 flag bug made the AVR
 * board's clock step back 32768 µs) must not trip the watchdog: silence is counted from the
 * step, never as an unsigned wrap-around. */
static void test_watchdog_survives_a_clock_step_back(void)
{
	boot();
	skip_boot();
	fake.now_us = 500000;
	send("1 SET 1 0");
	next();
	drain_events();
	next();
	fake.now_us = 500000 - 32768;
	core_poll();
	CHECK(core_events_queued() == 0 && !fake.pin[1]);
	fake.now_us = 500000 - 32768 + 4999999;
	core_poll();
	CHECK(core_events_queued() == 0 && !fake.pin[1]);
	fake.now_us = 500000 - 32768 + 5000000;
	core_poll();
	CHECK(fake.pin[1]);
	drain_events();
	CHECK(next_is("! 2 WDOG t=5467232 silent_ms=5000"));
	CHECK(next_is("! 3 EDGE ch=1 on=1 t=5467232 why=wdog"));
}

static void test_event_gap_when_queue_overflows(void)
{
	boot();
	skip_boot();
	for (int i = 0; i < 20; i++) {
		char req[32];
		snprintf(req, sizeof req, "%d SET 0 %d", i + 1, i % 2);
		send(req);
		next();
	}
	drain_events();
	int events = 0;
	const char *line;
	char last[64] = "";
	while (*(line = next())) {
		events++;
		snprintf(last, sizeof last, "%s", line);
	}
	CHECK(events < 20);
	CHECK(strncmp(last, "! ", 2) == 0 && events > 0);
	send("99 SET 1 0");
	next();
	drain_events();
	CHECK(strncmp(next(), "! 21 EDGE", 9) == 0); /* 20 sequence numbers were used */
}

static void test_rail_capture_reports_fall_times(void)
{
	boot();
	skip_boot();
	send("1 RAIL 2 600 100 10 4");
	CHECK(next_is("1 OK ch=2 hi=600 lo=100 win_ms=10 nsamp=4"));
	core_adc_sample(2, 800, 900);
	fake.now_us = 1000;
	send("2 SET 2 0");
	next();
	uint16_t v = 800;
	for (uint64_t t = 1000; t <= 12000; t += 100) {
		core_adc_sample(2, v, t);
		v = (uint16_t)(v * 9 / 10);
	}
	drain_events();
	CHECK(next_is("! 1 EDGE ch=2 on=0 t=1000 why=set"));
	const char *rail = next();
	CHECK(strstr(rail, "! 2 RAIL ch=2 t=1000 v0=800 hi_us=300 lo_us=2000") == rail);
	CHECK(strstr(rail, "end=fell") != NULL);
	const char *samples = next();
	CHECK(strncmp(samples, "! 3 RAILS ch=2 dt_us=2500 v=800,", 32) == 0);
	send("3 ADC 2");
	CHECK(strncmp(next(), "3 OK ch=2 v=", 12) == 0);
}

static void test_rail_capture_ends_when_power_returns(void)
{
	boot();
	skip_boot();
	send("1 RAIL 0 600 100 50 0");
	next();
	core_adc_sample(0, 800, 900);
	fake.now_us = 1000;
	send("2 CUT 0 0 500");
	next();
	core_timer_due();
	core_adc_sample(0, 700, 1100);
	fake.now_us = 1500;
	core_timer_due();
	drain_events();
	next();
	next();
	const char *rail = next();
	CHECK(strstr(rail, "hi_us=- lo_us=- min=700 end=on") != NULL);
}

int main(void)
{
	struct {
		const char *name;
		void (*fn)(void);
	} tests[] = {
		{"crc_and_numbers", test_crc_and_numbers},
		{"boot_puts_channels_in_safe_state", test_boot_puts_channels_in_safe_state},
		{"identify", test_identify},
		{"set_reports_one_edge", test_set_reports_one_edge},
		{"cut_is_timed_by_the_scheduler", test_cut_is_timed_by_the_scheduler},
		{"close_edges_are_spun_for_not_rearmed", test_close_edges_are_spun_for_not_rearmed},
		{"short_glitch_restores_before_bookkeeping",
		 test_short_glitch_restores_before_bookkeeping},
		{"cut_refusals", test_cut_refusals},
		{"cutat_fires_at_the_mcu_instant", test_cutat_fires_at_the_mcu_instant},
		{"errors_are_never_acted_on", test_errors_are_never_acted_on},
		{"carriage_return_only_before_newline", test_carriage_return_only_before_newline},
		{"retry_replays_without_acting", test_retry_replays_without_acting},
		{"watchdog_restores_safe_state", test_watchdog_restores_safe_state},
		{"watchdog_survives_a_clock_step_back", test_watchdog_survives_a_clock_step_back},
		{"event_gap_when_queue_overflows", test_event_gap_when_queue_overflows},
		{"rail_capture_reports_fall_times", test_rail_capture_reports_fall_times},
		{"rail_capture_ends_when_power_returns", test_rail_capture_ends_when_power_returns},
	};
	int passed = 0, failed = 0;
	for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
		failures_in_test = 0;
		tests[i].fn();
		if (fake.irq_depth != 0) {
			printf("  FAIL unbalanced board_irq_save\n");
			failures_in_test++;
		}
		printf("%s %s\n", failures_in_test ? "FAIL" : "ok  ", tests[i].name);
		if (failures_in_test)
			failed++;
		else
			passed++;
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
