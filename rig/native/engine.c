/* Write engine: the writer's slot loop in C, off the GIL, fed with planned batches as it runs.
 *
 * Linux native AIO (io_submit/io_getevents through raw syscalls; no library needed) on an O_DIRECT
 * descriptor. Each slot (a "worker" of the ledger) owns a disjoint stripe and has at most one
 * request in flight, so the queue depth is the slot count and no two requests in flight overlap
 * (docs/decisions.md 1). Every request is timestamped on CLOCK_MONOTONIC right before it is built
 * and submitted and right after its completion is reaped (docs/decisions.md 3). The record of a
 * write is generated into the slot's buffer just before submission (media.c). Completions
 * already in the kernel's AIO ring are read from it; io_getevents is called only to wait
 * (docs/decisions.md 150).
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

/* Live signals for cut strategies (rig/cuts.py), read by another thread while the engine runs. */
enum {
    LIVE_ACKS,
    LIVE_LAST_ACK_NS,
    LIVE_FLUSHES_IN_FLIGHT,
    LIVE_FLUSHES_DONE,
    LIVE_WRITES_ISSUED, /* writes that reached the device (accepted by io_submit) */
    LIVE_RING_REAPED,   /* completions read from the shared ring without io_getevents */
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

/* The engine's state per slot (slot nslots: the timer flush). */
struct slots {
    struct iocb cbs[MAX_SLOTS + 1];
    int64_t current[MAX_SLOTS + 1]; /* entry in flight per slot, -1 = idle */
    struct pfr_batch *current_batch[MAX_SLOTS + 1];
    uint64_t slot_seq[MAX_SLOTS]; /* the batch each slot is in (stripes) */
    int64_t next[MAX_SLOTS];      /* its next entry there, -1 = not entered */
    uint8_t dead[MAX_SLOTS];
    int64_t busy_lba[MAX_SLOTS], busy_end[MAX_SLOTS]; /* write in flight */
    struct io_event events[MAX_SLOTS + 1];
};

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
    aio_context_t ctx = (aio_context_t)aio;
    struct aio_ring_header *shared_ring = ring_of(ctx);

    /* Per-slot state on the heap, not in thread-local storage: in a shared library every
     * access to a __thread array went through __tls_get_addr (4 % of the engine thread at 4 KiB). */
    struct slots *st = calloc(1, sizeof(*st));
    if (!st)
        return -ENOMEM;
    struct iocb *cbs = st->cbs;
    int64_t *current = st->current;
    struct pfr_batch **current_batch = st->current_batch;
    uint64_t *slot_seq = st->slot_seq;
    int64_t *next = st->next;
    uint8_t *dead = st->dead;
    int64_t *busy_lba = st->busy_lba, *busy_end = st->busy_end;
    struct io_event *events = st->events;
    uint64_t stream_seq = 0, head = 0; /* head: the oldest batch not retired */
    int64_t stream_next = -1;
    const uint32_t per_block = block_size / PFR_SECTOR;
    const uint64_t flags = durable ? 1 : 0;
    long inflight = 0, failed = 0;
    int draining = 0, timed_out = 0;
    int64_t stopped_at = 0, last_timer = now_ns();

    for (uint32_t s = 0; s <= nslots; s++) {
        current[s] = -1;
        current_batch[s] = NULL;
    }
    for (uint32_t s = 0; s < nslots; s++) {
        slot_seq[s] = 0;
        next[s] = -1;
        dead[s] = 0;
        busy_lba[s] = busy_end[s] = 0;
    }

    for (;;) {
        if (!draining && (*stop || failed == (long)nslots)) {
            draining = 1;
            stopped_at = now_ns();
        }
        int starving = 0; /* an idle slot waits for a batch the caller has not published yet */
        /* feed every idle slot its next entry */
        for (uint32_t s = 0; s < nslots && !draining; s++) {
            if (current[s] != -1 || dead[s])
                continue;
            struct pfr_batch *b;
            int64_t e;
            if (shared) {
                for (;;) {
                    b = available(ring, nring, stream_seq);
                    if (!b)
                        break;
                    if (stream_next < 0)
                        stream_next = b->slot_start[0];
                    if (stream_next < b->slot_start[1])
                        break;
                    stream_seq++; /* this batch is all submitted: on to the next */
                    stream_next = -1;
                }
                if (!b) {
                    starving = 1;
                    break;
                }
                e = stream_next;
                if (b->kind[e] == 0 &&
                    overlaps(busy_lba, busy_end, nslots, b->lba[e], b->nblocks[e]))
                    break; /* the stream waits for the write in its way */
                stream_next++;
            } else {
                for (;;) {
                    b = available(ring, nring, slot_seq[s]);
                    if (!b)
                        break;
                    if (next[s] < 0)
                        next[s] = b->slot_start[s];
                    if (next[s] < b->slot_start[s + 1])
                        break;
                    slot_seq[s]++; /* this slot's part is all submitted: on to the next batch */
                    next[s] = -1;
                }
                if (!b) {
                    starving = 1;
                    continue;
                }
                e = next[s]++;
            }
            b->slot_of[e] = (int16_t)s;
            struct iocb *cb = &cbs[s];
            memset(cb, 0, sizeof(*cb));
            cb->aio_data = (((uint64_t)e << RING_BITS | (uint64_t)(b - ring)) << SLOT_BITS) | s;
            cb->aio_fildes = (uint32_t)fd;
            int64_t t = now_ns();
            if (b->kind[e] == 1) {
                cb->aio_lio_opcode = IOCB_CMD_FDSYNC;
            } else {
                uint8_t *buf = buffers + (uint64_t)s * slot_bytes;
                uint64_t bytes = (uint64_t)b->nblocks[e] * block_size;
                if (bytes > slot_bytes) {
                    b->status[e] = EINVAL;
                    dead[s] = 1;
                    failed = shared ? (long)nslots : failed + 1;
                    continue;
                }
                pfr_build32((uint64_t *)buf, per_block, b->nblocks[e], campaign,
                            (uint64_t)b->lba[e], b->gens + b->gen_offset[e], worker[s],
                            b->op_seq[e], (uint64_t)t, flags);
                cb->aio_lio_opcode = IOCB_CMD_PWRITE;
                cb->aio_buf = (uint64_t)(uintptr_t)buf;
                cb->aio_nbytes = bytes;
                cb->aio_offset = b->lba[e] * (int64_t)block_size;
                cb->aio_rw_flags = durable ? RWF_DSYNC : 0;
            }
            b->issue_ns[e] = t;
            if (!b->started_ns)
                b->started_ns = t;
            b->status[e] = submit_one(ctx, cb);
            if (b->status[e]) { /* refused at submission: the request never reached the drive */
                dead[s] = 1;
                failed = shared ? (long)nslots : failed + 1;
                continue;
            }
            current[s] = e;
            current_batch[s] = b;
            b->inflight++;
            inflight++;
            if (b->kind[e] == 1) {
                live_add(live, LIVE_FLUSHES_IN_FLIGHT, 1);
            } else {
                live_add(live, LIVE_WRITES_ISSUED, 1);
                busy_lba[s] = b->lba[e];
                busy_end[s] = b->lba[e] + b->nblocks[e];
            }
        }
        if (!draining && flush_every_ns > 0 && current[nslots] == -1 &&
            now_ns() - last_timer >= flush_every_ns) {
            struct pfr_batch *b = available(ring, nring, head);
            if (b && b->t_count < b->t_cap) { /* else it waits for a batch with room */
                struct iocb *cb = &cbs[nslots];
                memset(cb, 0, sizeof(*cb));
                cb->aio_data = TIMER_BIT | (uint64_t)(b - ring);
                cb->aio_fildes = (uint32_t)fd;
                cb->aio_lio_opcode = IOCB_CMD_FDSYNC;
                last_timer = now_ns();
                uint64_t i = b->t_count++;
                b->t_issue[i] = last_timer;
                b->t_complete[i] = -1;
                b->t_status[i] = submit_one(ctx, cb);
                if (!b->t_status[i]) {
                    current[nslots] = (int64_t)i;
                    current_batch[nslots] = b;
                    b->inflight++;
                    inflight++;
                    live_add(live, LIVE_FLUSHES_IN_FLIGHT, 1);
                }
            }
        }
        /* retire, in order, the batches every live slot has left and nothing of is in flight */
        for (;;) {
            struct pfr_batch *b = available(ring, nring, head);
            if (!b || b->inflight > 0)
                break;
            int left = 1;
            if (!draining) {
                if (shared)
                    left = stream_seq > head;
                else
                    for (uint32_t s = 0; s < nslots && left; s++)
                        left = dead[s] || slot_seq[s] > head;
            }
            if (!left)
                break;
            retire(b, notify_fd);
            head++;
        }
        if (draining && (inflight == 0 || timed_out))
            break;
        if (inflight == 0) {
            if (starving) { /* nothing to reap: give the caller a moment to publish */
                struct timespec pause = {0, 100000};
                nanosleep(&pause, NULL);
            }
            continue;
        }
        if (draining && now_ns() - stopped_at > drain_timeout_ns) {
            timed_out = 1;
            continue; /* the batches are retired as they are, stuck requests marked */
        }
        /* completions already there are read from the ring; the system call only to wait */
        long got = reap_ring(shared_ring, events, nslots + 1);
        if (got > 0) {
            live_add(live, LIVE_RING_REAPED, got);
        } else {
            int64_t wait = starving ? 500000 : 20000000; /* the stop flag at least every 20 ms */
            if (flush_every_ns > 0 && !draining) {
                int64_t due = last_timer + flush_every_ns - now_ns();
                if (due < wait)
                    wait = due > 0 ? due : 0;
            }
            struct timespec timeout = {wait / 1000000000LL, wait % 1000000000LL};
            got = sys_io_getevents(ctx, 1, nslots + 1, events, &timeout);
        }
        int64_t t = now_ns(); /* right after the completions are reaped, either way */
        if (got < 0 && errno != EINTR) {
            timed_out = 1; /* the context is unusable: what is in flight never comes back */
            draining = 1;
            continue;
        }
        for (long k = 0; k < got; k++) {
            inflight--;
            long res = (long)events[k].res;
            uint64_t data = events[k].data;
            if (data & TIMER_BIT) {
                struct pfr_batch *b = current_batch[nslots];
                int64_t i = current[nslots];
                b->t_complete[i] = res < 0 ? -1 : t;
                b->t_status[i] = res < 0 ? (int32_t)-res : 0;
                b->inflight--;
                current[nslots] = -1;
                current_batch[nslots] = NULL;
                live_add(live, LIVE_FLUSHES_IN_FLIGHT, -1);
                if (res >= 0)
                    live_add(live, LIVE_FLUSHES_DONE, 1);
                continue;
            }
            uint32_t s = (uint32_t)(data & ((1u << SLOT_BITS) - 1));
            struct pfr_batch *b = &ring[(data >> SLOT_BITS) & (MAX_RING - 1)];
            int64_t e = (int64_t)(data >> (SLOT_BITS + RING_BITS));
            current[s] = -1;
            current_batch[s] = NULL;
            busy_lba[s] = busy_end[s] = 0;
            b->inflight--;
            uint64_t want = b->kind[e] == 1 ? 0 : (uint64_t)b->nblocks[e] * block_size;
            if (res < 0 || (b->kind[e] == 0 && (uint64_t)res != want)) {
                b->status[e] = res < 0 ? (int32_t)-res : EIO; /* short write: an I/O error */
                dead[s] = 1;
                failed = shared ? (long)nslots : failed + 1; /* a stream stops at its first error */
            } else {
                b->complete_ns[e] = t;
                if (b->kind[e] == 0) {
                    live_set(live, LIVE_LAST_ACK_NS, t);
                    live_add(live, LIVE_ACKS, 1);
                } else {
                    live_add(live, LIVE_FLUSHES_DONE, 1);
                }
            }
            if (b->kind[e] == 1)
                live_add(live, LIVE_FLUSHES_IN_FLIGHT, -1);
        }
    }
    int stuck = inflight > 0;
    for (uint32_t s = 0; s <= nslots && stuck; s++) {
        struct pfr_batch *b = current_batch[s];
        if (!b)
            continue;
        b->stuck = 1;
        if (s < nslots)
            b->status[current[s]] = ETIMEDOUT;
        else
            b->t_status[current[s]] = ETIMEDOUT;
    }
    for (struct pfr_batch *b; (b = available(ring, nring, head)) != NULL; head++)
        retire(b, notify_fd); /* the rest, in order: ones never started submitted nothing */
    free(st);
    return stuck;
}
