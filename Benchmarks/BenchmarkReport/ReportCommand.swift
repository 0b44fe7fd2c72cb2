// BenchmarkReport — the statistics and the JSON of Scripts/benchmark and Scripts/benchmark-dbus.
//
//   BenchmarkReport stats VALUE...              "MEDIAN MIN MAX COUNT" ("nan nan nan 0" for none)
//   BenchmarkReport ratio A B [DECIMALS]        A / B
//   BenchmarkReport difference A B [DECIMALS]   A - B
//   BenchmarkReport slope N1 V1 N2 V2 [DECIMALS]  (V2 - V1) / (N2 - N1): the cost of one more unit
//   BenchmarkReport verdict VALUE GOAL          "meets" (VALUE <= GOAL) or "misses"
//   BenchmarkReport json FILE [NAME VALUE]...   writes the object {NAME: VALUE, ...} to FILE, in order
//   BenchmarkReport get FILE KEY                prints KEY's value in the JSON object in FILE
//
// Figures are printed with DECIMALS digits after the point (default 6), as printf's "%.6f".
// Exits 2 for a wrong call, 1 when a file cannot be read or written or `get` finds no KEY.
import Foundation

@main
struct ReportCommand {
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            let response = try respond(to: arguments)
            for warning in response.warnings { complain("warning: \(warning)") }
            if let (path, contents) = response.file {
                do {
                    try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
                } catch {
                    complain("error: cannot write \(path): \(error.localizedDescription)")
                    exit(1)
                }
            }
            if let output = response.output { print(output) }
        } catch let error as UsageError {
            complain("error: \(error.description)")
            exit(2)
        } catch {
            complain("error: \(error)")
            exit(1)
        }
    }

    private static func complain(_ message: String) {
        FileHandle.standardError.write(Data("BenchmarkReport: \(message)\n".utf8))
    }
}

/// What one call prints, warns about and writes.
struct Response: Equatable {
    var output: String?
    var warnings: [String] = []
    var file: (path: String, contents: String)?

    static func == (lhs: Response, rhs: Response) -> Bool {
        lhs.output == rhs.output && lhs.warnings == rhs.warnings && lhs.file?.path == rhs.file?.path
            && lhs.file?.contents == rhs.file?.contents
    }
}

struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The answer to one command line (without the program's name); reads a file only for `get`.
func respond(to arguments: [String]) throws -> Response {
    guard let command = arguments.first else { throw UsageError("no command (stats, ratio, ...)") }
    let operands = Array(arguments.dropFirst())
    switch command {
    case "stats":
        return Response(output: Summary.line(for: try operands.map { try figure($0) }))
    case "ratio":
        let (values, decimals) = try figures(operands, count: 2, command: "ratio A B [DECIMALS]")
        return Response(output: fixed(ratio(values[0], values[1]), decimals: decimals))
    case "difference":
        let (values, decimals) = try figures(operands, count: 2, command: "difference A B [DECIMALS]")
        return Response(output: fixed(values[0] - values[1], decimals: decimals))
    case "slope":
        let (values, decimals) = try figures(operands, count: 4, command: "slope N1 V1 N2 V2 [DECIMALS]")
        let value = slope(from: (values[0], values[1]), to: (values[2], values[3]))
        return Response(output: fixed(value, decimals: decimals))
    case "verdict":
        guard operands.count == 2 else { throw UsageError("usage: verdict VALUE GOAL") }
        let goal = try figure(operands[1])
        return Response(output: Verdict(number(operands[0]) ?? .nan, atMost: goal).rawValue)
    case "json":
        guard let path = operands.first, operands.count % 2 == 1 else {
            throw UsageError("usage: json FILE [NAME VALUE]...")
        }
        let pairs = Array(operands.dropFirst())
        let fields = stride(from: 0, to: pairs.count, by: 2).map { (name: pairs[$0], value: pairs[$0 + 1]) }
        let (text, warnings) = try JSONReport.object(fields)
        return Response(warnings: warnings, file: (path, text))
    case "get":
        guard operands.count == 2 else { throw UsageError("usage: get FILE KEY") }
        guard let data = FileManager.default.contents(atPath: operands[0]) else {
            throw ReportError("cannot read \(operands[0])")
        }
        guard let value = try JSONReport.value(of: operands[1], in: data) else {
            throw ReportError("no \(operands[1]) in \(operands[0])")
        }
        return Response(output: value)
    default:
        throw UsageError("unknown command: \(command)")
    }
}

/// A figure on the command line; anything but a number is a wrong call.
private func figure(_ text: String) throws -> Double {
    guard let value = number(text) else { throw UsageError("not a number: '\(text)'") }
    return value
}

/// `count` figures and an optional number of decimals after them (default 6).
private func figures(_ operands: [String], count: Int, command: String) throws -> (values: [Double], decimals: Int) {
    guard operands.count == count || operands.count == count + 1 else { throw UsageError("usage: \(command)") }
    var decimals = 6
    if operands.count > count {
        guard let given = Int(operands[count]), (0...17).contains(given) else {
            throw UsageError("DECIMALS must be 0 to 17, not '\(operands[count])'")
        }
        decimals = given
    }
    return (try operands.prefix(count).map { try figure($0) }, decimals)
}
