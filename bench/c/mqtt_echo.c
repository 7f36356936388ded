/* The broker's floor for the command round trip: a trivial client that answers every
 * <base>/<user>/<room>/lights/set command with the new state on <base>/<user>/<room>/lights, as the
 * bridge does, but with nothing in between (no state, no JSON, no history).
 *
 *   mqtt_echo -p PORT [-q 1]
 *
 * Runs until killed. Same client settings as the bridge: MQTT 3.1.1, TCP_NODELAY, QoS 1,
 * retained state, libmosquitto's network thread. */
#include "benchc.h"
#include <signal.h>
#include <strings.h>

static int qos = 1;

static void on_connect(struct mosquitto *mosq, void *obj, int rc)
{
    (void)obj;
    if (rc) { fprintf(stderr, "connect refused: %s\n", mosquitto_connack_string(rc)); exit(2); }
    mosquitto_subscribe(mosq, NULL, "smarthome/+/+/lights/set", qos);
}

static void on_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *m)
{
    (void)obj;
    if (m->retain) return;
    size_t len = strlen(m->topic);
    if (len < 4 || strcmp(m->topic + len - 4, "/set") != 0) return;
    char topic[512];
    if (len - 4 >= sizeof topic) return;
    memcpy(topic, m->topic, len - 4);
    topic[len - 4] = 0;
    const char *state = m->payloadlen == 2 && strncasecmp(m->payload, "ON", 2) == 0 ? "ON" : "OFF";
    mosquitto_publish(mosq, NULL, topic, (int)strlen(state), state, qos, true);
}

int main(int argc, char **argv)
{
    int port = (int)opt_num(argc, argv, "-p", 1883);
    const char *host = opt_str(argc, argv, "-H", "127.0.0.1");
    qos = (int)opt_num(argc, argv, "-q", 1);
    char id[64];
    snprintf(id, sizeof id, "bench-echo-%d", (int)getpid());
    struct mosquitto *mosq = bench_client(id, NULL, 100);
    mosquitto_connect_callback_set(mosq, on_connect);
    mosquitto_message_callback_set(mosq, on_message);
    int rc = mosquitto_connect(mosq, host, port, 60);
    if (rc) die("connect", rc);
    rc = mosquitto_loop_forever(mosq, -1, 1);
    mosquitto_destroy(mosq);
    mosquitto_lib_cleanup();
    return rc ? 1 : 0;
}
