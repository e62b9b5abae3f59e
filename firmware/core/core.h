/* The portable firmware core: line parser, command dispatch, channel state machine, edge
 * scheduler, host-silence watchdog, rail-sense capture and event queue. It talks to the hardware
 * only through board.h; a board calls the functions below. */
#ifndef CORE_H
#define CORE_H

#include <stdbool.h>
#include <stdint.h>

#define CORE_CHANNELS 4
#define FIRMWARE_VERSION "0.3.0"
#ifndef BUILD_ID
#define BUILD_ID "unknown"
#endif

/* What the board tells the core at every reset. */
struct core_board_info {
	const char *board_name;  /* "nano328p", "host" */
	const char *reset_cause; /* "power", "external", "brownout", "watchdog", "soft", "unknown" */
	uint32_t clock_hz;
};

/* Main-loop context. core_init puts every channel in its safe state and queues BOOT. */
void core_init(const struct core_board_info *info);
void core_rx_byte(uint8_t byte);
/* Watchdog check and at most one queued event written per call; call it every loop pass. */
void core_poll(void);

/* Timer context (interrupt on the AVR): the clock reached the armed time. */
void core_timer_due(void);

/* ADC context: a conversion of channel ch finished with value v (0..1023) at time t_us.
 * Returns the channel to convert next. */
uint8_t core_adc_sample(uint8_t ch, uint16_t v, uint64_t t_us);

/* For tests: number of events waiting to be written. */
uint8_t core_events_queued(void);

#endif
