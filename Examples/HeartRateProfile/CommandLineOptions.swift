/// A small parser for the examples' `--flag` and `--option value` arguments.
public struct CommandLineOptions: Sendable {
    private var values: [String: String] = [:]
    private var flags: Set<String> = []

    /// Parses `arguments` (without the program name). `valued` lists options that take a value;
    /// `flags` those that do not. Unknown arguments and missing values are errors.
    public init(_ arguments: [String], valued: Set<String>, flags allowedFlags: Set<String>) throws(UsageError) {
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            var name = argument
            var inline: String? = nil
            if let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            if valued.contains(name) {
                guard let value = inline ?? remaining.popFirst() else { throw UsageError("\(name) needs a value") }
                values[name] = value
            } else if allowedFlags.contains(name), inline == nil {
                flags.insert(name)
            } else {
                throw UsageError("unknown argument \(argument)")
            }
        }
    }

    /// The value of `--name`, if given.
    public func value(_ name: String) -> String? { values[name] }

    /// Whether `--flag` was given.
    public func flag(_ name: String) -> Bool { flags.contains(name) }

    /// The value of `--name` as a positive integer, `default` when absent.
    public func positiveInteger(_ name: String, default fallback: Int) throws(UsageError) -> Int {
        guard let text = values[name] else { return fallback }
        guard let number = Int(text), number > 0 else {
            throw UsageError("\(name) needs a positive number, not \(text)")
        }
        return number
    }
}

/// A mistake on the command line.
public struct UsageError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public let description: String
    init(_ description: String) { self.description = description }

    /// `--id` that is not a UUID.
    public static func invalidIdentifier(_ text: String) -> UsageError { UsageError("--id needs a UUID, not \(text)") }
}
