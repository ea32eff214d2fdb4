/* SPDX-License-Identifier: MIT */
/*
 * wait.c - deadlines for busy_timeout_ms (wait.h).
 */
#include "wait.h"

#include <errno.h>

#include "bonsai.h"

#define FIRST_STEP_US 1000u
#define LAST_STEP_US 20000u

static int64_t ns_until(const struct timespec *end)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)(end->tv_sec - now.tv_sec) * 1000000000 +
           (end->tv_nsec - now.tv_nsec);
}

void bx_wait_start(bx_wait *w, uint32_t timeout_ms)
{
    w->timeout_ms = timeout_ms;
    w->step_us = FIRST_STEP_US;
    clock_gettime(CLOCK_MONOTONIC, &w->end);
    w->end.tv_sec += timeout_ms / 1000;
    w->end.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (w->end.tv_nsec >= 1000000000) {
        w->end.tv_sec++;
        w->end.tv_nsec -= 1000000000;
    }
}

int bx_wait_sleep(bx_wait *w)
{
    if (w->timeout_ms == 0)
        return 0;
    int64_t step = (int64_t)w->step_us * 1000;
    if (w->timeout_ms != BONSAI_WAIT_FOREVER) {
        int64_t left = ns_until(&w->end);
        if (left <= 0)
            return 0;
        if (step > left)
            step = left;
    }
    struct timespec d = {(time_t)(step / 1000000000), (long)(step % 1000000000)};
    while (nanosleep(&d, &d) != 0 && errno == EINTR)
        ;
    if (w->step_us < LAST_STEP_US)
        w->step_us *= 2;
    return 1;
}

int bx_wait_cond(bx_wait *w, pthread_cond_t *cond, pthread_mutex_t *mutex)
{
    if (w->timeout_ms == 0)
        return 0;
    if (w->timeout_ms == BONSAI_WAIT_FOREVER)
        return pthread_cond_wait(cond, mutex) == 0;
    return pthread_cond_timedwait(cond, mutex, &w->end) != ETIMEDOUT;
}

int bx_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t a;
    if (pthread_condattr_init(&a) != 0)
        return BONSAI_NOMEM;
    int rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC) == 0 &&
                     pthread_cond_init(cond, &a) == 0
                 ? 0
                 : BONSAI_NOMEM;
    pthread_condattr_destroy(&a);
    return rc;
}
