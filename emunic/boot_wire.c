/* SPDX-License-Identifier: MIT */
/* Framed messages and sockets of the bootstrap channel (see boot_wire.h). */
#include "emunic/boot_wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int wait_fd(int fd, short ev, long long deadline)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int r, left;

	for (;;) {
		left = deadline < 0 ? -1 : (int)(deadline - now_ms());
		if (deadline >= 0 && left <= 0)
			return -ETIMEDOUT;
		r = poll(&p, 1, left);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t len, int timeout_ms)
{
	long long deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	char *p = buf;
	int r;

	while (len) {
		ssize_t n;

		r = wait_fd(fd, POLLIN, deadline);
		if (r)
			return r;
		n = recv(fd, p, len, 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int emunic_wire_send(int fd, uint32_t type, int32_t rank, const void *buf, size_t len)
{
	struct emunic_boot_msg m = { .type = type, .rank = rank, .len = len };
	int r = write_all(fd, &m, sizeof(m));

	return r ? r : (len ? write_all(fd, buf, len) : 0);
}

int emunic_wire_recv_hdr(int fd, struct emunic_boot_msg *m, int timeout_ms)
{
	int r = read_all(fd, m, sizeof(*m), timeout_ms);

	if (r)
		return r;
	if (m->len > EMUNIC_BOOT_MAX_PAYLOAD)
		return -EPROTO;
	return 0;
}

int emunic_wire_recv_body(int fd, void *buf, size_t len, int timeout_ms)
{
	return read_all(fd, buf, len, timeout_ms);
}

static int split_hostport(const char *hostport, char *host, size_t hlen, const char **port)
{
	const char *colon = strrchr(hostport, ':');

	if (!colon || colon == hostport || !colon[1] || (size_t)(colon - hostport) >= hlen)
		return -EINVAL;
	memcpy(host, hostport, (size_t)(colon - hostport));
	host[colon - hostport] = '\0';
	*port = colon + 1;
	return 0;
}

int emunic_wire_connect(const char *hostport, int timeout_ms)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
	long long deadline = now_ms() + timeout_ms;
	char host[256];
	const char *port;
	int fd, one = 1, r;

	if (split_hostport(hostport, host, sizeof(host), &port))
		return -EINVAL;
	if (getaddrinfo(host, port, &hints, &ai))
		return -EHOSTUNREACH;
	/* The server may still be starting (another node): retry until the deadline. */
	for (;;) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			r = -errno;
			break;
		}
		if (!connect(fd, ai->ai_addr, ai->ai_addrlen)) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			freeaddrinfo(ai);
			return fd;
		}
		r = -errno;
		close(fd);
		if (now_ms() >= deadline)
			break;
		usleep(50 * 1000);
	}
	freeaddrinfo(ai);
	return r;
}

int emunic_wire_listen(const char *host, char *bound, size_t boundlen)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	char hbuf[256];
	const char *port = "0";
	int fd, one = 1;

	if (strchr(host, ':')) {
		if (split_hostport(host, hbuf, sizeof(hbuf), &port))
			return -EINVAL;
		host = hbuf;
	}
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return -EINVAL;
	sa.sin_port = htons((uint16_t)atoi(port));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 1024) ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl)) {
		int r = -errno;

		close(fd);
		return r;
	}
	snprintf(bound, boundlen, "%s:%u", host, ntohs(sa.sin_port));
	return fd;
}
