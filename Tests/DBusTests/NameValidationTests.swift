import Testing

@testable import DBus

/// Names, signatures and values that libdbus would abort on are refused with a
/// typed `DBusError` before they reach it.
@Suite(.timeLimit(.minutes(5))) struct NameValidationTests {
    @Test(arguments: ["", "a", "/a/", "//", "/a-b", "/a\u{0}b", "/a//b", "a/b", "/a b", "/ä", "/a/."])
    func invalidObjectPathsAreRefused(_ text: String) {
        let error = #expect(throws: DBusError.self) { try ObjectPath(text) }
        #expect(error?.code == .invalidArgs)
    }

    @Test func validObjectPaths() throws {
        for text in ["/", "/a", "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF", "/_/9/Z"] {
            #expect(try ObjectPath(text).rawValue == text)
        }
    }

    @Test func objectPathHelpers() throws {
        let device = try path("/org/bluez/hci0/dev_AA")
        #expect(try path("/org/bluez/hci0").appending("dev_AA") == device)
        #expect(try ObjectPath.root.appending("org") == path("/org"))
        #expect(device.parent == (try path("/org/bluez/hci0")))
        #expect(try path("/org").parent == .root)
        #expect(ObjectPath.root.parent == nil)
        #expect(device.isDescendant(of: try path("/org/bluez")))
        #expect(device.isDescendant(of: device))
        #expect(device.isDescendant(of: .root))
        #expect(!(try path("/org/bluez2")).isDescendant(of: try path("/org/bluez")))
        for bad in ["", "a-b", "a/b", "ä"] {
            let error = #expect(throws: DBusError.self) { try ObjectPath.root.appending(bad) }
            #expect(error?.code == .invalidArgs, "\(bad)")
        }
    }

    @Test(arguments: [
        "a", "(}", "{ss}", "(", ")", "a{vs}", "a{(i)s}", "z", "()", "a{s}", "a{sss}", "s\u{0}",
        String(repeating: "a", count: 33) + "i",
        String(repeating: "(", count: 33) + "i" + String(repeating: ")", count: 33),
        String(repeating: "i", count: 256),
    ])
    func invalidSignaturesAreRefused(_ text: String) {
        let error = #expect(throws: DBusError.self) { try DBusSignature(text) }
        #expect(error?.code == .invalidSignature)
    }

    @Test func validSignatures() throws {
        let deepest = String(repeating: "a", count: 32) + "i"
        for text in [
            "", "a{sv}", "a{oa{sa{sv}}}", "(ii)", "av", "aay", "sa{sv}as", deepest, String(repeating: "y", count: 255),
        ] {
            #expect(try DBusSignature(text).rawValue == text)
        }
        #expect(try DBusSignature(String("a{sv}")).isSingleCompleteType)
        #expect(!(try DBusSignature(String("ss"))).isSingleCompleteType)
        #expect(!DBusSignature.empty.isSingleCompleteType)
    }

    @Test(arguments: [
        "", "a", "com..example", "1com.example", "com.example.", ".com.example", "com.ex ample",
        "com.example\u{0}", String(repeating: "a.", count: 128) + "b",
    ])
    func invalidBusNamesAreRefused(_ text: String) {
        let error = #expect(throws: DBusError.self) { try BusName(text) }
        #expect(error?.code == .invalidArgs)
    }

    @Test func validBusNames() throws {
        for text in [":1.42", "org.bluez", "com.example-dash.x_y", ":1.0"] {
            #expect(try BusName(text).rawValue == text)
        }
        #expect(try BusName(String(":1.42")).isUnique)
        #expect(!(try BusName(String("org.bluez"))).isUnique)
    }

    @Test(arguments: ["", "a", "com.", ".com", "com.1x", "com.a-b", "com..x", ":1.2", "com.ex\u{0}ample"])
    func invalidInterfaceNamesAreRefused(_ text: String) {
        let error = #expect(throws: DBusError.self) { try InterfaceName(text) }
        #expect(error?.code == .invalidArgs)
    }

    @Test(arguments: ["", "a.b", "1a", "a-b", "a b", "Read\u{0}Value", String(repeating: "m", count: 256)])
    func invalidMemberNamesAreRefused(_ text: String) {
        let error = #expect(throws: DBusError.self) { try MemberName(text) }
        #expect(error?.code == .invalidArgs)
    }

    @Test func validInterfaceAndMemberNames() throws {
        for text in ["org.bluez.GattCharacteristic1", "a.b", "_x.y9_"] {
            #expect(try InterfaceName(text).rawValue == text)
        }
        for text in ["ReadValue", "_x9", "A"] {
            #expect(try MemberName(text).rawValue == text)
        }
    }

    // MARK: Values

    /// Builds a message with `arguments` and returns the error code it was refused with.
    func refusal(_ arguments: [DBusValue]) -> DBusError.Code? {
        let error = #expect(throws: DBusError.self) { try localCall(arguments) }
        return error?.code
    }

    @Test func stringsWithNULAreRefusedWhereverTheyAre() throws {
        #expect(refusal([.string("a\u{0}b")]) == .invalidArgs)
        #expect(refusal([.stringArray(["ok", "\u{0}"])]) == .invalidArgs)
        #expect(refusal([.stringVariantDictionary(["k": .string("v\u{0}")])]) == .invalidArgs)
        #expect(refusal([.dictionary(key: "s", value: "i", [.init(.string("\u{0}"), .int32(1))])]) == .invalidArgs)
        #expect(refusal([.variant(.variant(.string("\u{0}")))]) == .invalidArgs)
        #expect(refusal([.structure([.int32(1), .string("\u{0}")])]) == .invalidArgs)
        // The same text in a signal and a reply.
        #expect(throws: DBusError.self) {
            try DBusMessage.signal(
                path: path("/s"), interface: testInterface, member: "S", arguments: [.string("\u{0}")])
        }
    }

    @Test func elementsThatDoNotMatchTheElementSignatureAreRefused() {
        #expect(refusal([.array(element: "i", [.int32(1), .string("x")])]) == .invalidArgs)
        #expect(refusal([.array(element: "s", [.objectPath(.root)])]) == .invalidArgs)
        #expect(refusal([.array(element: "v", [.int32(1)])]) == .invalidArgs)
        #expect(refusal([.array(element: "ai", [.array(element: "u", [])])]) == .invalidArgs)
        #expect(refusal([.dictionary(key: "s", value: "v", [.init(.string("k"), .int32(1))])]) == .invalidArgs)
        #expect(refusal([.dictionary(key: "s", value: "v", [.init(.int32(1), .variant(.int32(1)))])]) == .invalidArgs)
    }

    @Test func malformedContainersAreRefused() {
        // ("{sv}" alone is not a signature at all, so `.array(element: "{sv}")` cannot be written.)
        #expect(refusal([.array(element: "ii", [])]) == .invalidSignature)
        #expect(refusal([.array(element: .empty, [])]) == .invalidSignature)
        #expect(refusal([.dictionary(key: "v", value: "s", [])]) == .invalidSignature)
        #expect(refusal([.dictionary(key: "(i)", value: "s", [])]) == .invalidSignature)
        #expect(refusal([.dictionary(key: "ay", value: "s", [])]) == .invalidSignature)
        #expect(refusal([.dictionary(key: "s", value: "ss", [])]) == .invalidSignature)
        #expect(refusal([.structure([])]) == .invalidArgs)
    }

    @Test func nestingDeeperThan64IsRefused() throws {
        // 64 containers around a leaf is the limit, whatever mixes them.
        #expect(try localCall([Nesting.variants(64)]).arguments() == [Nesting.variants(64)])
        #expect(refusal([Nesting.variants(65)]) == .invalidArgs)
        #expect(refusal([Nesting.variants(200)]) == .invalidArgs)
        #expect(refusal([Nesting.variants(40, around: Nesting.structs(25))]) == .invalidArgs)
        #expect(refusal([.array(element: "v", [Nesting.variants(64)])]) == .invalidArgs)
        #expect(refusal([.stringVariantDictionary(["k": Nesting.variants(62)])]) == .invalidArgs)
    }

    @Test func signaturesThatLibdbusWouldAbortOnAreRefused() throws {
        // More than 32 nested structs or arrays, at the top or inside a variant.
        #expect(try localCall([Nesting.structs(32)]).arguments() == [Nesting.structs(32)])
        #expect(refusal([Nesting.structs(33)]) == .invalidSignature)
        #expect(refusal([.variant(Nesting.structs(33))]) == .invalidSignature)
        #expect(refusal([.variant(.variant(Nesting.structs(33)))]) == .invalidSignature)
        let deep = try DBusSignature(String(repeating: "a", count: 31) + "i")
        let deepest = try DBusSignature(String(repeating: "a", count: 32) + "i")
        #expect(try localCall([.array(element: deep, [])]).arguments() == [.array(element: deep, [])])
        #expect(refusal([.array(element: deepest, [])]) == .invalidSignature)
        #expect(refusal([.array(element: "v", [.variant(.array(element: deepest, []))])]) == .invalidSignature)
        // libdbus counts runs of consecutive arrays: a dictionary's key starts a new run.
        let dictionary = DBusValue.dictionary(key: "s", value: deepest, [])
        #expect(try localCall([dictionary]).arguments() == [dictionary])
        // A variant whose own signature is longer than 255 characters.
        #expect(refusal([.variant(.structure(Array(repeating: .int32(1), count: 300)))]) == .invalidSignature)
    }

    @Test func signaturesLongerThan255AreRefused() throws {
        let longest = Array(repeating: DBusValue.byte(1), count: 255)
        #expect(try localCall(longest).signature.rawValue.count == 255)
        #expect(refusal(longest + [.byte(1)]) == .invalidSignature)
        #expect(refusal([.structure(Array(repeating: .int32(1), count: 254))]) == .invalidSignature)
    }

    @Test func takenFileDescriptorsAreRefused() {
        let fd = UnixFileDescriptor(owning: -1)
        #expect(refusal([.unixFD(fd)]) == .invalidArgs)
        #expect(refusal([.array(element: "h", [.unixFD(fd)])]) == .invalidArgs)
        #expect(refusal([.variant(.structure([.int32(1), .unixFD(fd)]))]) == .invalidArgs)
        #expect(refusal([.dictionary(key: "s", value: "h", [.init(.string("fd"), .unixFD(fd))])]) == .invalidArgs)
    }

    @Test func errorNamesMapToCodes() {
        let table: [(String, DBusError.Code)] = [
            ("Failed", .failed), ("NoReply", .noReply), ("Timeout", .timeout), ("TimedOut", .timeout),
            ("UnknownObject", .unknownObject), ("UnknownMethod", .unknownMethod),
            ("UnknownInterface", .unknownInterface), ("UnknownProperty", .unknownProperty),
            ("PropertyReadOnly", .propertyReadOnly), ("InvalidArgs", .invalidArgs),
            ("InvalidSignature", .invalidSignature), ("AccessDenied", .accessDenied),
            ("ServiceUnknown", .serviceUnknown), ("NameHasNoOwner", .nameHasNoOwner),
            ("Disconnected", .disconnected), ("NoMemory", .noMemory), ("Cancelled", .cancelled),
        ]
        for (short, code) in table {
            let name = "org.freedesktop.DBus.Error." + short
            #expect(DBusError(name: name, message: "m").code == code, "\(short)")
            if short != "TimedOut" { #expect(DBusError(code, "m").name == name) }
        }
        let bluez = DBusError(name: "org.bluez.Error.Failed", message: "x")
        #expect(bluez.code == .other("org.bluez.Error.Failed"))
        #expect(DBusError(.other("org.bluez.Error.InProgress"), "").name == "org.bluez.Error.InProgress")
        #expect(
            DBusError(name: "org.freedesktop.DBus.Error.FileNotFound", message: "").code
                == .other("org.freedesktop.DBus.Error.FileNotFound"))
        #expect(DBusError(.failed, "boom").description == "org.freedesktop.DBus.Error.Failed: boom")
    }

    @Test func matchRulesQuoteTheirValues() throws {
        let rule = DBusMatchRule(
            sender: "org.bluez", path: try path("/org/bluez"), interface: .properties, member: "PropertiesChanged",
            arg0: "it's")
        let expected = [
            "type='signal'", "sender='org.bluez'", "path='/org/bluez'", "interface='org.freedesktop.DBus.Properties'",
            "member='PropertiesChanged'", "arg0='it'\\''s'",
        ]
        #expect(rule.description == expected.joined(separator: ","))
        #expect(DBusMatchRule(pathNamespace: .root).description == "type='signal',path_namespace='/'")
    }
}

@Suite(.timeLimit(.minutes(5))) struct ObjectPathAncestorTests {
    @Test func theAncestorEndsAtTheFirstElementWithThePrefix() throws {
        let attribute = try ObjectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF/service000a/char000b")
        #expect(attribute.ancestor(withElementPrefix: "dev_")?.rawValue == "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF")
        #expect(attribute.ancestor(withElementPrefix: "char")?.rawValue == attribute.rawValue)
        #expect(attribute.ancestor(withElementPrefix: "desc") == nil)
        // A prefix inside an element does not count.
        #expect(try ObjectPath("/org/x_dev_1/y").ancestor(withElementPrefix: "dev_") == nil)
        // An element that is just the prefix, the last element, a path shorter than the prefix.
        #expect(try ObjectPath("/a/dev_/b").ancestor(withElementPrefix: "dev_")?.rawValue == "/a/dev_")
        #expect(try ObjectPath("/a/dev_1").ancestor(withElementPrefix: "dev_")?.rawValue == "/a/dev_1")
        #expect(try ObjectPath("/a/dev").ancestor(withElementPrefix: "dev_") == nil)
        #expect(ObjectPath.root.ancestor(withElementPrefix: "dev_") == nil)
        // The first match wins.
        #expect(try ObjectPath("/dev_1/dev_2").ancestor(withElementPrefix: "dev_")?.rawValue == "/dev_1")
    }
}
