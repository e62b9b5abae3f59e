/* Host (Linux) board: the firmware core behind a pty, for fast tests without a simulator.
 *
 * stdout, one line each, flushed:
 *   pty <slave path>                                   once, when ready
 *   pin ch=<n> on=<0|1> mcu_us=<core clock> mono_ns=<CLOCK_MONOTONIC> clk_us=<core clock>
 *                                                      every pin write that changes a level
 *                                                      (clk_us as the simavr bridge's)
 *   reset mcu_us=<n> mono_ns=<n>                       after SIGUSR1 (simulated MCU reset)
 * The core boots once the pty is first opened and written to (as a Nano resets on open and
 * its bootloader waits), so the host reads the BOOT line. The "MCU clock" is CLOCK_MONOTONIC
 * since boot (or the last reset), in µs. The rails are modelled (RC charge/discharge) so rail
 * sense has something to measure. SIGTERM/SIGINT end it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pty.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "../core/board.h"
#include "../core/core.h"

/* The core spins up to SPIN_US for an edge; waking this much early leaves poll() jitter to it. */
#define TIMER_LEAD_US 80
/* A board's MCU is not loaded by the host it talks to: the host build runs SCHED_FIFO where the
 * host allows it (root or CAP_SYS_NICE), above the rig's cut thread (rig/power/realtime.py:
 * 10), else as an ordinary process. Its loop sleeps in ppoll and spins only TIMER_LEAD_US
 * before an edge, so it cannot starve the host. */
#define MCU_PRIORITY 20
#define ADC_PERIOD_US 104 /* as the AVR: prescaler 128, 13 ADC clocks */
#define RAIL_FULL_COUNTS 819.0
#define RAIL_FALL_TAU_US 2000.0
#define RAIL_RISE_TAU_US 300.0

static int pty_master = -1;
static uint64_t start_ns;
static uint64_t timer_deadline_us = BOARD_TIMER_OFF;
static uint8_t nv[16];
static volatile sig_atomic_t reset_requested, stop_requested;

/* Rail model per channel: level at the last edge, and the edge. */
static struct rail {
	int on; /* -1 before the first boot */
	uint64_t edge_us;
	double level_at_edge;
} rails[CORE_CHANNELS];

#define PIN_LOG_MAX 64
static struct pin_edge {
	uint8_t ch;
	bool on;
	uint64_t mcu_us, mono_ns;
} pin_log[PIN_LOG_MAX];
static unsigned pin_log_len;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t board_now_us(void)
{
	return (mono_ns() - start_ns) / 1000U;
}

static double rail_level(const struct rail *r, uint64_t t_us)
{
	double dt = t_us > r->edge_us ? (double)(t_us - r->edge_us) : 0.0;
	if (r->on == 1)
		return RAIL_FULL_COUNTS -
		       (RAIL_FULL_COUNTS - r->level_at_edge) * exp(-dt / RAIL_RISE_TAU_US);
	return r->level_at_edge * exp(-dt / RAIL_FALL_TAU_US);
}

void board_pin_write(uint8_t ch, bool on)
{
	struct rail *r = &rails[ch];
	uint64_t now_ns = mono_ns();
	uint64_t now_us = (now_ns - start_ns) / 1000U;
	if (r->on == on)
		return;
	r->level_at_edge = r->on < 0 ? RAIL_FULL_COUNTS * on : rail_level(r, now_us);
	r->edge_us = now_us;
	r->on = on;
	if (pin_log_len < PIN_LOG_MAX)
		pin_log[pin_log_len++] = (struct pin_edge){ch, on, now_us, now_ns};
}

/* Printing is slow (a pipe write): edges are logged from the main loop, not while timing. */
static void flush_pin_log(void)
{
	for (unsigned i = 0; i < pin_log_len; i++)
		printf("pin ch=%u on=%u mcu_us=%" PRIu64 " mono_ns=%" PRIu64 " clk_us=%" PRIu64 "\n",
		       pin_log[i].ch, pin_log[i].on, pin_log[i].mcu_us, pin_log[i].mono_ns,
		       pin_log[i].mcu_us);
	if (pin_log_len)
		fflush(stdout);
	pin_log_len = 0;
}

void board_timer_arm(uint64_t when_us)
{
	timer_deadline_us = when_us;
}

void board_spin_until(uint64_t when_us)
{
	while (board_now_us() < when_us) {
	}
}

void board_uart_write(const char *s, uint8_t len)
{
	while (len) {
		ssize_t n = write(pty_master, s, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd p = {.fd = pty_master, .events = POLLOUT};
				poll(&p, 1, 100);
				continue;
			}
			return; /* nobody listening: a real UART also just sends into the void */
		}
		s += n;
		len = (uint8_t)(len - n);
	}
}

uint8_t board_irq_save(void)
{
	return 0; /* single-threaded: timer and ADC run from the main loop */
}

void board_irq_restore(uint8_t saved)
{
	(void)saved;
}

void board_nv_read(uint8_t addr, uint8_t *buf, uint8_t len)
{
	memcpy(buf, nv + addr, len);
}

void board_nv_write(uint8_t addr, const uint8_t *buf, uint8_t len)
{
	memcpy(nv + addr, buf, len);
}

void board_outputs_enable(void)
{
	/* board_pin_write switches the modelled rail directly: nothing left to enable */
}

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		reset_requested = 1;
	else
		stop_requested = 1;
}

static char pty_name[128];

static int open_pty(void)
{
	int slave;
	if (openpty(&pty_master, &slave, pty_name, NULL, NULL) < 0) {
		perror("openpty");
		return -1;
	}
	struct termios tio;
	tcgetattr(slave, &tio);
	cfmakeraw(&tio);
	tcsetattr(slave, TCSANOW, &tio);
	close(slave);
	fcntl(pty_master, F_SETFL, fcntl(pty_master, F_GETFL) | O_NONBLOCK);
	printf("pty %s\n", pty_name);
	fflush(stdout);
	return 0;
}

/* Like a Nano, which resets when the host opens its port and whose bootloader waits for the
 * host: boot once the pty is first opened and then written to (or 1 s later, optiboot's wait,
 * for a host that only listens). Not a fixed delay after the open: pyserial flushes its input
 * after opening (serialposix.py: reset_input_buffer), and on a loaded host that flush can come
 * later than any delay and swallow the BOOT line; the host's first byte comes after it. Then
 * keep a slave fd of our own so a host that closes and reopens does not leave the master hung
 * up. */
static void wait_for_first_open(void)
{
	for (;;) {
		struct pollfd p = {.fd = pty_master, .events = POLLIN};
		if (poll(&p, 1, 10) >= 0 && !(p.revents & POLLHUP))
			break;
		if (stop_requested)
			return;
		/* no slave open: poll() reports the hang-up at once, without its timeout */
		struct timespec idle = {.tv_sec = 0, .tv_nsec = 1000000};
		nanosleep(&idle, NULL);
	}
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct pollfd p = {.fd = pty_master, .events = POLLIN};
		if (poll(&p, 1, 10) > 0 && (p.revents & POLLIN))
			break; /* the host's first bytes wait in the pty for the core to read */
		clock_gettime(CLOCK_MONOTONIC, &now);
		long waited_ms = (now.tv_sec - start.tv_sec) * 1000 +
				 (now.tv_nsec - start.tv_nsec) / 1000000;
		if (stop_requested || waited_ms >= 1000)
			break;
	}
	if (open(pty_name, O_RDWR | O_NOCTTY) < 0)
		perror(pty_name);
}

/* At a reset the pins float and the board's pulls hold every switch at "powered" (as the
 * simavr bridge models it), then the core drives the safe states. */
static void board_reset(const char *cause)
{
	for (uint8_t ch = 0; ch < CORE_CHANNELS; ch++)
		if (rails[ch].on == 0)
			board_pin_write(ch, true);
	struct core_board_info info = {
		.board_name = "host", .reset_cause = cause, .clock_hz = 1000000000UL};
	core_init(&info);
}

/* Everything the host has written so far (the pty is non-blocking). */
static void receive_pending(void)
{
	uint8_t buf[256];
	ssize_t n;
	while ((n = read(pty_master, buf, sizeof buf)) > 0)
		for (ssize_t i = 0; i < n; i++)
			core_rx_byte(buf[i]);
}

int main(void)
{
	memset(nv, 0xFF, sizeof nv); /* like an erased EEPROM */
	for (uint8_t ch = 0; ch < CORE_CHANNELS; ch++)
		rails[ch].on = -1;
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_TIMERSLACK, 1UL); /* default 50 µs slack would make every wake-up late */
	if (open_pty() < 0)
		return 1;
	wait_for_first_open();
	struct sched_param rt = {.sched_priority = MCU_PRIORITY};
	(void)sched_setscheduler(0, SCHED_FIFO, &rt); /* refused: runs at normal priority */
	start_ns = mono_ns();
	board_reset("power");

	uint64_t next_adc_us = 0;
	uint8_t adc_ch = 0;
	while (!stop_requested) {
		if (reset_requested) {
			reset_requested = 0;
			start_ns = mono_ns();
			timer_deadline_us = BOARD_TIMER_OFF;
			next_adc_us = 0;
			adc_ch = 0;
			printf("reset mcu_us=0 mono_ns=%" PRIu64 "\n", start_ns);
			fflush(stdout);
			board_reset("external");
		}
		uint64_t now = board_now_us();
		/* Replay the ADC conversions that were due, at their own times. */
		while (next_adc_us <= now) {
			uint16_t v = (uint16_t)lround(rail_level(&rails[adc_ch], next_adc_us));
			adc_ch = core_adc_sample(adc_ch, v, next_adc_us);
			next_adc_us += ADC_PERIOD_US;
		}
		if (timer_deadline_us != BOARD_TIMER_OFF && now + TIMER_LEAD_US >= timer_deadline_us) {
			timer_deadline_us = BOARD_TIMER_OFF;
			core_timer_due();
		}
		/* Bytes waiting in the pty have arrived: on the board its UART interrupt would have
		 * taken them already. Take them before the watchdog check, or a process the host OS
		 * did not run for a while (a loaded machine) trips while the host was talking. Not
		 * while events wait to be written: BOOT goes out before any reply. */
		if (!core_events_queued())
			receive_pending();
		core_poll();
		flush_pin_log();
		if (core_events_queued())
			continue;

		uint64_t wait_us = 5000;
		now = board_now_us();
		if (timer_deadline_us != BOARD_TIMER_OFF) {
			uint64_t wake = timer_deadline_us - TIMER_LEAD_US;
			wait_us = wake > now ? (wake - now < wait_us ? wake - now : wait_us) : 0;
		}
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(wait_us * 1000)};
		struct pollfd p = {.fd = pty_master, .events = POLLIN};
		int ready = ppoll(&p, 1, &ts, NULL);
		if (ready > 0 && (p.revents & POLLIN))
			receive_pending();
		else if (ready > 0 && (p.revents & POLLHUP)) /* no slave: never spin at SCHED_FIFO */
			nanosleep(&ts, NULL);
	}
	flush_pin_log(); /* a stop between a switch and its loop's print still logs the switch */
	return 0;
}
