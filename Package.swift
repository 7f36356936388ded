// swift-tools-version:6.0
import PackageDescription

/// SmartHomeBridge: a pure core (`BridgeCore`), one C module and one thin Swift adapter per C
/// library, a runtime that wires them into services, and an executable that only parses the
/// command line.
let package = Package(
    name: "SmartHomeBridge",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "smarthome-bridge", targets: ["smarthome-bridge"]),
    ],
    targets: [
        // C libraries from Debian, through pkg-config.
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // libcrypto only for mosquitto's own password-file format (PBKDF2-HMAC-SHA512), which libsodium lacks.
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),

        // The domain and the contract's shapes: no C imports, no I/O.
        .target(name: "BridgeCore"),

        // One adapter per C library.
        .target(name: "BridgeMQTT", dependencies: ["CMosquitto"]),
        .target(name: "BridgeHTTP", dependencies: ["CMicroHTTPD", "BridgeCore"]),
        .target(name: "BridgeYAML", dependencies: ["CYAML", "BridgeCore"]),
        .target(name: "BridgeCrypto", dependencies: ["CSodium", "COpenSSL"]),
        .target(name: "BridgeStorage", dependencies: ["CSQLite", "CPostgres", "BridgeCore"]),

        // Services wired from the core and the adapters.
        .target(name: "BridgeRuntime", dependencies: ["BridgeCore", "BridgeMQTT", "BridgeHTTP", "BridgeYAML", "BridgeCrypto", "BridgeStorage"]),
        .executableTarget(name: "smarthome-bridge", dependencies: ["BridgeRuntime"]),

        .testTarget(name: "BridgeCoreTests", dependencies: ["BridgeCore"]),
        .testTarget(name: "BridgeHTTPTests", dependencies: ["BridgeHTTP", "BridgeCore"]),
        .testTarget(name: "BridgeYAMLTests", dependencies: ["BridgeYAML", "BridgeCore"]),
        // Starts a real PostgreSQL for the storage and integration tests (README "PostgreSQL").
        .target(name: "PostgresTestSupport", dependencies: ["BridgeRuntime"], path: "Tests/PostgresTestSupport"),
        .testTarget(name: "BridgeStorageTests", dependencies: ["BridgeStorage", "BridgeCore", "PostgresTestSupport"]),
        .testTarget(name: "BridgeMQTTTests", dependencies: ["BridgeMQTT"]),
        // The runtime's features on an in-memory broker (the integration tests run them on real ones).
        .testTarget(name: "BridgeRuntimeTests", dependencies: ["BridgeRuntime", "BridgeCore", "BridgeMQTT", "BridgeStorage"]),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "BridgeCore", "BridgeMQTT", "BridgeHTTP", "BridgeYAML", "BridgeCrypto", "BridgeStorage", "BridgeRuntime",
                "PostgresTestSupport",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
