import BridgeCore
import BridgeStorage
import Foundation

/// Watches sensors (README "Watchdogs"): every second it asks `WatchdogRules` about each enabled
/// watchdog of a user this instance owns, keeps the episode's state in the database (so a fired
/// watchdog stays fired across a restart), and publishes `watchdog` events, which reach the events
/// topic, the event streams and the notification targets through the state bus.
final class WatchdogMonitor: BridgeFeature {
    let name = "watchdogs"
    private let store: WatchdogStore
    private let rules: WatchdogRules
    private let observer: SensorObserver
    private let controller: HomeController
    private let logger: Logger
    /// When this bridge began watching: silence is never counted from before it.
    private let watchingSince: Date

    init(store: WatchdogStore, rules: WatchdogRules, observer: SensorObserver, controller: HomeController,
         logger: Logger, watchingSince: Date = Date()) {
        self.store = store
        self.rules = rules
        self.observer = observer
        self.controller = controller
        self.logger = logger
        self.watchingSince = watchingSince
    }

    func tick(now: Date) {
        let watchdogs: [(Watchdog, WatchdogState)]
        do {
            watchdogs = try store.enabled()
        } catch {
            logger.error("cannot read watchdogs", ["error": error.description])
            return
        }
        for (watchdog, state) in watchdogs where controller.ownership.owns(watchdog.userID) {
            let observation = observer.observation(user: watchdog.userID, room: watchdog.room, sensor: watchdog.sensor.id)
            let outcome = rules.decide(watchdog, observation: observation, state: state, now: now,
                                       watchingSince: watchingSince)
            if outcome.state != state {
                // Kept before the event goes out: a restart right after does not fire it again.
                do {
                    try store.save(outcome.state, uuid: watchdog.uuid)
                } catch {
                    logger.error("cannot keep a watchdog's state", ["watchdog": watchdog.uuid, "error": error.description])
                    continue
                }
            }
            guard let action = outcome.action else { continue }
            let recovered = action == .recover
            logger.info(recovered ? "watchdog recovered" : "watchdog fired",
                        ["user": watchdog.userID, "watchdog": watchdog.uuid, "room": watchdog.room,
                         "sensor": watchdog.sensor.id, "condition": watchdog.condition.rawValue])
            controller.publishEvent(user: watchdog.userID, .watchdog(watchdog, recovered: recovered, at: now))
        }
    }

    /// Ticks every second until cancelled.
    func run() async {
        while !Task.isCancelled {
            tick(now: Date())
            do { try await Task.sleep(for: .seconds(1)) } catch { break }
        }
    }
}
