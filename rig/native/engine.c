/* Write engine: the hot loop of one workload batch in C, off the GIL.
 *
 * Linux native AIO (io_submit/io_getevents through raw syscalls; no library needed) on an O_DIRECT
 * descriptor. Each slot (a "worker" of the ledger) owns a disjoint stripe and has at most one
 * request in flight, so the queue depth is the slot count and no two requests in flight overlap
 * (docs/decisions.md 1). Every request is timestamped on CLOCK_MONOTONIC right before it is built
 * and submitted and right after its completion is reaped (docs/decisions.md 3). The record of a
 * write is generated into the slot's buffer just before submission (media.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/aio_abi.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pfr.h"

#define TIMER_TAG 0xFFFFFFFFFFFFFFFFULL
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

/* Live signals for cut strategies (rig/cuts.py), read by another thread while the engine runs. */
enum { LIVE_ACKS, LIVE_LAST_ACK_NS, LIVE_FLUSHES_IN_FLIGHT, LIVE_FLUSHES_DONE, LIVE_N };
static inline void live_set(int64_t *live, int i, int64_t v)
{
    __atomic_store_n(&live[i], v, __ATOMIC_RELEASE);
}
static inline void live_add(int64_t *live, int i, int64_t v)
{
    __atomic_add_fetch(&live[i], v, __ATOMIC_RELEASE);
}

static int overlaps(const int64_t *start, const int64_t *end, uint32_t n, int64_t lba,
                    uint32_t count)
{
    for (uint32_t s = 0; s < n; s++)
        if (start[s] < lba + (int64_t)count && lba < end[s])
            return 1;
    return 0;
}

#define SLOT_BITS 11 /* aio_data = entry << SLOT_BITS | slot */

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

/* Runs the plan until one slot has used up its entries, the stop flag is set, or every slot
 * failed; then waits for what is in flight (at most drain_timeout_ns after stopping).
 *
 * Plan, stripes layout (shared = 0): entries grouped by slot; slot s runs entries
 * slot_start[s] .. slot_start[s+1]-1 in order. Stream layout (shared = 1): one queue
 * slot_start[0] .. slot_start[1]-1 taken in order by whichever slot is idle; a write that would
 * overlap one in flight waits (with everything after it) until that one completes, so no two
 * requests in flight ever overlap either way. slot_of[e] says which slot ran entry e; worker[s]
 * is the worker id slot s writes into the headers (and the ledger's worker column).
 *   kind 0 = write of nblocks at lba with generations gens[gen_offset ..], 1 = flush (fdatasync).
 * Results per entry: issue_ns (-2 = never submitted), complete_ns (-1 = never completed),
 * status (0 ok, else errno). Timer flushes (every flush_every_ns, engine-wide) go to the t_*
 * arrays, at most t_cap of them; their count is returned in *t_count.
 * live[LIVE_N] is updated as requests complete (acknowledgements, flushes in flight).
 * `ctx` comes from pfr_aio_setup with a depth of at least nslots + 1.
 * Returns 0, or -EINVAL for a bad slot count, or 1 if requests were still in flight at the
 * drain timeout (their buffers and the context must then never be reused: the kernel may still
 * write from them). */
int pfr_engine_run(uint64_t aio, int fd, uint32_t nslots, int shared, uint32_t block_size,
                   uint64_t campaign, int durable,
                   int64_t flush_every_ns, int64_t drain_timeout_ns, uint8_t *buffers,
                   uint64_t slot_bytes, const int64_t *slot_start, const uint8_t *kind,
                   const int64_t *lba, const uint32_t *nblocks, const int64_t *gen_offset,
                   const uint32_t *gens, const uint64_t *op_seq, const uint16_t *worker,
                   int16_t *slot_of, int64_t *issue_ns,
                   int64_t *complete_ns, int32_t *status, int64_t *t_issue, int64_t *t_complete,
                   int32_t *t_status, uint64_t t_cap, uint64_t *t_count, volatile int *stop,
                   int64_t *live)
{
    if (nslots == 0 || nslots > MAX_SLOTS)
        return -EINVAL;
    aio_context_t ctx = (aio_context_t)aio;

    static __thread struct iocb cbs[MAX_SLOTS + 1];
    static __thread int64_t current[MAX_SLOTS + 1]; /* entry in flight per slot, -1 = idle */
    static __thread int64_t next[MAX_SLOTS];
    static __thread int64_t busy_lba[MAX_SLOTS], busy_end[MAX_SLOTS]; /* write in flight */
    int64_t shared_next = slot_start[0];
    const int64_t total = shared ? slot_start[1] : slot_start[nslots];
    struct io_event events[MAX_SLOTS + 1];
    const uint32_t per_block = block_size / PFR_SECTOR;
    const uint64_t flags = durable ? 1 : 0;
    uint64_t timers = 0;
    long inflight = 0, failed = 0;
    int draining = 0;
    int64_t stopped_at = 0, last_timer = now_ns();

    for (int64_t i = 0; i < total; i++) {
        slot_of[i] = -1;
        issue_ns[i] = -2;
        complete_ns[i] = -1;
        status[i] = 0;
    }
    for (uint32_t s = 0; s <= nslots; s++)
        current[s] = -1;
    for (uint32_t s = 0; s < nslots; s++) {
        next[s] = shared ? 0 : slot_start[s];
        busy_lba[s] = busy_end[s] = 0;
    }

    for (;;) {
        if (!draining && (*stop || failed == (long)nslots)) {
            draining = 1;
            stopped_at = now_ns();
        }
        /* feed every idle slot its next entry */
        for (uint32_t s = 0; s < nslots && !draining; s++) {
            if (current[s] != -1 || next[s] < 0)
                continue;
            int64_t e;
            if (shared) {
                if (shared_next >= total) {
                    draining = 1;
                    stopped_at = now_ns();
                    break;
                }
                e = shared_next;
                if (kind[e] == 0 && overlaps(busy_lba, busy_end, nslots, lba[e], nblocks[e]))
                    break; /* the stream waits for the write in its way */
                shared_next++;
            } else {
                if (next[s] >= slot_start[s + 1]) {
                    draining = 1; /* one slot ran dry: stop here so no slot runs far ahead */
                    stopped_at = now_ns();
                    break;
                }
                e = next[s]++;
            }
            slot_of[e] = (int16_t)s;
            struct iocb *cb = &cbs[s];
            memset(cb, 0, sizeof(*cb));
            cb->aio_data = ((uint64_t)e << SLOT_BITS) | s;
            cb->aio_fildes = (uint32_t)fd;
            int64_t t = now_ns();
            if (kind[e] == 1) {
                cb->aio_lio_opcode = IOCB_CMD_FDSYNC;
            } else {
                uint8_t *buf = buffers + (uint64_t)s * slot_bytes;
                uint64_t bytes = (uint64_t)nblocks[e] * block_size;
                if (bytes > slot_bytes) {
                    status[e] = EINVAL;
                    next[s] = -1;
                    failed = shared ? (long)nslots : failed + 1;
                    continue;
                }
                pfr_build32((uint64_t *)buf, per_block, nblocks[e], campaign, (uint64_t)lba[e],
                            gens + gen_offset[e], worker[s], op_seq[e], (uint64_t)t, flags);
                cb->aio_lio_opcode = IOCB_CMD_PWRITE;
                cb->aio_buf = (uint64_t)(uintptr_t)buf;
                cb->aio_nbytes = bytes;
                cb->aio_offset = lba[e] * (int64_t)block_size;
                cb->aio_rw_flags = durable ? RWF_DSYNC : 0;
            }
            issue_ns[e] = t;
            status[e] = submit_one(ctx, cb);
            if (status[e]) { /* refused at submission: the request never reached the drive */
                next[s] = -1;
                failed = shared ? (long)nslots : failed + 1;
                continue;
            }
            current[s] = e;
            inflight++;
            if (kind[e] == 1) {
                live_add(live, LIVE_FLUSHES_IN_FLIGHT, 1);
            } else {
                busy_lba[s] = lba[e];
                busy_end[s] = lba[e] + nblocks[e];
            }
        }
        if (!draining && flush_every_ns > 0 && current[nslots] == -1 &&
            now_ns() - last_timer >= flush_every_ns) {
            if (timers == t_cap) { /* no room to log another: end the batch, the caller goes on */
                draining = 1;
                stopped_at = now_ns();
                continue;
            }
            struct iocb *cb = &cbs[nslots];
            memset(cb, 0, sizeof(*cb));
            cb->aio_data = TIMER_TAG;
            cb->aio_fildes = (uint32_t)fd;
            cb->aio_lio_opcode = IOCB_CMD_FDSYNC;
            last_timer = now_ns();
            t_issue[timers] = last_timer;
            t_complete[timers] = -1;
            t_status[timers] = submit_one(ctx, cb);
            if (!t_status[timers]) {
                current[nslots] = (int64_t)timers;
                inflight++;
                live_add(live, LIVE_FLUSHES_IN_FLIGHT, 1);
            }
            timers++;
        }
        if (inflight == 0) {
            if (draining)
                break;
            continue;
        }
        int64_t wait = 20000000; /* look at the stop flag at least every 20 ms */
        if (flush_every_ns > 0 && !draining) {
            int64_t due = last_timer + flush_every_ns - now_ns();
            if (due < wait)
                wait = due > 0 ? due : 0;
        }
        if (draining && now_ns() - stopped_at > drain_timeout_ns)
            break;
        struct timespec timeout = {wait / 1000000000LL, wait % 1000000000LL};
        long got = sys_io_getevents(ctx, 1, nslots + 1, events, &timeout);
        int64_t t = now_ns();
        if (got < 0 && errno != EINTR)
            break;
        for (long k = 0; k < got; k++) {
            inflight--;
            long res = (long)events[k].res;
            if (events[k].data == TIMER_TAG) {
                int64_t i = current[nslots];
                t_complete[i] = res < 0 ? -1 : t;
                t_status[i] = res < 0 ? (int32_t)-res : 0;
                current[nslots] = -1;
                live_add(live, LIVE_FLUSHES_IN_FLIGHT, -1);
                if (res >= 0)
                    live_add(live, LIVE_FLUSHES_DONE, 1);
                continue;
            }
            int64_t e = (int64_t)(events[k].data >> SLOT_BITS);
            uint32_t s = (uint32_t)(events[k].data & ((1u << SLOT_BITS) - 1));
            current[s] = -1;
            busy_lba[s] = busy_end[s] = 0;
            uint64_t want = kind[e] == 1 ? 0 : (uint64_t)nblocks[e] * block_size;
            if (res < 0 || (kind[e] == 0 && (uint64_t)res != want)) {
                status[e] = res < 0 ? (int32_t)-res : EIO; /* short write: an I/O error */
                next[s] = -1;
                failed = shared ? (long)nslots : failed + 1; /* a stream stops at its first error */
            } else {
                complete_ns[e] = t;
                if (kind[e] == 0) {
                    live_set(live, LIVE_LAST_ACK_NS, t);
                    live_add(live, LIVE_ACKS, 1);
                } else {
                    live_add(live, LIVE_FLUSHES_DONE, 1);
                }
            }
            if (kind[e] == 1)
                live_add(live, LIVE_FLUSHES_IN_FLIGHT, -1);
        }
    }
    *t_count = timers;
    if (inflight > 0) {
        for (uint32_t s = 0; s <= nslots; s++) {
            if (current[s] == -1)
                continue;
            if (s < nslots)
                status[current[s]] = ETIMEDOUT;
            else
                t_status[current[s]] = ETIMEDOUT;
        }
        return 1;
    }
    return 0;
}
