import Foundation

/// Prints the examples' events: one human line each, or with `--json` one JSON object per
/// line with an `"event"` key (keys sorted, so lines are stable for scripts and tests).
public struct EventOutput: Sendable {
    /// Whether to print JSON lines.
    public let json: Bool

    /// An output; `json` picks JSON lines.
    public init(json: Bool) { self.json = json }

    /// Prints one event: `human` as is, or `event` with `fields` as a JSON object. Flushes at once.
    ///
    /// Field values may be `String`, `Int`, `Double`, `Bool`, arrays of those, or `NSNull`; the
    /// object is written by hand (keys sorted) — Foundation's JSONSerialization cost about half
    /// of the central's CPU per reading at a hundred readings a second.
    public func emit(_ event: String, _ fields: [String: any Sendable] = [:], human: @autoclosure () -> String) {
        if json {
            var members = fields.map { key, value in (key, Self.encode(value)) }
            members.append(("event", Self.encode(event)))
            members.sort { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }
            let line = "{" + members.map { Self.encode($0.0) + ":" + $0.1 }.joined(separator: ",") + "}\n"
            FileHandle.standardOutput.write(Data(line.utf8))
        } else {
            FileHandle.standardOutput.write(Data((human() + "\n").utf8))
        }
    }

    /// One JSON value; anything else becomes its description as a string.
    package static func encode(_ value: any Sendable) -> String {
        switch value {
        case let text as String: return quote(text)
        case let number as Int: return String(number)
        case let number as Double: return number.isFinite ? "\(number)" : "null"
        case let flag as Bool: return flag ? "true" : "false"
        case is NSNull: return "null"
        case let list as [String]: return "[" + list.map(quote).joined(separator: ",") + "]"
        case let list as [Int]: return "[" + list.map { String($0) }.joined(separator: ",") + "]"
        case let list as [Double]: return "[" + list.map { encode($0) }.joined(separator: ",") + "]"
        default: return quote("\(value)")
        }
    }

    /// A JSON string literal.
    package static func quote(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20:
                result +=
                    "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                    + String(scalar.value, radix: 16)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    /// Prints an error event (`"message"`) and, for humans, to standard error.
    public func error(_ message: String) {
        if json {
            emit("error", ["message": message], human: message)
        } else {
            FileHandle.standardError.write(Data(("error: " + message + "\n").utf8))
        }
    }
}
