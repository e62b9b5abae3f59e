#include "fake_board.h"

#include <string.h>

#include "../core/board.h"

struct fake_board fake;
static unsigned read_pos;
static char line_buf[512];

void fake_reset(void)
{
	memset(&fake, 0, sizeof fake);
	memset(fake.nv, 0xFF, sizeof fake.nv);
	fake.timer_us = BOARD_TIMER_OFF;
	read_pos = 0;
}

const char *fake_next_line(void)
{
	for (unsigned i = read_pos; i < fake.out_len; i++) {
		if (fake.out[i] != '\n')
			continue;
		unsigned len = i - read_pos;
		if (len >= sizeof line_buf)
			len = sizeof line_buf - 1;
		memcpy(line_buf, fake.out + read_pos, len);
		line_buf[len] = 0;
		read_pos = i + 1;
		return line_buf;
	}
	return NULL;
}

uint64_t board_now_us(void)
{
	return fake.tick_on_read ? fake.now_us++ : fake.now_us;
}

void board_pin_write(uint8_t ch, bool on)
{
	if (fake.pin[ch] != on)
		fake.pin_writes++;
	fake.pin[ch] = on;
}

void board_outputs_enable(void)
{
	fake.outputs_enabled = true;
	memcpy(fake.pins_at_enable, fake.pin, sizeof fake.pin);
}

void board_timer_arm(uint64_t when_us)
{
	fake.timer_us = when_us;
}

void board_spin_until(uint64_t when_us)
{
	if (fake.now_us < when_us)
		fake.now_us = when_us;
}

void board_uart_write(const char *s, uint8_t len)
{
	if (fake.out_len + len > FAKE_OUT_MAX) {
		fake.out_len = 0; /* the fuzz driver writes a lot; tests never come near this */
		read_pos = 0;
	}
	memcpy(fake.out + fake.out_len, s, len);
	fake.out_len += len;
}

uint8_t board_irq_save(void)
{
	fake.irq_depth++;
	return 0;
}

void board_irq_restore(uint8_t saved)
{
	(void)saved;
	fake.irq_depth--;
}

void board_nv_read(uint8_t addr, uint8_t *buf, uint8_t len)
{
	memcpy(buf, fake.nv + addr, len);
}

void board_nv_write(uint8_t addr, const uint8_t *buf, uint8_t len)
{
	memcpy(fake.nv + addr, buf, len);
}
