/// Settings that are valid but unsafe, which `check-config` prints and the bridge logs at every start
/// (README "Security model").
extension BridgeConfiguration {
    public var warnings: [String] {
        var found: [String] = []
        let beyondLoopback = HostAllowList.reachesBeyondLoopback(bind: http.bind)
        if http.legacyRoutes && beyondLoopback {
            found.append("http.legacy_routes is on and http.bind \(http.bind) is reachable beyond this machine: "
                + "/login/:username/:password sends passwords in URLs and /rooms/:userID answers without a token, "
                + "to anyone on the network; bind 127.0.0.1 or turn http.legacy_routes off")
        }
        if beyondLoopback && http.tlsCert == nil {
            found.append("http.bind \(http.bind) is reachable beyond this machine without TLS: passwords and tokens "
                + "cross the network in clear text; set http.tls.cert and http.tls.key")
        }
        if HostAllowList.isWildcard(http.bind) && http.allowedHosts == nil {
            found.append("http.bind \(http.bind) with the default http.allowed_hosts answers only loopback names; "
                + "list the names and addresses clients use in http.allowed_hosts")
        }
        // The embedded broker admits only the bridge and its local account, which may not publish
        // device topics (README, "Connect your devices").
        if mqtt.url == nil, devices.mqttURL == nil, users.contains(where: { $0.rooms.contains { !$0.bindings.isEmpty } }) {
            found.append("sensors are bound to devices but no mqtt.url or devices.mqtt.url is set: devices cannot "
                + "publish to the embedded broker; run a broker of your own and set mqtt.url (or devices.mqtt.url)")
        }
        return found
    }
}
