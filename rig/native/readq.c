/* Verification reads at queue depth: Linux native AIO (raw syscalls, as engine.c) on an
 * O_DIRECT descriptor, with a timeout per read and no thread per read (rig/readback.py).
 *
 * Requests are submitted in order, at most `depth` in flight; each must complete within
 * `timeout_ns` of its own submission. One that has not is a hang: it stays in flight (the drive
 * sits on it; its buffer and the context must never be reused), nothing more is submitted, and
 * the call returns once every other request has completed or hung too. Requests after the first
 * hang are left unsubmitted: the caller reads them later, in order, one budget at a time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/aio_abi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pfr.h"

#define RQ_MAX_DEPTH 256

static int64_t rq_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int pfr_readq_setup(uint32_t depth, uint64_t *ctx)
{
    aio_context_t c = 0;
    if (depth == 0 || depth > RQ_MAX_DEPTH)
        return -EINVAL;
    if (syscall(SYS_io_setup, depth, &c) < 0)
        return -errno;
    *ctx = (uint64_t)c;
    return 0;
}

void pfr_readq_destroy(uint64_t ctx) { syscall(SYS_io_destroy, (aio_context_t)ctx); }

/* Reads request i: nbytes[i] bytes at byte offset[i] of fd into base + buf_off[i].
 * Per request: state[i] = PFR_RQ_DONE (res[i]: bytes read, or -errno; a submission the kernel
 * refused is -errno too), PFR_RQ_HUNG (no answer within timeout_ns: still in flight) or
 * PFR_RQ_UNSENT (never submitted: after a hang). timeout_ns <= 0: no timeout.
 * Returns the number of requests still in flight (hung), or -EINVAL. */
int64_t pfr_readq_run(uint64_t ctx, int fd, uint32_t depth, uint64_t n, const int64_t *offset,
                      const uint64_t *nbytes, uint8_t *base, const uint64_t *buf_off,
                      int64_t timeout_ns, uint8_t *state, int64_t *res)
{
    if (depth == 0 || depth > RQ_MAX_DEPTH)
        return -EINVAL;
    aio_context_t c = (aio_context_t)ctx;
    struct iocb cbs[RQ_MAX_DEPTH];
    int64_t slot_req[RQ_MAX_DEPTH], deadline[RQ_MAX_DEPTH];
    uint8_t is_hung[RQ_MAX_DEPTH];
    uint32_t free_slots[RQ_MAX_DEPTH], nfree = depth;
    struct io_event events[RQ_MAX_DEPTH];
    uint64_t next = 0;
    int64_t inflight = 0, hung = 0;
    int stopped = 0;

    for (uint32_t s = 0; s < depth; s++) {
        free_slots[s] = depth - 1 - s;
        slot_req[s] = -1;
        is_hung[s] = 0;
    }
    for (uint64_t i = 0; i < n; i++) {
        state[i] = PFR_RQ_UNSENT;
        res[i] = 0;
    }
    for (;;) {
        /* keep the queue full, in order */
        struct iocb *batch[RQ_MAX_DEPTH];
        long nb = 0;
        while (!stopped && next < n && nfree > 0) {
            uint32_t s = free_slots[--nfree];
            struct iocb *cb = &cbs[s];
            memset(cb, 0, sizeof(*cb));
            cb->aio_data = s;
            cb->aio_fildes = (uint32_t)fd;
            cb->aio_lio_opcode = IOCB_CMD_PREAD;
            cb->aio_buf = (uint64_t)(uintptr_t)(base + buf_off[next]);
            cb->aio_nbytes = nbytes[next];
            cb->aio_offset = offset[next];
            slot_req[s] = (int64_t)next++;
            batch[nb++] = cb;
        }
        long sent = 0;
        int64_t t = rq_now_ns();
        while (sent < nb) {
            long done = syscall(SYS_io_submit, c, nb - sent, batch + sent);
            if (done < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (done <= 0) { /* refused: that request fails with the errno, the rest goes on */
                uint32_t s = (uint32_t)batch[sent]->aio_data;
                int64_t r = slot_req[s];
                state[r] = PFR_RQ_DONE;
                res[r] = done < 0 ? -errno : -EIO;
                slot_req[s] = -1;
                free_slots[nfree++] = s;
                sent++;
                continue;
            }
            for (long k = sent; k < sent + done; k++) {
                uint32_t s = (uint32_t)batch[k]->aio_data;
                deadline[s] = timeout_ns > 0 ? t + timeout_ns : INT64_MAX;
                state[slot_req[s]] = PFR_RQ_HUNG; /* until its completion is reaped */
                inflight++;
            }
            sent += done;
        }
        if (inflight == hung) {
            if (stopped || next >= n)
                break;
            continue;
        }
        /* wait for completions until the earliest deadline of a request still answering */
        int64_t earliest = INT64_MAX;
        for (uint32_t s = 0; s < depth; s++)
            if (slot_req[s] >= 0 && !is_hung[s] && deadline[s] < earliest)
                earliest = deadline[s];
        int64_t now = rq_now_ns();
        int64_t wait = earliest == INT64_MAX ? 1000000000LL : earliest - now;
        if (wait < 0)
            wait = 0;
        struct timespec timeout = {wait / 1000000000LL, wait % 1000000000LL};
        long got = syscall(SYS_io_getevents, c, 1, (long)depth, events, &timeout);
        if (got < 0 && errno != EINTR)
            return -errno;
        for (long k = 0; k < got; k++) {
            uint32_t s = (uint32_t)events[k].data;
            int64_t r = slot_req[s];
            if (r < 0)
                continue;
            if (is_hung[s]) { /* answered after its timeout: still a hang, but no longer in flight */
                is_hung[s] = 0;
                hung--;
            } else {
                state[r] = PFR_RQ_DONE;
                res[r] = (int64_t)events[k].res;
            }
            slot_req[s] = -1;
            free_slots[nfree++] = s;
            inflight--;
        }
        now = rq_now_ns();
        for (uint32_t s = 0; s < depth; s++) {
            if (slot_req[s] >= 0 && !is_hung[s] && deadline[s] <= now) {
                is_hung[s] = 1; /* counted once; its slot stays taken while it is in flight */
                hung++;
                stopped = 1;
            }
        }
    }
    return hung;
}
