/* wakeup-writer FD INTERVAL_MS WARMUP N — the stimulus of the receive floor
 * (Scripts/benchmark-wakeup-floor, driven by Scripts/guest/wakeup-floor.py).
 *
 * Sends WARMUP + N datagrams of 2 bytes (a heart-rate measurement: flags 0x00, the rate; see
 * wakeup-common.h) on the SOCK_SEQPACKET socket FD (inherited), one every INTERVAL_MS on an
 * absolute clock_nanosleep schedule, as bluetoothd writes notifications to an AcquireNotify
 * socket. After datagram WARMUP and after the last one it waits half an interval (the reader
 * has handled it and waits again), prints "mark K" and waits for a line on standard input:
 * the driver samples the reader's CPU counters then, so the window holds exactly N datagrams
 * and no sampling happens while the reader works. Then it prints "sent COUNT sum SUM" and
 * closes FD (the reader sees the end and exits). */
#include "wakeup-common.h"

#include <sys/socket.h>
#include <unistd.h>

static void mark(unsigned long count, struct timespec *next, long interval_ns) {
    wakeup_advance(next, interval_ns / 2);
    wakeup_sleep_until(next);
    printf("mark %lu\n", count);
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) wakeup_die("the driver went away");
    /* The next datagram one full interval from now. */
    clock_gettime(CLOCK_MONOTONIC, next);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s FD INTERVAL_MS WARMUP N\n", argv[0]);
        return 2;
    }
    int fd = (int)wakeup_number(argv[1], 0);
    long interval_ns = (long)wakeup_number(argv[2], 1) * 1000000L;
    unsigned long warmup = wakeup_number(argv[3], 1), count = wakeup_number(argv[4], 1);
    unsigned long total = warmup + count, sum = 0;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (unsigned long i = 0; i < total; i++) {
        wakeup_advance(&next, interval_ns);
        wakeup_sleep_until(&next);
        unsigned char datagram[2] = {0x00, (unsigned char)wakeup_rate(i)};
        for (;;) {
            ssize_t sent = send(fd, datagram, sizeof datagram, 0);
            if (sent == (ssize_t)sizeof datagram) break;
            if (sent < 0 && errno == EINTR) continue;
            wakeup_die("send");
        }
        sum += wakeup_rate(i);
        if (i + 1 == warmup || i + 1 == total) mark(i + 1, &next, interval_ns);
    }
    printf("sent %lu sum %lu\n", total, sum);
    fflush(stdout);
    close(fd);
    return 0;
}
