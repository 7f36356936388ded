import BridgeCore
import Foundation

/// The running bridge: start-up, the one task group every feature runs in, the MQTT event loop
/// and the shutdown in reverse order (docs/architecture.md, "Threads").
extension Bridge {
    /// Serves HTTP, connects to the broker and runs every feature until the task is cancelled;
    /// then shuts the features down in reverse order, disconnects and stops serving.
    public func run() async throws {
        try http.start()
        logger.info("HTTP listening", ["bind": configuration.http.bind, "port": String(http.port),
                                       "scheme": configuration.http.tlsCert == nil ? "http" : "https"])
        Bridge.warnAboutSettings(configuration, logger: logger)
        controller.seed(source.initialReadings())
        do {
            let restored = controller.restore(try history.lastValues())
            if restored > 0 { logger.info("restored last values from the database", ["values": String(restored)]) }
        } catch {
            logger.error("cannot read the last values; starting from defaults", ["error": error.description])
        }
        for feature in features { try router.add(feature) }
        if configuration.cluster.instances > 1 {
            logger.info("cluster instance", ["index": String(configuration.cluster.index),
                                             "instances": String(configuration.cluster.instances),
                                             "owned_users": String(configuration.owned.users.count),
                                             "users": String(configuration.users.count)])
        }
        try mqtt.start()
        logger.info("connecting to broker", ["broker": brokerAddress, "client_id": configuration.clientID])
        await withDiscardingTaskGroup { group in
            group.addTask { await self.handleEvents() }
            for feature in features {
                group.addTask { await feature.run() }
            }
        }
        logger.info("shutting down")
        for feature in features.reversed() { await feature.shutdown() }
        mqtt.stop()
        http.stop()
    }

    /// The MQTT event loop: connection events to the log and to every feature, messages to the
    /// features that subscribed to them.
    func handleEvents() async {
        var wasConnected = false
        for await event in mqtt.events {
            Bridge.log(event, broker: mqtt, address: brokerAddress, wasConnected: wasConnected, logger: logger)
            switch event {
            case .connected:
                wasConnected = true
                for feature in features { feature.connected() }
            case .refused, .disconnected:
                wasConnected = false
            case .message(let message):
                router.route(message)
            }
        }
    }
}
