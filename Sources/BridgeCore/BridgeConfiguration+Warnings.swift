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
        if let secret = cluster.secret, secret.count >= Cluster.minimumSecretLength,
           let weakness = SecretStrength.weakness(of: secret) {
            found.append("cluster.secret \(weakness): anyone who guesses it can sign API tokens for any user; "
                + "use a random one, e.g. from `openssl rand -base64 32`")
        }
        if !mqtt.tlsVerify {
            found.append("mqtt.tls.verify is false: the broker's certificate is not checked against its host name, so "
                + "anyone on the way can pose as the broker and read the bridge's password and every message")
        }
        found += plaintextPasswordWarnings
        return found
    }

    /// A password sent in the clear to a broker beyond this machine: `mqtt://` (not `mqtts://`) to a
    /// host that is not loopback, with a password from the keys or the URL.
    private var plaintextPasswordWarnings: [String] {
        let brokers = [("mqtt.url", mqtt.url, mqtt.password != nil || mqtt.passwordFile != nil),
                       ("devices.mqtt.url", devices.mqttURL, devices.mqttPassword != nil)]
        return brokers.compactMap { key, url, passwordSet in
            guard let url, !url.tls, passwordSet || url.password != nil,
                  HostAllowList.reachesBeyondLoopback(bind: url.host) else { return nil }
            return "\(key) \(url) is plain mqtt:// to a host beyond this machine: the broker password crosses the "
                + "network in clear text; use mqtts:// (and mqtt.tls.ca)"
        }
    }
}

extension BridgeConfiguration.HTTP {
    /// Whether a dashboard folder (with links resolved) is one of the system's own folders, whose
    /// files anyone who can reach the bridge could then read: `/`, one of the standard folders
    /// directly under it (`/etc`, `/home`, `/usr`, `/var`, `/opt`, ...), anything inside `/etc`,
    /// `/root`, `/proc`, `/sys`, `/dev` or `/boot`, or a home folder itself (`/home/<name>`, with its
    /// `.ssh`). A folder of one's own right under `/` (`/web`) is not one.
    public static func isSystemFolder(_ resolvedPath: String) -> Bool {
        let parts = resolvedPath.split(separator: "/").map(String.init)
        guard let first = parts.first else { return true }
        if parts.count == 1 { return standardFolders.contains(first) }
        if ["etc", "root", "proc", "sys", "dev", "boot"].contains(first) { return true }
        return first == "home" && parts.count == 2
    }

    /// The Filesystem Hierarchy Standard's folders under `/`, and the usual merged-/usr links.
    static let standardFolders: Set<String> = [
        "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "media", "mnt", "opt", "proc",
        "root", "run", "sbin", "srv", "sys", "tmp", "usr", "var",
    ]
}
