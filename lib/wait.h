/* SPDX-License-Identifier: MIT */
/*
 * wait.h - waiting, up to a deadline, for a lock another thread or
 * process holds: the store's busy_timeout_ms (bonsai.h).
 *
 * A thread waiting for the write transaction of its own process sleeps on
 * a condition variable (bx_wait_cond); a lock another process holds
 * (flock, a byte lock) cannot be waited on with a timeout, so it is tried
 * again after sleeps that grow from 1 ms to 20 ms (bx_wait_sleep): the
 * deadline is overshot by at most one short sleep.
 */
#ifndef BONSAI_WAIT_H
#define BONSAI_WAIT_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

typedef struct bx_wait {
    uint32_t timeout_ms;  /* 0: never wait; BONSAI_WAIT_FOREVER */
    struct timespec end;  /* CLOCK_MONOTONIC */
    unsigned step_us;     /* the next sleep */
} bx_wait;

void bx_wait_start(bx_wait *w, uint32_t timeout_ms);

/* Sleeps before the next try: 1 when there is time for one, 0 when the
 * deadline has passed (the caller answers BONSAI_BUSY). */
int bx_wait_sleep(bx_wait *w);

/* Waits on cond (its clock CLOCK_MONOTONIC, see bx_cond_init) under mutex
 * until signalled: 1, or 0 when the deadline has passed. */
int bx_wait_cond(bx_wait *w, pthread_cond_t *cond, pthread_mutex_t *mutex);

/* A condition variable whose timed waits use CLOCK_MONOTONIC, so that a
 * change of the wall clock does not stretch or cut a wait. */
int bx_cond_init(pthread_cond_t *cond);

#endif
