import BridgeCore

/// Fuzzes the HTTP API's JSON body parsers, `APIBody.login` and `APIBody.lights`, with any body bytes.
///
/// Invariants: both are deterministic; an accepted login has a non-empty username and password of at most
/// 1024 bytes each, and the same login comes back from a body the bridge's own `JSONValue` writes for it
/// (strings with quotes, escapes, control characters and non-ASCII survive the round trip); an accepted
/// lights body gives the same command as `{"state":"..."}` written afresh and as the MQTT parser on the same
/// bytes; a problem has a short, non-empty message that does not echo the body.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let body = Array(UnsafeBufferPointer(start: data, count: size))
    checkLogin(body)
    checkLights(body)
    return 0
}

private func checkLogin(_ body: [UInt8]) {
    let result = APIBody.login(body)
    require(APIBody.login(body) == result, "login is not deterministic for \(excerpt(body))")
    switch result {
    case .success(let login):
        for (name, value) in [("username", login.username), ("password", login.password)] {
            require(!value.isEmpty && value.utf8.count <= 1024,
                    "login \(excerpt(body)) accepted a \(name) of \(value.utf8.count) bytes")
        }
        let rewritten = JSONValue.object([
            ("password", .string(login.password)), ("username", .string(login.username)), ("extra", .null),
        ]).bytes
        let again = APIBody.login(rewritten)
        require(again == .success(login),
                "login \(excerpt(body)) gave \(login) but its rewrite \(excerpt(rewritten)) gave \(again)")
    case .failure(let problem):
        checkProblem(problem, body: body)
    }
}

private func checkLights(_ body: [UInt8]) {
    let result = APIBody.lights(body)
    require(APIBody.lights(body) == result, "lights is not deterministic for \(excerpt(body))")
    switch result {
    case .success(let command):
        let rewritten = JSONValue.object([("state", .string(command.rawValue.lowercased()))]).bytes
        let again = APIBody.lights(rewritten)
        require(again == .success(command), "lights \(excerpt(body)) gave \(command) but its rewrite gave \(again)")
    case .failure(let problem):
        checkProblem(problem, body: body)
    }
    // A body that is exactly a JSON object (no white space around it) is read alike over HTTP and MQTT.
    if body.first == UInt8(ascii: "{"), body.last == UInt8(ascii: "}"), body.count <= LightCommand.maxPayloadBytes,
       String(validating: body, as: UTF8.self) != nil {
        let mqtt = LightCommand.parse(body)
        require((try? mqtt.get()) == (try? result.get()),
                "\(excerpt(body)): HTTP APIBody.lights gave \(result), MQTT parse gave \(mqtt)")
    }
}

private func checkProblem(_ problem: APIBody.Problem, body: [UInt8]) {
    require(!problem.message.isEmpty, "empty problem message for \(excerpt(body))")
    // Messages name fields, never their values: a password must not reach a 400 answer or a log line.
    require(problem.message.count <= 100 && hasNoControlCharacters(problem.message),
            "problem message for \(excerpt(body)) echoes the body: \(problem.message.debugDescription)")
}
