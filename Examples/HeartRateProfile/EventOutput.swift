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
    /// object is written by hand (keys sorted by their UTF-8 bytes) straight into bytes and out
    /// with one `write(2)`: the central prints a line per reading, and building it through
    /// `String`s and `FileHandle` cost about 55,000 instructions a line (Foundation's
    /// JSONSerialization, before that, about half of the central's CPU per reading).
    public func emit(_ event: String, _ fields: [String: any Sendable] = [:], human: @autoclosure () -> String) {
        Self.writeToStandardOutput(line(event, fields, human: human()))
    }

    /// The bytes ``emit(_:_:human:)`` writes, the newline included.
    package func line(_ event: String, _ fields: [String: any Sendable] = [:], human: @autoclosure () -> String)
        -> [UInt8]
    {
        var line: [UInt8] = []
        line.reserveCapacity(128)
        if json {
            // Sorted as indices (cheap to move), "event" merged in where it belongs.
            let order = fields.indices.sorted { fields[$0].key.utf8.lexicographicallyPrecedes(fields[$1].key.utf8) }
            var eventWritten = false
            line.append(UInt8(ascii: "{"))
            for index in order {
                let (key, value) = fields[index]
                if !eventWritten, "event".utf8.lexicographicallyPrecedes(key.utf8) {
                    Self.appendMember("event", event, to: &line)
                    eventWritten = true
                }
                Self.appendMember(key, value, to: &line)
            }
            if !eventWritten { Self.appendMember("event", event, to: &line) }
            line[line.count - 1] = UInt8(ascii: "}")
        } else {
            line.append(contentsOf: human().utf8)
        }
        line.append(UInt8(ascii: "\n"))
        return line
    }

    /// One JSON value; anything else becomes its description as a string.
    package static func encode(_ value: any Sendable) -> String {
        var bytes: [UInt8] = []
        append(value, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A JSON string literal.
    package static func quote(_ text: String) -> String {
        var bytes: [UInt8] = []
        appendQuoted(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `"key":value,` (the caller turns the last comma into the closing brace).
    private static func appendMember(_ key: String, _ value: any Sendable, to bytes: inout [UInt8]) {
        appendQuoted(key, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        append(value, to: &bytes)
        bytes.append(UInt8(ascii: ","))
    }

    /// Appends one JSON value (the most frequent types tried first: each try is a dynamic cast).
    static func append(_ value: any Sendable, to bytes: inout [UInt8]) {
        switch value {
        case let number as Int: bytes.append(contentsOf: String(number).utf8)
        case let text as String: appendQuoted(text, to: &bytes)
        case let list as [Double]: appendList(list, to: &bytes) { appendDouble($0, to: &$1) }
        case let number as Double: appendDouble(number, to: &bytes)
        case let flag as Bool: bytes.append(contentsOf: (flag ? "true" : "false").utf8)
        case is NSNull: bytes.append(contentsOf: "null".utf8)
        case let list as [String]: appendList(list, to: &bytes) { appendQuoted($0, to: &$1) }
        case let list as [Int]: appendList(list, to: &bytes) { $1.append(contentsOf: String($0).utf8) }
        default: appendQuoted("\(value)", to: &bytes)
        }
    }

    private static func appendList<Element>(
        _ list: [Element], to bytes: inout [UInt8], _ appendElement: (Element, inout [UInt8]) -> Void
    ) {
        bytes.append(UInt8(ascii: "["))
        for (index, element) in list.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            appendElement(element, &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    static func appendDouble(_ number: Double, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: (number.isFinite ? number.description : "null").utf8)
    }

    /// Appends `text` as a JSON string literal: quote, backslash and control characters escaped,
    /// everything else as its UTF-8 bytes.
    static func appendQuoted(_ text: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            bytes.append(contentsOf: text.utf8)
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in text.utf8 {
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else {
                bytes.append(byte)
                continue
            }
            bytes.append(UInt8(ascii: "\\"))
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
            case UInt8(ascii: "\n"): bytes.append(UInt8(ascii: "n"))
            case UInt8(ascii: "\r"): bytes.append(UInt8(ascii: "r"))
            case UInt8(ascii: "\t"): bytes.append(UInt8(ascii: "t"))
            default:
                bytes.append(UInt8(ascii: "u"))
                bytes.append(UInt8(ascii: "0"))
                bytes.append(UInt8(ascii: "0"))
                bytes.append(hexDigit(byte >> 4))
                bytes.append(hexDigit(byte & 0x0F))
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }

    /// Writes `bytes` to file descriptor 1 in one `write(2)` (again for what a short write left).
    static func writeToStandardOutput(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(1, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { return }
                offset += written
            }
        }
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
