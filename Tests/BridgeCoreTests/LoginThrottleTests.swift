import Testing
@testable import BridgeCore

@Suite struct LoginThrottleTests {
    @Test func failuresPastTheFreeOnesBlockWithDoublingDelays() {
        var throttle = LoginThrottle()
        for attempt in 0..<3 {
            #expect(throttle.retryAfter(username: "a", address: "1.1.1.1", now: Double(attempt)) == nil)
            throttle.recordFailure(username: "a", address: "1.1.1.1", now: Double(attempt))
        }
        #expect(throttle.retryAfter(username: "a", address: "1.1.1.1", now: 3) == nil)
        throttle.recordFailure(username: "a", address: "1.1.1.1", now: 3)  // 4th: 1 s
        #expect(throttle.retryAfter(username: "a", address: "1.1.1.1", now: 3) == 1)
        #expect(throttle.retryAfter(username: "A", address: "9.9.9.9", now: 3.5) == 0.5, "usernames in any case")
        #expect(throttle.retryAfter(username: "a", address: "1.1.1.1", now: 4) == nil)
        throttle.recordFailure(username: "a", address: "1.1.1.1", now: 4)  // 5th: 2 s
        #expect(throttle.retryAfter(username: "a", address: "1.1.1.1", now: 4) == 2)
        throttle.recordFailure(username: "a", address: "1.1.1.1", now: 6)  // 6th: 4 s
        #expect(throttle.retryAfter(username: "a", address: "1.1.1.1", now: 6) == 4)
        // Another user from the same address is not blocked: the address allows more failures.
        #expect(throttle.retryAfter(username: "b", address: "1.1.1.1", now: 6) == nil)
    }

    @Test func delaysAreCapped() {
        var throttle = LoginThrottle()
        for second in 0..<100 { throttle.recordFailure(username: "a", address: "x", now: Double(second)) }
        #expect(throttle.retryAfter(username: "a", address: "y", now: 99) == throttle.policy.maxDelay)
    }

    @Test func addressesAreThrottledAcrossUsernames() {
        var throttle = LoginThrottle()
        for index in 0..<21 { throttle.recordFailure(username: "user\(index)", address: "6.6.6.6", now: 0) }
        #expect(throttle.retryAfter(username: "fresh", address: "6.6.6.6", now: 0) != nil)
        #expect(throttle.retryAfter(username: "fresh", address: "7.7.7.7", now: 0) == nil)
    }

    @Test func successClearsTheUserAndTimeForgets() {
        var throttle = LoginThrottle()
        for _ in 0..<5 { throttle.recordFailure(username: "a", address: "x", now: 0) }
        throttle.recordSuccess(username: "a", now: 100)
        #expect(throttle.retryAfter(username: "a", address: "y", now: 100) == nil)
        for _ in 0..<5 { throttle.recordFailure(username: "b", address: "x", now: 0) }
        throttle.recordFailure(username: "b", address: "x", now: 5000)
        #expect(throttle.retryAfter(username: "b", address: "y", now: 5000) == nil, "an hour later it starts afresh")
    }

    @Test func memoryStaysBounded() {
        var policy = LoginThrottle.Policy()
        policy.maxEntries = 100
        var throttle = LoginThrottle(policy: policy)
        // n0 fails first, then 999 other names, each from its own address: far past 100 keys, all
        // within forgetAfter, so only the bound can make the throttle let go of n0.
        for index in 0..<1000 { throttle.recordFailure(username: "n\(index)", address: "a\(index)", now: Double(index)) }
        // The oldest was dropped: three more failures for n0 are its first three again (free), where
        // a remembered n0 would now have four and be blocked.
        for _ in 0..<3 { throttle.recordFailure(username: "n0", address: "z", now: 1000) }
        #expect(throttle.retryAfter(username: "n0", address: "q", now: 1000) == nil, "the oldest key was kept")
        // The newest failures are still remembered.
        for _ in 0..<4 { throttle.recordFailure(username: "n999", address: "z", now: 1000) }
        #expect(throttle.retryAfter(username: "n999", address: "q", now: 1000) != nil)
    }
}

@Suite struct APIBodyTests {
    @Test func loginBodies() throws {
        #expect(try APIBody.login(Array(#"{"username":"a","password":"b"}"#.utf8)).get()
            == APIBody.Login(username: "a", password: "b"))
        let cases: [(String, String)] = [
            ("", "empty"), ("{", "not valid JSON"), ("[]", "must be a JSON object"),
            (#"{"password":"b"}"#, "field \"username\" is required"),
            (#"{"username":"a"}"#, "field \"password\" is required"),
            (#"{"username":1,"password":"b"}"#, "field \"username\" must be a string"),
            (#"{"username":"","password":"b"}"#, "field \"username\" must not be empty"),
            (#"{"username":null,"password":"b"}"#, "field \"username\" is required"),
        ]
        for (body, message) in cases {
            guard case .failure(let problem) = APIBody.login(Array(body.utf8)) else {
                Issue.record("\(body) accepted")
                continue
            }
            #expect(problem.message.contains(message), "\(body): \(problem.message)")
        }
    }

    @Test func lightsBodies() throws {
        #expect(try APIBody.lights(Array(#"{"state":"on"}"#.utf8)).get() == .on)
        #expect(try APIBody.lights(Array(#"{"state":"TOGGLE"}"#.utf8)).get() == .toggle)
        guard case .failure(let problem) = APIBody.lights(Array(#"{"state":"DIM"}"#.utf8)) else {
            Issue.record("DIM accepted")
            return
        }
        #expect(problem.message == "field \"state\" must be ON, OFF or TOGGLE")
        guard case .failure(let missing) = APIBody.lights(Array(#"{"State":"ON"}"#.utf8)) else {
            Issue.record(#"{"State":"ON"} accepted"#)
            return
        }
        #expect(missing.message == "field \"state\" is required")
    }
}
