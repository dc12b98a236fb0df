/*
 * kraftd bench "ceiling": the cheapest possible server for the raw-consume loop.
 *
 * It answers every request frame (4-byte big-endian size + body) on a loopback TCP
 * connection with one pre-built Fetch *response* frame (built by bench/raw_consume.py for the
 * negotiated Fetch version): a 1 MiB-ish chunk of real record batches.  Per request it only
 * patches the correlation id and the base offsets of the batches in the chunk (chunk i holds
 * offsets i*K*R ...), so the client sees exactly the byte stream a broker would send for the
 * same dataset, produced by the same request -> response loop.  No parsing, no copies beyond
 * the kernel's send path: this is what the loopback + client loop can absorb.
 *
 * usage: copy_server PORT TEMPLATE RECORDS_POS BATCH_SIZE BATCHES_PER_CHUNK RECORDS_PER_BATCH
 *                    TOTAL_CHUNKS
 * Prints "ceiling listening on <port>" (PORT may be 0 = ephemeral) and serves connections
 * one at a time until killed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}
static void put_be64(unsigned char *p, uint64_t v) {
    put_be32(p, (uint32_t)(v >> 32)); put_be32(p + 4, (uint32_t)v);
}

static int read_exact(int fd, unsigned char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k == 0) return -1;
        if (k < 0) { if (errno == EINTR) continue; return -1; }
        got += (size_t)k;
    }
    return 0;
}

static int write_all(int fd, const unsigned char *buf, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t k = write(fd, buf + done, n - done);
        if (k < 0) { if (errno == EINTR) continue; return -1; }
        done += (size_t)k;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: %s PORT TEMPLATE RECORDS_POS BATCH_SIZE BATCHES_PER_CHUNK "
                        "RECORDS_PER_BATCH TOTAL_CHUNKS\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    const char *tpath = argv[2];
    long records_pos = atol(argv[3]);
    long batch_size = atol(argv[4]);
    long k = atol(argv[5]);
    long r = atol(argv[6]);
    long total_chunks = atol(argv[7]);
    if (total_chunks < 1) total_chunks = 1;
    signal(SIGPIPE, SIG_IGN);

    FILE *f = fopen(tpath, "rb");
    if (!f) { perror("template"); return 1; }
    struct stat st;
    if (fstat(fileno(f), &st) != 0) { perror("stat"); return 1; }
    size_t tlen = (size_t)st.st_size;
    unsigned char *resp = malloc(tlen);
    if (!resp || fread(resp, 1, tlen, f) != tlen) { perror("read template"); return 1; }
    fclose(f);
    if (records_pos + k * batch_size > (long)tlen) { fprintf(stderr, "bad layout\n"); return 1; }

    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&addr, sizeof addr) != 0) { perror("bind"); return 1; }
    if (listen(ls, 16) != 0) { perror("listen"); return 1; }
    socklen_t alen = sizeof addr;
    getsockname(ls, (struct sockaddr *)&addr, &alen);
    printf("ceiling listening on %d\n", ntohs(addr.sin_port));
    fflush(stdout);

    unsigned char *req = malloc(1 << 20);
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) { if (errno == EINTR) continue; perror("accept"); return 1; }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        long chunk = 0;
        for (;;) {
            unsigned char hdr[4];
            if (read_exact(fd, hdr, 4) != 0) break;
            uint32_t size = ((uint32_t)hdr[0] << 24) | (hdr[1] << 16) | (hdr[2] << 8) | hdr[3];
            if (size < 8 || size > (1 << 20)) break;
            if (read_exact(fd, req, size) != 0) break;
            memcpy(resp + 4, req + 4, 4); /* correlation id (after api key + version) */
            uint64_t base = (uint64_t)(chunk % total_chunks) * (uint64_t)(k * r);
            for (long j = 0; j < k; j++)
                put_be64(resp + records_pos + j * batch_size, base + (uint64_t)(j * r));
            if (write_all(fd, resp, tlen) != 0) break;
            chunk++;
        }
        close(fd);
    }
}
