/*
 * isal_bench: throughput of Intel ISA-L's xor_gen and pq_gen (libisal, the
 * run-time dispatched entry points), measured the same way as raidlab's
 * raidlab_parity::bench::run: a warm-up call, then the best of many timed
 * loops of 20 ms each, SECONDS in all; GB/s (1e9 bytes) of DATA processed,
 * i.e. data_disks * chunk bytes per call. Buffers are 64-byte aligned.
 *
 * Usage: isal_bench DATA_DISKS CHUNK_BYTES SECONDS
 * Prints one JSON object per line: {"op":"xor"|"pq","engine":"isa-l",...},
 * then {"op":"digest",...} with FNV-1a fingerprints of P and Q. The data is a
 * xorshift64 stream (seed 0x9e3779b97f4a7c15, shifts 13/7/17, low byte of each
 * step) filling data block 0, 1, ... in order.
 */
#include <isa-l/raid.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* 64-bit FNV-1a of a buffer. */
static uint64_t fnv1a(const void *buf, int len)
{
	const unsigned char *b = buf;
	uint64_t h = 0xcbf29ce484222325ull;
	for (int i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

typedef int (*gen_fn)(int vects, int len, void **array);

/* Calls per second of fn(vects, len, bufs): best of 20 ms rounds (at least 3). */
static double rate(gen_fn fn, int vects, int len, void **bufs, double seconds)
{
	double best = 0, round = 0.020;
	int rounds = (int)(seconds / round + 0.999);
	if (rounds < 3) {
		rounds = 3;
		round = seconds / 3;
	}
	fn(vects, len, bufs);
	for (int r = 0; r < rounds; r++) {
		double start = now(), el;
		uint64_t iters = 0;
		for (;;) {
			fn(vects, len, bufs);
			iters++;
			if ((el = now() - start) >= round)
				break;
		}
		if (iters / el > best)
			best = iters / el;
	}
	return best;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s DATA_DISKS CHUNK_BYTES SECONDS\n", argv[0]);
		return 2;
	}
	int disks = atoi(argv[1]);
	int chunk = atoi(argv[2]);
	double seconds = atof(argv[3]);
	if (disks < 1 || chunk <= 0 || chunk % 64 != 0 || seconds <= 0) {
		fprintf(stderr, "need DATA_DISKS >= 1, CHUNK_BYTES a positive multiple of 64\n");
		return 2;
	}
	/* data blocks, then P, then Q (pq_gen's layout; xor_gen uses data + P). */
	void *bufs[disks + 2];
	uint64_t s = 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < disks + 2; i++) {
		if (posix_memalign(&bufs[i], 64, chunk)) {
			perror("posix_memalign");
			return 1;
		}
		unsigned char *b = bufs[i];
		for (int j = 0; j < chunk; j++) {
			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			b[j] = (unsigned char)s;
		}
	}
	double bytes = (double)disks * chunk;
	double x = rate(xor_gen, disks + 1, chunk, bufs, seconds);
	printf("{\"op\":\"xor\",\"engine\":\"isa-l\",\"data_disks\":%d,\"chunk_bytes\":%d,\"gbps\":%.3f}\n",
	       disks, chunk, x * bytes / 1e9);
	if (xor_check(disks + 1, chunk, bufs) != 0) {
		fprintf(stderr, "xor_check failed\n");
		return 1;
	}
	double pq = rate(pq_gen, disks + 2, chunk, bufs, seconds);
	printf("{\"op\":\"pq\",\"engine\":\"isa-l\",\"data_disks\":%d,\"chunk_bytes\":%d,\"gbps\":%.3f}\n",
	       disks, chunk, pq * bytes / 1e9);
	if (pq_check(disks + 2, chunk, bufs) != 0) {
		fprintf(stderr, "pq_check failed\n");
		return 1;
	}
	/* Fingerprints of P and Q for this data, so the script can check that
	 * raidlab computes the very same parity (see parity_bench --digest). */
	printf("{\"op\":\"digest\",\"engine\":\"isa-l\",\"data_disks\":%d,\"chunk_bytes\":%d,"
	       "\"p\":\"%016llx\",\"q\":\"%016llx\"}\n",
	       disks, chunk, (unsigned long long)fnv1a(bufs[disks], chunk),
	       (unsigned long long)fnv1a(bufs[disks + 1], chunk));
	return 0;
}
