/* AVR board: ATmega328P at 16 MHz on an Arduino Nano.
 *
 * Pin map (see README.md):
 *   channel 0..3 switch  -> D4..D7 (PD4..PD7), high = rail powered
 *   channel 0..3 sense   -> A0..A3 (ADC0..ADC3), AVCC reference
 *   UART                 -> D0/D1 (USB serial), 115200 8N1
 *
 * Clock: Timer1 free-running at F_CPU/8 = 2 MHz; its overflows extend it to 48 bits in
 * software. Compare-match A wakes the core a little before a scheduled edge and the core spins
 * to the exact microsecond. The hardware watchdog (250 ms) resets the MCU if the main loop
 * hangs. */
#include <avr/eeprom.h>
#include <avr/interrupt.h>
#include <avr/io.h>
#include <avr/wdt.h>
#include <stdint.h>

#include "../core/board.h"
#include "../core/core.h"

#define CHANNEL_MASK 0xF0
#define UBRR_115200_U2X 16 /* 16 MHz / (8 * (16 + 1)) = 117647 baud, +2.1% */
#define RX_RING 128	   /* power of two */
/* Wake this long before an edge; must stay below the core's SPIN_US (100). Covers interrupt
 * entry and the core's scheduling work (measured in simavr, docs/firmware-timing.md). */
#define TIMER_LEAD_US 80
#define ADMUX_AVCC _BV(REFS0)

static volatile uint8_t rx_ring[RX_RING];
static volatile uint8_t rx_head, rx_tail;

/* MCUSR is read before main (and cleared, as the datasheet asks, so a later watchdog reset is
 * seen as one). Optiboot clears MCUSR itself and hands the flags over in r2. */
static uint8_t reset_flags __attribute__((section(".noinit")));
static uint8_t bootloader_flags __attribute__((section(".noinit")));
void save_reset_flags(void) __attribute__((naked, used, section(".init3")));
void save_reset_flags(void)
{
	__asm__ __volatile__("sts %0, r2" : "=m"(bootloader_flags));
	reset_flags = MCUSR;
	MCUSR = 0;
	wdt_disable(); /* after a watchdog reset the WDT stays on with its shortest timeout */
}

static const char *reset_cause(void)
{
	uint8_t f = reset_flags ? reset_flags : bootloader_flags;
	if (f & _BV(WDRF))
		return "watchdog";
	if (f & _BV(BORF))
		return "brownout";
	if (f & _BV(EXTRF))
		return "external";
	if (f & _BV(PORF))
		return "power";
	return "unknown";
}

/* ---- clock and timer ---- */

/* µs at the last Timer1 overflow (65536 ticks = 32768 µs). Kept in µs so reading the clock is
 * one 64-bit add, not 64-bit shifts: the core reads it in its timing spin. */
static volatile uint64_t overflow_us;

/* Never steps back: an overflow is counted by its interrupt or, while still pending, here. That
 * holds as long as nothing clears TOV1 but the interrupt: the firmware never writes TIFR1 after
 * start-up (simavr 1.6, Debian's, clears every Timer1 flag on any TIFR1 write, which made this
 * clock lose 32768 µs; docs/decisions.md, "The firmware core is split as Klipper's, with an
 * explicit command table"). No run-time guard here: 64-bit work costs microseconds on the AVR,
 * and this is read between a pin write and the next (glitch widths). */
uint64_t board_now_us(void)
{
	uint8_t sreg = SREG;
	cli();
	uint16_t ticks = TCNT1;
	uint64_t base = overflow_us;
	/* An overflow not yet counted by its interrupt (we may be inside another ISR). */
	if ((TIFR1 & _BV(TOV1)) && ticks < 0x8000)
		base += 32768U;
	SREG = sreg;
	return base + (ticks >> 1);
}

ISR(TIMER1_OVF_vect)
{
	overflow_us += 32768U;
}

ISR(TIMER1_COMPA_vect)
{
	core_timer_due();
}

void board_timer_arm(uint64_t when_us)
{
	if (when_us == BOARD_TIMER_OFF) {
		TIMSK1 &= (uint8_t)~_BV(OCIE1A);
		return;
	}
	uint64_t wake_us = when_us > TIMER_LEAD_US ? when_us - TIMER_LEAD_US : 0;
	/* A wake time already passed (or about to be) must still fire: 16 ticks give the code
	 * below time to write OCR1A before the counter gets there. One beyond this 32 ms period
	 * fires early; the core then re-arms. Overflows happen at multiples of 32768 µs, so the
	 * compare value is the wake time's low bits in ticks. A stale OCF1A (a match while
	 * disarmed) is left set on purpose: it only wakes the core early, and the core re-arms.
	 * Clearing it (TIFR1 = _BV(OCF1A)) also cleared a pending TOV1 in simavr 1.6, losing a
	 * clock overflow: the clock stepped back 32768 µs and the host watchdog tripped. */
	if (wake_us < board_now_us() + 8)
		OCR1A = (uint16_t)(TCNT1 + 16);
	else
		OCR1A = (uint16_t)((uint16_t)wake_us << 1);
	TIMSK1 |= _BV(OCIE1A);
}

void board_spin_until(uint64_t when_us)
{
	/* 64-bit arithmetic costs ~10 µs a step with avr-gcc: compare raw 16-bit ticks instead.
	 * Valid while when_us is within ±16 ms of now (it is at most SPIN_US ahead). */
	uint16_t target = (uint16_t)((uint16_t)when_us << 1);
	while ((int16_t)(TCNT1 - target) < 0) {
	}
}

static void timer_init(void)
{
	TCCR1A = 0;
	TCCR1B = _BV(CS11); /* normal mode, clk/8 */
	TCNT1 = 0;
	TIFR1 = _BV(TOV1) | _BV(OCF1A);
	TIMSK1 = _BV(TOIE1);
}

/* ---- channels ---- */

static const uint8_t channel_bits[4] = {_BV(PD4), _BV(PD5), _BV(PD6), _BV(PD7)};

void board_pin_write(uint8_t ch, bool on)
{
	uint8_t bit = channel_bits[ch & 3];
	if (on)
		PORTD |= bit;
	else
		PORTD &= (uint8_t)~bit;
}

/* ---- UART ---- */

void board_outputs_enable(void)
{
	DDRD |= CHANNEL_MASK; /* PORTD already holds the safe levels: no glitch */
}

static void uart_init(void)
{
	UCSR0A = _BV(U2X0);
	UBRR0 = UBRR_115200_U2X;
	UCSR0C = _BV(UCSZ01) | _BV(UCSZ00);
	UCSR0B = _BV(RXEN0) | _BV(TXEN0) | _BV(RXCIE0);
}

ISR(USART_RX_vect)
{
	uint8_t byte = UDR0;
	uint8_t next = (uint8_t)((rx_head + 1) & (RX_RING - 1));
	if (next != rx_tail) { /* full: drop; the line then fails its checksum */
		rx_ring[rx_head] = byte;
		rx_head = next;
	}
}

void board_uart_write(const char *s, uint8_t len)
{
	for (uint8_t i = 0; i < len; i++) {
		while (!(UCSR0A & _BV(UDRE0))) {
		}
		UDR0 = (uint8_t)s[i];
	}
}

/* ---- ADC: one conversion at a time, the core picks the next channel ---- */

static void adc_init(void)
{
	DIDR0 = 0x0F; /* ADC0..3 analog only */
	ADMUX = ADMUX_AVCC;
	/* clk/128 = 125 kHz: 13 ADC clocks = 104 µs per reading, full 10-bit accuracy. */
	ADCSRA = _BV(ADEN) | _BV(ADIE) | _BV(ADPS2) | _BV(ADPS1) | _BV(ADPS0);
	ADCSRA |= _BV(ADSC);
}

ISR(ADC_vect)
{
	uint16_t v = ADC;
	uint8_t ch = ADMUX & 0x0F;
	uint8_t next = core_adc_sample(ch, v, board_now_us());
	ADMUX = (uint8_t)(ADMUX_AVCC | next);
	ADCSRA |= _BV(ADSC);
}

/* ---- misc ---- */

uint8_t board_irq_save(void)
{
	uint8_t sreg = SREG;
	cli();
	return sreg;
}

void board_irq_restore(uint8_t saved)
{
	SREG = saved;
}

void board_nv_read(uint8_t addr, uint8_t *buf, uint8_t len)
{
	eeprom_read_block(buf, (const void *)(uintptr_t)addr, len);
}

void board_nv_write(uint8_t addr, const uint8_t *buf, uint8_t len)
{
	eeprom_update_block(buf, (void *)(uintptr_t)addr, len);
}

int main(void)
{
	timer_init();
	uart_init();
	struct core_board_info info = {
		.board_name = "nano328p", .reset_cause = reset_cause(), .clock_hz = F_CPU};
	core_init(&info); /* safe levels into PORTD, then board_outputs_enable() drives them */
	adc_init();
	wdt_enable(WDTO_250MS);
	sei();
	for (;;) {
		while (rx_tail != rx_head) {
			uint8_t byte = rx_ring[rx_tail];
			rx_tail = (uint8_t)((rx_tail + 1) & (RX_RING - 1));
			core_rx_byte(byte);
		}
		core_poll();
		wdt_reset();
	}
}
