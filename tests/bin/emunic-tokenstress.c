/* SPDX-License-Identifier: MIT */
/*
 * emunic-tokenstress: the engine's ownership token under contention.  Two
 * application threads and the progress core share one device; each thread
 * has its own trigger counter, done counter and event queue, and ROUNDS
 * times:
 *   - posts two triggered CT_INCs on its trigger counter, the higher
 *     threshold first (2i, then 2i - 1), each counting on its done counter
 *     and reporting to its event queue with the threshold as user value;
 *   - bumps the trigger counter by 2 (an op through the engine);
 *   - waits for the done counter to reach 2i, then for the two events,
 *     which must come in threshold order (2i - 1, then 2i).
 * So each thread waits 3 x ROUNDS times on objects of its own while the
 * other thread and the core take the token.  A lost wake-up shows as a wait
 * that times out (every wait is bounded), a deadlock as emunic-run's
 * timeout, a misordered trigger as a FAIL naming the round.
 *
 *   emunic-run -n 1 emunic-tokenstress [ROUNDS]     (default 10000)
 *
 * $EMUNIC_ASSIST_US=0 makes every wait sleep at once: then every wake-up
 * goes through the core's hand-over.  Exit 0: PASS; 1: FAIL; 2: usage.
 */
#include "emunic.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define THREADS 2
#define WAIT_MS 10000

struct worker {
	struct emunic_dev *dev;
	struct emunic_ct *trig, *done;
	struct emunic_eq *eq;
	unsigned id, rounds;
	char why[256];			/* empty: passed */
};

#define FAILED(w, ...) (snprintf((w)->why, sizeof((w)->why), __VA_ARGS__), (void *)NULL)

static void *work(void *arg)
{
	struct worker *w = arg;

	for (uint64_t i = 1; i <= w->rounds; i++) {
		struct emunic_op op = {
			.kind = EMUNIC_OP_CT_INC, .ct_target = w->done, .ct_value = { 1, 0 }, .eq = w->eq,
		};
		struct emunic_ct_val one = { 2, 0 };
		struct emunic_event ev;
		int r;

		for (uint64_t th = 2 * i; th >= 2 * i - 1; th--) {
			op.user = th;
			if ((r = emunic_trig_post(w->dev, &op, w->trig, th)))
				return FAILED(w, "round %llu: emunic_trig_post(threshold %llu): %s",
					      (unsigned long long)i, (unsigned long long)th, strerror(-r));
		}
		if ((r = emunic_ct_inc(w->trig, one)))
			return FAILED(w, "round %llu: emunic_ct_inc: %s", (unsigned long long)i, strerror(-r));
		if ((r = emunic_ct_wait(w->done, 2 * i, NULL, WAIT_MS)))
			return FAILED(w, "round %llu: the done counter did not reach %llu within %d ms (%s): "
				      "a lost wake-up or a trigger that did not fire", (unsigned long long)i,
				      (unsigned long long)(2 * i), WAIT_MS, strerror(-r));
		for (uint64_t th = 2 * i - 1; th <= 2 * i; th++) {
			if ((r = emunic_eq_wait(w->eq, &ev, WAIT_MS)))
				return FAILED(w, "round %llu: no event for threshold %llu within %d ms (%s)",
					      (unsigned long long)i, (unsigned long long)th, WAIT_MS, strerror(-r));
			if (ev.kind != EMUNIC_EV_CT_DONE || ev.status || ev.user != th)
				return FAILED(w, "round %llu: event %s status %d for threshold %llu, expected "
					      "CT_DONE 0 for %llu: triggers out of threshold order",
					      (unsigned long long)i, emunic_ev_kind_str(ev.kind), ev.status,
					      (unsigned long long)ev.user, (unsigned long long)th);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker w[THREADS] = { 0 };
	pthread_t th[THREADS];
	struct emunic_boot *boot;
	struct emunic_dev *dev;
	struct timespec t0, t1;
	unsigned rounds = 10000;
	int failed = 0;

	if (argc > 2 || (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
				       !(rounds = (unsigned)strtoul(argv[1], NULL, 10))))) {
		fprintf(argc == 2 && argv[1][0] == '-' ? stdout : stderr,
			"usage: emunic-run -n 1 emunic-tokenstress [ROUNDS]   (default 10000)\n");
		return argc == 2 && argv[1][0] == '-' ? 0 : 2;
	}
	if (emunic_boot_init(&boot) || emunic_dev_open(boot, NULL, &dev)) {
		fprintf(stderr, "emunic-tokenstress: cannot open the device\n");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned t = 0; t < THREADS; t++) {
		w[t] = (struct worker){ .dev = dev, .id = t, .rounds = rounds };
		if (emunic_ct_alloc(dev, &w[t].trig) || emunic_ct_alloc(dev, &w[t].done) ||
		    emunic_eq_create(dev, 16, NULL, NULL, &w[t].eq)) {
			fprintf(stderr, "emunic-tokenstress: cannot make thread %u's counters and event queue\n", t);
			return 1;
		}
	}
	for (unsigned t = 0; t < THREADS; t++)
		if (pthread_create(&th[t], NULL, work, &w[t])) {
			fprintf(stderr, "emunic-tokenstress: pthread_create failed\n");
			return 1;
		}
	for (unsigned t = 0; t < THREADS; t++) {
		pthread_join(th[t], NULL);
		if (w[t].why[0]) {
			fprintf(stderr, "emunic-tokenstress: thread %u: FAIL: %s\n", t, w[t].why);
			failed = 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	for (unsigned t = 0; t < THREADS; t++) {
		emunic_eq_destroy(w[t].eq);
		emunic_ct_free(w[t].done);
		emunic_ct_free(w[t].trig);
	}
	emunic_dev_close(dev);
	emunic_boot_fini(boot);
	if (!failed)
		printf("emunic-tokenstress: PASS: %u threads x %u rounds (%u waits each, triggers in threshold order) "
		       "in %.2f s\n", THREADS, rounds, 3 * rounds,
		       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return failed;
}
