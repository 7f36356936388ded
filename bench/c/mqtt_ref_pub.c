/* Reference publisher: plain libmosquitto, the bridge's topics and payload sizes, as fast as it can.
 *
 *   mqtt_ref_pub -p PORT [-q 0|1] [-u USERS] [-r ROOMS_PER_USER] [-i INFLIGHT] [-W WINDOW] [-d SECONDS]
 *
 * Publishes, retained, in rounds over every room of USERS users with ROOMS_PER_USER rooms each
 * (ids and room names as bench/run.py writes them into the bridge's config): the room's humidity
 * (4 bytes, every round), its temperature (4 bytes, every other round) and the room's JSON in the
 * seed shape (~150 bytes, every round). That is roughly the mix the bridge's simulator publishes at
 * interval 0, where about 1.5 readings per room change per step.
 *
 * Like the bridge it runs libmosquitto's network thread (mosquitto_loop_start) and publishes from
 * the main thread, with MQTT 3.1.1, TCP_NODELAY and INFLIGHT (default 100, the bridge's) QoS 1
 * messages in flight. Unlike the bridge it has flow control: at most WINDOW (default 1000)
 * messages are handed to libmosquitto and not yet written (QoS 0) or acknowledged (QoS 1);
 * -W 0 removes the limit. Runs SECONDS (0: until killed) and prints how many it published. */
#include "benchc.h"
#include <pthread.h>
#include <signal.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t room_to_send = PTHREAD_COND_INITIALIZER;
static long outstanding;
static volatile int connected;
static volatile sig_atomic_t stop;

static void on_connect(struct mosquitto *mosq, void *obj, int rc)
{
    (void)mosq; (void)obj;
    if (rc) { fprintf(stderr, "connect refused: %s\n", mosquitto_connack_string(rc)); exit(2); }
    connected = 1;
}

static void on_publish(struct mosquitto *mosq, void *obj, int mid)
{
    (void)mosq; (void)obj; (void)mid;
    pthread_mutex_lock(&lock);
    outstanding--;
    pthread_cond_signal(&room_to_send);
    pthread_mutex_unlock(&lock);
}

static void on_signal(int sig) { (void)sig; stop = 1; }

static const char *room_names[] = { "livingroom", "bathroom", "bedroom", "kitchen", "garden", "saloon", "babyroom", "balcony" };

int main(int argc, char **argv)
{
    int port = (int)opt_num(argc, argv, "-p", 1883);
    const char *host = opt_str(argc, argv, "-H", "127.0.0.1");
    int qos = (int)opt_num(argc, argv, "-q", 0);
    int users = (int)opt_num(argc, argv, "-u", 2);
    int rooms_per_user = (int)opt_num(argc, argv, "-r", 8);
    int inflight = (int)opt_num(argc, argv, "-i", 100);
    long window = (long)opt_num(argc, argv, "-W", 1000);
    double duration = opt_num(argc, argv, "-d", 0);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);

    int rooms = users * rooms_per_user;
    char (*base)[96] = calloc((size_t)rooms, sizeof *base);
    int *has_gas = calloc((size_t)rooms, sizeof *has_gas);
    for (int u = 0; u < users; u++) {
        for (int r = 0; r < rooms_per_user; r++) {
            int i = u * rooms_per_user + r;
            const char *name = room_names[r % 8];
            if (r < 8) snprintf(base[i], sizeof base[i], "smarthome/%d/%s", u + 1, name);
            else snprintf(base[i], sizeof base[i], "smarthome/%d/%s%d", u + 1, name, r / 8 + 1);
            has_gas[i] = strcmp(name, "kitchen") == 0 || strcmp(name, "bathroom") == 0;
        }
    }

    char id[64];
    snprintf(id, sizeof id, "bench-refpub-%d", (int)getpid());
    struct mosquitto *mosq = bench_client(id, NULL, inflight);
    mosquitto_connect_callback_set(mosq, on_connect);
    mosquitto_publish_callback_set(mosq, on_publish);
    int rc = mosquitto_connect(mosq, host, port, 60);
    if (rc) die("connect", rc);
    rc = mosquitto_loop_start(mosq);
    if (rc) die("loop_start", rc);
    while (!connected && !stop) sleep_s(0.001);

    double start = now_s();
    unsigned long published = 0, round = 0;
    unsigned seed = 12345;
    char topic[160], payload[320];
    while (!stop && (duration <= 0 || now_s() - start < duration)) {
        for (int i = 0; i < rooms && !stop; i++) {
            double temperature = 25.0 + (rand_r(&seed) % 200) / 100.0;
            double humidity = 50.0 + (rand_r(&seed) % 1000) / 100.0;
            int lights = 0, other = rand_r(&seed) % 12 == 0;
            for (int k = 0; k < 3; k++) {
                if (k == 1 && (round + (unsigned long)i) % 2) continue; /* temperature every other round */
                if (k == 0) {
                    snprintf(topic, sizeof topic, "%s/humidity", base[i]);
                    snprintf(payload, sizeof payload, "%.1f", humidity);
                } else if (k == 1) {
                    snprintf(topic, sizeof topic, "%s/temperature", base[i]);
                    snprintf(payload, sizeof payload, "%.1f", temperature);
                } else {
                    snprintf(topic, sizeof topic, "%s", base[i]);
                    if (has_gas[i])
                        snprintf(payload, sizeof payload,
                                 "{\"SensorNames\":[\"Temperature\",\"Humidity\",\"Lights\",\"Gas\"],"
                                 "\"SensorIcon\":[\"temperature\",\"humidity\",\"%s\",\"%s\"],"
                                 "\"SensorValues\":[\"%.1f\",\"%.1f\",\"%s\",\"%s\"]}",
                                 lights ? "On" : "Off", other ? "Gas" : "Okey", temperature, humidity,
                                 lights ? "On" : "Off", other ? "Gas" : "Okey");
                    else
                        snprintf(payload, sizeof payload,
                                 "{\"SensorNames\":[\"Temperature\",\"Humidity\",\"Lights\",\"Movement\"],"
                                 "\"SensorIcon\":[\"temperature\",\"humidity\",\"%s\",\"%s\"],"
                                 "\"SensorValues\":[\"%.1f\",\"%.1f\",\"%s\",\"%s\"]}",
                                 lights ? "On" : "Off", other ? "Detected" : "Not-Detected", temperature, humidity,
                                 lights ? "On" : "Off", other ? "Detected" : "Not-Detected");
                }
                if (window > 0) {
                    pthread_mutex_lock(&lock);
                    while (outstanding >= window && !stop) {
                        struct timespec until;
                        clock_gettime(CLOCK_REALTIME, &until);
                        until.tv_nsec += 100000000;
                        if (until.tv_nsec >= 1000000000) { until.tv_sec++; until.tv_nsec -= 1000000000; }
                        pthread_cond_timedwait(&room_to_send, &lock, &until);
                    }
                    outstanding++;
                    pthread_mutex_unlock(&lock);
                }
                rc = mosquitto_publish(mosq, NULL, topic, (int)strlen(payload), payload, qos, true);
                if (rc) { fprintf(stderr, "publish: %s\n", mosquitto_strerror(rc)); stop = 1; break; }
                published++;
            }
        }
        round++;
    }
    double seconds = now_s() - start;
    printf("{\"published\":%lu,\"seconds\":%.3f,\"rate\":%.1f}\n", published, seconds, published / seconds);
    fflush(stdout);
    mosquitto_disconnect(mosq);
    mosquitto_loop_stop(mosq, true);
    mosquitto_destroy(mosq);
    mosquitto_lib_cleanup();
    return 0;
}
