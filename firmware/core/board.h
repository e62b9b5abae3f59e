/* What the portable core needs from a board. Each board (AVR, host) implements every function
 * here once; the core never includes a platform header. */
#ifndef BOARD_H
#define BOARD_H

#include <stdbool.h>
#include <stdint.h>

/* MCU clock in microseconds since reset; never wraps in practice (48-bit on the AVR). */
uint64_t board_now_us(void);

/* Drive a channel's switch: on = rail powered. Must be fast (called from timer context). */
void board_pin_write(uint8_t ch, bool on);

/* Start driving the channel pins (with the levels board_pin_write set). Until then the board's
 * pulls hold every switch at "powered", as during a reset. Called once, by core_init. */
void board_outputs_enable(void);

/* Call core_timer_due() once the clock reaches when_us (earlier is allowed, later is the error
 * the timing tests measure). BOARD_TIMER_OFF disarms. Called with interrupts masked. */
#define BOARD_TIMER_OFF UINT64_MAX
void board_timer_arm(uint64_t when_us);

/* Busy-wait until the clock reaches when_us, as precisely as the board can; when_us is at most
 * SPIN_US (100 µs) ahead. Called from timer context for the last stretch before an edge. */
void board_spin_until(uint64_t when_us);

/* Blocking write of one complete line (the core includes the newline). Main-loop context only. */
void board_uart_write(const char *s, uint8_t len);

/* Critical section against the timer and ADC interrupts. */
uint8_t board_irq_save(void);
void board_irq_restore(uint8_t saved);

/* Non-volatile bytes (EEPROM on the AVR). Unwritten storage reads as 0xFF. */
void board_nv_read(uint8_t addr, uint8_t *buf, uint8_t len);
void board_nv_write(uint8_t addr, const uint8_t *buf, uint8_t len);

#endif
