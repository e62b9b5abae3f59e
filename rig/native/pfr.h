/* Native kernels of the rig: the record format (media.c) and the write engine (engine.c).
 * rig/io/media.py keeps the numpy reference; tests compare the two byte for byte. */
#ifndef PFR_H
#define PFR_H

#include <stddef.h>
#include <stdint.h>

#define PFR_SECTOR 512
#define PFR_WORDS 64
#define PFR_HEADER_WORDS 8
#define PFR_CHECKSUM_WORD 8
#define PFR_PAYLOAD_START 9
#define PFR_MAGIC 0x47524650ULL
#define PFR_VERSION 1ULL
#define PFR_VERSION2 2ULL /* payload = base of the sector's place ^ mix(header sum) */

enum { PFR_VALID = 0, PFR_ZERO = 1, PFR_CORRUPT = 2 };

/* One write's blocks: `nblocks` blocks of `per_block` sectors, generation gens[i] for block i. */
void pfr_build(uint64_t *out, uint32_t per_block, uint64_t nblocks, uint64_t campaign,
               uint64_t first_lba, const uint64_t *gens, uint64_t worker, uint64_t op_seq,
               uint64_t issued_ns, uint64_t flags);

/* Same, with 32-bit generations (the engine's plan). */
void pfr_build32(uint64_t *out, uint32_t per_block, uint64_t nblocks, uint64_t campaign,
                 uint64_t first_lba, const uint32_t *gens, uint64_t worker, uint64_t op_seq,
                 uint64_t issued_ns, uint64_t flags);

/* Version 2 (media.c): a buffer prepared once with the bases of its sectors' places
 * (pfr_stamp_init: fold[s] and k[s] per sector), then stamped in place write after write. */
void pfr_stamp_init(uint64_t *buf, uint64_t nsectors, uint32_t per_block, uint64_t campaign,
                    uint64_t *fold, uint64_t *k);
void pfr_stamp(uint64_t *buf, uint32_t per_block, uint64_t nblocks, uint64_t campaign,
               uint64_t first_lba, const uint64_t *gens, uint64_t worker, uint64_t op_seq,
               uint64_t issued_ns, uint64_t flags, const uint64_t *fold, uint64_t *k);
void pfr_stamp32(uint64_t *buf, uint32_t per_block, uint64_t nblocks, uint64_t campaign,
                 uint64_t first_lba, const uint32_t *gens, uint64_t worker, uint64_t op_seq,
                 uint64_t issued_ns, uint64_t flags, const uint64_t *fold, uint64_t *k);

/* One planned batch of the write engine and its results (engine.c, pfr_engine_loop; mirrored
 * by rig/native/__init__.py). The caller fills the plan and publishes it; the engine runs it and
 * retires it; the caller then reads the results and may fill the descriptor again. */
enum { PFR_BATCH_EMPTY = 0, PFR_BATCH_READY = 1, PFR_BATCH_RUNNING = 2, PFR_BATCH_RETIRED = 3 };
struct pfr_batch {
    const int64_t *slot_start; /* nslots_planned + 1 offsets (stripes) or 2 (stream) */
    const uint8_t *kind;
    const int64_t *lba;
    const uint32_t *nblocks;
    const int64_t *gen_offset;
    const uint32_t *gens;
    const uint64_t *op_seq;
    int16_t *slot_of;
    int64_t *issue_ns;
    int64_t *complete_ns;
    int32_t *status;
    int64_t *t_issue;
    int64_t *t_complete;
    int32_t *t_status;
    uint64_t t_cap;
    uint64_t t_count;
    uint64_t seq;           /* the caller's batch number: 0, 1, 2, ... */
    uint64_t nslots_planned; /* slot_start[nslots_planned] is the entry count */
    int64_t started_ns;     /* first submission, 0 if none */
    int64_t retired_ns;
    int64_t inflight;
    int32_t state;
    int32_t stuck; /* a request of it was still in flight at the drain timeout */
};

/* State of each of `nsectors` sectors (PFR_VALID / PFR_ZERO / PFR_CORRUPT). */
void pfr_check(const uint64_t *words, uint64_t nsectors, uint8_t *state);

/* Check blocks of `per_block` sectors and summarise each (media.c): per sector its state; per
 * block whether it is uniform, sector 0's state and fields (head[k * head_stride + b]: k = 0
 * campaign, 1 LBA, 2 generation, 3 op_seq, 4 worker), and every sector's fields
 * (fields[k * field_stride + i]) only for a block that is not uniform. */
enum { PFR_BLOCK_FIELDS = 5 };
void pfr_parse_blocks(const uint64_t *words, uint64_t nblocks, uint32_t per_block, uint8_t *state,
                      uint8_t *uniform, uint8_t *state0, uint64_t *head, uint64_t head_stride,
                      uint64_t *fields, uint64_t field_stride);

/* Check and decode every header word: header[j * nsectors + i] is word j of sector i. */
void pfr_parse_header(const uint64_t *words, uint64_t nsectors, uint8_t *state, uint64_t *header);

/* Verification reads at queue depth (readq.c): a stream of reads served in order by its own
 * thread; per request state. */
enum { PFR_RQ_DONE = 0, PFR_RQ_HUNG = 1, PFR_RQ_UNSENT = 2 };
struct pfr_rqs;
int pfr_rqs_open(uint32_t depth, uint64_t capacity, void **out);
void pfr_rqs_abandon(struct pfr_rqs *s);
int64_t pfr_rqs_add(struct pfr_rqs *s, int fd, uint64_t n, const int64_t *offset,
                    const uint64_t *nbytes, uint8_t *base, const uint64_t *buf_off,
                    int64_t timeout_ns, uint8_t *state, int64_t *res);
int64_t pfr_rqs_settled(struct pfr_rqs *s);
int64_t pfr_rqs_wait(struct pfr_rqs *s, uint64_t seq);
int64_t pfr_rqs_wait_span(struct pfr_rqs *s, uint64_t first, uint64_t end);
void pfr_rqs_resume(struct pfr_rqs *s);
void pfr_rqs_stats(struct pfr_rqs *s, int64_t *inflight_ns, int64_t *busy_ns);
int64_t pfr_rqs_retire(struct pfr_rqs *s, uint64_t end);

/* A cut timed from a request's completion (trigger.c): the rig sets `delay_ns`; the thread that
 * completes the request fires it, fixing the edge's instant `at_ns` = the completion plus the
 * delay, or the firing instant when that is later (0 until fired). */
typedef struct pfr_trigger {
    int64_t delay_ns;
    int64_t event_ns; /* the completion the cut is timed from */
    int64_t armed_ns; /* when the completion path fixed the instant */
    int64_t at_ns;
} pfr_trigger;

void pfr_trigger_fire(pfr_trigger *t, int64_t event_ns);
int64_t pfr_trigger_at(const pfr_trigger *t);
/* A simulated request completing at `complete_ns`: sleep until then, then fire `t` (if not
 * NULL) at once, in this thread; returns the instant it woke. */
int64_t pfr_complete_at(int64_t complete_ns, pfr_trigger *t);
/* A simulated request arriving now and completing `latency_ns` later: a thread of its own fires
 * `t` at the completion, however late the caller gets there; returns the arrival instant
 * (-errno if no thread could start), the thread in `*thread` (join it: pfr_arrive_join). */
int64_t pfr_arrive(pfr_trigger *t, int64_t latency_ns, uint64_t *thread);
void pfr_arrive_join(uint64_t thread);

#endif
