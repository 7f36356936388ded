import BridgeCore
import BridgeMQTT
import BridgeStorage
import Foundation

/// Home Assistant discovery's life beside the retained configs the state publisher sends
/// (README, "Home Assistant"): clears the configs of entities this bridge no longer has after
/// the first connection (`DiscoverySweep`), and when Home Assistant comes (back) online, has
/// everything republished after a short random delay, so it has subscribed and no entity stays
/// unavailable. A burst of `online` messages costs one republish.
final class HomeAssistantFeature: BridgeFeature {
    let name = "homeassistant"

    private let sweep: DiscoverySweep
    private let discovery: HomeAssistantDiscovery?
    private let announced: AnnouncedConfigStore
    private let store: HomeStore
    private let publisher: StatePublisher
    private let outbound: Outbound
    private let router: MessageRouter
    private let logger: Logger
    private let sweepStart = CoalescedSignal()
    private let homeAssistantOnline = CoalescedSignal()

    /// - Parameters:
    ///   - identity: the discovery settings that identify this bridge's configs (used even when
    ///     discovery is off, to find the configs to clear).
    ///   - discovery: the configs to announce, nil when `homeassistant.discovery` is off.
    init(identity: HomeAssistantDiscovery, discovery: HomeAssistantDiscovery?, announced: AnnouncedConfigStore,
         store: HomeStore, publisher: StatePublisher, outbound: Outbound, router: MessageRouter, logger: Logger) {
        sweep = DiscoverySweep(identity: identity)
        self.discovery = discovery
        self.announced = announced
        self.store = store
        self.publisher = publisher
        self.outbound = outbound
        self.router = router
        self.logger = logger
    }

    var subscriptions: [MQTTSubscription] {
        [MQTTSubscription(filter: sweep.filter, qos: 0)]
            + (discovery.map { [MQTTSubscription(filter: $0.statusTopic, qos: 0)] } ?? [])
    }

    func handle(_ message: MQTTMessage) {
        if let discovery, message.topic == discovery.statusTopic {
            if message.text == "online" { homeAssistantOnline.request() }
            return
        }
        _ = sweep.collect(message)
    }

    func connected() {
        if sweep.begin() { sweepStart.request() }
    }

    func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await _ in self.sweepStart.requests {
                    do { try await Task.sleep(for: DiscoverySweep.window) } catch { return }
                    self.clearStaleConfigs()
                    return
                }
            }
            group.addTask {
                for await _ in self.homeAssistantOnline.requests {
                    let delay = Int.random(in: 1000...3000)
                    self.logger.info("Home Assistant is online; republishing discovery and states",
                                     ["delay_ms": String(delay)])
                    do { try await Task.sleep(for: .milliseconds(delay)) } catch { return }
                    self.publisher.republish()
                }
            }
        }
    }

    /// Clears this bridge's retained discovery configs for entities it no longer has, and
    /// remembers the current ones for the next start.
    private func clearStaleConfigs() {
        let current = discovery?.configTopics(home: store.home) ?? []
        var remembered: Set<String> = []
        do {
            remembered = try announced.topics()
        } catch {
            logger.warning("cannot read the announced discovery configs", ["error": error.description])
        }
        let stale = sweep.finish(current: current, remembered: remembered)
        for topic in stale { outbound.send(topic, "") }
        if !stale.isEmpty { logger.info("cleared stale Home Assistant configs", ["count": String(stale.count)]) }
        do {
            try announced.replace(with: current)
            logger.info("recorded the announced Home Assistant configs", ["count": String(current.count)])
        } catch {
            logger.warning("cannot record the announced discovery configs", ["error": error.description])
        }
        router.unsubscribe(sweep.filter, for: self)
    }
}
