import BridgeCore

/// Writes security events to the bridge's log (README "Security log"): one line each, `security: login`
/// with `user=`, `address=` and `outcome=`; failures and throttling as warnings.
enum SecurityLog {
    static func recorder(_ logger: Logger) -> @Sendable (SecurityEvent) -> Void {
        { event in
            logger.log(event.isWarning ? .warning : .info, "security: \(event.action)",
                       ["user": event.user, "address": event.address, "outcome": event.outcome])
        }
    }
}
