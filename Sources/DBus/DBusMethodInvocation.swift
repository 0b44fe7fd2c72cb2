import Synchronization

/// A method call to one of our exported objects, answered exactly once — now or later.
///
/// `reply` and `reply(error:)` may be called from any thread; the second and
/// later answers are ignored. An invocation released without an answer is
/// answered `org.freedesktop.DBus.Error.Failed`, so a caller (BlueZ, for
/// instance) never waits for its own timeout because a handler forgot it.
package final class DBusMethodInvocation: Sendable {
    package let message: DBusMessage
    private weak let connection: DBusConnection?
    private let answered = Atomic<Bool>(false)

    init(message: DBusMessage, connection: DBusConnection) {
        self.message = message
        self.connection = connection
    }

    /// The caller's unique name.
    package var sender: BusName? { message.sender }
    package var path: ObjectPath? { message.path }

    /// The arguments (their signature was checked against the method's before the handler ran).
    package func arguments() throws(DBusError) -> [DBusValue] { try message.arguments() }

    /// Whether an answer was already given.
    package var isAnswered: Bool { answered.load(ordering: .acquiring) }

    /// Answers with a method return carrying `values`. A value that cannot be
    /// marshalled turns the answer into a `Failed` error reply.
    package func reply(_ values: [DBusValue] = []) {
        guard claim() else { return }
        do {
            try send(DBusMessage.methodReturn(to: message, arguments: values))
        } catch {
            // Failed, not the validation error itself: InvalidArgs would blame the caller's arguments.
            send(DBusMessage.errorReply(to: message, error: DBusError(.failed, "cannot send the reply: \(error)")))
        }
    }

    /// Answers with an error reply.
    package func reply(error: DBusError) {
        guard claim() else { return }
        send(DBusMessage.errorReply(to: message, error: error))
    }

    private func claim() -> Bool { !answered.exchange(true, ordering: .acquiringAndReleasing) }

    private func send(_ reply: DBusMessage?) {
        guard !message.noReplyExpected, let reply else { return }
        connection?.send(reply)
    }

    deinit {
        if claim() {
            send(
                DBusMessage.errorReply(
                    to: message, error: DBusError(.failed, "the request was dropped without an answer")))
        }
    }
}
