/* Shared by the wake-up floor programs (Scripts/benchmark-wakeup-floor): the datagram a
 * heart-rate sensor's notification carries, its decoding, and small helpers. The Swift
 * (Benchmarks/WakeupFloor) and Python (Benchmarks/python/wakeup_*.py) sides follow the same
 * definitions: datagram i is 2 bytes, flags 0x00 (8-bit rate) and the rate 60 + i % 120. */
#ifndef WAKEUP_COMMON_H
#define WAKEUP_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline void wakeup_die(const char *what) {
    fprintf(stderr, "%s: %s\n", what, errno ? strerror(errno) : "failed");
    exit(1);
}

/* The rate in datagram number `index` (from 0). */
static inline unsigned wakeup_rate(unsigned long index) { return 60 + (unsigned)(index % 120); }

/* The rate a heart-rate measurement carries: 8 bits, or 16 (little endian) when flags bit 0 is set. */
static inline unsigned wakeup_decode(const unsigned char *bytes, long count) {
    if (count < 2) return 0;
    if ((bytes[0] & 0x01) && count >= 3) return (unsigned)bytes[1] | (unsigned)bytes[2] << 8;
    return bytes[1];
}

static inline unsigned long wakeup_number(const char *text, unsigned long minimum) {
    char *end = NULL;
    unsigned long value = strtoul(text, &end, 10);
    if (!end || *end || value < minimum) {
        fprintf(stderr, "not a number (at least %lu): %s\n", minimum, text);
        exit(2);
    }
    return value;
}

/* `time` plus `ns` nanoseconds. */
static inline void wakeup_advance(struct timespec *time, long ns) {
    time->tv_nsec += ns;
    while (time->tv_nsec >= 1000000000L) {
        time->tv_nsec -= 1000000000L;
        time->tv_sec += 1;
    }
}

/* Sleeps until `deadline` (CLOCK_MONOTONIC), through interruptions. */
static inline void wakeup_sleep_until(const struct timespec *deadline) {
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, deadline, NULL) == EINTR) {
    }
}

#endif
