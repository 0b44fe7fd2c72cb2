import Foundation
import HeartRateProfile
import Testing

/// The examples' hand-written JSON lines must be JSON a parser accepts, with the same values.
@Suite struct EventOutputTests {
    @Test(arguments: ["plain", "quote \" and backslash \\", "new\nline\ttab\r", "\u{01}\u{1F}", "emoji 🫀 é", ""])
    func stringsSurviveAJSONParser(_ text: String) throws {
        let encoded = EventOutput.encode(text)
        let decoded = try JSONSerialization.jsonObject(with: Data("[\(encoded)]".utf8)) as? [String]
        #expect(decoded == [text])
    }

    @Test func numbersArraysAndNull() throws {
        let fields: [(any Sendable, String)] = [
            (72, "72"), (0.72265625, "0.72265625"), (true, "true"), (NSNull(), "null"), (Double.nan, "null"),
            ([1, 2], "[1,2]"), (["a", "b"], "[\"a\",\"b\"]"), ([0.5, 1.25], "[0.5,1.25]"),
        ]
        for (value, expected) in fields { #expect(EventOutput.encode(value) == expected) }
    }
}
