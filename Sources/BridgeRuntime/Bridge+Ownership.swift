import BridgeCore
import BridgeStorage
import Foundation

extension Bridge {
    /// What a lease round that takes or hands back users sets off (docs/scaling.md, "Leases"): users
    /// taken over start from what the database last had (their lights above all), the sources follow,
    /// and their retained state, Home Assistant configs and availability go out at once.
    static func followOwnership(_ ownership: Ownership, history: HistoryStore, controller: HomeController,
                                layout: HomeLayout, publisher: StatePublisher, homie: HomieFeature?, logger: Logger) {
        ownership.onChange { change in
            if !change.taken.isEmpty {
                do {
                    _ = controller.restore(try history.lastValues().filter { change.taken.contains($0.user) })
                } catch {
                    logger.warning("cannot read the last values of the users taken over", ["error": "\(error)"])
                }
            }
            layout.ownershipChanged(change)
            if !change.taken.isEmpty { publisher.publishTakenOver(change.taken) }
            homie?.ownershipChanged(change)
        }
    }
}
