/* Start-up time: from exec of a command to the last of N distinct topics seen by a subscriber.
 *
 *   mqtt_startup -p PORT [-n TOPICS | -Q QUIET_S] [-t 'smarthome/#'] [-T TIMEOUT_S] -- COMMAND [ARGS...]
 *
 * Subscribes first (QoS 1), then forks and execs COMMAND (its environment inherited) and waits until
 * messages on N distinct topics have arrived live, or, without -n, until no new topic has appeared
 * for QUIET_S seconds (default 1), the time reported being that of the last new topic (retained copies the broker holds from earlier
 * runs arrive at subscribe time, before the exec, and are ignored). Then stops COMMAND with
 * SIGTERM, waits for it, and prints one JSON line: the milliseconds to the first message and to
 * the N-th distinct topic, and that topic. */
#include "benchc.h"
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int subscribed, started, distinct, wanted;
static double t_exec, t_first, t_last;
static char last_topic[512];
static char **seen;
static size_t seen_cap;

static unsigned long hash(const char *s)
{
    unsigned long h = 1469598103934665603UL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211UL;
    return h;
}

/* Adds a topic to the open-addressing set; returns whether it was new. */
static int add_topic(const char *topic)
{
    size_t i = hash(topic) & (seen_cap - 1);
    while (seen[i]) {
        if (strcmp(seen[i], topic) == 0) return 0;
        i = (i + 1) & (seen_cap - 1);
    }
    seen[i] = strdup(topic);
    return 1;
}

static void on_subscribe(struct mosquitto *mosq, void *obj, int mid, int n, const int *granted)
{
    (void)mosq; (void)obj; (void)mid; (void)n; (void)granted;
    pthread_mutex_lock(&lock);
    subscribed = 1;
    pthread_mutex_unlock(&lock);
}

static void on_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *m)
{
    (void)mosq; (void)obj;
    double t = now_s();
    pthread_mutex_lock(&lock);
    if (started && !m->retain && distinct < wanted) {
        if (t_first == 0) t_first = t;
        if (add_topic(m->topic)) {
            distinct++;
            t_last = t;
            snprintf(last_topic, sizeof last_topic, "%s", m->topic);
        }
    }
    pthread_mutex_unlock(&lock);
}

int main(int argc, char **argv)
{
    int port = (int)opt_num(argc, argv, "-p", 1883);
    const char *host = opt_str(argc, argv, "-H", "127.0.0.1");
    const char *filter = opt_str(argc, argv, "-t", "smarthome/#");
    wanted = (int)opt_num(argc, argv, "-n", 0);
    double quiet = opt_num(argc, argv, "-Q", 1);
    int quiet_mode = wanted <= 0;
    if (quiet_mode) wanted = 1 << 30;
    double timeout = opt_num(argc, argv, "-T", 30);
    int command = 0;
    for (int i = 1; i < argc; i++) if (strcmp(argv[i], "--") == 0) { command = i + 1; break; }
    if (!command || command >= argc) { fprintf(stderr, "usage: mqtt_startup -p PORT -n TOPICS -- COMMAND...\n"); return 2; }
    for (seen_cap = 64; seen_cap < (size_t)(quiet_mode ? 1 << 20 : wanted) * 2; seen_cap *= 2) { }
    seen = calloc(seen_cap, sizeof *seen);

    char id[64];
    snprintf(id, sizeof id, "bench-startup-%d", (int)getpid());
    struct mosquitto *mosq = bench_client(id, NULL, 0);
    mosquitto_subscribe_callback_set(mosq, on_subscribe);
    mosquitto_message_callback_set(mosq, on_message);
    int rc = mosquitto_connect(mosq, host, port, 60);
    if (rc) die("connect", rc);
    rc = mosquitto_subscribe(mosq, NULL, filter, 1);
    if (rc) die("subscribe", rc);
    rc = mosquitto_loop_start(mosq);
    if (rc) die("loop_start", rc);
    for (double deadline = now_s() + 10;;) {
        pthread_mutex_lock(&lock);
        int ok = subscribed;
        pthread_mutex_unlock(&lock);
        if (ok) break;
        if (now_s() > deadline) { fprintf(stderr, "no SUBACK within 10 s\n"); return 2; }
        sleep_s(0.001);
    }
    sleep_s(0.2); /* let retained messages from earlier runs arrive before the clock starts */

    pthread_mutex_lock(&lock);
    started = 1;
    t_exec = now_s();
    pthread_mutex_unlock(&lock);
    pid_t child = fork();
    if (child == 0) {
        execv(argv[command], argv + command);
        perror("exec");
        _exit(127);
    }
    int done = 0, exited = 0, status = 0;
    double deadline = t_exec + timeout;
    while (!done && now_s() < deadline) {
        pthread_mutex_lock(&lock);
        done = quiet_mode ? distinct > 0 && now_s() - t_last >= quiet : distinct >= wanted;
        pthread_mutex_unlock(&lock);
        if (!done && waitpid(child, &status, WNOHANG) == child) { exited = 1; break; }
        if (!done) sleep_s(0.0005);
    }
    if (!exited) {
        kill(child, SIGTERM);
        waitpid(child, &status, 0);
    }
    pthread_mutex_lock(&lock);
    if (quiet_mode) wanted = 0;
    printf("{\"complete\":%s,\"topics\":%d,\"wanted\":%d,\"first_ms\":%.3f,\"last_ms\":%.3f,\"last_topic\":\"%s\"%s}\n",
           done ? "true" : "false", distinct, wanted, t_first ? (t_first - t_exec) * 1000 : -1,
           t_last ? (t_last - t_exec) * 1000 : -1, last_topic, exited ? ",\"exited_early\":true" : "");
    pthread_mutex_unlock(&lock);
    mosquitto_disconnect(mosq);
    mosquitto_loop_stop(mosq, false);
    mosquitto_destroy(mosq);
    mosquitto_lib_cleanup();
    return done ? 0 : 1;
}
