import Foundation

/// `users[].notify` (README "Notifications"):
///
/// ```yaml
///     notify:
///       - webhook: { url: "http://192.168.1.5:8123/api/webhook/home", headers: { X-Api-Key: "..." } }
///       - ntfy: { url: "https://ntfy.sh", topic: grandma-hallway, token: "tk_..." }
/// ```
extension UsersDecoder {
    /// The most targets one user may have: each event is one delivery per target.
    static let maxNotifyTargets = 8

    static func decodeNotify(_ node: ConfigNode, path: String, issues: inout [ConfigIssue]) -> [NotifyTarget] {
        guard case .sequence(let items, _) = node else {
            issues.append(ConfigIssue(path: path, message: "must be a list of {webhook: {...}} or {ntfy: {...}}",
                                      line: node.line))
            return []
        }
        if items.count > maxNotifyTargets {
            issues.append(ConfigIssue(path: path, message: "has \(items.count) targets; at most \(maxNotifyTargets)",
                                      line: node.line))
        }
        var targets: [NotifyTarget] = []
        for (index, item) in items.enumerated() {
            let itemPath = "\(path)[\(index)]"
            guard let kinds = members(of: item, path: itemPath, allowed: ["webhook", "ntfy"], issues: &issues) else {
                continue
            }
            guard kinds.count == 1, let (kind, body) = kinds.first else {
                issues.append(ConfigIssue(path: itemPath, message: "must hold exactly one of webhook, ntfy", line: item.line))
                continue
            }
            let bodyPath = "\(itemPath).\(kind)"
            if kind == "webhook" {
                guard let fields = members(of: body, path: bodyPath, allowed: ["url", "headers"], issues: &issues),
                      let url = httpURL(fields["url"], path: "\(bodyPath).url", line: body.line, issues: &issues)
                else { continue }
                var headers: [String: String] = [:]
                if let node = fields["headers"] {
                    guard case .mapping(let pairs, _) = node else {
                        issues.append(ConfigIssue(path: "\(bodyPath).headers", message: "must be a mapping of header names to values",
                                                  line: node.line))
                        continue
                    }
                    for (name, value) in pairs {
                        let valid = !name.isEmpty && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
                        guard valid else {
                            issues.append(ConfigIssue(path: "\(bodyPath).headers.\(name)", message: "is not a valid header name",
                                                      line: value.line))
                            continue
                        }
                        guard let text = text(value, path: "\(bodyPath).headers.\(name)", parentLine: node.line,
                                              issues: &issues) else { continue }
                        guard !text.contains(where: \.isNewline) else {
                            issues.append(ConfigIssue(path: "\(bodyPath).headers.\(name)", message: "must be one line",
                                                      line: value.line))
                            continue
                        }
                        headers[name] = text
                    }
                }
                targets.append(.webhook(url: url, headers: headers))
            } else {
                guard let fields = members(of: body, path: bodyPath, allowed: ["url", "topic", "token"], issues: &issues),
                      let url = httpURL(fields["url"], path: "\(bodyPath).url", line: body.line, issues: &issues),
                      let topic = text(fields["topic"], path: "\(bodyPath).topic", parentLine: body.line, issues: &issues)
                else { continue }
                guard topic.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }),
                      topic.count <= 64
                else {
                    issues.append(ConfigIssue(path: "\(bodyPath).topic", message: "may hold only letters, digits, - and _ (at most 64)",
                                              line: fields["topic"]?.line ?? body.line))
                    continue
                }
                let token = fields["token"].flatMap { text($0, path: "\(bodyPath).token", parentLine: body.line, issues: &issues) }
                targets.append(.ntfy(url: url, topic: topic, token: token))
            }
        }
        return targets
    }

    /// An `http://` or `https://` URL with a host; the message never repeats it (it may hold a secret).
    private static func httpURL(_ node: ConfigNode?, path: String, line: Int, issues: inout [ConfigIssue]) -> String? {
        guard let url = text(node, path: path, parentLine: line, issues: &issues) else { return nil }
        guard let parts = URLComponents(string: url), ["http", "https"].contains(parts.scheme?.lowercased() ?? ""),
              parts.host?.isEmpty == false
        else {
            issues.append(ConfigIssue(path: path, message: "must be an http:// or https:// URL with a host",
                                      line: node?.line ?? line))
            return nil
        }
        return url
    }
}
