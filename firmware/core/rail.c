/* Rail sense: every channel's last ADC reading, and one capture at a time after an off edge
 * (the times the rail fell below its thresholds, its minimum, and optional samples). The ADC
 * context fills it; its RAIL and RAILS lines are written by the main loop (events.c). */
#include <string.h>

#include "board.h"
#include "internal.h"

struct rail_config {
	uint16_t hi, lo;
	uint16_t win_ms;
	uint8_t nsamp;
};

enum rail_state { RAIL_IDLE, RAIL_RUNNING, RAIL_DONE };
enum rail_end { END_FELL, END_TIMEOUT, END_ON };
static const char *const end_names[] = {"fell", "timeout", "on"};

/* One capture at a time; its report stays here until the main loop has written it. */
struct rail_capture {
	volatile uint8_t state;
	uint8_t ch, end, nsamp, n;
	bool hi_hit, lo_hit;
	uint16_t hi, lo, v0, min;
	uint32_t hi_us, lo_us, win_us, dt_us;
	uint64_t t0;
	uint16_t samples[RAIL_MAX_SAMPLES];
};

static struct rail_config rail_cfg[CORE_CHANNELS];
static struct rail_capture cap;
static volatile uint16_t last_adc[CORE_CHANNELS];

static void rail_finish(uint8_t end)
{
	cap.end = end;
	cap.state = RAIL_DONE;
	if (!push_event(EV_RAIL, cap.ch, false, 0, cap.t0)) {
		cap.state = RAIL_IDLE;
		return;
	}
	if (cap.nsamp && !push_event(EV_RAILS, cap.ch, false, 0, cap.t0))
		cap.nsamp = 0; /* the RAIL line then releases the capture */
}

static bool rail_fell(void)
{
	return cap.lo_hit || (cap.lo == 0 && cap.hi_hit);
}

void rail_on_edge(uint8_t ch, bool on, uint64_t t)
{
	if (on) {
		if (cap.state == RAIL_RUNNING && cap.ch == ch)
			rail_finish(rail_fell() ? END_FELL : END_ON);
		return;
	}
	const struct rail_config *cfg = &rail_cfg[ch];
	if (cfg->hi == 0 && cfg->lo == 0)
		return;
	if (cap.state != RAIL_IDLE) {
		push_event(EV_RAIL_BUSY, ch, false, 0, t);
		return;
	}
	cap.ch = ch;
	cap.t0 = t;
	cap.hi = cfg->hi;
	cap.lo = cfg->lo;
	cap.v0 = last_adc[ch];
	cap.min = cap.v0;
	cap.hi_hit = cap.lo_hit = false;
	cap.hi_us = cap.lo_us = 0;
	cap.win_us = (uint32_t)cfg->win_ms * 1000UL;
	cap.nsamp = cfg->nsamp;
	cap.dt_us = cfg->nsamp ? cap.win_us / cfg->nsamp : 0;
	cap.n = 0;
	cap.state = RAIL_RUNNING;
}

uint8_t core_adc_sample(uint8_t ch, uint16_t v, uint64_t t_us)
{
	if (ch >= CORE_CHANNELS)
		return 0;
	last_adc[ch] = v;
	if (cap.state != RAIL_RUNNING)
		return (uint8_t)((ch + 1) % CORE_CHANNELS);
	if (ch == cap.ch && t_us >= cap.t0) {
		uint64_t since = t_us - cap.t0;
		uint32_t elapsed = since > UINT32_MAX ? UINT32_MAX : (uint32_t)since;
		if (v < cap.min)
			cap.min = v;
		if (!cap.hi_hit && v < cap.hi) {
			cap.hi_hit = true;
			cap.hi_us = elapsed;
		}
		if (!cap.lo_hit && v < cap.lo) {
			cap.lo_hit = true;
			cap.lo_us = elapsed;
		}
		if (cap.n < cap.nsamp && elapsed >= (uint32_t)cap.n * cap.dt_us)
			cap.samples[cap.n++] = v;
		if (elapsed >= cap.win_us)
			rail_finish(rail_fell() ? END_FELL : END_TIMEOUT);
	}
	return cap.state == RAIL_RUNNING ? cap.ch : (uint8_t)((ch + 1) % CORE_CHANNELS);
}

void rail_configure(uint8_t ch, uint16_t hi, uint16_t lo, uint16_t win_ms, uint8_t nsamp)
{
	struct rail_config *cfg = &rail_cfg[ch];
	uint8_t saved = board_irq_save();
	cfg->hi = hi;
	cfg->lo = lo;
	cfg->win_ms = win_ms;
	cfg->nsamp = nsamp;
	board_irq_restore(saved);
}

uint16_t rail_last_adc(uint8_t ch)
{
	return last_adc[ch];
}

static void out_rail_time(const char *key, bool hit, uint32_t us)
{
	if (hit) {
		out_kv(key, us);
	} else {
		out_kv_str(key, "-");
	}
}

void rail_write_capture(void)
{
	out_str(" RAIL");
	out_kv("ch", cap.ch);
	out_kv("t", cap.t0);
	out_kv("v0", cap.v0);
	out_rail_time("hi_us", cap.hi_hit, cap.hi_us);
	out_rail_time("lo_us", cap.lo_hit, cap.lo_us);
	out_kv("min", cap.min);
	out_kv_str("end", end_names[cap.end]);
	if (cap.nsamp == 0)
		cap.state = RAIL_IDLE;
}

void rail_write_samples(void)
{
	out_str(" RAILS");
	out_kv("ch", cap.ch);
	out_kv("dt_us", cap.dt_us);
	out_str(" v=");
	for (uint8_t i = 0; i < cap.n; i++) {
		if (i)
			out_char(',');
		out_u64(cap.samples[i]);
	}
	cap.state = RAIL_IDLE;
}

void rail_reset(void)
{
	memset(rail_cfg, 0, sizeof rail_cfg);
	memset(&cap, 0, sizeof cap);
}
