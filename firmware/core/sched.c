/* Scheduling (after Klipper's src/sched.c): the channel table and its edges, the edge
 * scheduler that the timer context runs, the host-silence watchdog (the board's emergency
 * stop: every channel to its safe state), the main loop's poll and core_init. */
#include <string.h>

#include "board.h"
#include "internal.h"

#define WDOG_DEFAULT_MS 5000UL
/* Edges closer than this are waited for inside the timer context instead of re-arming the
 * timer: boards arm the timer a little early and the core spins to the exact microsecond. */
#define SPIN_US 100
/* A restore this close after its off edge is written straight after it, before any
 * bookkeeping (which takes ~60 µs on the AVR and would otherwise stretch a short glitch). */
#define GLITCH_DIRECT_US 80

struct core_board_info board_info;
struct channel chans[CORE_CHANNELS];
uint32_t wdog_ms;
uint64_t last_request_us;
uint16_t wdog_trips;

/* ---- channels and scheduler ---- */

/* Interrupts masked. Bookkeeping of an edge whose pin was written at time t. */
static void record_edge(uint8_t ch, bool on, uint8_t why, uint64_t t)
{
	chans[ch].on = on;
	push_event(EV_EDGE, ch, on, why, t);
	rail_on_edge(ch, on, t);
}

uint64_t edge(uint8_t ch, bool on, uint8_t why)
{
	board_pin_write(ch, on);
	uint64_t t = board_now_us();
	record_edge(ch, on, why, t);
	return t;
}

static uint64_t channel_next_due(const struct channel *c)
{
	if (c->off_scheduled)
		return c->off_at;
	if (c->restore_scheduled)
		return c->restore_at;
	return NO_TIME;
}

/* The next edge of all channels, worked out whenever the schedule changes so the timer context
 * has nothing to search before an edge (64-bit work is slow on the AVR). */
#define NO_CHANNEL 0xFF
static uint8_t next_ch = NO_CHANNEL;
static uint64_t next_at = NO_TIME;

/* Interrupts masked. */
static void plan_next(void)
{
	next_ch = NO_CHANNEL;
	next_at = NO_TIME;
	for (uint8_t ch = 0; ch < CORE_CHANNELS; ch++) {
		uint64_t due = channel_next_due(&chans[ch]);
		if (due < next_at) {
			next_at = due;
			next_ch = ch;
		}
	}
}

void rearm_timer(void)
{
	plan_next();
	board_timer_arm(next_at);
}

void core_timer_due(void)
{
	while (next_ch != NO_CHANNEL) {
		if (next_at > board_now_us() + SPIN_US) {
			board_timer_arm(next_at);
			return;
		}
		board_spin_until(next_at);
		/* Pin first, clock second, bookkeeping last: nothing slow between due time and pin. */
		uint8_t ch = next_ch;
		struct channel *c = &chans[ch];
		bool on = !c->off_scheduled;
		board_pin_write(ch, on);
		uint64_t t = board_now_us();
		if (!on && c->restore_scheduled && c->restore_at - c->off_at <= GLITCH_DIRECT_US) {
			board_spin_until(c->restore_at);
			board_pin_write(ch, true);
			uint64_t t_on = board_now_us();
			c->off_scheduled = c->restore_scheduled = false;
			record_edge(ch, false, WHY_CUT, t);
			record_edge(ch, true, WHY_RESTORE, t_on);
			plan_next();
			continue;
		}
		if (on)
			c->restore_scheduled = false;
		else
			c->off_scheduled = false;
		record_edge(ch, on, on ? WHY_RESTORE : WHY_CUT, t);
		plan_next();
	}
	board_timer_arm(BOARD_TIMER_OFF);
}

void cancel_schedule(struct channel *c)
{
	c->off_scheduled = false;
	c->restore_scheduled = false;
}

/* ---- watchdog and main loop ---- */

static void watchdog_trip(void)
{
	uint8_t saved = board_irq_save();
	push_event(EV_WDOG, 0, false, 0, board_now_us());
	for (uint8_t ch = 0; ch < CORE_CHANNELS; ch++) {
		struct channel *c = &chans[ch];
		cancel_schedule(c);
		if (c->on != c->safe)
			edge(ch, c->safe, WHY_WDOG);
	}
	rearm_timer();
	board_irq_restore(saved);
	wdog_trips++;
}

void core_poll(void)
{
	uint64_t now = board_now_us();
	/* A clock reading behind the last request (a board clock that stepped back) is no
	 * silence: counted from here instead, it can never wrap the unsigned difference below
	 * into a spurious trip (docs/decisions.md, "The firmware core is split as Klipper's,
	 * with an explicit command table"). */
	if (now < last_request_us)
		last_request_us = now;
	if (wdog_ms && now - last_request_us >= (uint64_t)wdog_ms * 1000U) {
		watchdog_trip();
		last_request_us = now; /* stays armed: trips again after another silent period */
	}
	write_next_event();
}

void core_init(const struct core_board_info *info)
{
	uint8_t saved = board_irq_save();
	board_info = *info;
	memset(chans, 0, sizeof chans);
	rail_reset();
	events_reset();
	load_safe_states();
	for (uint8_t ch = 0; ch < CORE_CHANNELS; ch++) {
		chans[ch].on = chans[ch].safe;
		board_pin_write(ch, chans[ch].safe);
	}
	board_outputs_enable();
	rearm_timer();
	wdog_ms = WDOG_DEFAULT_MS;
	wdog_trips = 0;
	last_request_us = board_now_us();
	command_reset();
	/* BOOT's t: every channel is driving its safe state from this instant on. */
	push_event(EV_BOOT, 0, false, 0, last_request_us);
	board_irq_restore(saved);
}
