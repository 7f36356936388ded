import CMosquitto

/// MQTT topic filters as the broker applies them (`+` one level, `#` the rest), by libmosquitto's
/// own `mosquitto_topic_matches_sub`, so the bridge routes a message to a feature exactly when the
/// broker would have delivered it to that feature's subscription.
public enum MQTTTopicFilter {
    /// Whether `topic` matches `filter`; false for a malformed filter or topic.
    public static func matches(_ filter: String, topic: String) -> Bool {
        var result = false
        let rc = mosquitto_topic_matches_sub(filter, topic, &result)
        return rc == Int32(MOSQ_ERR_SUCCESS.rawValue) && result
    }

    /// Whether `filter` has a wildcard (`+` or `#`), rather than naming one topic.
    public static func isWildcard(_ filter: String) -> Bool { filter.contains("+") || filter.contains("#") }
}
