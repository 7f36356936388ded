/* Shared helpers for the benchmark's C programs (bench/c/): clocks, argument parsing and a
 * libmosquitto client set up like the bridge's own (MQTT 3.1.1, TCP_NODELAY). */
#pragma once
#define _GNU_SOURCE
#include <errno.h>
#include <mosquitto.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void sleep_s(double seconds)
{
    struct timespec ts = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) { }
}

static inline void die(const char *what, int rc)
{
    fprintf(stderr, "%s: %s\n", what, rc ? mosquitto_strerror(rc) : strerror(errno));
    exit(2);
}

/* A client configured like the bridge's: MQTT 3.1.1, TCP_NODELAY, the given inflight window. */
static inline struct mosquitto *bench_client(const char *id, void *userdata, int inflight)
{
    mosquitto_lib_init();
    struct mosquitto *mosq = mosquitto_new(id, true, userdata);
    if (!mosq) die("mosquitto_new", 0);
    int rc = mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
    if (rc) die("protocol", rc);
    rc = mosquitto_int_option(mosq, MOSQ_OPT_TCP_NODELAY, 1);
    if (rc) die("TCP_NODELAY", rc);
    if (inflight > 0) {
        rc = mosquitto_max_inflight_messages_set(mosq, (unsigned)inflight);
        if (rc) die("inflight", rc);
    }
    return mosq;
}

/* Option helpers: `-x value` pairs, everything numeric unless noted. */
static inline const char *opt_str(int argc, char **argv, const char *name, const char *fallback)
{
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], name) == 0) return argv[i + 1];
    }
    return fallback;
}

static inline double opt_num(int argc, char **argv, const char *name, double fallback)
{
    const char *s = opt_str(argc, argv, name, NULL);
    return s ? atof(s) : fallback;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted values. */
static inline double percentile(const double *sorted, int n, double p)
{
    if (n == 0) return 0;
    int rank = (int)(p / 100.0 * n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return sorted[rank - 1];
}
