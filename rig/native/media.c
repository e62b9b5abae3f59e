/* Record format kernel: generate and check the self-describing sectors of docs/record-format.md.
 * A sector costs about 130 splitmix64 rounds either way. The loops over words are independent
 * lanes, so gcc vectorises them; the public entry points are also cloned for x86-64-v4 (AVX-512
 * has 64-bit multiplies) and the loader picks the clone the CPU supports at run time. */
#include "pfr.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(PFR_NO_CLONES)
#define PFR_CLONES __attribute__((target_clones("default", "arch=x86-64-v4")))
#else
#define PFR_CLONES
#endif

#define GOLDEN 0x9E3779B97F4A7C15ULL

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    x ^= x >> 31;
    return x;
}

static inline uint64_t seed_of(const uint64_t *w)
{
    uint64_t seed = 0;
    for (unsigned j = 0; j < PFR_HEADER_WORDS; j++)
        seed += mix(w[j] + (uint64_t)(j + 1) * GOLDEN);
    return seed;
}

/* Checksum over the 63 words other than the checksum word; word j has rank j (j < 8) or j - 1. */
static inline uint64_t checksum_of(const uint64_t *w)
{
    uint64_t sum = 0;
    for (unsigned j = 0; j < PFR_CHECKSUM_WORD; j++)
        sum += mix(w[j] + (uint64_t)(j + 1) * GOLDEN);
    for (unsigned j = PFR_PAYLOAD_START; j < PFR_WORDS; j++)
        sum += mix(w[j] + (uint64_t)j * GOLDEN);
    return mix(sum);
}

static inline void fill_sector(uint64_t *w, uint64_t sector_index, uint64_t campaign, uint64_t lba,
                               uint64_t gen, uint64_t first_lba, uint64_t w5, uint64_t op_seq,
                               uint64_t issued_ns)
{
    w[0] = PFR_MAGIC | (PFR_VERSION << 32) | (sector_index << 48);
    w[1] = campaign;
    w[2] = lba;
    w[3] = gen;
    w[4] = first_lba;
    w[5] = w5;
    w[6] = op_seq;
    w[7] = issued_ns;
    uint64_t seed = seed_of(w);
    for (unsigned j = PFR_PAYLOAD_START; j < PFR_WORDS; j++)
        w[j] = mix(seed + (uint64_t)(j + 1) * GOLDEN);
    w[PFR_CHECKSUM_WORD] = checksum_of(w);
}

#define BUILD_BODY                                                                             \
    uint64_t w5 = nblocks | (worker << 32) | (flags << 48);                                    \
    uint64_t *w = out;                                                                         \
    for (uint64_t b = 0; b < nblocks; b++)                                                     \
        for (uint32_t s = 0; s < per_block; s++, w += PFR_WORDS)                               \
            fill_sector(w, s, campaign, first_lba + b, (uint64_t)gens[b], first_lba, w5, op_seq, \
                        issued_ns);

PFR_CLONES void pfr_build(uint64_t *out, uint32_t per_block, uint64_t nblocks, uint64_t campaign,
               uint64_t first_lba, const uint64_t *gens, uint64_t worker, uint64_t op_seq,
               uint64_t issued_ns, uint64_t flags)
{
    BUILD_BODY
}

PFR_CLONES void pfr_build32(uint64_t *out, uint32_t per_block, uint64_t nblocks, uint64_t campaign,
                 uint64_t first_lba, const uint32_t *gens, uint64_t worker, uint64_t op_seq,
                 uint64_t issued_ns, uint64_t flags)
{
    BUILD_BODY
}

/* Version 2 (docs/record-format.md): the payload is a base that depends only on the campaign and
 * the sector's place in its write, XORed with one word k = mix(H) of the header's own sum H; the
 * checksum covers the header (H) and the payload's XOR fold. A writer keeps the base in its
 * buffer and stamps, per write, the header, k and the checksum: one XOR per payload word instead
 * of two splitmix64 rounds. */
static inline uint64_t base_seed(uint64_t campaign, uint64_t offset, uint64_t sector_index)
{
    return mix(campaign + 2 * GOLDEN) + mix(offset + 3 * GOLDEN) + mix(sector_index + GOLDEN);
}

static inline uint64_t checksum2(uint64_t h, uint64_t fold)
{
    return mix(h + mix(fold + (uint64_t)(PFR_CHECKSUM_WORD + 1) * GOLDEN));
}

static inline uint8_t check_sector_v2(const uint64_t *w)
{
    uint64_t h = seed_of(w);
    uint64_t k = mix(h);
    uint64_t base = base_seed(w[1], w[2] - w[4], w[0] >> 48);
    uint64_t diff = 0, fold = 0;
    for (unsigned j = PFR_PAYLOAD_START; j < PFR_WORDS; j++) {
        diff |= w[j] ^ k ^ mix(base + (uint64_t)(j + 1) * GOLDEN);
        fold ^= w[j];
    }
    if (w[PFR_CHECKSUM_WORD] != checksum2(h, fold))
        return PFR_CORRUPT;
    return diff ? PFR_CORRUPT : PFR_VALID;
}

static inline uint8_t check_sector(const uint64_t *w)
{
    uint64_t any = 0;
    for (unsigned j = 0; j < PFR_WORDS; j++)
        any |= w[j];
    if (!any)
        return PFR_ZERO;
    if ((w[0] & 0xFFFFFFFFFFFFULL) == (PFR_MAGIC | (PFR_VERSION2 << 32)))
        return check_sector_v2(w);
    if ((w[0] & 0xFFFFFFFFFFFFULL) != (PFR_MAGIC | (PFR_VERSION << 32)))
        return PFR_CORRUPT;
    if (w[PFR_CHECKSUM_WORD] != checksum_of(w))
        return PFR_CORRUPT;
    /* The checksum covers the payload; regenerating it as well rules out a header rewritten
     * consistently over someone else's payload (a misdirected partial write). */
    uint64_t seed = seed_of(w);
    uint64_t diff = 0;
    for (unsigned j = PFR_PAYLOAD_START; j < PFR_WORDS; j++)
        diff |= w[j] ^ mix(seed + (uint64_t)(j + 1) * GOLDEN);
    return diff ? PFR_CORRUPT : PFR_VALID;
}

PFR_CLONES void pfr_check(const uint64_t *words, uint64_t nsectors, uint8_t *state)
{
    for (uint64_t i = 0; i < nsectors; i++)
        state[i] = check_sector(words + i * PFR_WORDS);
}

/* Sector 0's fields of a block, and (for a block that is not uniform) every sector's. */
static inline void put_fields(const uint64_t *w, uint64_t *out, uint64_t stride)
{
    out[0] = w[1];
    out[stride] = w[2];
    out[2 * stride] = w[3];
    out[3 * stride] = w[6];
    out[4 * stride] = (w[5] >> 32) & 0xFFFF;
}

/* Check and summarise blocks of `per_block` sectors in one pass. Per sector: its state. Per block:
 * sector 0's state and fields (head[k * head_stride + b], k as in pfr.h), and whether the block
 * is uniform: no sector corrupt, and every sector of sector 0's state with its campaign, LBA and
 * generation (all valid from one write, or all zero). Only a block that is not uniform gets its
 * sectors' fields (fields[k * field_stride + i]): the checker looks at sectors only there. */
PFR_CLONES void pfr_parse_blocks(const uint64_t *words, uint64_t nblocks, uint32_t per_block,
                                 uint8_t *state, uint8_t *uniform, uint8_t *state0,
                                 uint64_t *head, uint64_t head_stride, uint64_t *fields,
                                 uint64_t field_stride)
{
    for (uint64_t b = 0; b < nblocks; b++) {
        const uint64_t *first = words + b * per_block * PFR_WORDS;
        uint8_t *st = state + b * per_block;
        uint8_t s0 = check_sector(first);
        st[0] = s0;
        int same = s0 != PFR_CORRUPT;
        for (uint32_t s = 1; s < per_block; s++) {
            const uint64_t *w = first + s * PFR_WORDS;
            st[s] = check_sector(w);
            same &= (st[s] == s0) & (w[1] == first[1]) & (w[2] == first[2]) & (w[3] == first[3]);
        }
        uniform[b] = (uint8_t)same;
        state0[b] = s0;
        put_fields(first, head + b, head_stride);
        if (!same)
            for (uint32_t s = 0; s < per_block; s++)
                put_fields(first + s * PFR_WORDS, fields + b * per_block + s, field_stride);
    }
}

/* Same with every header word: header[j * nsectors + i] is word j of sector i. */
PFR_CLONES void pfr_parse_header(const uint64_t *words, uint64_t nsectors, uint8_t *state,
                                 uint64_t *header)
{
    for (uint64_t i = 0; i < nsectors; i++) {
        const uint64_t *w = words + i * PFR_WORDS;
        state[i] = check_sector(w);
        for (unsigned j = 0; j < PFR_HEADER_WORDS; j++)
            header[j * nsectors + i] = w[j];
    }
}

/* Version 2, the writer's side. pfr_stamp_init fills `nsectors` sectors of a write buffer with
 * the base of their place (offset o = s / per_block blocks into the write, sector index
 * s % per_block): payload words only, k = 0, and the XOR fold of each sector's base in fold[s].
 * pfr_stamp32 then turns the buffer into a write's record in place: per sector the header, the
 * payload XORed with k_old ^ k_new (k[s] holds the k the buffer's sector carries), the
 * checksum. Nothing of it depends on more than the sector's header and place, so the buffer can
 * be prepared once and stamped write after write. */
PFR_CLONES void pfr_stamp_init(uint64_t *buf, uint64_t nsectors, uint32_t per_block,
                               uint64_t campaign, uint64_t *fold, uint64_t *k)
{
    for (uint64_t s = 0; s < nsectors; s++) {
        uint64_t *w = buf + s * PFR_WORDS;
        uint64_t base = base_seed(campaign, s / per_block, s % per_block);
        uint64_t f = 0;
        for (unsigned j = PFR_PAYLOAD_START; j < PFR_WORDS; j++) {
            w[j] = mix(base + (uint64_t)(j + 1) * GOLDEN);
            f ^= w[j];
        }
        fold[s] = f;
        k[s] = 0;
    }
}

static inline uint64_t term(uint64_t word, unsigned j) { return mix(word + (uint64_t)(j + 1) * GOLDEN); }

#define STAMP_BODY                                                                             \
    uint64_t w5 = nblocks | (worker << 32) | (flags << 48);                                    \
    uint64_t shared = term(campaign, 1) + term(first_lba, 4) + term(w5, 5) + term(op_seq, 6) +  \
                      term(issued_ns, 7);                                                      \
    uint64_t *w = buf;                                                                         \
    for (uint64_t b = 0; b < nblocks; b++) {                                                   \
        uint64_t lba = first_lba + b, gen = (uint64_t)gens[b];                                 \
        uint64_t hb = shared + term(lba, 2) + term(gen, 3);                                    \
        for (uint32_t i = 0; i < per_block; i++, w += PFR_WORDS) {                             \
            uint64_t s = b * per_block + i;                                                    \
            uint64_t w0 = PFR_MAGIC | (PFR_VERSION2 << 32) | ((uint64_t)i << 48);              \
            uint64_t h = hb + term(w0, 0);                                                     \
            uint64_t knew = mix(h), delta = knew ^ k[s];                                       \
            for (unsigned j = PFR_PAYLOAD_START; j < PFR_WORDS; j++)                           \
                w[j] ^= delta;                                                                 \
            k[s] = knew;                                                                       \
            w[0] = w0;                                                                         \
            w[1] = campaign;                                                                   \
            w[2] = lba;                                                                        \
            w[3] = gen;                                                                        \
            w[4] = first_lba;                                                                  \
            w[5] = w5;                                                                         \
            w[6] = op_seq;                                                                     \
            w[7] = issued_ns;                                                                  \
            w[PFR_CHECKSUM_WORD] = checksum2(h, fold[s] ^ knew); /* 55 words: odd */           \
        }                                                                                      \
    }

PFR_CLONES void pfr_stamp(uint64_t *buf, uint32_t per_block, uint64_t nblocks, uint64_t campaign,
                          uint64_t first_lba, const uint64_t *gens, uint64_t worker,
                          uint64_t op_seq, uint64_t issued_ns, uint64_t flags,
                          const uint64_t *fold, uint64_t *k)
{
    STAMP_BODY
}

PFR_CLONES void pfr_stamp32(uint64_t *buf, uint32_t per_block, uint64_t nblocks,
                            uint64_t campaign, uint64_t first_lba, const uint32_t *gens,
                            uint64_t worker, uint64_t op_seq, uint64_t issued_ns, uint64_t flags,
                            const uint64_t *fold, uint64_t *k)
{
    STAMP_BODY
}
