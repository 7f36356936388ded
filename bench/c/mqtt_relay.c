/* Reference relay for the devices benchmark: what the bridge does with a device message, in plain
 * libmosquitto and nothing else (no decoding, no history).
 *
 *   mqtt_relay -p PORT [-t FILTER] [-o PREFIX] [-q 0|1] [-R 0|1] [-i INFLIGHT]
 *
 * Subscribes to FILTER (default bench/dev/+) and republishes every message's payload, unchanged,
 * to PREFIX/<the topic's last level> (default relay/...), with QoS (default 1, the bridge's
 * mqtt.qos in the benchmark), retained (-R, default 1, like the bridge's sensor topics) and
 * INFLIGHT (default 100, the bridge's) messages in flight. One connection, libmosquitto's
 * network thread, publishing from the message callback. Runs until killed. */
#include "benchc.h"
#include <signal.h>

static const char *prefix;
static int qos, retain;
static volatile sig_atomic_t stop;
static unsigned long relayed;

static void on_connect(struct mosquitto *mosq, void *obj, int rc)
{
    const char *filter = obj;
    if (rc) { fprintf(stderr, "connect refused: %s\n", mosquitto_connack_string(rc)); exit(2); }
    rc = mosquitto_subscribe(mosq, NULL, filter, qos);
    if (rc) die("subscribe", rc);
}

static void on_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *message)
{
    (void)obj;
    const char *last = strrchr(message->topic, '/');
    char topic[256];
    snprintf(topic, sizeof topic, "%s/%s", prefix, last ? last + 1 : message->topic);
    int rc = mosquitto_publish(mosq, NULL, topic, message->payloadlen, message->payload, qos, retain);
    if (rc) fprintf(stderr, "publish: %s\n", mosquitto_strerror(rc));
    else relayed++;
}

static void on_signal(int sig) { (void)sig; stop = 1; }

int main(int argc, char **argv)
{
    int port = (int)opt_num(argc, argv, "-p", 1883);
    const char *filter = opt_str(argc, argv, "-t", "bench/dev/+");
    prefix = opt_str(argc, argv, "-o", "relay");
    qos = (int)opt_num(argc, argv, "-q", 1);
    retain = (int)opt_num(argc, argv, "-R", 1);
    int inflight = (int)opt_num(argc, argv, "-i", 100);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    char id[64];
    snprintf(id, sizeof id, "bench-relay-%d", (int)getpid());
    struct mosquitto *mosq = bench_client(id, (void *)filter, inflight);
    mosquitto_connect_callback_set(mosq, on_connect);
    mosquitto_message_callback_set(mosq, on_message);
    int rc = mosquitto_connect(mosq, "127.0.0.1", port, 60);
    if (rc) die("connect", rc);
    rc = mosquitto_loop_start(mosq);
    if (rc) die("loop_start", rc);
    while (!stop) sleep_s(0.05);
    fprintf(stderr, "relayed %lu\n", relayed);
    mosquitto_disconnect(mosq);
    mosquitto_loop_stop(mosq, true);
    mosquitto_destroy(mosq);
    mosquitto_lib_cleanup();
    return 0;
}
