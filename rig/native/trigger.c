/* A cut timed from a completion, armed by the thread that completes the request.
 *
 * A cut after an acknowledgement (or a flush's completion) must fall a set delay after it. On a
 * loaded host the thread that got the completion back may wait milliseconds for the
 * interpreter's lock before it can tell the switch; here the instant is fixed in the
 * completion path itself, without the interpreter, and the switch reads it from the trigger
 * (docs/decisions.md, "A cut after an event is armed in the completion path"). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "pfr.h"

static int64_t monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void pfr_trigger_fire(pfr_trigger *t, int64_t event_ns) {
    int64_t now = monotonic_ns(), at = event_ns + t->delay_ns;
    t->event_ns = event_ns;
    t->armed_ns = now;
    /* published last: a reader that sees at_ns sees the rest */
    __atomic_store_n(&t->at_ns, at > now ? at : now, __ATOMIC_RELEASE);
}

int64_t pfr_trigger_at(const pfr_trigger *t) { return __atomic_load_n(&t->at_ns, __ATOMIC_ACQUIRE); }

int64_t pfr_complete_at(int64_t complete_ns, pfr_trigger *t) {
    struct timespec ts = {.tv_sec = complete_ns / 1000000000LL, .tv_nsec = complete_ns % 1000000000LL};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
    if (t != NULL) pfr_trigger_fire(t, complete_ns);
    return monotonic_ns();
}

struct fire_job {
    pfr_trigger *t;
    int64_t at_ns;
};

static void *fire_at_thread(void *arg) {
    struct fire_job *job = arg;
    pfr_complete_at(job->at_ns, job->t);
    free(job);
    return NULL;
}

int64_t pfr_arrive(pfr_trigger *t, int64_t latency_ns, uint64_t *thread) {
    int64_t now = monotonic_ns();
    struct fire_job *job = malloc(sizeof *job);
    pthread_t id;
    /* the thread inherits the caller's scheduling (a real-time cut thread's) */
    if (job == NULL) return -ENOMEM;
    job->t = t;
    job->at_ns = now + latency_ns;
    int rc = pthread_create(&id, NULL, fire_at_thread, job);
    if (rc != 0) {
        free(job);
        return -rc;
    }
    *thread = (uint64_t)id;
    return now;
}

void pfr_arrive_join(uint64_t thread) { pthread_join((pthread_t)thread, NULL); }
