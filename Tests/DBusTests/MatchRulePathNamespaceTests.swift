import Testing

@testable import DBus

/// `path_namespace` as the local filter reads it: from the message's C string, at element
/// boundaries only.
@Suite(.timeLimit(.minutes(5))) struct MatchRulePathNamespaceTests {
    @Test(arguments: [
        ("/org/bluez", "/org/bluez", true),
        ("/org/bluez", "/org/bluez/hci0", true),
        ("/org/bluez", "/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service000c/char000d", true),
        ("/org/bluez", "/org/bluezx", false),
        ("/org/bluez", "/org/blue", false),
        ("/org/bluez", "/org", false),
        ("/org/bluez", "/", false),
        ("/org/bluez", "/net/bluez", false),
        ("/", "/", true),
        ("/", "/anything/below", true),
    ])
    func pathInNamespace(namespace: String, path: String, expected: Bool) throws {
        let namespacePath = try ObjectPath(namespace)
        #expect(path.withCString { DBusMatchRule.isPath($0, in: namespacePath) } == expected)
    }
}
