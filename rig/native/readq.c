/* Verification reads at queue depth: a read stream over Linux native AIO (raw syscalls, as
 * engine.c) on O_DIRECT descriptors, with a timeout per read and no thread per read
 * (rig/check/readback.py).
 *
 * The caller adds requests in order, window after window (`pfr_rqs_add`), and waits for each
 * one's outcome (`pfr_rqs_wait`). One server thread per stream submits them in that order, at
 * most `depth` in flight, and reaps them: it keeps submitting the next window's reads while the
 * caller checks the last one, so the queue does not empty between windows. Each request must
 * complete within its timeout of its own submission. One that has not is a hang: it stays in
 * flight (the drive sits on it; its buffer and the context must never be reused), nothing more
 * is submitted ("stopped") until the caller resumes the stream, and a wait for it returns once
 * every other request in flight has completed or hung too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/aio_abi.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pfr.h"

#define RQ_MAX_DEPTH 256

enum { PH_QUEUED = 0, PH_FLIGHT = 1, PH_DONE = 2, PH_TIMEDOUT = 3, PH_DROPPED = 4 };

struct rqs_req {
    int64_t offset;
    uint64_t nbytes;
    uint64_t addr;
    int64_t timeout_ns;
    uint8_t *state; /* the caller's: PFR_RQ_UNSENT, then PFR_RQ_HUNG in flight, PFR_RQ_DONE */
    int64_t *res;   /* bytes read or -errno, once done */
    int32_t fd;
    uint8_t phase;
};

struct pfr_rqs {
    pthread_mutex_t mu;
    pthread_cond_t changed; /* any progress, a new request, resume, quit */
    aio_context_t ctx;
    uint32_t depth;
    uint64_t cap; /* ring entries; request seq lives in ring[seq % cap] */
    struct rqs_req *ring;
    uint64_t added, next, settled; /* requests added; next to submit; prefix no longer pending */
    int64_t inflight, hung;        /* hung: timed out and still in flight */
    int stopped, quit, error;
    int64_t stat_at, stat_inflight_ns, stat_busy_ns; /* the queue over time (pfr_rqs_stats) */
    struct iocb cbs[RQ_MAX_DEPTH];
    int64_t slot_req[RQ_MAX_DEPTH]; /* seq, or -1 */
    int64_t deadline[RQ_MAX_DEPTH];
    uint8_t is_hung[RQ_MAX_DEPTH];
    uint32_t free_slots[RQ_MAX_DEPTH], nfree;
};

static int64_t rq_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Time-weighted requests answering, and time with at least one, up to now (lock held): called before
 * every change of `inflight` or `hung`. */
static void rqs_account(struct pfr_rqs *s)
{
    int64_t now = rq_now_ns(), dt = now - s->stat_at;
    s->stat_inflight_ns += dt * (s->inflight - s->hung);
    if (s->inflight > s->hung)
        s->stat_busy_ns += dt;
    s->stat_at = now;
}

static struct rqs_req *rqs_at(struct pfr_rqs *s, uint64_t seq) { return &s->ring[seq % s->cap]; }

static void rqs_settle(struct pfr_rqs *s)
{
    while (s->settled < s->added && rqs_at(s, s->settled)->phase >= PH_DONE)
        s->settled++;
}

/* Submits what the free slots allow, in order (called and returning with the lock held). */
static void rqs_fill(struct pfr_rqs *s)
{
    struct iocb *batch[RQ_MAX_DEPTH];
    long nb = 0;
    int64_t t = rq_now_ns();
    rqs_account(s);
    while (!s->stopped && s->next < s->added && s->nfree > 0) {
        struct rqs_req *r = rqs_at(s, s->next);
        if (r->phase == PH_DROPPED) {
            s->next++;
            continue;
        }
        uint32_t slot = s->free_slots[--s->nfree];
        struct iocb *cb = &s->cbs[slot];
        memset(cb, 0, sizeof(*cb));
        cb->aio_data = slot;
        cb->aio_fildes = (uint32_t)r->fd;
        cb->aio_lio_opcode = IOCB_CMD_PREAD;
        cb->aio_buf = r->addr;
        cb->aio_nbytes = r->nbytes;
        cb->aio_offset = r->offset;
        s->slot_req[slot] = (int64_t)s->next++;
        s->deadline[slot] = r->timeout_ns > 0 ? t + r->timeout_ns : INT64_MAX;
        r->phase = PH_FLIGHT;
        *r->state = PFR_RQ_HUNG; /* until its completion is reaped */
        s->inflight++;
        batch[nb++] = cb;
    }
    long sent = 0;
    while (sent < nb) { /* submitted under the lock: a waiter sees a consistent queue */
        long done = syscall(SYS_io_submit, s->ctx, nb - sent, batch + sent);
        if (done < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (done <= 0) { /* refused: that request fails with the errno, the rest goes on */
            uint32_t slot = (uint32_t)batch[sent]->aio_data;
            struct rqs_req *r = rqs_at(s, (uint64_t)s->slot_req[slot]);
            r->phase = PH_DONE;
            *r->res = done < 0 ? -errno : -EIO;
            *r->state = PFR_RQ_DONE;
            s->slot_req[slot] = -1;
            s->free_slots[s->nfree++] = slot;
            s->inflight--;
            sent++;
            continue;
        }
        sent += done;
    }
}

/* Reaps completions until the earliest deadline of a request still answering (lock held,
 * released while waiting). */
static void rqs_reap(struct pfr_rqs *s)
{
    struct io_event events[RQ_MAX_DEPTH];
    int64_t earliest = INT64_MAX;
    for (uint32_t k = 0; k < s->depth; k++)
        if (s->slot_req[k] >= 0 && !s->is_hung[k] && s->deadline[k] < earliest)
            earliest = s->deadline[k];
    int64_t wait = earliest == INT64_MAX ? 100000000LL : earliest - rq_now_ns();
    if (wait < 0)
        wait = 0;
    if (wait > 100000000LL) /* new requests are picked up at least this often */
        wait = 100000000LL;
    struct timespec timeout = {wait / 1000000000LL, wait % 1000000000LL};
    pthread_mutex_unlock(&s->mu);
    long got = syscall(SYS_io_getevents, s->ctx, 1, (long)s->depth, events, &timeout);
    int failure = got < 0 && errno != EINTR ? errno : 0;
    pthread_mutex_lock(&s->mu);
    rqs_account(s);
    if (failure)
        s->error = failure;
    for (long k = 0; k < got; k++) {
        uint32_t slot = (uint32_t)events[k].data;
        int64_t seq = s->slot_req[slot];
        if (seq < 0)
            continue;
        if (s->is_hung[slot]) { /* answered after its timeout: still a hang, no longer in flight */
            s->is_hung[slot] = 0;
            s->hung--;
        } else {
            struct rqs_req *r = rqs_at(s, (uint64_t)seq);
            r->phase = PH_DONE;
            *r->res = (int64_t)events[k].res;
            *r->state = PFR_RQ_DONE;
        }
        s->slot_req[slot] = -1;
        s->free_slots[s->nfree++] = slot;
        s->inflight--;
    }
    int64_t now = rq_now_ns();
    for (uint32_t k = 0; k < s->depth; k++) {
        if (s->slot_req[k] >= 0 && !s->is_hung[k] && s->deadline[k] <= now) {
            s->is_hung[k] = 1; /* counted once; its slot stays taken while it is in flight */
            rqs_at(s, (uint64_t)s->slot_req[k])->phase = PH_TIMEDOUT;
            s->hung++;
            s->stopped = 1;
        }
    }
}

static void *rqs_serve(void *arg)
{
    struct pfr_rqs *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->quit && !s->error) {
        rqs_fill(s);
        if (s->inflight == s->hung) { /* nothing answering: wait for work */
            rqs_settle(s);
            pthread_cond_broadcast(&s->changed);
            if (s->stopped || s->next >= s->added)
                pthread_cond_wait(&s->changed, &s->mu);
            continue;
        }
        rqs_reap(s);
        rqs_settle(s);
        pthread_cond_broadcast(&s->changed);
    }
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int pfr_rqs_open(uint32_t depth, uint64_t capacity, void **out)
{
    if (depth == 0 || depth > RQ_MAX_DEPTH || capacity == 0)
        return -EINVAL;
    struct pfr_rqs *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->ring = calloc(capacity, sizeof(*s->ring));
    if (!s->ring) {
        free(s);
        return -ENOMEM;
    }
    if (syscall(SYS_io_setup, depth, &s->ctx) < 0) {
        int rc = -errno;
        free(s->ring);
        free(s);
        return rc;
    }
    s->depth = depth;
    s->cap = capacity;
    s->nfree = depth;
    s->stat_at = rq_now_ns();
    for (uint32_t k = 0; k < depth; k++) {
        s->free_slots[k] = depth - 1 - k;
        s->slot_req[k] = -1;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->changed, NULL);
    pthread_t thread;
    int rc = pthread_create(&thread, NULL, rqs_serve, s);
    if (rc != 0) {
        syscall(SYS_io_destroy, s->ctx);
        free(s->ring);
        free(s);
        return -rc;
    }
    pthread_detach(thread);
    *out = s;
    return 0;
}

/* Stops the server thread. The stream is never freed: a hung request may still be in flight
 * through its context (the caller keeps its buffers too). */
void pfr_rqs_abandon(struct pfr_rqs *s)
{
    pthread_mutex_lock(&s->mu);
    s->quit = 1;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->mu);
}

int64_t pfr_rqs_add(struct pfr_rqs *s, int fd, uint64_t n, const int64_t *offset,
                    const uint64_t *nbytes, uint8_t *base, const uint64_t *buf_off,
                    int64_t timeout_ns, uint8_t *state, int64_t *res)
{
    if (n > s->cap)
        return -EINVAL;
    pthread_mutex_lock(&s->mu);
    while (s->added + n - s->settled > s->cap && !s->stopped && !s->quit && !s->error)
        pthread_cond_wait(&s->changed, &s->mu);
    if (s->added + n - s->settled > s->cap || s->quit || s->error) {
        int rc = s->error ? -s->error : -ENOSPC;
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    int64_t first = (int64_t)s->added;
    for (uint64_t i = 0; i < n; i++) {
        struct rqs_req *r = rqs_at(s, s->added++);
        r->offset = offset[i];
        r->nbytes = nbytes[i];
        r->addr = (uint64_t)(uintptr_t)(base + buf_off[i]);
        r->timeout_ns = timeout_ns;
        r->state = &state[i];
        r->res = &res[i];
        r->fd = fd;
        r->phase = PH_QUEUED;
        state[i] = PFR_RQ_UNSENT;
        res[i] = 0;
    }
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->mu);
    return first;
}

/* Requests before this one are all settled (done, timed out or dropped), or -1 while a hang is
 * in flight (its buffer may still be written). The caller keeps its buffers until then. */
int64_t pfr_rqs_settled(struct pfr_rqs *s)
{
    pthread_mutex_lock(&s->mu);
    int64_t rc = s->hung > 0 ? -1 : (int64_t)s->settled;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Until request `seq` has an outcome: done (or dropped), or (timed out, or left unsent by a
 * stop) once every other request in flight has completed or hung too. `seq` must not be older
 * than the ring (the caller waits only for requests of windows it has not retired). Returns the number still in flight hung,
 * or -errno (the stream failed). */
int64_t pfr_rqs_wait(struct pfr_rqs *s, uint64_t seq)
{
    pthread_mutex_lock(&s->mu);
    if (seq >= s->added) {
        pthread_mutex_unlock(&s->mu);
        return -EINVAL;
    }
    for (;;) {
        uint8_t phase = rqs_at(s, seq)->phase;
        if (phase == PH_DONE || phase == PH_DROPPED)
            break;
        int idle = s->inflight == s->hung;
        if ((phase == PH_TIMEDOUT || (phase == PH_QUEUED && s->stopped)) && idle)
            break;
        if (s->error || s->quit)
            break;
        pthread_cond_wait(&s->changed, &s->mu);
    }
    int64_t rc = s->error ? -s->error : s->hung;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Until every request in [first, end) is done, or one will not be without the caller (timed
 * out, or left unsent by a stop, once every other request in flight has completed or hung).
 * Returns how many of them, from `first`, are done, or -errno (the stream failed). */
int64_t pfr_rqs_wait_span(struct pfr_rqs *s, uint64_t first, uint64_t end)
{
    pthread_mutex_lock(&s->mu);
    if (end > s->added || first > end) {
        pthread_mutex_unlock(&s->mu);
        return -EINVAL;
    }
    uint64_t seq = first;
    for (;;) {
        while (seq < end && rqs_at(s, seq)->phase == PH_DONE)
            seq++;
        if (seq == end || s->error || s->quit)
            break;
        uint8_t phase = rqs_at(s, seq)->phase;
        int idle = s->inflight == s->hung;
        if ((phase == PH_TIMEDOUT || phase == PH_DROPPED || (phase == PH_QUEUED && s->stopped)) &&
            idle)
            break;
        pthread_cond_wait(&s->changed, &s->mu);
    }
    int64_t rc = s->error ? -s->error : (int64_t)(seq - first);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Since the stream opened: requests answering integrated over time, and time with at least one
 * answering (ns). */
void pfr_rqs_stats(struct pfr_rqs *s, int64_t *inflight_ns, int64_t *busy_ns)
{
    pthread_mutex_lock(&s->mu);
    rqs_account(s);
    *inflight_ns = s->stat_inflight_ns;
    *busy_ns = s->stat_busy_ns;
    pthread_mutex_unlock(&s->mu);
}

/* Submitting goes on after a stop (its hang answered late, or nothing is left in flight). */
void pfr_rqs_resume(struct pfr_rqs *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopped = 0;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->mu);
}

/* Requests before `end` not submitted yet are dropped (their state stays PFR_RQ_UNSENT), and
 * the call returns once none of them is in flight unless hung: their buffers are free again. */
int64_t pfr_rqs_retire(struct pfr_rqs *s, uint64_t end)
{
    pthread_mutex_lock(&s->mu);
    for (uint64_t seq = s->next; seq < end && seq < s->added; seq++)
        rqs_at(s, seq)->phase = PH_DROPPED;
    rqs_settle(s);
    while (s->settled < end && s->settled < s->added && !s->error && !s->quit) {
        pthread_cond_wait(&s->changed, &s->mu);
        rqs_settle(s);
    }
    int64_t rc = s->error ? -s->error : s->hung;
    pthread_mutex_unlock(&s->mu);
    return rc;
}
