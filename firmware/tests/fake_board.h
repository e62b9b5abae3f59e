/* A board for unit tests and the fuzz driver: a clock the test sets, pins and UART output
 * captured in memory. */
#ifndef FAKE_BOARD_H
#define FAKE_BOARD_H

#include <stdbool.h>
#include <stdint.h>

#define FAKE_OUT_MAX 65536

struct fake_board {
	uint64_t now_us;
	bool tick_on_read;	/* advance the clock 1 µs per read (lets spin loops end) */
	uint64_t timer_us;	/* last armed time, BOARD_TIMER_OFF when disarmed */
	bool pin[8];
	unsigned pin_writes;	/* writes that changed a level */
	bool outputs_enabled;	/* board_outputs_enable() was called */
	bool pins_at_enable[8]; /* the levels the pins started driving */
	char out[FAKE_OUT_MAX]; /* everything written to the UART */
	unsigned out_len;
	uint8_t nv[16];
	int irq_depth;
};

extern struct fake_board fake;

void fake_reset(void);
/* Removes and returns the next complete UART line (without "\n"), or NULL if there is none. */
const char *fake_next_line(void);

#endif
