import BlueZ
import Testing

/// BlueZ's GATT flag strings live in one table (issue 36): each flag has one distinct bit and
/// one string, reading and writing go through the table, and nothing is exported empty.
@Suite(.timeLimit(.minutes(5))) struct BlueZGattFlagsTableTests {
    @Test func everyFlagHasItsOwnBitAndString() {
        let table = BlueZGattFlags.table
        #expect(Set(table.map(\.name)).count == table.count)
        #expect(Set(table.map(\.flag.rawValue)).count == table.count)
        for entry in table { #expect(entry.flag.rawValue.nonzeroBitCount == 1, "\(entry.name)") }
    }

    @Test func namesReadBackAsTheSameFlagsInTheDocumentationsOrder() {
        let all = BlueZGattFlags.table.reduce(into: BlueZGattFlags()) { $0.insert($1.flag) }
        #expect(all.names == BlueZGattFlags.table.map(\.name))
        #expect(BlueZGattFlags(names: all.names) == all)
        #expect(BlueZGattFlags(names: ["notify", "read", "notify"]).names == ["read", "notify"])
    }

    @Test func unknownStringsAreIgnored() {
        #expect(BlueZGattFlags(names: ["bogus", "read", "READ", ""]) == .read)
        #expect(BlueZGattFlags(names: []) == [])
    }

    @Test func nothingIsExportedEmpty() {
        #expect(BlueZGattFlags().exportedNames == ["authorize"])
        #expect(BlueZGattFlags([.read, .encryptRead]).exportedNames == ["read", "encrypt-read"])
    }

    @Test func theIndicatingFlagsAreTheIndicateOnes() {
        let names = BlueZGattFlags.indicating.names
        #expect(names.count == 4 && names.allSatisfy { $0.hasSuffix("indicate") })
    }
}
