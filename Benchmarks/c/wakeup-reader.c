/* wakeup-reader blocking|epoll FD — the C readers of the receive floor
 * (Scripts/benchmark-wakeup-floor, driven by Scripts/guest/wakeup-floor.py).
 *
 * Reads the datagrams Benchmarks/c/wakeup-writer.c sends on the inherited SOCK_SEQPACKET
 * socket FD (as a central reads an AcquireNotify socket) and decodes each one's heart rate,
 * until the writer closes its end; then prints "received COUNT sum SUM".
 *   blocking  one thread in a blocking recv: one wake-up and one system call per datagram,
 *             the least any reader can do (the floor).
 *   epoll     epoll_wait, then one non-blocking recv: an event loop's shape (two system calls
 *             per datagram, as asyncio's add_reader or a dispatch source pay at least).
 * Prints "ready" once it waits for the first datagram. */
#include "wakeup-common.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static unsigned long received, sum;

static void handle(const unsigned char *bytes, long count) {
    received += 1;
    sum += wakeup_decode(bytes, count);
}

static void read_blocking(int fd) {
    unsigned char buffer[1024];
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        ssize_t count = recv(fd, buffer, sizeof buffer, 0);
        if (count > 0) {
            handle(buffer, count);
        } else if (count == 0) {
            return; /* the writer never sends an empty datagram: this is the end */
        } else if (errno != EINTR) {
            wakeup_die("recv");
        }
    }
}

static void read_epoll(int fd) {
    unsigned char buffer[1024];
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) wakeup_die("fcntl");
    int poller = epoll_create1(EPOLL_CLOEXEC);
    if (poller < 0) wakeup_die("epoll_create1");
    struct epoll_event event = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(poller, EPOLL_CTL_ADD, fd, &event) < 0) wakeup_die("epoll_ctl");
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        struct epoll_event ready;
        int n = epoll_wait(poller, &ready, 1, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) wakeup_die("epoll_wait");
        ssize_t count = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
        if (count > 0) {
            handle(buffer, count);
        } else if (count == 0) {
            break;
        } else if (errno != EAGAIN && errno != EINTR) {
            wakeup_die("recv");
        }
    }
    close(poller);
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "blocking") != 0 && strcmp(argv[1], "epoll") != 0)) {
        fprintf(stderr, "usage: %s blocking|epoll FD\n", argv[0]);
        return 2;
    }
    int fd = (int)wakeup_number(argv[2], 0);
    if (strcmp(argv[1], "blocking") == 0) {
        read_blocking(fd);
    } else {
        read_epoll(fd);
    }
    printf("received %lu sum %lu\n", received, sum);
    return 0;
}
