/* Portable firmware core. Concurrency model: the main loop (core_rx_byte, core_poll) and the
 * timer/ADC contexts (core_timer_due, core_adc_sample) share the channel table, the event queue
 * and the rail capture. Timer and ADC contexts never preempt each other (AVR interrupts do not
 * nest); the main loop masks them with board_irq_save() around every shared update. */
#include "core.h"

#include <string.h>

#include "board.h"
#include "proto.h"

#define WDOG_DEFAULT_MS 5000UL
#define WDOG_MIN_MS 50UL
#define WDOG_MAX_MS 600000UL
#define DURATION_MAX_US 4000000000UL
/* Edges closer than this are waited for inside the timer context instead of re-arming the
 * timer: boards arm the timer a little early and the core spins to the exact microsecond. */
#define SPIN_US 100
/* A restore this close after its off edge is written straight after it, before any
 * bookkeeping (which takes ~60 µs on the AVR and would otherwise stretch a short glitch). */
#define GLITCH_DIRECT_US 80
#define EVENT_SLOTS 12
#define RAIL_MAX_SAMPLES 32
#define LAST_REPLY_MAX 128
#define NV_ADDR 0
#define NV_MAGIC 0xA5
#define NO_TIME UINT64_MAX

enum why { WHY_SET, WHY_CUT, WHY_RESTORE, WHY_WDOG };
static const char *const why_names[] = {"set", "cut", "restore", "wdog"};

enum ev_kind { EV_BOOT, EV_EDGE, EV_WDOG, EV_RAIL, EV_RAIL_BUSY, EV_RAILS };

struct event {
	uint8_t kind, ch, on, why;
	uint16_t seq;
	uint64_t t;
};

struct channel {
	bool on;
	bool safe;
	bool off_scheduled;
	bool restore_scheduled;
	uint64_t off_at;
	uint64_t restore_at;
};

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

static struct core_board_info board_info;
static struct channel chans[CORE_CHANNELS];
static struct rail_config rail_cfg[CORE_CHANNELS];
static struct rail_capture cap;
static volatile uint16_t last_adc[CORE_CHANNELS];

static struct event events[EVENT_SLOTS];
static uint8_t ev_head, ev_count;
static uint16_t ev_next_seq;

static uint32_t wdog_ms;
static uint64_t last_request_us;
static uint16_t wdog_trips;

/* Line assembly. */
static char line[PROTO_MAX_REQUEST];
static uint8_t line_len;
static bool line_overlong, line_bad_byte;
/* A \r was received and held back: ignored if the \n follows, a framing error otherwise. */
static bool line_cr;

/* The reply or event being written, and the last reply kept for retried requests. */
static char out[PROTO_MAX_LINE + 6];
static uint8_t out_len;
static char last_reply[LAST_REPLY_MAX];
static uint8_t last_reply_len;
static bool have_last;
static uint16_t last_seq, last_crc;

/* ---- output ---- */

static void out_char(char c)
{
	if (out_len < PROTO_MAX_LINE - 5)
		out[out_len++] = c;
}

static void out_str(const char *s)
{
	while (*s)
		out_char(*s++);
}

static void out_u64(uint64_t v)
{
	char digits[20];
	uint8_t n = proto_format_u64(digits, v);
	for (uint8_t i = 0; i < n; i++)
		out_char(digits[i]);
}

static void out_kv(const char *key, uint64_t v)
{
	out_char(' ');
	out_str(key);
	out_char('=');
	out_u64(v);
}

static void out_kv_str(const char *key, const char *v)
{
	out_char(' ');
	out_str(key);
	out_char('=');
	out_str(v);
}

static void out_begin(void)
{
	out_len = 0;
}

/* Appends "*CRC\n" and writes the line. */
static void out_send(void)
{
	static const char hex[] = "0123456789ABCDEF";
	uint16_t crc = proto_crc16(out, out_len);
	out[out_len++] = '*';
	for (int8_t shift = 12; shift >= 0; shift -= 4)
		out[out_len++] = hex[(crc >> shift) & 0xF];
	out[out_len++] = '\n';
	board_uart_write(out, out_len);
}

static void send_framing_error(const char *code)
{
	out_begin();
	out_str("- ERR ");
	out_str(code);
	out_send();
}

/* ---- events ---- */

/* Caller masks interrupts. The sequence number advances even when the queue is full, so the
 * host sees the gap. */
static bool push_event(uint8_t kind, uint8_t ch, bool on, uint8_t why, uint64_t t)
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

/* which: 0 = on, 1 = safe, 2 = edges still scheduled. */
static void out_channel_list(const char *key, const struct channel *table, uint8_t which)
{
	out_char(' ');
	out_str(key);
	out_char('=');
	for (uint8_t ch = 0; ch < CORE_CHANNELS; ch++) {
		const struct channel *c = &table[ch];
		uint8_t v = which == 0   ? c->on
			    : which == 1 ? c->safe
					 : (uint8_t)(c->off_scheduled + c->restore_scheduled);
		if (ch)
			out_char(',');
		out_char((char)('0' + v));
	}
}

static void out_rail_time(const char *key, bool hit, uint32_t us)
{
	if (hit) {
		out_kv(key, us);
	} else {
		out_kv_str(key, "-");
	}
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
		break;
	case EV_RAILS:
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
		break;
	}
	out_send();
}

/* ---- rail sense ---- */

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

/* Interrupts masked. An off edge starts a capture on a channel with thresholds set. */
static void rail_on_edge(uint8_t ch, bool on, uint64_t t)
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

/* ---- channels and scheduler ---- */

/* Interrupts masked. Bookkeeping of an edge whose pin was written at time t. */
static void record_edge(uint8_t ch, bool on, uint8_t why, uint64_t t)
{
	chans[ch].on = on;
	push_event(EV_EDGE, ch, on, why, t);
	rail_on_edge(ch, on, t);
}

/* Interrupts masked. Writes the pin, then reads the clock: the reported time is the edge's. */
static uint64_t edge(uint8_t ch, bool on, uint8_t why)
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

/* Interrupts masked. */
static void rearm_timer(void)
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

static void cancel_schedule(struct channel *c)
{
	c->off_scheduled = false;
	c->restore_scheduled = false;
}

/* ---- non-volatile safe states ---- */

static void load_safe_states(void)
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

static uint16_t reply_seq;

static void reply_begin(void)
{
	out_begin();
	out_u64(reply_seq);
}

static void reply_error(const char *code)
{
	reply_begin();
	out_str(" ERR ");
	out_str(code);
}

static void reply_ok(void)
{
	reply_begin();
	out_str(" OK");
}

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

static void cmd_cut(const uint32_t *args)
{
	if (!valid_channel(args[0]) || args[1] > DURATION_MAX_US || args[2] > DURATION_MAX_US) {
		reply_error("args");
		return;
	}
	uint8_t ch = (uint8_t)args[0];
	struct channel *c = &chans[ch];
	uint8_t saved = board_irq_save();
	const char *refused = c->off_scheduled || c->restore_scheduled ? "busy"
			      : !c->on					 ? "state"
									 : NULL;
	uint64_t now = board_now_us();
	if (!refused) {
		c->off_at = now + args[1];
		c->restore_at = c->off_at + args[2];
		c->off_scheduled = true;
		c->restore_scheduled = args[2] != 0;
		rearm_timer();
	}
	board_irq_restore(saved);
	if (refused) {
		reply_error(refused);
		return;
	}
	reply_ok();
	out_kv("t", now);
	out_kv("at", now + args[1]);
	out_kv("ch", ch);
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
	struct rail_config *cfg = &rail_cfg[args[0]];
	uint8_t saved = board_irq_save();
	cfg->hi = (uint16_t)args[1];
	cfg->lo = (uint16_t)args[2];
	cfg->win_ms = (uint16_t)args[3];
	cfg->nsamp = (uint8_t)args[4];
	board_irq_restore(saved);
	reply_ok();
	out_kv("ch", args[0]);
	out_kv("hi", cfg->hi);
	out_kv("lo", cfg->lo);
	out_kv("win_ms", cfg->win_ms);
	out_kv("nsamp", cfg->nsamp);
}

static void cmd_adc(const uint32_t *args)
{
	if (!valid_channel(args[0])) {
		reply_error("args");
		return;
	}
	reply_ok();
	out_kv("ch", args[0]);
	out_kv("v", last_adc[args[0]]);
}

struct command {
	const char *name;
	uint8_t nargs;
	void (*run)(const uint32_t *args);
};

static const struct command commands[] = {
	{"ID", 0, cmd_id},     {"SYNC", 0, cmd_sync}, {"STATE", 0, cmd_state},
	{"SET", 2, cmd_set},   {"CUT", 3, cmd_cut},   {"ABORT", 1, cmd_abort},
	{"SAFE", 2, cmd_safe}, {"WDOG", 1, cmd_wdog}, {"RAIL", 5, cmd_rail},
	{"ADC", 1, cmd_adc},
};

/* Splits "CMD a b c" after the sequence number; returns false on an empty token. */
static bool split_tokens(const char *s, uint8_t len, const char **tok, uint8_t *tok_len,
			 uint8_t max, uint8_t *count)
{
	uint8_t n = 0, i = 0;
	while (i <= len) {
		uint8_t start = i;
		while (i < len && s[i] != ' ')
			i++;
		if (i == start || n == max)
			return false;
		tok[n] = s + start;
		tok_len[n] = (uint8_t)(i - start);
		n++;
		i++; /* skip the space (or step past the end) */
	}
	*count = n;
	return true;
}

static void run_request(const char *body, uint8_t len)
{
	const char *tok[PROTO_MAX_ARGS + 1];
	uint8_t tok_len[PROTO_MAX_ARGS + 1];
	uint8_t count = 0;
	if (len == 0 || !split_tokens(body, len, tok, tok_len, PROTO_MAX_ARGS + 1, &count)) {
		/* An empty or missing token: a known command gets "args", anything else "unknown". */
		uint8_t name_len = 0;
		while (name_len < len && body[name_len] != ' ')
			name_len++;
		for (uint8_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
			if (strlen(commands[i].name) == name_len && name_len &&
			    memcmp(commands[i].name, body, name_len) == 0) {
				reply_error("args");
				return;
			}
		}
		reply_error("unknown");
		return;
	}
	for (uint8_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
		const struct command *cmd = &commands[i];
		if (strlen(cmd->name) != tok_len[0] || memcmp(cmd->name, tok[0], tok_len[0]) != 0)
			continue;
		uint32_t args[PROTO_MAX_ARGS] = {0};
		if (count - 1 != cmd->nargs) {
			reply_error("args");
			return;
		}
		for (uint8_t a = 0; a < cmd->nargs; a++) {
			if (!proto_parse_u32(tok[a + 1], tok_len[a + 1], &args[a])) {
				reply_error("args");
				return;
			}
		}
		cmd->run(args);
		return;
	}
	reply_error("unknown");
}

static void handle_line(const char *s, uint8_t len)
{
	uint16_t crc;
	if (len < 5 || s[len - 5] != '*' || !proto_parse_hex4(s + len - 4, &crc) ||
	    proto_crc16(s, (uint8_t)(len - 5)) != crc) {
		send_framing_error("crc");
		return;
	}
	uint8_t body_len = (uint8_t)(len - 5);
	uint8_t digits = 0;
	while (digits < body_len && s[digits] >= '0' && s[digits] <= '9')
		digits++;
	uint32_t seq;
	if (digits == 0 || digits >= body_len || s[digits] != ' ' ||
	    !proto_parse_u32(s, digits, &seq) || seq > 0xFFFF) {
		send_framing_error("frame");
		return;
	}
	last_request_us = board_now_us(); /* a valid request feeds the host-silence watchdog */
	if (have_last && seq == last_seq && crc == last_crc) {
		board_uart_write(last_reply, last_reply_len);
		return;
	}
	reply_seq = (uint16_t)seq;
	run_request(s + digits + 1, (uint8_t)(body_len - digits - 1));
	out_send();
	have_last = out_len <= LAST_REPLY_MAX;
	if (have_last) {
		memcpy(last_reply, out, out_len);
		last_reply_len = out_len;
		last_seq = (uint16_t)seq;
		last_crc = crc;
	}
}

void core_rx_byte(uint8_t byte)
{
	if (byte == '\n') {
		if (line_overlong)
			send_framing_error("long");
		else if (line_bad_byte)
			send_framing_error("frame");
		else if (line_len)
			handle_line(line, line_len);
		line_len = 0;
		line_overlong = line_bad_byte = line_cr = false;
		return;
	}
	/* Only a \r right before the \n is ignored (PROTOCOL.md 1): one anywhere else is a byte
	 * outside 0x20..0x7E, and dropping it would execute the rest of the line. */
	if (line_cr)
		line_bad_byte = true;
	line_cr = byte == '\r';
	if (line_cr)
		return;
	if (line_len == PROTO_MAX_REQUEST) {
		line_overlong = true; /* discard up to the newline */
		return;
	}
	if (byte < 0x20 || byte > 0x7E)
		line_bad_byte = true;
	line[line_len++] = (char)byte;
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
	 * into a spurious trip (decisions.md, item 47). */
	if (now < last_request_us)
		last_request_us = now;
	if (wdog_ms && now - last_request_us >= (uint64_t)wdog_ms * 1000U) {
		watchdog_trip();
		last_request_us = now; /* stays armed: trips again after another silent period */
	}
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

void core_init(const struct core_board_info *info)
{
	uint8_t saved = board_irq_save();
	board_info = *info;
	memset(chans, 0, sizeof chans);
	memset(rail_cfg, 0, sizeof rail_cfg);
	memset(&cap, 0, sizeof cap);
	ev_head = ev_count = 0;
	ev_next_seq = 0;
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
	line_len = 0;
	line_overlong = line_bad_byte = line_cr = false;
	have_last = false;
	/* BOOT's t: every channel is driving its safe state from this instant on. */
	push_event(EV_BOOT, 0, false, 0, last_request_us);
	board_irq_restore(saved);
}
