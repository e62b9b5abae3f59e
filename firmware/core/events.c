/* The event queue: what happened without a request (BOOT, EDGE, WDOG, RAIL, RAILS), queued by
 * any context and written one line per main-loop pass. */
#include "board.h"
#include "internal.h"
#include "proto.h"

#define EVENT_SLOTS 12

struct event {
	uint8_t kind, ch, on, why;
	uint16_t seq;
	uint64_t t;
};

static const char *const why_names[] = {"set", "cut", "restore", "wdog"};

static struct event events[EVENT_SLOTS];
static uint8_t ev_head, ev_count;
static uint16_t ev_next_seq;

/* The sequence number advances even when the queue is full, so the host sees the gap. */
bool push_event(uint8_t kind, uint8_t ch, bool on, uint8_t why, uint64_t t)
{
	uint16_t seq = ev_next_seq++;
	if (ev_count == EVENT_SLOTS)
		return false;
	struct event *e = &events[(uint8_t)(ev_head + ev_count) % EVENT_SLOTS];
	e->kind = kind;
	e->ch = ch;
	e->on = on;
	e->why = why;
	e->seq = seq;
	e->t = t;
	ev_count++;
	return true;
}

uint8_t core_events_queued(void)
{
	return ev_count;
}

void events_reset(void)
{
	ev_head = ev_count = 0;
	ev_next_seq = 0;
}

static void write_event(const struct event *e)
{
	out_begin();
	out_str("! ");
	out_u64(e->seq);
	switch (e->kind) {
	case EV_BOOT:
		board_uart_write("\n", 1); /* ends a line a reset cut short */
		out_str(" BOOT");
		out_kv("proto", PROTOCOL_VERSION);
		out_kv_str("reset", board_info.reset_cause);
		out_channel_list("on", chans, 0);
		out_kv("t", e->t);
		break;
	case EV_EDGE:
		out_str(" EDGE");
		out_kv("ch", e->ch);
		out_kv("on", e->on);
		out_kv("t", e->t);
		out_kv_str("why", why_names[e->why]);
		break;
	case EV_WDOG:
		out_str(" WDOG");
		out_kv("t", e->t);
		out_kv("silent_ms", wdog_ms);
		break;
	case EV_RAIL_BUSY:
		out_str(" RAIL");
		out_kv("ch", e->ch);
		out_kv("t", e->t);
		out_str(" v0=- hi_us=- lo_us=- min=- end=busy");
		break;
	case EV_RAIL:
		rail_write_capture();
		break;
	case EV_RAILS:
		rail_write_samples();
		break;
	}
	out_send();
}

void write_next_event(void)
{
	struct event e = {0};
	uint8_t saved = board_irq_save();
	bool have = ev_count > 0;
	if (have) {
		e = events[ev_head];
		ev_head = (uint8_t)((ev_head + 1) % EVENT_SLOTS);
		ev_count--;
	}
	board_irq_restore(saved);
	if (have)
		write_event(&e);
}
