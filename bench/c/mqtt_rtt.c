/* Command round trip: publish ON/OFF to <room>/lights/set, wait for <room>/lights to say so.
 *
 *   mqtt_rtt -p PORT [-t smarthome/1/kitchen] [-n 5000] [-w 100] [-q 1] [-T 2] [-s SLOW_MS]
 *
 * With -s, every round trip slower than SLOW_MS is also written to stderr with its start time
 * (seconds since the first one), to see whether outliers are periodic.
 * Alternates ON and OFF so every command changes the state; WARMUP (-w) round trips are not
 * counted. A round trip that takes more than T seconds counts as a timeout (ten in a row end the run). Prints one JSON line
 * with the percentiles in milliseconds. Same client settings as the bridge's (MQTT 3.1.1,
 * TCP_NODELAY, QoS 1, network thread). */
#include "benchc.h"
#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static char state_topic[512];
static char expected[8];
static int matched, subscribed, connected;

static void on_connect(struct mosquitto *mosq, void *obj, int rc)
{
    (void)mosq; (void)obj;
    if (rc) { fprintf(stderr, "connect refused: %s\n", mosquitto_connack_string(rc)); exit(2); }
    pthread_mutex_lock(&lock);
    connected = 1;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void on_subscribe(struct mosquitto *mosq, void *obj, int mid, int n, const int *granted)
{
    (void)mosq; (void)obj; (void)mid; (void)n; (void)granted;
    pthread_mutex_lock(&lock);
    subscribed = 1;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void on_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *m)
{
    (void)mosq; (void)obj;
    if (m->retain || strcmp(m->topic, state_topic) != 0) return;
    pthread_mutex_lock(&lock);
    if ((size_t)m->payloadlen == strlen(expected) && memcmp(m->payload, expected, strlen(expected)) == 0) {
        matched = 1;
        pthread_cond_broadcast(&changed);
    }
    pthread_mutex_unlock(&lock);
}

/* Waits (lock held) until *flag is set or `seconds` pass; returns whether it was set. */
static int wait_for(int *flag, double seconds)
{
    double deadline = now_s() + seconds;
    while (!*flag) {
        double left = deadline - now_s();
        if (left <= 0) return 0;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        double ns = until.tv_nsec + (left < 0.05 ? left : 0.05) * 1e9;
        until.tv_sec += (time_t)(ns / 1e9);
        until.tv_nsec = (long)(ns - (double)(time_t)(ns / 1e9) * 1e9);
        pthread_cond_timedwait(&changed, &lock, &until);
    }
    return 1;
}

int main(int argc, char **argv)
{
    int port = (int)opt_num(argc, argv, "-p", 1883);
    const char *host = opt_str(argc, argv, "-H", "127.0.0.1");
    const char *room = opt_str(argc, argv, "-t", "smarthome/1/kitchen");
    int iterations = (int)opt_num(argc, argv, "-n", 5000);
    int warmup = (int)opt_num(argc, argv, "-w", 100);
    int qos = (int)opt_num(argc, argv, "-q", 1);
    double timeout = opt_num(argc, argv, "-T", 2);
    double slow_ms = opt_num(argc, argv, "-s", 0);
    char set_topic[520];
    snprintf(state_topic, sizeof state_topic, "%s/lights", room);
    snprintf(set_topic, sizeof set_topic, "%s/lights/set", room);

    char id[64];
    snprintf(id, sizeof id, "bench-rtt-%d", (int)getpid());
    struct mosquitto *mosq = bench_client(id, NULL, 100);
    mosquitto_connect_callback_set(mosq, on_connect);
    mosquitto_subscribe_callback_set(mosq, on_subscribe);
    mosquitto_message_callback_set(mosq, on_message);
    int rc = mosquitto_connect(mosq, host, port, 60);
    if (rc) die("connect", rc);
    rc = mosquitto_loop_start(mosq);
    if (rc) die("loop_start", rc);
    pthread_mutex_lock(&lock);
    if (!wait_for(&connected, 10)) { fprintf(stderr, "not connected within 10 s\n"); return 2; }
    pthread_mutex_unlock(&lock);
    mosquitto_subscribe(mosq, NULL, state_topic, qos);
    pthread_mutex_lock(&lock);
    if (!wait_for(&subscribed, 10)) { fprintf(stderr, "no SUBACK within 10 s\n"); return 2; }
    pthread_mutex_unlock(&lock);

    double *ms = calloc((size_t)iterations, sizeof *ms);
    int counted = 0, timeouts = 0, consecutive_timeouts = 0;
    double started = now_s();
    for (int i = 0; i < warmup + iterations; i++) {
        const char *command = i % 2 ? "OFF" : "ON";
        pthread_mutex_lock(&lock);
        strcpy(expected, command);
        matched = 0;
        pthread_mutex_unlock(&lock);
        double t0 = now_s();
        rc = mosquitto_publish(mosq, NULL, set_topic, (int)strlen(command), command, qos, false);
        if (rc) die("publish", rc);
        pthread_mutex_lock(&lock);
        int ok = wait_for(&matched, timeout);
        pthread_mutex_unlock(&lock);
        double t1 = now_s();
        if (!ok) {
            if (i >= warmup) timeouts++;
            if (++consecutive_timeouts >= 10) { fprintf(stderr, "10 round trips in a row timed out; giving up\n"); break; }
            continue;
        }
        consecutive_timeouts = 0;
        if (i < warmup) continue;
        ms[counted++] = (t1 - t0) * 1000.0;
        if (slow_ms > 0 && (t1 - t0) * 1000.0 > slow_ms)
            fprintf(stderr, "slow round trip: %.3f ms at t=%.3f s\n", (t1 - t0) * 1000.0, t0 - started);
    }
    double elapsed = now_s() - started;
    qsort(ms, (size_t)counted, sizeof *ms, cmp_double);
    double sum = 0;
    for (int i = 0; i < counted; i++) sum += ms[i];
    printf("{\"iterations\":%d,\"completed\":%d,\"timeouts\":%d,\"seconds\":%.3f,\"mean_ms\":%.4f,\"p50_ms\":%.4f,"
           "\"p90_ms\":%.4f,\"p99_ms\":%.4f,\"p999_ms\":%.4f,\"max_ms\":%.4f,\"min_ms\":%.4f}\n",
           iterations, counted, timeouts, elapsed, counted ? sum / counted : 0, percentile(ms, counted, 50),
           percentile(ms, counted, 90), percentile(ms, counted, 99), percentile(ms, counted, 99.9),
           counted ? ms[counted - 1] : 0, counted ? ms[0] : 0);
    mosquitto_disconnect(mosq);
    mosquitto_loop_stop(mosq, false);
    mosquitto_destroy(mosq);
    mosquitto_lib_cleanup();
    return timeouts > 0 && counted == 0 ? 1 : 0;
}
