/* Devices benchmark load: a publisher posing as devices and a client measuring what comes out.
 *
 *   mqtt_dev_load -p PORT -s FILTER [-T PREFIX] [-n TOPICS] [-r RATE] [-W WINDOW] [-w WARMUP] [-d SECONDS]
 *                 [-q 0|1] [-D DRAIN] [-M MAXDRAIN] [-P PUBWINDOW]
 *
 * Publishes {"v":"<CLOCK_MONOTONIC ns>"} round-robin on PREFIX/0 ... PREFIX/<TOPICS-1> (default
 * bench/dev, 1 topic) at RATE messages/s in total (0: as fast as it can), QoS (default 0), not
 * retained. A second connection subscribes (QoS 0) to FILTER, where the bridge (a generic sensor
 * bound with `value: /v` passes the text through) or mqtt_relay republishes them; each message
 * whose payload holds such a time (the first run of 9 or more digits) is a delivery, its latency
 * now - that time.
 *
 * WINDOW (default 0: none) bounds sent-but-not-delivered messages, so that at RATE 0 the publisher
 * runs at the pipeline's pace rather than filling the broker's queues; when nothing is delivered
 * for 0.5 s the missing ones are counted lost and the window starts over. Only messages sent
 * between WARMUP and WARMUP + SECONDS count; after it the client waits for them while they keep
 * coming (until none came for DRAIN s, default 2), at most MAXDRAIN s (default 60). PUBWINDOW
 * (default 1000) bounds the messages handed to libmosquitto and not yet written (QoS 0) or
 * acknowledged (QoS 1), like mqtt_ref_pub's -W: "as fast as it can" is then the broker's pace,
 * not how fast libmosquitto can queue in this process. Prints one JSON line: sent and delivered in the window, rates, latency p50/p99/p99.9/max
 * in ms, lost. Publishing from the main thread, both connections with libmosquitto's network
 * thread, MQTT 3.1.1 and TCP_NODELAY (benchc.h). */
#include "benchc.h"
#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t progress = PTHREAD_COND_INITIALIZER;
static pthread_cond_t written = PTHREAD_COND_INITIALIZER;
static long unwritten;
static volatile int connected_pub, subscribed;
static const char *filter;
static long delivered_all;           /* every delivery, for the window */
static long delivered, late;         /* deliveries of messages sent inside the measured window */
static double *latencies;
static long latencies_cap;
/* Nothing counts until the window is set (retained messages arrive on subscribing). */
static int64_t window_from_ns = INT64_MAX, window_to_ns = INT64_MAX;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void on_connect_pub(struct mosquitto *mosq, void *obj, int rc)
{
    (void)mosq; (void)obj;
    if (rc) { fprintf(stderr, "connect refused: %s\n", mosquitto_connack_string(rc)); exit(2); }
    connected_pub = 1;
}

static void on_publish(struct mosquitto *mosq, void *obj, int mid)
{
    (void)mosq; (void)obj; (void)mid;
    pthread_mutex_lock(&lock);
    unwritten--;
    pthread_cond_signal(&written);
    pthread_mutex_unlock(&lock);
}

static void on_connect_sub(struct mosquitto *mosq, void *obj, int rc)
{
    (void)obj;
    if (rc) { fprintf(stderr, "connect refused: %s\n", mosquitto_connack_string(rc)); exit(2); }
    rc = mosquitto_subscribe(mosq, NULL, filter, 0);
    if (rc) die("subscribe", rc);
}

static void on_subscribe(struct mosquitto *mosq, void *obj, int mid, int count, const int *granted)
{
    (void)mosq; (void)obj; (void)mid; (void)count; (void)granted;
    subscribed = 1;
}

static void on_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *message)
{
    (void)mosq; (void)obj;
    int64_t now = now_ns();
    const char *p = message->payload, *end = p + message->payloadlen;
    while (p < end && (*p < '0' || *p > '9')) p++;
    int64_t sent = 0;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9' && digits < 19) { sent = sent * 10 + (*p - '0'); p++; digits++; }
    if (digits < 9) return;
    pthread_mutex_lock(&lock);
    delivered_all++;
    if (sent >= window_from_ns && sent < window_to_ns) {
        if (delivered == latencies_cap) {
            latencies_cap = latencies_cap ? latencies_cap * 2 : 65536;
            latencies = realloc(latencies, (size_t)latencies_cap * sizeof *latencies);
            if (!latencies) die("realloc", 0);
        }
        latencies[delivered++] = (double)(now - sent) / 1e6;
    } else if (sent >= window_to_ns) {
        late++;
    }
    pthread_cond_signal(&progress);
    pthread_mutex_unlock(&lock);
}

int main(int argc, char **argv)
{
    int port = (int)opt_num(argc, argv, "-p", 1883);
    filter = opt_str(argc, argv, "-s", NULL);
    if (!filter) { fprintf(stderr, "mqtt_dev_load: -s FILTER is required\n"); return 2; }
    const char *prefix = opt_str(argc, argv, "-T", "bench/dev");
    int topics = (int)opt_num(argc, argv, "-n", 1);
    double rate = opt_num(argc, argv, "-r", 0);
    long window = (long)opt_num(argc, argv, "-W", 0);
    double warmup = opt_num(argc, argv, "-w", 1);
    double duration = opt_num(argc, argv, "-d", 5);
    double drain = opt_num(argc, argv, "-D", 2);
    double max_drain = opt_num(argc, argv, "-M", 60);
    long pub_window = (long)opt_num(argc, argv, "-P", 1000);
    int qos = (int)opt_num(argc, argv, "-q", 0);
    if (topics < 1) topics = 1;

    char id[64];
    snprintf(id, sizeof id, "bench-devsub-%d", (int)getpid());
    struct mosquitto *sub = bench_client(id, NULL, 0);
    mosquitto_connect_callback_set(sub, on_connect_sub);
    mosquitto_subscribe_callback_set(sub, on_subscribe);
    mosquitto_message_callback_set(sub, on_message);
    int rc = mosquitto_connect(sub, "127.0.0.1", port, 60);
    if (rc) die("connect", rc);
    if ((rc = mosquitto_loop_start(sub))) die("loop_start", rc);
    snprintf(id, sizeof id, "bench-devpub-%d", (int)getpid());
    struct mosquitto *pub = bench_client(id, NULL, 100);
    mosquitto_connect_callback_set(pub, on_connect_pub);
    mosquitto_publish_callback_set(pub, on_publish);
    if ((rc = mosquitto_connect(pub, "127.0.0.1", port, 60))) die("connect", rc);
    if ((rc = mosquitto_loop_start(pub))) die("loop_start", rc);
    double waited = now_s();
    while (!(connected_pub && subscribed)) {
        if (now_s() - waited > 10) { fprintf(stderr, "mqtt_dev_load: not connected after 10 s\n"); return 2; }
        sleep_s(0.001);
    }

    char (*names)[128] = calloc((size_t)topics, sizeof *names);
    for (int i = 0; i < topics; i++) snprintf(names[i], sizeof names[i], "%s/%d", prefix, i);
    double start = now_s();
    int64_t start_ns = now_ns();
    pthread_mutex_lock(&lock);
    window_from_ns = start_ns + (int64_t)(warmup * 1e9);
    window_to_ns = window_from_ns + (int64_t)(duration * 1e9);
    pthread_mutex_unlock(&lock);
    long sent_all = 0, sent = 0, lost = 0, written_off = 0;
    char payload[64];
    for (;;) {
        double now = now_s();
        if (now - start >= warmup + duration) break;
        if (rate > 0) {
            double due = start + (double)sent_all / rate;
            if (due > now) { sleep_s(due - now); continue; }
        }
        if (window > 0) {
            pthread_mutex_lock(&lock);
            long seen = delivered_all;
            double stalled = now_s();
            while (sent_all - delivered_all - written_off >= window) {
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_nsec += 50000000;
                if (until.tv_nsec >= 1000000000) { until.tv_sec++; until.tv_nsec -= 1000000000; }
                pthread_cond_timedwait(&progress, &lock, &until);
                if (delivered_all != seen) { seen = delivered_all; stalled = now_s(); }
                else if (now_s() - stalled > 0.5) {
                    lost += sent_all - delivered_all - written_off;
                    written_off = sent_all - delivered_all;
                }
            }
            pthread_mutex_unlock(&lock);
        }
        if (pub_window > 0) {
            pthread_mutex_lock(&lock);
            while (unwritten >= pub_window) {
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_nsec += 50000000;
                if (until.tv_nsec >= 1000000000) { until.tv_sec++; until.tv_nsec -= 1000000000; }
                pthread_cond_timedwait(&written, &lock, &until);
            }
            unwritten++;
            pthread_mutex_unlock(&lock);
        }
        int64_t stamp = now_ns();
        int length = snprintf(payload, sizeof payload, "{\"v\":\"%lld\"}", (long long)stamp);
        rc = mosquitto_publish(pub, NULL, names[sent_all % topics], length, payload, qos, false);
        if (rc == MOSQ_ERR_NOMEM || rc == MOSQ_ERR_OVERSIZE_PACKET) die("publish", rc);
        if (rc) {
            pthread_mutex_lock(&lock);
            unwritten--;
            pthread_mutex_unlock(&lock);
            sleep_s(0.001);
            continue;
        }
        sent_all++;
        if (stamp >= window_from_ns && stamp < window_to_ns) sent++;
    }
    /* Wait for the window's messages: until all came or nothing came for DRAIN s. */
    long before = -1;
    double quiet_since = now_s(), drain_start = quiet_since;
    for (;;) {
        pthread_mutex_lock(&lock);
        long now_delivered = delivered;
        pthread_mutex_unlock(&lock);
        if (now_delivered >= sent) break;
        if (now_delivered != before) { before = now_delivered; quiet_since = now_s(); }
        else if (now_s() - quiet_since > drain) break;
        if (now_s() - drain_start > max_drain) break;
        sleep_s(0.01);
    }
    pthread_mutex_lock(&lock);
    long n = delivered;
    qsort(latencies, (size_t)n, sizeof *latencies, cmp_double);
    printf("{\"sent\":%ld,\"delivered\":%ld,\"seconds\":%.3f,\"sent_rate\":%.1f,\"delivered_rate\":%.1f,"
           "\"drain_s\":%.3f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"p999_ms\":%.3f,\"max_ms\":%.3f,\"lost_window\":%ld,\"sent_total\":%ld}\n",
           sent, n, duration, sent / duration, n / duration, now_s() - drain_start, percentile(latencies, (int)n, 50),
           percentile(latencies, (int)n, 99), percentile(latencies, (int)n, 99.9), n ? latencies[n - 1] : 0.0,
           lost, sent_all);
    fflush(stdout);
    pthread_mutex_unlock(&lock);
    mosquitto_disconnect(pub);
    mosquitto_disconnect(sub);
    mosquitto_loop_stop(pub, true);
    mosquitto_loop_stop(sub, true);
    mosquitto_lib_cleanup();
    return 0;
}
