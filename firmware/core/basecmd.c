/* The commands (after Klipper's src/basecmd.c): each checks its arguments, acts under the
 * interrupt lock where it touches what the timer and ADC contexts share, and appends its
 * fields to the reply that command.c opened and sends. The table at the end is the whole
 * command set (PROTOCOL.md 3); the safe states live in non-volatile storage. */
#include <string.h>

#include "board.h"
#include "internal.h"
#include "proto.h"

#define WDOG_MIN_MS 50UL
#define WDOG_MAX_MS 600000UL
#define DURATION_MAX_US 4000000000UL
#define NV_ADDR 0
#define NV_MAGIC 0xA5

/* ---- non-volatile safe states ---- */

void load_safe_states(void)
{
	uint8_t nv[2];
	board_nv_read(NV_ADDR, nv, sizeof nv);
	bool valid = nv[0] == NV_MAGIC;
	for (uint8_t ch = 0; ch < CORE_CHANNELS; ch++)
		chans[ch].safe = valid ? (nv[1] >> ch) & 1 : true; /* default: drives powered */
}

static void store_safe_states(void)
{
	uint8_t nv[2] = {NV_MAGIC, 0};
	for (uint8_t ch = 0; ch < CORE_CHANNELS; ch++)
		if (chans[ch].safe)
			nv[1] |= (uint8_t)(1 << ch);
	board_nv_write(NV_ADDR, nv, sizeof nv);
}

/* ---- commands ---- */

static bool valid_channel(uint32_t ch)
{
	return ch < CORE_CHANNELS;
}

static void cmd_id(const uint32_t *args)
{
	(void)args;
	reply_ok();
	out_kv("proto", PROTOCOL_VERSION);
	out_kv_str("fw", FIRMWARE_VERSION);
	out_kv_str("build", BUILD_ID);
	out_kv_str("board", board_info.board_name);
	out_kv("ch", CORE_CHANNELS);
	out_kv("clk_hz", board_info.clock_hz);
	out_kv_str("reset", board_info.reset_cause);
	out_kv("trips", wdog_trips);
	out_kv("wdog_ms", wdog_ms);
}

static void cmd_sync(const uint32_t *args)
{
	(void)args;
	reply_ok();
	out_kv("t", board_now_us());
}

static void cmd_state(const uint32_t *args)
{
	(void)args;
	/* Snapshot under the lock, format outside it: formatting is slow on the AVR. */
	struct channel snapshot[CORE_CHANNELS];
	uint8_t saved = board_irq_save();
	uint64_t t = board_now_us();
	memcpy(snapshot, chans, sizeof snapshot);
	board_irq_restore(saved);
	reply_ok();
	out_kv("t", t);
	out_channel_list("on", snapshot, 0);
	out_channel_list("safe", snapshot, 1);
	out_channel_list("pend", snapshot, 2);
}

static void cmd_set(const uint32_t *args)
{
	if (!valid_channel(args[0]) || args[1] > 1) {
		reply_error("args");
		return;
	}
	uint8_t ch = (uint8_t)args[0];
	bool on = args[1];
	uint8_t saved = board_irq_save();
	struct channel *c = &chans[ch];
	cancel_schedule(c);
	bool changed = c->on != on;
	uint64_t t = changed ? edge(ch, on, WHY_SET) : board_now_us();
	rearm_timer();
	board_irq_restore(saved);
	reply_ok();
	out_kv("t", t);
	out_kv("ch", ch);
	out_kv("on", on);
	out_kv("edge", changed);
}

/* Schedule channel `ch`'s off edge at MCU time `off_at` (restore `off_us` later; 0: stay
 * off), unless the channel is off or already has edges scheduled. Called with interrupts
 * masked (`saved`: as board_irq_save returned it), which it restores. */
static void schedule_cut(uint8_t ch, uint64_t now, uint64_t off_at, uint32_t off_us,
			 uint8_t saved)
{
	struct channel *c = &chans[ch];
	const char *refused = c->off_scheduled || c->restore_scheduled ? "busy"
			      : !c->on					 ? "state"
									 : NULL;
	if (!refused) {
		c->off_at = off_at;
		c->restore_at = off_at + off_us;
		c->off_scheduled = true;
		c->restore_scheduled = off_us != 0;
		rearm_timer();
	}
	board_irq_restore(saved);
	if (refused) {
		reply_error(refused);
		return;
	}
	reply_ok();
	out_kv("t", now);
	out_kv("at", off_at);
	out_kv("ch", ch);
}

static void cmd_cut(const uint32_t *args)
{
	if (!valid_channel(args[0]) || args[1] > DURATION_MAX_US || args[2] > DURATION_MAX_US) {
		reply_error("args");
		return;
	}
	uint8_t saved = board_irq_save();
	uint64_t now = board_now_us();
	schedule_cut((uint8_t)args[0], now, now + args[1], args[2], saved);
}

/* CUTAT: the off edge at an instant of the MCU's own clock, given as its low 32 bits (the
 * host maps its deadline through the clock mapping), so the time the request spent on the
 * line is not added to the delay. The instant is taken as the one nearest to now: up to 2^31
 * us (35 min) ahead. One nearer than CUTAT_LEAD_US, or past, is moved to CUTAT_LEAD_US from
 * now: an edge due sooner waits for the timer interrupt (about 0.1 ms on the AVR) while its
 * restore keeps its own time, so a glitch would come out short. */
#define CUTAT_LEAD_US 200
static void cmd_cutat(const uint32_t *args)
{
	if (!valid_channel(args[0]) || args[2] > DURATION_MAX_US) {
		reply_error("args");
		return;
	}
	uint8_t saved = board_irq_save();
	uint64_t now = board_now_us();
	int32_t ahead = (int32_t)(args[1] - (uint32_t)now);
	uint64_t off_at = now + (ahead > CUTAT_LEAD_US ? (uint64_t)ahead : CUTAT_LEAD_US);
	schedule_cut((uint8_t)args[0], now, off_at, args[2], saved);
}

static void cmd_abort(const uint32_t *args)
{
	if (!valid_channel(args[0])) {
		reply_error("args");
		return;
	}
	uint8_t saved = board_irq_save();
	struct channel *c = &chans[args[0]];
	bool cancelled = c->off_scheduled || c->restore_scheduled;
	cancel_schedule(c);
	rearm_timer();
	board_irq_restore(saved);
	reply_ok();
	out_kv("ch", args[0]);
	out_kv("cancelled", cancelled);
}

static void cmd_safe(const uint32_t *args)
{
	if (!valid_channel(args[0]) || args[1] > 1) {
		reply_error("args");
		return;
	}
	chans[args[0]].safe = args[1];
	store_safe_states();
	reply_ok();
	out_kv("ch", args[0]);
	out_kv("safe", args[1]);
}

static void cmd_wdog(const uint32_t *args)
{
	if (args[0] != 0 && (args[0] < WDOG_MIN_MS || args[0] > WDOG_MAX_MS)) {
		reply_error("args");
		return;
	}
	wdog_ms = args[0];
	reply_ok();
	out_kv("wdog_ms", wdog_ms);
}

static void cmd_rail(const uint32_t *args)
{
	if (!valid_channel(args[0]) || args[1] > 1023 || args[2] > 1023 || args[3] < 1 ||
	    args[3] > 60000 || args[4] > RAIL_MAX_SAMPLES) {
		reply_error("args");
		return;
	}
	rail_configure((uint8_t)args[0], (uint16_t)args[1], (uint16_t)args[2], (uint16_t)args[3],
		       (uint8_t)args[4]);
	reply_ok();
	out_kv("ch", args[0]);
	out_kv("hi", args[1]);
	out_kv("lo", args[2]);
	out_kv("win_ms", args[3]);
	out_kv("nsamp", args[4]);
}

static void cmd_adc(const uint32_t *args)
{
	if (!valid_channel(args[0])) {
		reply_error("args");
		return;
	}
	reply_ok();
	out_kv("ch", args[0]);
	out_kv("v", rail_last_adc((uint8_t)args[0]));
}

const struct command commands[] = {
	{"ID", 0, cmd_id},     {"SYNC", 0, cmd_sync}, {"STATE", 0, cmd_state},
	{"SET", 2, cmd_set},   {"CUT", 3, cmd_cut},   {"CUTAT", 3, cmd_cutat},
	{"ABORT", 1, cmd_abort},
	{"SAFE", 2, cmd_safe}, {"WDOG", 1, cmd_wdog}, {"RAIL", 5, cmd_rail},
	{"ADC", 1, cmd_adc},
};
const uint8_t command_count = sizeof commands / sizeof commands[0];
