/* The HTTP server library's own ceiling: libmicrohttpd started exactly as the bridge starts it
 * (internal polling thread + epoll, thread pool, connection limits, memory limit; see
 * Sources/BridgeHTTP/DaemonHandle.swift) with a handler that answers every GET with a fixed JSON
 * body the size of /rooms/1/Kitchen's, plus the same response headers the bridge sends.
 *
 *   mhd_trivial -p PORT [-n THREADS(4)] [-c MAX_CONNECTIONS(256)] [-a PER_ADDRESS(64)]
 *
 * Runs until killed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char body[] =
    "{\"SensorNames\":[\"Temperature\",\"Humidity\",\"Lights\",\"Gas\"],"
    "\"SensorIcon\":[\"temperature\",\"humidity\",\"Off\",\"Okey\"],"
    "\"SensorValues\":[\"25.7\",\"55.2\",\"Off\",\"Okey\"]}";

static enum MHD_Result handler(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size, void **ctx)
{
    (void)cls; (void)url; (void)method; (void)version; (void)upload_data;
    static int marker;
    if (*ctx == NULL) { *ctx = &marker; return MHD_YES; } /* headers only: wait for the end of the request */
    if (*upload_data_size) { *upload_data_size = 0; return MHD_YES; }
    struct MHD_Response *response =
        MHD_create_response_from_buffer(sizeof body - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(response, "Content-Type", "application/json; charset=utf-8");
    MHD_add_response_header(response, "Cache-Control", "no-store");
    MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(response, "X-Frame-Options", "DENY");
    MHD_add_response_header(response, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(response, "Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'");
    enum MHD_Result rc = MHD_queue_response(connection, MHD_HTTP_OK, response);
    MHD_destroy_response(response);
    return rc;
}

static const char *opt(int argc, char **argv, const char *name, const char *fallback)
{
    for (int i = 1; i + 1 < argc; i++) if (strcmp(argv[i], name) == 0) return argv[i + 1];
    return fallback;
}

int main(int argc, char **argv)
{
    unsigned port = (unsigned)atoi(opt(argc, argv, "-p", "8081"));
    unsigned threads = (unsigned)atoi(opt(argc, argv, "-n", "4"));
    unsigned limit = (unsigned)atoi(opt(argc, argv, "-c", "256"));
    unsigned per_address = (unsigned)atoi(opt(argc, argv, "-a", "64"));
    struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, (uint16_t)port, NULL, NULL,
        handler, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&address,
        MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, limit,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_address,
        MHD_OPTION_CONNECTION_TIMEOUT, 30u,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024),
        MHD_OPTION_END);
    if (!daemon) { fprintf(stderr, "cannot start libmicrohttpd on 127.0.0.1:%u\n", port); return 2; }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sig;
    sigwait(&set, &sig);
    MHD_stop_daemon(daemon);
    return 0;
}
