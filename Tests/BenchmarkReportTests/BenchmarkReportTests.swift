import Foundation
import Testing

@testable import BenchmarkReport

/// The statistics and the JSON of the benchmark scripts (`Benchmarks/BenchmarkReport`).
@Suite(.timeLimit(.minutes(5))) struct BenchmarkReportTests {
    @Test func medianOfAnOddCountIsTheMiddleSample() {
        #expect(Summary([5, 1, 3]) == Summary(median: 3, min: 1, max: 5, count: 3))
        #expect(Summary([2.5]) == Summary(median: 2.5, min: 2.5, max: 2.5, count: 1))
    }

    @Test func medianOfAnEvenCountIsTheMeanOfTheTwoMiddleSamples() {
        #expect(Summary([4, 1, 10, 2]) == Summary(median: 3, min: 1, max: 10, count: 4))
        #expect(Summary([14.819, 18.5717]) == Summary(median: 16.69535, min: 14.819, max: 18.5717, count: 2))
    }

    @Test func minAndMaxAreTheExtremesWhateverTheOrder() throws {
        let summary = try #require(Summary([300, -2, 196, 208, 1e6, 0]))
        #expect(summary.min == -2)
        #expect(summary.max == 1e6)
        #expect(summary.count == 6)
        #expect(summary.median == 202)
    }

    @Test func noSamplesHaveNoSummary() {
        #expect(Summary([]) == nil)
        #expect(Summary.line(for: []) == "nan nan nan 0")
    }

    @Test func theLineHasSixDecimalsAndTheCount() {
        #expect(Summary.line(for: [14.8190, 42.3320, 17.19]) == "17.190000 14.819000 42.332000 3")
        #expect(Summary.line(for: [1, 2]) == "1.500000 1.000000 2.000000 2")
    }

    @Test func ratioDifferenceAndSlope() {
        #expect(fixed(ratio(14.819, 18.5717), decimals: 6) == "0.797934")
        #expect(ratio(1, 0) == .infinity)
        #expect(slope(from: (2000, 10_000_000), to: (12000, 30_000_000)) == 2000)
        #expect(fixed(slope(from: (100, 1_000_000), to: (200, 3_826_744)), decimals: 3) == "28267.440")
    }

    @Test func aGoalIsMetUpToAndIncludingItsValue() {
        #expect(Verdict(1.069915, atMost: 1.10) == .meets)
        #expect(Verdict(1.10, atMost: 1.10) == .meets)
        #expect(Verdict(1.1000001, atMost: 1.10) == .misses)
        #expect(Verdict(1025, atMost: 1024) == .misses)
        #expect(Verdict(.nan, atMost: 0.5) == .misses)
    }

    @Test func theCommandsPrintWhatTheScriptsRead() throws {
        #expect(try respond(to: ["stats", "3", "1", "2"]).output == "2.000000 1.000000 3.000000 3")
        #expect(try respond(to: ["stats"]).output == "nan nan nan 0")
        #expect(try respond(to: ["ratio", "1", "3"]).output == "0.333333")
        #expect(try respond(to: ["ratio", "1", "3", "2"]).output == "0.33")
        #expect(try respond(to: ["difference", "19.4", "24.4", "3"]).output == "-5.000")
        #expect(try respond(to: ["slope", "2000", "100", "12000", "19260100", "1"]).output == "1926.0")
        #expect(try respond(to: ["verdict", "0.235", "0.5"]).output == "meets")
        #expect(try respond(to: ["verdict", "nan", "0.5"]).output == "misses")
        #expect(try respond(to: ["verdict", "", "1024"]).output == "misses")
    }

    @Test func wrongCallsAreRefused() {
        #expect(throws: UsageError.self) { try respond(to: []) }
        #expect(throws: UsageError.self) { try respond(to: ["median", "1"]) }
        #expect(throws: UsageError.self) { try respond(to: ["stats", "1", "x"]) }
        #expect(throws: UsageError.self) { try respond(to: ["ratio", "1"]) }
        #expect(throws: UsageError.self) { try respond(to: ["ratio", "1", "2", "many"]) }
        #expect(throws: UsageError.self) { try respond(to: ["verdict", "1", "goal"]) }
        #expect(throws: UsageError.self) { try respond(to: ["json", "out.json", "lonely"]) }
    }

    @Test func theJSONKeepsTheOrderOfItsFields() throws {
        let response = try respond(to: [
            "json", "/tmp/figures.json", "signal_value_instructions_ratio_vs_c", "1.069915",
            "managed_objects_1000_ms_bluezkit", "14.819000", "scan_distinct_addresses_advertisements", "1000000",
        ])
        let file = try #require(response.file)
        #expect(file.path == "/tmp/figures.json")
        #expect(
            file.contents == """
                {
                  "signal_value_instructions_ratio_vs_c": 1.069915,
                  "managed_objects_1000_ms_bluezkit": 14.819,
                  "scan_distinct_addresses_advertisements": 1000000
                }

                """)
        #expect(response.warnings.isEmpty)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(file.contents.utf8)) as? [String: Any])
        #expect(object.count == 3)
        #expect((object["managed_objects_1000_ms_bluezkit"] as? NSNumber)?.doubleValue == 14.819)
    }

    @Test func aFigureThatIsNotANumberIsWrittenAsNull() throws {
        let (text, warnings) = try JSONReport.object([("latency", "nan"), ("rate", "")])
        #expect(text == "{\n  \"latency\": null,\n  \"rate\": null\n}\n")
        #expect(warnings.count == 2)
        #expect(try JSONReport.object([]).text == "{\n}\n")
    }

    @Test func getReadsAValueBack() throws {
        let (text, _) = try JSONReport.object([("ratio", "1.064047"), ("count", "3"), ("gone", "nan")])
        let data = Data(text.utf8)
        #expect(try JSONReport.value(of: "ratio", in: data) == "1.064047")
        #expect(try JSONReport.value(of: "count", in: data) == "3")
        #expect(try JSONReport.value(of: "gone", in: data) == "null")
        #expect(try JSONReport.value(of: "absent", in: data) == nil)
        #expect(throws: ReportError.self) { try JSONReport.value(of: "x", in: Data("[1]".utf8)) }
    }
}
