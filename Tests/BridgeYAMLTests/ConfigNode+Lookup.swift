import BridgeCore

/// Test-only navigation so assertions can reach deep nodes without nested `switch`es.
extension ConfigNode {
    subscript(key: String) -> ConfigNode? {
        guard case .mapping(let entries, _) = self else { return nil }
        return entries.first { $0.key == key }?.value
    }

    subscript(index: Int) -> ConfigNode? {
        guard case .sequence(let items, _) = self, items.indices.contains(index) else { return nil }
        return items[index]
    }

    var keys: [String] {
        guard case .mapping(let entries, _) = self else { return [] }
        return entries.map(\.key)
    }

    var text: String? {
        guard case .scalar(let text, _, _) = self else { return nil }
        return text
    }

    var isQuoted: Bool? {
        guard case .scalar(_, let isQuoted, _) = self else { return nil }
        return isQuoted
    }

    var isNull: Bool {
        guard case .null = self else { return false }
        return true
    }
}
