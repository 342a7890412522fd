/* Compressed chunks: copies' bytes cut into chunks, each sent raw, LZ4 or
 * as zero words behind a self-describing header (docs/wire.md, "Compressed chunks"), and
 * the decision, from a sample of a chunk's bytes, whether compressing pays
 * on a link of a given rate. Knows nothing of CUDA or sockets: the caller
 * measures its link and moves the bytes.
 *
 * Sender, per copy:  compress_decide() once on the copy's bytes, then for
 *                    each chunk compress_chunk(..., verdict.method, ...).
 * Receiver, per chunk: read COMPRESS_HEADER_SIZE bytes, compress_header_read(),
 *                    read h.stored bytes, compress_body_decode() into the
 *                    destination. Or decompress_chunk() on a whole buffer. */
#ifndef RIG_PROTO_COMPRESS_H
#define RIG_PROTO_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/error.h"

/* The chunk header: u8 method, u32 original length, u32 stored length (the
 * bytes that follow). */
#define COMPRESS_HEADER_SIZE 9
/* The largest original length of one chunk; a header above it is refused
 * before anything is allocated or read. */
#define COMPRESS_CHUNK_MAX ((uint32_t)16 << 20)

enum compress_method {
    COMPRESS_RAW = 0,   /* stored == original, the bytes as they are */
    COMPRESS_LZ4 = 1,   /* one LZ4 block (liblz4's block format), 0 < stored < original */
    COMPRESS_ZEROS = 2, /* zero words: per 32 words a u32 mask and the nonzero ones, 0 < stored < original */
};

typedef struct compress_header {
    uint8_t method;             /* enum compress_method */
    uint32_t original;          /* bytes the chunk decodes to, <= COMPRESS_CHUNK_MAX */
    uint32_t stored;            /* bytes after the header */
} compress_header;

/* What a sender knows when it decides. */
typedef struct compress_rates {
    double link_bps;            /* the link's rate, bytes/s, measured by the caller */
    double compress_bps;        /* this machine's LZ4 speed, input bytes/s (compress_measure) */
    double decompress_bps;      /* LZ4 decoding, output bytes/s (the peer's assumed the same) */
    double zeros_compress_bps;  /* zero words, input bytes/s */
    double zeros_decompress_bps;   /* ... decoding, output bytes/s */
} compress_rates;

typedef struct compress_verdict {
    bool pays;                  /* compress this copy's chunks */
    uint8_t method;             /* with: COMPRESS_LZ4 or COMPRESS_ZEROS; COMPRESS_RAW when it does not pay */
    double ratio;               /* original / compressed size of the sample with the chosen (or last tried) method */
    double raw_bps;             /* the copy's estimated rate sent raw (the link's) */
    double compressed_bps;      /* ... sent compressed, pipelined chunk by chunk */
} compress_verdict;

/* Bytes compress_chunk may write for len input bytes: the header and the
 * largest of raw and each method's worst case. 0 when len > COMPRESS_CHUNK_MAX. */
size_t compress_bound(size_t len);

/* Turns the zero-words codec's vector paths (AVX2, chosen at run time)
 * on, where the CPU has them, or off; returns whether they are on. Both
 * write and read the same bytes: for tests that compare them. */
bool compress_vectors(bool on);

/* Fills p[0..len) with floats of which about 7 in 8 are zero and the rest
 * random in [0, 1) from seed: what activations after a ReLU or a pruned
 * weight tensor look like (compress_measure, the bench, the tests). */
void compress_sparse_floats(uint8_t *p, size_t len, uint64_t seed);

/* Times LZ4 and zero words both ways on a few MiB of sparse floats (a
 * typical compressible tensor), per second of the calling thread's CPU
 * time, and fills r's speeds; link_bps is left alone. Takes tens of milliseconds: call once per process. */
int compress_measure(compress_rates *r, rig_why *why);

/* This machine's speeds (compress_measure), measured by the first caller
 * of the process (or by each caller until one has published its result:
 * none waits for another's) and remembered; all 0 when measuring failed
 * (nothing is then compressed). link_bps is 0. */
compress_rates compress_machine(void);

/* The link rate a sender decides with: RIG_LINK_RATE (bytes/s) when set to
 * a positive number, for a link the sends cannot measure, else measured. */
double compress_link_rate(uint64_t measured);

/* After compressing len bytes in seconds (wall time) for a link of
 * link_bps: true when compressing kept up with the link by the deciding
 * margin. On a loaded machine it gets a share of a CPU no sample sees, so a sender
 * whose compressing did not keep up stops compressing for a while. */
bool compress_kept_up(size_t len, double seconds, double link_bps);
/* How long a sender goes raw after compressing did not keep up. */
#define COMPRESS_PAUSE_MS 1000

/* Whether a sender's compressing keeps up, piece after piece: one slow
 * piece is a preemption (two CPUs shared by program, agent and kernel
 * lose one often), COMPRESS_SLOW_PIECES in a row a loaded machine, and
 * the sender goes raw for COMPRESS_PAUSE_MS. Zeroed to start; safe to
 * share between threads. */
typedef struct compress_pace {
    unsigned slow;              /* pieces in a row that did not keep up */
    int64_t paused_until_ns;    /* CLOCK_MONOTONIC: raw until then */
} compress_pace;
#define COMPRESS_SLOW_PIECES 3

/* Notes one piece (compress_kept_up's arguments); true when it makes
 * COMPRESS_SLOW_PIECES in a row: the pause then begins, and the count
 * starts again. */
bool compress_pace_note(compress_pace *p, size_t len, double seconds, double link_bps);

/* True while a pause lasts: send raw. */
bool compress_pace_paused(const compress_pace *p);

/* Decides from a sample (16 pieces of 1 KiB spread evenly over p[0..len),
 * or all of it when shorter) whether sending len bytes compressed beats
 * sending them raw on r->link_bps, and how: compressed chunks are
 * pipelined, so the copy runs at the slowest of compressing (LZ4's: its
 * measured speed, or half the sample's own when faster), the link carrying
 * ratio times its rate, and decompressing (LZ4's likewise); the faster
 * method wins and must beat the link by 10%. A method whose measured
 * speeds cannot beat the link is not sampled (a fast link costs no
 * sample), but from 1 MiB LZ4 is while the zero words' decoding beats the
 * link (over long runs LZ4 decodes about as fast). Never fails: a rate
 * of 0 or less says no. Uses about 33 KiB of stack and a few microseconds. */
compress_verdict compress_decide(const void *p, size_t len, const compress_rates *r);

/* Writes one chunk of in[0..len) (len <= COMPRESS_CHUNK_MAX) into
 * out[0..cap): with method (COMPRESS_LZ4 or COMPRESS_ZEROS) when it
 * shrinks the bytes, else raw.
 * *out_len receives the header's and body's bytes. Returns 0, or
 * RIG_E_TOO_LONG (len above the limit, or cap below compress_bound(len)). */
int compress_chunk(const void *in, size_t len, uint8_t method, void *out, size_t cap, size_t *out_len, rig_why *why);

/* Parses and checks a header: a known method, original <= COMPRESS_CHUNK_MAX,
 * raw with stored == original, LZ4 and zeros with 0 < stored < original. Returns 0 or
 * RIG_E_MALFORMED / RIG_E_TOO_LONG naming the field. */
int compress_header_read(const uint8_t p[static COMPRESS_HEADER_SIZE], compress_header *h, rig_why *why);

/* Writes h's COMPRESS_HEADER_SIZE bytes. */
void compress_header_write(uint8_t p[static COMPRESS_HEADER_SIZE], const compress_header *h);

/* Decodes the h->stored bytes at body into out[0..cap), which must hold
 * h->original bytes. An LZ4 or zeros body must decode to exactly
 * h->original bytes, using every stored byte (zeros); neither decoder ever
 * reads or writes past either buffer. Returns 0,
 * RIG_E_TOO_LONG (cap too small) or RIG_E_MALFORMED. */
int compress_body_decode(const compress_header *h, const void *body, void *out, size_t cap, rig_why *why);

/* One whole chunk from in[0..in_len): header, then body. *consumed receives
 * the chunk's bytes (the header's and the body's; more may follow in in),
 * *out_len its original length. RIG_E_TRUNCATED when in ends inside it. */
int decompress_chunk(const void *in, size_t in_len, void *out, size_t cap, size_t *consumed, size_t *out_len,
                     rig_why *why);

#endif
