import BridgeCore

/// Assembles libyaml events into one `ConfigNode` tree, using an explicit stack of open collections.
struct YAMLTreeBuilder {
    /// A mapping or sequence whose end event has not arrived yet.
    private struct Frame {
        enum Kind {
            case mapping
            case sequence
        }

        let kind: Kind
        let anchor: String?
        let line: Int
        var entries: [(key: String, value: ConfigNode)] = []
        var items: [ConfigNode] = []
        /// The key read in a mapping whose value has not been read yet.
        var pendingKey: String?
        /// Levels of collections below this one, and values in it (itself included), aliases expanded.
        var depthBelow = 0
        var size = 1

        var node: ConfigNode {
            switch kind {
            case .mapping: .mapping(entries, line: line)
            case .sequence: .sequence(items, line: line)
            }
        }
    }

    /// An anchored node, with its raw text when it was a scalar so an alias can also serve as a key,
    /// and its depth (collection levels, 0 for a scalar) and size, which every alias to it adds.
    private struct Anchored {
        let node: ConfigNode
        let keyText: String?
        let depth: Int
        let size: Int
    }

    private static let nullWords: Set<String> = ["", "~", "null", "Null", "NULL"]

    /// Far beyond any real config, yet shallow enough that code recursing over the tree (validation, `==`,
    /// releasing it) cannot overflow the stack on a hostile file.
    private static let maximumDepth = 100

    /// Values in the tree once aliases are expanded: a few aliases can otherwise multiply a small
    /// file into millions of values that validation would walk one by one.
    private static let maximumValues = 100_000

    private var values = 0

    private var frames: [Frame] = []
    private var anchors: [String: Anchored] = [:]
    private var root: ConfigNode?

    /// Reads `stream` to its end and returns the single document's root.
    mutating func build(from stream: inout YAMLEventStream) throws(ConfigIssue) -> ConfigNode {
        var sawDocument = false
        while true {
            let event: YAMLEvent
            do {
                event = try stream.next()
            } catch {
                var issue = error
                issue.path = currentPath
                throw issue
            }
            switch event {
            case .streamStart, .documentEnd:
                continue
            case .documentStart(let line):
                guard !sawDocument else {
                    throw ConfigIssue(path: "", message: "config file must hold one YAML document", line: line)
                }
                sawDocument = true
            case .streamEnd:
                // No document at all means an empty file or one holding only comments.
                return root ?? .mapping([], line: 1)
            case .mappingStart(let anchor, let line):
                try open(.mapping, anchor: anchor, line: line)
            case .sequenceStart(let anchor, let line):
                try open(.sequence, anchor: anchor, line: line)
            case .mappingEnd, .sequenceEnd:
                let frame = frames.removeLast()
                let node = frame.node
                remember(node, keyText: nil, as: frame.anchor, depth: frame.depthBelow + 1, size: frame.size)
                try attach(node, keyText: nil, line: frame.line, depth: frame.depthBelow + 1, size: frame.size)
            case .scalar(let text, let isPlain, let anchor, let line):
                let node = scalarNode(text, isPlain: isPlain, line: line)
                remember(node, keyText: text, as: anchor, depth: 0, size: 1)
                try count(1, line: line)
                try attach(node, keyText: text, line: line, depth: 0, size: 1)
            case .alias(let name, let line):
                // Anchors are remembered only once their node is complete, so a self-referencing alias fails here.
                guard let anchored = anchors[name] else {
                    throw ConfigIssue(path: currentPath, message: "unknown alias *\(name)", line: line)
                }
                guard frames.count + anchored.depth <= Self.maximumDepth else {
                    throw ConfigIssue(path: currentPath, message: "alias *\(name) nests collections deeper than "
                        + "\(Self.maximumDepth) levels", line: line)
                }
                try count(anchored.size, line: line)
                // The copy keeps the anchored node's lines: that is where its content is written.
                try attach(anchored.node, keyText: anchored.keyText, line: line, depth: anchored.depth,
                           size: anchored.size)
            }
        }
    }

    private func scalarNode(_ text: String, isPlain: Bool, line: Int) -> ConfigNode {
        guard isPlain, Self.nullWords.contains(text) else {
            return .scalar(text, isQuoted: !isPlain, line: line)
        }
        // A document holding only `---` has an empty root; treat it like an empty file.
        if frames.isEmpty && text.isEmpty {
            return .mapping([], line: 1)
        }
        return .null(line: line)
    }

    private mutating func open(_ kind: Frame.Kind, anchor: String?, line: Int) throws(ConfigIssue) {
        if let top = frames.last, top.kind == .mapping, top.pendingKey == nil {
            let what = kind == .mapping ? "a mapping" : "a sequence"
            throw ConfigIssue(path: currentPath, message: "mapping key must be a scalar, not \(what)", line: line)
        }
        guard frames.count < Self.maximumDepth else {
            throw ConfigIssue(
                path: currentPath,
                message: "collections nested deeper than \(Self.maximumDepth) levels",
                line: line
            )
        }
        try count(1, line: line)
        frames.append(Frame(kind: kind, anchor: anchor, line: line))
    }

    private mutating func count(_ added: Int, line: Int) throws(ConfigIssue) {
        values += added
        guard values <= Self.maximumValues else {
            throw ConfigIssue(path: currentPath, message: "the config holds more than \(Self.maximumValues) values "
                + "once aliases are expanded", line: line)
        }
    }

    private mutating func remember(_ node: ConfigNode, keyText: String?, as anchor: String?, depth: Int, size: Int) {
        guard let anchor else { return }
        // A later anchor of the same name replaces the earlier one, as the YAML spec says.
        anchors[anchor] = Anchored(node: node, keyText: keyText, depth: depth, size: size)
    }

    /// Places a finished node as the root, the next sequence item, or a mapping's key or value.
    ///
    /// `keyText` is nil for collections and for aliases of them; `line` is where the node or alias starts.
    private mutating func attach(_ node: ConfigNode, keyText: String?, line: Int, depth: Int, size: Int)
        throws(ConfigIssue)
    {
        guard let top = frames.indices.last else {
            root = node
            return
        }
        frames[top].depthBelow = max(frames[top].depthBelow, depth)
        frames[top].size += size
        switch frames[top].kind {
        case .sequence:
            frames[top].items.append(node)
        case .mapping:
            if let key = frames[top].pendingKey {
                frames[top].entries.append((key: key, value: node))
                frames[top].pendingKey = nil
            } else if let keyText {
                frames[top].pendingKey = keyText
            } else {
                throw ConfigIssue(path: currentPath, message: "mapping key must be a scalar", line: line)
            }
        }
    }

    /// The dotted key path of the node being read, e.g. `users[0].rooms[1].name`.
    private var currentPath: String {
        var path = ""
        for frame in frames {
            switch frame.kind {
            case .sequence:
                path += "[\(frame.items.count)]"
            case .mapping:
                if let key = frame.pendingKey {
                    path += path.isEmpty ? key : ".\(key)"
                }
            }
        }
        return path
    }
}
