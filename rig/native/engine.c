/* Write engine: the writer's slot loop in C, off the GIL, fed with planned batches as it runs.
 *
 * Linux native AIO (io_submit/io_getevents through raw syscalls; no library needed) on an O_DIRECT
 * descriptor. Each slot (a "worker" of the ledger) owns a disjoint stripe and has at most one
 * request in flight, so the queue depth is the slot count and no two requests in flight overlap
 * (docs/decisions.md, "No two requests in flight overlap, and generations are never reused").
 * Every request is timestamped on CLOCK_MONOTONIC right before it is built and submitted and
 * right after its completion is reaped (docs/decisions.md, "Durability is judged on the host's
 * own timestamps"). The record of a write (version 2) is stamped into the slot's buffer,
 * prepared once per run with the payload bases of its places, just before submission (media.c;
 * docs/decisions.md, "Record version 2 stamps a prepared payload"). Completions already in the
 * kernel's AIO ring are read from it; io_getevents is called only to wait (docs/decisions.md,
 * "The write engine is one C thread with Linux AIO").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/aio_abi.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pfr.h"

#define TIMER_BIT (1ULL << 63) /* aio_data of a timed flush: TIMER_BIT | ring index */
#define MAX_SLOTS 1024 /* < 1 << SLOT_BITS */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long sys_io_setup(unsigned nr, aio_context_t *ctx) { return syscall(SYS_io_setup, nr, ctx); }
static long sys_io_destroy(aio_context_t ctx) { return syscall(SYS_io_destroy, ctx); }
static long sys_io_submit(aio_context_t ctx, long n, struct iocb **iocbs)
{
    return syscall(SYS_io_submit, ctx, n, iocbs);
}
static long sys_io_getevents(aio_context_t ctx, long min, long max, struct io_event *events,
                             struct timespec *timeout)
{
    return syscall(SYS_io_getevents, ctx, min, max, events, timeout);
}

/* 0, or the errno of a submission the kernel refused */
static int32_t submit_one(aio_context_t ctx, struct iocb *cb)
{
    struct iocb *list[1] = {cb};
    long done;
    do
        done = sys_io_submit(ctx, 1, list);
    while (done < 0 && (errno == EAGAIN || errno == EINTR));
    return done == 1 ? 0 : (done < 0 ? errno : EIO);
}

/* The completion ring the kernel shares with user space at the context's address (fs/aio.c,
 * struct aio_ring). Reading completions from it needs no system call; the kernel takes back the
 * slots of events reaped this way when it needs them (user_refill_reqs_available). */
struct aio_ring_header {
    unsigned id, nr, head, tail, magic, compat_features, incompat_features, header_length;
};
#define AIO_RING_MAGIC 0xa10a10a1u

/* The context's ring if its layout is the one above, else NULL (then only io_getevents). */
static struct aio_ring_header *ring_of(aio_context_t ctx)
{
    struct aio_ring_header *r = (struct aio_ring_header *)(uintptr_t)ctx;
    if (!r || r->magic != AIO_RING_MAGIC || r->incompat_features != 0 || r->nr == 0 ||
        r->header_length < sizeof(*r))
        return NULL;
    return r;
}

/* Up to `max` completions already in the ring, without a system call: how many. */
static long reap_ring(struct aio_ring_header *r, struct io_event *out, long max)
{
    if (!r)
        return 0;
    unsigned head = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
    unsigned tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE); /* events written before it */
    const struct io_event *events =
        (const struct io_event *)((const char *)r + r->header_length);
    long n = 0;
    for (; head != tail && n < max; n++) {
        out[n] = events[head];
        head = head + 1 == r->nr ? 0 : head + 1;
    }
    if (n)
        __atomic_store_n(&r->head, head, __ATOMIC_RELEASE); /* the kernel may reuse them now */
    return n;
}

/* Live signals for cut strategies (rig/campaign/cutcycle/cuts.py), read by another thread while
 * the engine runs. */
enum {
    LIVE_ACKS,
    LIVE_LAST_ACK_NS,
    LIVE_FLUSHES_IN_FLIGHT,
    LIVE_FLUSHES_DONE,
    LIVE_WRITES_ISSUED, /* writes that reached the device (accepted by io_submit) */
    LIVE_RING_REAPED,   /* completions read from the shared ring without io_getevents */
    LIVE_FIRST_ISSUE_NS, /* issue instant of the first write that reached the device */
    LIVE_N
};
static inline void live_set(int64_t *live, int i, int64_t v)
{
    __atomic_store_n(&live[i], v, __ATOMIC_RELEASE);
}
static inline void live_add(int64_t *live, int i, int64_t v)
{
    __atomic_add_fetch(&live[i], v, __ATOMIC_RELEASE);
}

/* Without branches: the first comparison is a coin toss for random writes, and the
 * mispredictions of an early exit were 3 % of the engine thread at 4 KiB. */
static int overlaps(const int64_t *start, const int64_t *end, uint32_t n, int64_t lba,
                    uint32_t count)
{
    const int64_t last = lba + (int64_t)count;
    int hit = 0;
    for (uint32_t s = 0; s < n; s++)
        hit |= (start[s] < last) & (lba < end[s]);
    return hit;
}

#define SLOT_BITS 11 /* aio_data = (entry << RING_BITS | ring index) << SLOT_BITS | slot */
#define RING_BITS 3
#define MAX_RING (1u << RING_BITS)

/* An AIO context for `depth` requests (kept across batches: io_destroy waits for an RCU grace
 * period, tens of milliseconds). 0 or -errno. */
int pfr_aio_setup(uint32_t depth, uint64_t *ctx)
{
    aio_context_t c = 0;
    if (sys_io_setup(depth, &c) < 0)
        return -errno;
    *ctx = (uint64_t)c;
    return 0;
}

void pfr_aio_destroy(uint64_t ctx) { sys_io_destroy((aio_context_t)ctx); }

/* The ring of planned batches, in the order of their `seq`: batch q lives in ring[q % nring]. */
static struct pfr_batch *available(struct pfr_batch *ring, uint32_t nring, uint64_t seq)
{
    struct pfr_batch *b = &ring[seq % nring];
    int32_t state = __atomic_load_n(&b->state, __ATOMIC_ACQUIRE);
    if ((state != PFR_BATCH_READY && state != PFR_BATCH_RUNNING) || b->seq != seq)
        return NULL;
    if (state == PFR_BATCH_READY) { /* first touch: nothing of it submitted yet */
        int64_t total = b->slot_start[b->nslots_planned];
        for (int64_t i = 0; i < total; i++) {
            b->slot_of[i] = -1;
            b->issue_ns[i] = -2;
            b->complete_ns[i] = -1;
            b->status[i] = 0;
        }
        b->t_count = 0;
        b->started_ns = 0;
        b->inflight = 0;
        b->stuck = 0;
        __atomic_store_n(&b->state, PFR_BATCH_RUNNING, __ATOMIC_RELAXED);
    }
    return b;
}

static void retire(struct pfr_batch *b, int notify_fd)
{
    b->retired_ns = now_ns();
    __atomic_store_n(&b->state, PFR_BATCH_RETIRED, __ATOMIC_RELEASE);
    if (notify_fd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(notify_fd, &one, sizeof(one)); /* an eventfd: cannot block for 1 */
        (void)w;
    }
}

void pfr_batch_publish(struct pfr_batch *b)
{
    __atomic_store_n(&b->state, PFR_BATCH_READY, __ATOMIC_RELEASE);
}

int32_t pfr_batch_state(const struct pfr_batch *b)
{
    return __atomic_load_n(&b->state, __ATOMIC_ACQUIRE);
}

/* The engine's state: what it was given, and per slot (slot nslots: the timer flush). The loop
 * is split the way Klipper's firmware splits its own: choosing what runs next (the scheduling:
 * next_entry, timer_due), the requests themselves (submit_entry, submit_timer_flush,
 * complete_entry, complete_timer), and the loop that drives them (feed_slots, retire_left,
 * reap, pfr_engine_loop). */
struct engine {
    aio_context_t ctx;
    struct aio_ring_header *shared_ring;
    int fd, shared, durable, notify_fd;
    uint32_t nslots, nring, block_size, per_block;
    uint64_t campaign, flags, slot_bytes;
    int64_t flush_every_ns, drain_timeout_ns;
    uint8_t *buffers;
    uint64_t *fold, *k; /* per place of a slot's buffer, and per slot and place (record v2) */
    uint64_t slot_sectors;
    const uint16_t *worker;
    struct pfr_batch *ring;
    volatile int *stop;
    int64_t *live;

    uint64_t stream_seq, head; /* head: the oldest batch not retired */
    int64_t stream_next;
    long inflight, failed;
    int draining, timed_out;
    int64_t stopped_at, last_timer;

    struct iocb cbs[MAX_SLOTS + 1];
    int64_t current[MAX_SLOTS + 1]; /* entry in flight per slot, -1 = idle */
    struct pfr_batch *current_batch[MAX_SLOTS + 1];
    uint64_t slot_seq[MAX_SLOTS]; /* the batch each slot is in (stripes) */
    int64_t next[MAX_SLOTS];      /* its next entry there, -1 = not entered */
    uint8_t dead[MAX_SLOTS];
    int64_t busy_lba[MAX_SLOTS], busy_end[MAX_SLOTS]; /* write in flight */
    struct io_event events[MAX_SLOTS + 1];
};

/* A slot failed: it submits nothing more (in a stream, no slot does). */
static void slot_failed(struct engine *E, uint32_t s)
{
    E->dead[s] = 1;
    E->failed = E->shared ? (long)E->nslots : E->failed + 1;
}

/* Scheduling, stream layout: the stream's next entry in *bp, or -1 with *starving set when no
 * batch is published, or -1 when the entry waits for a write in flight that it overlaps. */
static int64_t next_stream_entry(struct engine *E, struct pfr_batch **bp, int *starving)
{
    struct pfr_batch *b;
    for (;;) {
        b = available(E->ring, E->nring, E->stream_seq);
        if (!b)
            break;
        if (E->stream_next < 0)
            E->stream_next = b->slot_start[0];
        if (E->stream_next < b->slot_start[1])
            break;
        E->stream_seq++; /* this batch is all submitted: on to the next */
        E->stream_next = -1;
    }
    if (!b) {
        *starving = 1;
        return -1;
    }
    int64_t e = E->stream_next;
    if (b->kind[e] == 0 && overlaps(E->busy_lba, E->busy_end, E->nslots, b->lba[e], b->nblocks[e]))
        return -1; /* the stream waits for the write in its way */
    E->stream_next++;
    *bp = b;
    return e;
}

/* Scheduling, stripes layout: slot s's next entry in *bp, or -1 (*starving set) if its next
 * batch is not published yet. */
static int64_t next_slot_entry(struct engine *E, uint32_t s, struct pfr_batch **bp, int *starving)
{
    struct pfr_batch *b;
    for (;;) {
        b = available(E->ring, E->nring, E->slot_seq[s]);
        if (!b)
            break;
        if (E->next[s] < 0)
            E->next[s] = b->slot_start[s];
        if (E->next[s] < b->slot_start[s + 1])
            break;
        E->slot_seq[s]++; /* this slot's part is all submitted: on to the next batch */
        E->next[s] = -1;
    }
    if (!b) {
        *starving = 1;
        return -1;
    }
    *bp = b;
    return E->next[s]++;
}

/* Each slot's buffer holds the payload bases of record v2 (media.c), prepared here once per run
 * so that a write only stamps its headers, its k and its checksums at submission. */
static int prepare_buffers(struct engine *E)
{
    E->slot_sectors = E->slot_bytes / PFR_SECTOR;
    E->fold = malloc(E->slot_sectors * sizeof(uint64_t));
    E->k = malloc((uint64_t)E->nslots * E->slot_sectors * sizeof(uint64_t));
    if (!E->fold || !E->k)
        return -ENOMEM;
    for (uint32_t s = 0; s < E->nslots; s++)
        pfr_stamp_init((uint64_t *)(E->buffers + (uint64_t)s * E->slot_bytes), E->slot_sectors,
                       E->per_block, E->campaign, E->fold, E->k + (uint64_t)s * E->slot_sectors);
    return 0;
}

static void engine_free(struct engine *E)
{
    free(E->fold);
    free(E->k);
    free(E);
}

/* Builds entry e of batch b (a write's record, stamped now, or a flush) and submits it on slot
 * s. 0, or -1 if the slot failed doing so. */
static int submit_entry(struct engine *E, uint32_t s, struct pfr_batch *b, int64_t e)
{
    b->slot_of[e] = (int16_t)s;
    struct iocb *cb = &E->cbs[s];
    memset(cb, 0, sizeof(*cb));
    cb->aio_data = (((uint64_t)e << RING_BITS | (uint64_t)(b - E->ring)) << SLOT_BITS) | s;
    cb->aio_fildes = (uint32_t)E->fd;
    int64_t t = now_ns();
    if (b->kind[e] == 1) {
        cb->aio_lio_opcode = IOCB_CMD_FDSYNC;
    } else {
        uint8_t *buf = E->buffers + (uint64_t)s * E->slot_bytes;
        uint64_t bytes = (uint64_t)b->nblocks[e] * E->block_size;
        if (bytes > E->slot_bytes) {
            b->status[e] = EINVAL;
            slot_failed(E, s);
            return -1;
        }
        pfr_stamp32((uint64_t *)buf, E->per_block, b->nblocks[e], E->campaign,
                    (uint64_t)b->lba[e], b->gens + b->gen_offset[e], E->worker[s], b->op_seq[e],
                    (uint64_t)t, E->flags, E->fold, E->k + (uint64_t)s * E->slot_sectors);
        cb->aio_lio_opcode = IOCB_CMD_PWRITE;
        cb->aio_buf = (uint64_t)(uintptr_t)buf;
        cb->aio_nbytes = bytes;
        cb->aio_offset = b->lba[e] * (int64_t)E->block_size;
        cb->aio_rw_flags = E->durable ? RWF_DSYNC : 0;
    }
    b->issue_ns[e] = t;
    if (!b->started_ns)
        b->started_ns = t;
    b->status[e] = submit_one(E->ctx, cb);
    if (b->status[e]) { /* refused at submission: the request never reached the drive */
        slot_failed(E, s);
        return -1;
    }
    E->current[s] = e;
    E->current_batch[s] = b;
    b->inflight++;
    E->inflight++;
    if (b->kind[e] == 1) {
        live_add(E->live, LIVE_FLUSHES_IN_FLIGHT, 1);
    } else {
        if (!__atomic_load_n(&E->live[LIVE_FIRST_ISSUE_NS], __ATOMIC_ACQUIRE))
            live_set(E->live, LIVE_FIRST_ISSUE_NS, t); /* before the count: a reader of it sees t */
        live_add(E->live, LIVE_WRITES_ISSUED, 1);
        E->busy_lba[s] = b->lba[e];
        E->busy_end[s] = b->lba[e] + b->nblocks[e];
    }
    return 0;
}

/* Feeds every idle slot its next entry; 1 if one waits for a batch not published yet. */
static int feed_slots(struct engine *E)
{
    int starving = 0;
    for (uint32_t s = 0; s < E->nslots && !E->draining; s++) {
        if (E->current[s] != -1 || E->dead[s])
            continue;
        struct pfr_batch *b = NULL;
        int64_t e;
        if (E->shared) {
            e = next_stream_entry(E, &b, &starving);
            if (e < 0)
                break; /* the stream is in order: no other slot can go either */
        } else {
            e = next_slot_entry(E, s, &b, &starving);
            if (e < 0)
                continue;
        }
        submit_entry(E, s, b, e);
    }
    return starving;
}

/* Scheduling of the timer flush: due now, and none in flight. */
static int timer_due(const struct engine *E)
{
    return !E->draining && E->flush_every_ns > 0 && E->current[E->nslots] == -1 &&
           now_ns() - E->last_timer >= E->flush_every_ns;
}

/* A timer flush, logged in the oldest batch not retired (a due one waits for a batch with room). */
static void submit_timer_flush(struct engine *E)
{
    struct pfr_batch *b = available(E->ring, E->nring, E->head);
    if (!b || b->t_count >= b->t_cap)
        return;
    struct iocb *cb = &E->cbs[E->nslots];
    memset(cb, 0, sizeof(*cb));
    cb->aio_data = TIMER_BIT | (uint64_t)(b - E->ring);
    cb->aio_fildes = (uint32_t)E->fd;
    cb->aio_lio_opcode = IOCB_CMD_FDSYNC;
    E->last_timer = now_ns();
    uint64_t i = b->t_count++;
    b->t_issue[i] = E->last_timer;
    b->t_complete[i] = -1;
    b->t_status[i] = submit_one(E->ctx, cb);
    if (!b->t_status[i]) {
        E->current[E->nslots] = (int64_t)i;
        E->current_batch[E->nslots] = b;
        b->inflight++;
        E->inflight++;
        live_add(E->live, LIVE_FLUSHES_IN_FLIGHT, 1);
    }
}

/* Retires, in order, the batches every live slot has left and nothing of is in flight. */
static void retire_left(struct engine *E)
{
    for (;;) {
        struct pfr_batch *b = available(E->ring, E->nring, E->head);
        if (!b || b->inflight > 0)
            return;
        int left = 1;
        if (!E->draining) {
            if (E->shared)
                left = E->stream_seq > E->head;
            else
                for (uint32_t s = 0; s < E->nslots && left; s++)
                    left = E->dead[s] || E->slot_seq[s] > E->head;
        }
        if (!left)
            return;
        retire(b, E->notify_fd);
        E->head++;
    }
}

static void complete_timer(struct engine *E, long res, int64_t t)
{
    struct pfr_batch *b = E->current_batch[E->nslots];
    int64_t i = E->current[E->nslots];
    b->t_complete[i] = res < 0 ? -1 : t;
    b->t_status[i] = res < 0 ? (int32_t)-res : 0;
    b->inflight--;
    E->current[E->nslots] = -1;
    E->current_batch[E->nslots] = NULL;
    live_add(E->live, LIVE_FLUSHES_IN_FLIGHT, -1);
    if (res >= 0)
        live_add(E->live, LIVE_FLUSHES_DONE, 1);
}

static void complete_entry(struct engine *E, uint64_t data, long res, int64_t t)
{
    uint32_t s = (uint32_t)(data & ((1u << SLOT_BITS) - 1));
    struct pfr_batch *b = &E->ring[(data >> SLOT_BITS) & (MAX_RING - 1)];
    int64_t e = (int64_t)(data >> (SLOT_BITS + RING_BITS));
    E->current[s] = -1;
    E->current_batch[s] = NULL;
    E->busy_lba[s] = E->busy_end[s] = 0;
    b->inflight--;
    uint64_t want = b->kind[e] == 1 ? 0 : (uint64_t)b->nblocks[e] * E->block_size;
    if (res < 0 || (b->kind[e] == 0 && (uint64_t)res != want)) {
        b->status[e] = res < 0 ? (int32_t)-res : EIO; /* short write: an I/O error */
        slot_failed(E, s); /* a stream stops at its first error */
    } else {
        b->complete_ns[e] = t;
        if (b->kind[e] == 0) {
            live_set(E->live, LIVE_LAST_ACK_NS, t);
            live_add(E->live, LIVE_ACKS, 1);
        } else {
            live_add(E->live, LIVE_FLUSHES_DONE, 1);
        }
    }
    if (b->kind[e] == 1)
        live_add(E->live, LIVE_FLUSHES_IN_FLIGHT, -1);
}

/* Takes the completions there are: from the shared ring if any, else waits in io_getevents (at
 * most 20 ms, to see the stop flag; less when a timer flush is due or a slot starves). */
static void reap(struct engine *E, int starving)
{
    long got = reap_ring(E->shared_ring, E->events, E->nslots + 1);
    if (got > 0) {
        live_add(E->live, LIVE_RING_REAPED, got);
    } else {
        int64_t wait = starving ? 500000 : 20000000;
        if (E->flush_every_ns > 0 && !E->draining) {
            int64_t due = E->last_timer + E->flush_every_ns - now_ns();
            if (due < wait)
                wait = due > 0 ? due : 0;
        }
        struct timespec timeout = {wait / 1000000000LL, wait % 1000000000LL};
        got = sys_io_getevents(E->ctx, 1, E->nslots + 1, E->events, &timeout);
    }
    int64_t t = now_ns(); /* right after the completions are reaped, either way */
    if (got < 0 && errno != EINTR) {
        E->timed_out = 1; /* the context is unusable: what is in flight never comes back */
        E->draining = 1;
        return;
    }
    for (long k = 0; k < got; k++) {
        E->inflight--;
        long res = (long)E->events[k].res;
        if (E->events[k].data & TIMER_BIT)
            complete_timer(E, res, t);
        else
            complete_entry(E, E->events[k].data, res, t);
    }
}

/* At the end: requests still in flight are marked ETIMEDOUT and their batches stuck; every
 * batch left is retired, in order (ones never started submitted nothing). 1 if any was stuck. */
static int finish(struct engine *E)
{
    int stuck = E->inflight > 0;
    for (uint32_t s = 0; s <= E->nslots && stuck; s++) {
        struct pfr_batch *b = E->current_batch[s];
        if (!b)
            continue;
        b->stuck = 1;
        if (s < E->nslots)
            b->status[E->current[s]] = ETIMEDOUT;
        else
            b->t_status[E->current[s]] = ETIMEDOUT;
    }
    for (struct pfr_batch *b; (b = available(E->ring, E->nring, E->head)) != NULL; E->head++)
        retire(b, E->notify_fd);
    return stuck;
}

/* Runs planned batches back to back, without letting the queue drain between them, until the
 * stop flag is set or every slot failed; then waits for what is in flight (at most
 * drain_timeout_ns after stopping) and retires every batch it started or was given.
 *
 * The caller keeps the ring filled from another thread: it publishes batch q (seq q, in
 * ring[q % nring]) once batch q - nring is retired and its results read. While the caller plans
 * and logs, the engine goes on with the batches already published; a slot whose next batch is
 * not published yet waits for it (the only way the queue can thin out).
 *
 * Plan of one batch, stripes layout (shared = 0): entries grouped by slot; slot s runs entries
 * slot_start[s] .. slot_start[s+1]-1 in order, then moves to the next batch on its own (so slots
 * drift at most nring - 1 batches apart). Stream layout (shared = 1): one queue slot_start[0] ..
 * slot_start[1]-1 taken in order by whichever slot is idle, batch after batch; a write that would
 * overlap one in flight (of any batch) waits, with everything after it, until that one
 * completes, so no two requests in flight ever overlap either way. slot_of[e] says which slot ran
 * entry e; worker[s] is the worker id slot s writes into the headers (and the ledger's worker).
 *   kind 0 = write of nblocks at lba with generations gens[gen_offset ..], 1 = flush (fdatasync).
 * Results per entry: issue_ns (-2 = never submitted), complete_ns (-1 = never completed),
 * status (0 ok, else errno). A slot that fails (an error, a short write, a refused submission)
 * submits nothing more in this run (a stream: no slot does). Timer flushes (every
 * flush_every_ns, engine-wide) are logged in the oldest batch not retired (t_* arrays, at most
 * t_cap per batch; a due flush waits for room).
 * A batch is retired (state RETIRED, then 8 bytes written to notify_fd, an eventfd) once every
 * live slot has moved past it and none of its requests (timer flushes included) is in flight;
 * batches retire in seq order.
 * live[LIVE_N] is updated as requests complete (acknowledgements, flushes in flight, and how
 * many completions were read from the shared ring rather than by the io_getevents call).
 * `ctx` comes from pfr_aio_setup with a depth of at least nslots + 1.
 * Returns 0, or -EINVAL for a bad slot or ring count, or 1 if requests were still in flight at
 * the drain timeout (marked ETIMEDOUT, their batches `stuck`; their buffers and the context must
 * then never be reused: the kernel may still write from them). */
int pfr_engine_loop(uint64_t aio, int fd, uint32_t nslots, int shared, uint32_t block_size,
                    uint64_t campaign, int durable, int64_t flush_every_ns,
                    int64_t drain_timeout_ns, uint8_t *buffers, uint64_t slot_bytes,
                    const uint16_t *worker, struct pfr_batch *ring, uint32_t nring,
                    int notify_fd, volatile int *stop, int64_t *live)
{
    if (nslots == 0 || nslots > MAX_SLOTS || nring == 0 || nring > MAX_RING)
        return -EINVAL;
    /* On the heap, not in thread-local storage: in a shared library every access to a __thread
     * array went through __tls_get_addr (4 % of the engine thread at 4 KiB). */
    struct engine *E = calloc(1, sizeof(*E));
    if (!E)
        return -ENOMEM;
    E->ctx = (aio_context_t)aio;
    E->shared_ring = ring_of(E->ctx);
    E->fd = fd;
    E->shared = shared;
    E->durable = durable;
    E->notify_fd = notify_fd;
    E->nslots = nslots;
    E->nring = nring;
    E->block_size = block_size;
    E->per_block = block_size / PFR_SECTOR;
    E->campaign = campaign;
    E->flags = durable ? 1 : 0;
    E->slot_bytes = slot_bytes;
    E->flush_every_ns = flush_every_ns;
    E->drain_timeout_ns = drain_timeout_ns;
    E->buffers = buffers;
    E->worker = worker;
    E->ring = ring;
    E->stop = stop;
    E->live = live;
    E->stream_next = -1;
    E->last_timer = now_ns();
    for (uint32_t s = 0; s <= nslots; s++)
        E->current[s] = -1;
    for (uint32_t s = 0; s < nslots; s++)
        E->next[s] = -1;
    if (prepare_buffers(E) < 0) {
        engine_free(E);
        return -ENOMEM;
    }

    for (;;) {
        if (!E->draining && (*stop || E->failed == (long)nslots)) {
            E->draining = 1;
            E->stopped_at = now_ns();
        }
        int starving = feed_slots(E);
        if (timer_due(E))
            submit_timer_flush(E);
        retire_left(E);
        if (E->draining && (E->inflight == 0 || E->timed_out))
            break;
        if (E->inflight == 0) {
            if (starving) { /* nothing to reap: give the caller a moment to publish */
                struct timespec pause = {0, 100000};
                nanosleep(&pause, NULL);
            }
            continue;
        }
        if (E->draining && now_ns() - E->stopped_at > drain_timeout_ns) {
            E->timed_out = 1; /* the batches are retired as they are, stuck requests marked */
            continue;
        }
        reap(E, starving);
    }
    int stuck = finish(E);
    engine_free(E);
    return stuck;
}
