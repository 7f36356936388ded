import BridgeCore
import BridgeHTTP
import BridgeMQTT
import Foundation

/// How the bridge's settings become its connections' configurations, and what their events
/// say in the log.
extension Bridge {
    static func mqttConfiguration(_ configuration: BridgeConfiguration, broker: BrokerURL,
                                  logger: Logger? = nil) throws -> MQTTConfiguration {
        let mqtt = configuration.mqtt
        var password = mqtt.password
        if let file = mqtt.passwordFile {
            do {
                password = try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .newlines)
            } catch {
                throw RuntimeError("cannot read mqtt.password_file \(file): \(error.localizedDescription)")
            }
        }
        let tls: MQTTConfiguration.TLS? = broker.tls || mqtt.tlsCA != nil
            ? MQTTConfiguration.TLS(caFile: mqtt.tlsCA, certFile: mqtt.tlsCert, keyFile: mqtt.tlsKey,
                                    verifyHostname: mqtt.tlsVerify)
            : nil
        return MQTTConfiguration(
            host: broker.host,
            port: broker.port,
            clientID: configuration.clientID,
            username: mqtt.username,
            password: password,
            keepalive: mqtt.keepalive,
            // A cluster instance's will is its own state; ClusterPeers looks after `bridge/state`.
            will: .init(topic: configuration.cluster.instances > 1
                            ? Topics(base: mqtt.baseTopic).instanceState(configuration.cluster.index)
                            : Topics(base: mqtt.baseTopic).bridgeState,
                        payload: Array("offline".utf8), qos: 1, retain: true),
            tls: tls,
            reconnectMin: mqtt.reconnectMin,
            reconnectMax: mqtt.reconnectMax,
            maxQueued: mqtt.maxQueued,
            // Persistent: QoS 1 commands sent while the bridge reconnects are delivered when it is
            // back (each start still begins with a fresh session; see MQTTConfiguration).
            cleanSession: false,
            onNotice: { [logger = logger ?? Logger(level: configuration.log.level)] notice in
                switch notice {
                case .queueFull(let capacity):
                    logger.warning("offline queue full (mqtt.max_queued); dropping the oldest superseded readings first",
                                   ["max_queued": String(capacity)])
                case .queueFlushed(let queued, let dropped, let total) where dropped > 0:
                    logger.warning("delivering readings queued while the broker was away; some were dropped",
                                   ["queued": String(queued), "dropped": String(dropped), "dropped_total": String(total)])
                case .queueFlushed(let queued, _, _):
                    logger.info("delivering readings queued while the broker was away", ["queued": String(queued)])
                case .deadConnection(let silence, let keepalive):
                    logger.warning("no answer from broker; closing the dead connection",
                                   ["silent_s": String(format: "%.1f", silence), "keepalive": String(keepalive)])
                case .noConnack(let seconds):
                    logger.warning("broker took the connection but did not answer CONNECT",
                                   ["timeout_s": String(format: "%.0f", seconds)])
                }
            }
        )
    }

    static func httpConfiguration(_ http: BridgeConfiguration.HTTP) -> HTTPServerConfiguration {
        HTTPServerConfiguration(
            bindAddress: http.bind,
            port: http.port,
            maxConnections: http.maxConnections,
            maxConnectionsPerAddress: http.maxConnectionsPerAddress,
            connectionTimeoutSeconds: Int(http.connectionTimeout.rounded(.up)),
            requestHeadTimeoutSeconds: http.requestHeadTimeout,
            maxHeaderBytes: http.maxHeaderBytes,
            maxBodyBytes: http.maxBodyBytes,
            threadPoolSize: http.threads,
            tls: http.tlsCert.flatMap { cert in
                http.tlsKey.map { HTTPServerConfiguration.TLS(certificateFile: cert, keyFile: $0) }
            }
        )
    }

    /// One log line per connection event worth one (the refusals and losses; docs/reliability.md).
    static func log(_ event: MQTTEvent, broker: any BrokerLink, address: String, wasConnected: Bool, logger: Logger) {
        switch event {
        case .connected:
            logger.info("connected to broker", ["broker": address])
        case .refused(let reason):
            // Retried with the same backoff as an unreachable broker, up to mqtt.reconnect_max.
            logger.error("broker refused: \(reason)", ["broker": address, "attempt": String(broker.failedAttempts),
                                                      "retry_in_s": String(format: "%.1f", broker.nextAttemptDelay ?? 0)])
        case .disconnected(let unexpected, let reason):
            let retry = String(format: "%.1f", broker.nextAttemptDelay ?? 0)
            if unexpected, wasConnected {
                logger.warning("lost connection to broker; reconnecting",
                               ["broker": address, "reason": reason, "retry_in_s": retry,
                                "queued": String(broker.queuedMessages)])
            } else if unexpected {
                logger.warning("cannot reach broker; retrying",
                               ["broker": address, "reason": reason, "attempt": String(broker.failedAttempts),
                                "retry_in_s": retry, "queued": String(broker.queuedMessages),
                                "dropped": String(broker.droppedMessages)])
            }
        case .message:
            break
        }
    }

    /// Settings that work but deserve a line at every start.
    static func warnAboutSettings(_ configuration: BridgeConfiguration, logger: Logger) {
        for warning in ConfigFile.unsafeSettings(configuration) {
            logger.warning("UNSAFE: " + warning)
        }
        if configuration.http.legacyRoutes {
            logger.warning("legacy seed routes are on: /login/:username/:password carries passwords in URLs; "
                + "turn http.legacy_routes off unless an old app needs them")
        }
        // Legal MQTT, but RabbitMQ's MQTT plugin maps topics to AMQP routing keys and back, so a
        // subscriber there gets '.' as '/' and '*' as '+': nobody's filter (nor this bridge's
        // command filter) matches the topics it then sees. A warning, as mosquitto is fine.
        let levels = [("mqtt.base_topic", configuration.mqtt.baseTopic),
                      ("homeassistant.prefix", configuration.homeAssistant.prefix)]
        for (key, value) in levels where value.contains(".") || value.contains("*") {
            logger.warning("\(key) contains '.' or '*', which RabbitMQ's MQTT plugin delivers as '/' or '+'; "
                + "choose one without them to use RabbitMQ (docs/brokers.md)", ["value": value])
        }
    }
}
