import Foundation

/// The figures file of a benchmark: one JSON object of numbers, its keys in the order the
/// script names them (the order of its table), each key and value written by `JSONEncoder`.
enum JSONReport {
    /// A field whose value is not a finite number (a measure that was not taken) is written as
    /// null, and named in the warnings.
    static func object(_ fields: [(name: String, value: String)]) throws -> (text: String, warnings: [String]) {
        let encoder = JSONEncoder()
        var lines: [String] = []
        var warnings: [String] = []
        for (name, text) in fields {
            let value: Data
            if let integer = Int(text.trimmingCharacters(in: .whitespaces)) {
                value = try encoder.encode(integer)
            } else if let double = number(text), double.isFinite {
                value = try encoder.encode(double)
            } else {
                value = Data("null".utf8)
                warnings.append("\(name): '\(text)' is not a finite number; written as null")
            }
            let key = try encoder.encode(name)
            lines.append("  " + String(decoding: key, as: UTF8.self) + ": " + String(decoding: value, as: UTF8.self))
        }
        let body = lines.isEmpty ? "" : lines.joined(separator: ",\n") + "\n"
        return ("{\n" + body + "}\n", warnings)
    }

    /// The value of `key` in a JSON object, as JSON text (a number as the encoder writes it);
    /// nil when the object has no such key.
    static func value(of key: String, in data: Data) throws -> String? {
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw ReportError("not a JSON object")
        }
        guard let value = object[key] else { return nil }
        if value is NSNull { return "null" }
        if let string = value as? String { return string }
        if let number = value as? NSNumber {
            return String(decoding: try JSONEncoder().encode(number.doubleValue), as: UTF8.self)
        }
        throw ReportError("\(key) is not a number")
    }
}

struct ReportError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
