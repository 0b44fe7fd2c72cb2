import BlueZ
import DBus

extension BlueZAgent {
    /// Registers the agent from a task of its own; a failure (bluetoothd gone again, or
    /// refusing) only leaves a debug line: pairing is then up to other agents.
    func registerInBackground(for manager: String) {
        Task {
            do throws(DBusError) {
                try await register()
            } catch {
                DBusLog.debug("\(manager): no pairing agent: \(error)")
            }
        }
    }
}
