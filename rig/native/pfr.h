/* Native kernels of the rig: the record format (media.c) and the write engine (engine.c).
 * rig/media.py keeps the numpy reference; tests compare the two byte for byte. */
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

enum { PFR_VALID = 0, PFR_ZERO = 1, PFR_CORRUPT = 2 };

/* One write's blocks: `nblocks` blocks of `per_block` sectors, generation gens[i] for block i. */
void pfr_build(uint64_t *out, uint32_t per_block, uint64_t nblocks, uint64_t campaign,
               uint64_t first_lba, const uint64_t *gens, uint64_t worker, uint64_t op_seq,
               uint64_t issued_ns, uint64_t flags);

/* Same, with 32-bit generations (the engine's plan). */
void pfr_build32(uint64_t *out, uint32_t per_block, uint64_t nblocks, uint64_t campaign,
                 uint64_t first_lba, const uint32_t *gens, uint64_t worker, uint64_t op_seq,
                 uint64_t issued_ns, uint64_t flags);

/* State of each of `nsectors` sectors (PFR_VALID / PFR_ZERO / PFR_CORRUPT). */
void pfr_check(const uint64_t *words, uint64_t nsectors, uint8_t *state);

#endif
