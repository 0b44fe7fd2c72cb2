package import DBus

/// Value slots: a routed characteristic's `Value`, kept in the cache without a lookup per value.
///
/// A route (`BlueZClient+ValueRoutes.swift`) takes every notification of one subscribed
/// characteristic. Storing each value in ``BlueZObjectCache/objects`` at once costs a hash of the
/// object's path and three nested dictionary writes per notification (about 2,900 instructions,
/// callgrind, 2026-12-07), for a copy that nothing reads between two notifications. Instead the
/// route's slot keeps the newest value, and the cache writes the slots' values into `objects`
/// before anyone reads or changes it (its accessors call ``flushPendingValues(_:)``): whoever
/// looks sees exactly what storing each value at once would have shown, in the same order
/// against the general path's changes.
///
/// Whether the slot's object is in the tree (a value of an object the cache lacks is dropped,
/// as the general path drops it) is looked up once per change of the tree's shape, not per
/// value: `State.shapeVersion` counts every change made through `objects`.
extension BlueZObjectCache {
    /// One route's slot (in `State.valueSlots`, by index).
    struct ValueSlot {
        let path: ObjectPath
        let interface: InterfaceName
        /// The newest value not yet written into `objects`.
        var pending: [UInt8]?
        /// The `shapeVersion` at which `present` was looked up.
        var checkedAt = -1
        /// Whether the object with `interface` was in the tree at `checkedAt`.
        var present = false
    }

    /// A slot for the values of `interface` of the object at `path`; its index, for
    /// ``takeValue(_:slot:)`` and ``removeValueSlot(_:)``. On the queue.
    package func addValueSlot(at path: ObjectPath, interface: InterfaceName) -> Int {
        let slot = ValueSlot(path: path, interface: interface)
        if let free = state.value.valueSlots.firstIndex(where: { $0 == nil }) {
            state.value.valueSlots[free] = slot
            return free
        }
        state.value.valueSlots.append(slot)
        return state.value.valueSlots.count - 1
    }

    /// How many slots are in use (for tests; on the queue).
    package var valueSlotCount: Int { state.value.valueSlots.count { $0 != nil } }

    /// Ends a slot: its pending value is written into `objects` first. On the queue.
    package func removeValueSlot(_ index: Int) {
        Self.flushPendingValues(&state.value)
        guard state.value.valueSlots.indices.contains(index) else { return }
        state.value.valueSlots[index] = nil
        while state.value.valueSlots.last.map({ $0 == nil }) == true { state.value.valueSlots.removeLast() }
    }

    /// Takes a `PropertiesChanged` signal whose only change is `Value` of the slot's interface
    /// (a notification under `StartNotify`) for the slot's route: the value is kept as if stored
    /// in `objects`, and no event is reported. On the queue.
    package func takeValue(_ message: DBusMessage, slot index: Int) -> ValueTake {
        guard isLoaded, state.value.valueSlots.indices.contains(index),
            let interface = state.value.valueSlots[index]?.interface,
            let bytes = message.propertiesChangedValueBytes(of: interface)
        else { return .notTaken }
        return Self.keep(bytes, slot: index, in: &state.value) ? .value(bytes) : .dropped
    }

    /// Keeps `bytes` in the slot; false (dropped) when its object is not in the tree.
    private static func keep(_ bytes: [UInt8], slot index: Int, in state: inout State) -> Bool {
        let version = state.shapeVersion
        if state.valueSlots[index]!.checkedAt != version {
            let slot = state.valueSlots[index]!
            state.valueSlots[index]!.present = state.objects[slot.path]?[slot.interface.rawValue] != nil
            state.valueSlots[index]!.checkedAt = version
        }
        guard state.valueSlots[index]!.present else { return false }
        if state.valueSlots[index]!.pending == nil { state.pendingSlots.append(index) }
        state.valueSlots[index]!.pending = bytes
        return true
    }

    /// Writes every slot's pending value into `objects` (in the order the slots first had one;
    /// each slot's newest value only, as storing each in turn would leave it).
    static func flushPendingValues(_ state: inout State) {
        guard !state.pendingSlots.isEmpty else { return }
        for index in state.pendingSlots {
            guard state.valueSlots.indices.contains(index), let slot = state.valueSlots[index],
                let bytes = state.valueSlots[index]!.pending.take()
            else { continue }
            _ = storeValue(bytes, at: slot.path, interface: slot.interface, in: &state.objects)
        }
        state.pendingSlots.removeAll(keepingCapacity: true)
    }

    /// Stores `bytes` as `Value` of `interface` of the object at `path` in `objects`; false
    /// (nothing stored) when there is no such object or it has no such interface.
    static func storeValue(
        _ bytes: [UInt8], at path: ObjectPath, interface: InterfaceName, in objects: inout [ObjectPath: Interfaces]
    ) -> Bool {
        // The object by its path; its interface and `Value` among the few it has by comparing
        // names (no hashing), the value changed in place. Each index is used at once.
        guard let index = objects.index(forKey: path),
            let interfaceIndex = objects.values[index].firstIndex(where: { $0.key == interface.rawValue })
        else { return false }
        if let valueIndex = objects.values[index].values[interfaceIndex].firstIndex(where: {
            $0.key == valueProperty
        }) {
            objects.values[index].values[interfaceIndex].values[valueIndex] = .bytes(bytes)
        } else {
            objects.values[index].values[interfaceIndex][valueProperty] = .bytes(bytes)
        }
        return true
    }
}
