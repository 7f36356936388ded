/* Subscriber that counts delivered messages over a fixed window.
 *
 *   mqtt_count -p PORT [-H 127.0.0.1] [-t 'smarthome/#'] [-q 0|1] [-w WARMUP_S] [-d WINDOW_S]
 *              [-Q QUIET_S [-M MAX_WAIT_S]]
 *
 * Connects, subscribes, waits WARMUP_S, then counts for WINDOW_S. With -Q (for periodic sources
 * such as the simulator at a 5 s interval) both ends of the window are moved into a quiet gap:
 * the window opens only once no message has arrived for QUIET_S, and closes, after WINDOW_S, at
 * the next such gap, so it holds whole bursts only (each wait gives up after MAX_WAIT_S, default
 * 30). Prints one line
 * {"event":"window_start","t":MONOTONIC} when the window opens (so a driver can sample CPU at the
 * same moment) and one JSON result line when it closes. A "reading" is a message on a 4-level topic
 * (<base>/<user>/<room>/<sensor>); everything else (room JSON, bridge state and info, events) counts as "other". */
#include "benchc.h"
#include <stdatomic.h>

static atomic_ulong total, readings, bytes;
static atomic_int subscribed;
static atomic_long last_message_ns;

static void on_connect(struct mosquitto *mosq, void *obj, int rc)
{
    (void)mosq; (void)obj;
    if (rc) { fprintf(stderr, "connect refused: %s\n", mosquitto_connack_string(rc)); exit(2); }
}

static void on_subscribe(struct mosquitto *mosq, void *obj, int mid, int n, const int *granted)
{
    (void)mosq; (void)obj; (void)mid; (void)n; (void)granted;
    atomic_store(&subscribed, 1);
}

static void on_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *m)
{
    (void)mosq; (void)obj;
    int slashes = 0;
    for (const char *c = m->topic; *c; c++) slashes += *c == '/';
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    atomic_store_explicit(&last_message_ns, (long)ts.tv_sec * 1000000000L + ts.tv_nsec, memory_order_relaxed);
    atomic_fetch_add_explicit(&total, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&bytes, (unsigned long)m->payloadlen, memory_order_relaxed);
    if (slashes == 3) atomic_fetch_add_explicit(&readings, 1, memory_order_relaxed);
}

/* Waits until no message has arrived for `quiet` seconds; returns 0 if that took over max_wait. */
static int wait_quiet(double quiet, double max_wait)
{
    double deadline = now_s() + max_wait;
    for (;;) {
        long last_ns = atomic_load(&last_message_ns);
        double now = now_s();
        if (last_ns > 0 && now - (double)last_ns / 1e9 >= quiet) return 1; /* a gap after a burst, not before the first */
        if (now > deadline) return 0;
        sleep_s(0.01);
    }
}

int main(int argc, char **argv)
{
    int port = (int)opt_num(argc, argv, "-p", 1883);
    const char *host = opt_str(argc, argv, "-H", "127.0.0.1");
    const char *filter = opt_str(argc, argv, "-t", "smarthome/#");
    int qos = (int)opt_num(argc, argv, "-q", 0);
    double warmup = opt_num(argc, argv, "-w", 2);
    double window = opt_num(argc, argv, "-d", 10);
    double quiet = opt_num(argc, argv, "-Q", 0);
    double max_wait = opt_num(argc, argv, "-M", 30);
    char id[64];
    snprintf(id, sizeof id, "bench-count-%d", (int)getpid());

    struct mosquitto *mosq = bench_client(id, NULL, 0);
    mosquitto_connect_callback_set(mosq, on_connect);
    mosquitto_subscribe_callback_set(mosq, on_subscribe);
    mosquitto_message_callback_set(mosq, on_message);
    int rc = mosquitto_connect(mosq, host, port, 60);
    if (rc) die("connect", rc);
    rc = mosquitto_subscribe(mosq, NULL, filter, qos);
    if (rc) die("subscribe", rc);
    rc = mosquitto_loop_start(mosq);
    if (rc) die("loop_start", rc);
    double deadline = now_s() + 10;
    while (!atomic_load(&subscribed)) {
        if (now_s() > deadline) { fprintf(stderr, "no SUBACK within 10 s\n"); return 2; }
        sleep_s(0.001);
    }
    sleep_s(warmup);
    int aligned_start = quiet > 0 ? wait_quiet(quiet, max_wait) : 0;
    unsigned long t0 = atomic_load(&total), r0 = atomic_load(&readings), b0 = atomic_load(&bytes);
    double start = now_s();
    printf("{\"event\":\"window_start\",\"t\":%.6f}\n", start);
    fflush(stdout);
    sleep_s(window);
    int aligned_end = quiet > 0 ? wait_quiet(quiet, max_wait) : 0;
    unsigned long t1 = atomic_load(&total), r1 = atomic_load(&readings), b1 = atomic_load(&bytes);
    double end = now_s();
    double seconds = end - start;
    printf("{\"event\":\"result\",\"t\":%.6f,\"seconds\":%.6f,\"messages\":%lu,\"readings\":%lu,\"others\":%lu,"
           "\"bytes\":%lu,\"rate\":%.1f,\"reading_rate\":%.1f,\"received_before_window\":%lu,"
           "\"aligned\":%s}\n",
           end, seconds, t1 - t0, r1 - r0, (t1 - t0) - (r1 - r0), b1 - b0, (double)(t1 - t0) / seconds,
           (double)(r1 - r0) / seconds, t0,
           quiet <= 0 ? "null" : aligned_start && aligned_end ? "true" : "false");
    fflush(stdout);
    mosquitto_disconnect(mosq);
    mosquitto_loop_stop(mosq, false);
    mosquitto_destroy(mosq);
    mosquitto_lib_cleanup();
    return 0;
}
