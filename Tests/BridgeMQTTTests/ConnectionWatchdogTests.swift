import Testing
@testable import BridgeMQTT

/// The connection's timing rules as a pure value (docs/reliability.md).
@Suite struct ConnectionWatchdogTests {
    @Test func aBrokerThatNeverAnswersConnectIsGivenUpOn() {
        var watchdog = ConnectionWatchdog(keepalive: 10, now: 0)
        #expect(watchdog.tick(now: 9.9, socketFailed: false, refusedCode: nil, stopping: false, lastInbound: 0).isEmpty)
        #expect(watchdog.tick(now: 10.1, socketFailed: false, refusedCode: nil, stopping: false, lastInbound: 0)
            == [.notice(.noConnack(seconds: 10)), .closeSocket])
        // The close takes effect: the ending is the time-out, not a plain close.
        #expect(watchdog.tick(now: 10.2, socketFailed: true, refusedCode: nil, stopping: false, lastInbound: 0)
            == [.end(.noConnack(seconds: 10))])
    }

    @Test func theConnackTimeoutIsAtLeastFiveSeconds() {
        var watchdog = ConnectionWatchdog(keepalive: 1, now: 0)
        #expect(watchdog.tick(now: 4.9, socketFailed: false, refusedCode: nil, stopping: false, lastInbound: 0).isEmpty)
        #expect(watchdog.tick(now: 5.1, socketFailed: false, refusedCode: nil, stopping: false, lastInbound: 0)
            .contains(.closeSocket))
    }

    @Test func aSilentConnectionIsDeadAfterOneAndAHalfKeepalives() {
        var watchdog = ConnectionWatchdog(keepalive: 10, now: 0)
        watchdog.connected(at: 1)
        #expect(watchdog.tick(now: 15, socketFailed: false, refusedCode: nil, stopping: false, lastInbound: 1).isEmpty)
        #expect(watchdog.tick(now: 16.5, socketFailed: false, refusedCode: nil, stopping: false, lastInbound: 1)
            == [.notice(.deadConnection(silence: 15.5, keepalive: 10)), .closeSocket])
        // Nothing more is forced while the close is under way; if it never completes, the attempt
        // ends anyway after the grace.
        #expect(watchdog.tick(now: 17, socketFailed: false, refusedCode: nil, stopping: false, lastInbound: 1).isEmpty)
        #expect(watchdog.tick(now: 18.6, socketFailed: false, refusedCode: nil, stopping: false, lastInbound: 1)
            == [.end(.dead(silence: 15.5, connectedFor: 15.5))])
    }

    @Test func trafficKeepsAConnectionAlive() {
        var watchdog = ConnectionWatchdog(keepalive: 10, now: 0)
        watchdog.connected(at: 0)
        for second in stride(from: 1.0, through: 100, by: 1) {
            #expect(watchdog.tick(now: second, socketFailed: false, refusedCode: nil, stopping: false,
                                  lastInbound: second - 5).isEmpty)
        }
    }

    @Test func aRefusalIsClosedAndReported() {
        var watchdog = ConnectionWatchdog(keepalive: 10, now: 0)
        #expect(watchdog.tick(now: 0.1, socketFailed: false, refusedCode: 5, stopping: false, lastInbound: 0) == [.closeSocket])
        #expect(watchdog.tick(now: 0.2, socketFailed: true, refusedCode: nil, stopping: false, lastInbound: 0)
            == [.end(.refused(code: 5))])
    }

    @Test func stoppingDisconnectsCleanlyOrClosesAfterASecond() {
        var connected = ConnectionWatchdog(keepalive: 10, now: 0)
        connected.connected(at: 0)
        #expect(connected.tick(now: 1, socketFailed: false, refusedCode: nil, stopping: true, lastInbound: 1) == [.disconnect])
        #expect(connected.tick(now: 1.5, socketFailed: false, refusedCode: nil, stopping: true, lastInbound: 1).isEmpty)
        #expect(connected.tick(now: 2.1, socketFailed: false, refusedCode: nil, stopping: true, lastInbound: 1)
            == [.closeSocket])
        #expect(connected.tick(now: 2.2, socketFailed: true, refusedCode: nil, stopping: true, lastInbound: 1)
            == [.end(.stopped(wasConnected: true))])

        var connecting = ConnectionWatchdog(keepalive: 10, now: 0)
        #expect(connecting.tick(now: 1, socketFailed: false, refusedCode: nil, stopping: true, lastInbound: 0) == [.closeSocket])
    }

    @Test func aLostConnectionSaysHowLongItLasted() {
        var watchdog = ConnectionWatchdog(keepalive: 10, now: 0)
        #expect(watchdog.tick(now: 1, socketFailed: true, refusedCode: nil, stopping: false, lastInbound: 0)
            == [.end(.closed(connectedFor: nil))])
        var connected = ConnectionWatchdog(keepalive: 10, now: 0)
        connected.connected(at: 2)
        #expect(connected.tick(now: 32, socketFailed: true, refusedCode: nil, stopping: false, lastInbound: 31)
            == [.end(.closed(connectedFor: 30))])
    }
}
