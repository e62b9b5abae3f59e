/* What the core's files share with each other; a board sees only core.h and board.h.
 *
 * The split follows Klipper's firmware (src/command.c, sched.c, basecmd.c):
 *   command.c  line assembly, framing (CRC, sequence number, replayed replies), tokens,
 *              dispatch through the command table, and the output line every reply is built in
 *   sched.c    the channel table, edges, the edge scheduler (timer context), the host-silence
 *              watchdog, the main loop's poll and core_init
 *   basecmd.c  the commands themselves (ID, SYNC, STATE, SET, CUT, ABORT, SAFE, WDOG, RAIL,
 *              ADC), their table, and the safe states kept in non-volatile storage
 *   events.c   the event queue and its lines (BOOT, EDGE, WDOG, RAIL, RAILS)
 *   rail.c     rail sense: the ADC context and the capture after an off edge
 *
 * Concurrency model: the main loop (core_rx_byte, core_poll) and the timer/ADC contexts
 * (core_timer_due, core_adc_sample) share the channel table, the event queue and the rail
 * capture. Timer and ADC contexts never preempt each other (AVR interrupts do not nest); the
 * main loop masks them with board_irq_save() around every shared update. */
#ifndef CORE_INTERNAL_H
#define CORE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"

#define NO_TIME UINT64_MAX
#define RAIL_MAX_SAMPLES 32

enum why { WHY_SET, WHY_CUT, WHY_RESTORE, WHY_WDOG };

enum ev_kind { EV_BOOT, EV_EDGE, EV_WDOG, EV_RAIL, EV_RAIL_BUSY, EV_RAILS };

struct channel {
	bool on;
	bool safe;
	bool off_scheduled;
	bool restore_scheduled;
	uint64_t off_at;
	uint64_t restore_at;
};

/* ---- command.c: the output line (one at a time, main loop only) and dispatch ---- */

struct command {
	const char *name;
	uint8_t nargs;
	void (*run)(const uint32_t *args);
};

void out_begin(void);
void out_char(char c);
void out_str(const char *s);
void out_u64(uint64_t v);
void out_kv(const char *key, uint64_t v);
void out_kv_str(const char *key, const char *v);
/* which: 0 = on, 1 = safe, 2 = edges still scheduled. */
void out_channel_list(const char *key, const struct channel *table, uint8_t which);
/* Appends "*CRC\n" and writes the line. */
void out_send(void);
/* A reply to the request being run: "SEQ OK" or "SEQ ERR code", fields appended after. */
void reply_ok(void);
void reply_error(const char *code);
void command_reset(void);

/* ---- basecmd.c ---- */

extern const struct command commands[];
extern const uint8_t command_count;
void load_safe_states(void);

/* ---- sched.c ---- */

extern struct core_board_info board_info;
extern struct channel chans[CORE_CHANNELS];
extern uint32_t wdog_ms;
extern uint16_t wdog_trips;
/* When the last valid request arrived: the host-silence watchdog counts from it. */
extern uint64_t last_request_us;
/* Interrupts masked. Writes the pin, then reads the clock: the reported time is the edge's. */
uint64_t edge(uint8_t ch, bool on, uint8_t why);
/* Interrupts masked. Works out the next edge of all channels and arms the timer for it. */
void rearm_timer(void);
void cancel_schedule(struct channel *c);

/* ---- events.c ---- */

/* Caller masks interrupts. False when the queue was full (the sequence number still moved). */
bool push_event(uint8_t kind, uint8_t ch, bool on, uint8_t why, uint64_t t);
/* Main loop: takes the oldest event off the queue and writes its line, if there is one. */
void write_next_event(void);
void events_reset(void);

/* ---- rail.c ---- */

/* Interrupts masked. An off edge starts a capture on a channel with thresholds set. */
void rail_on_edge(uint8_t ch, bool on, uint64_t t);
/* Main loop: sets a channel's thresholds (ADC counts), window and samples, under the lock. */
void rail_configure(uint8_t ch, uint16_t hi, uint16_t lo, uint16_t win_ms, uint8_t nsamp);
uint16_t rail_last_adc(uint8_t ch);
/* The RAIL and RAILS lines' fields of the finished capture; the last one written frees it. */
void rail_write_capture(void);
void rail_write_samples(void);
void rail_reset(void);

#endif
