import BlueZ
import Foundation

/// Included services: which GATT application carries which service.
///
/// bluetoothd 5.66 resolves a service's `Includes` only among the services of the same
/// application, and only against services it inserted before the including one (it inserts
/// them in the order of our `GetManagedObjects` reply; `include_services` in
/// `src/gatt-database.c` logs "include service not found" and skips anything else). So the
/// application registered for an added service (its *host*) carries, before it, every
/// service it includes, directly or not, each once. An added service that some other added
/// service includes has no application of its own while that one is published.
///
/// Every change (add, remove, republish) recomputes the wanted applications from the added
/// services and re-registers only those whose content changed, one change at a time.
extension PeripheralManager {
    /// The content of one application: services in export order (the host last) and, for each,
    /// the indices of the services it includes.
    struct ApplicationLayout: Equatable {
        var services: [MutableService]
        var includes: [[Int]]

        /// The host: the added service the application is registered for.
        var host: MutableService { services[services.count - 1] }
    }

    /// What the peripheral manager keeps about included services (part of `Shared`).
    struct IncludedServicesState {
        /// The content of each registered application, by host.
        var layouts: [ObjectIdentifier: ApplicationLayout] = [:]
        /// Services removed with `remove(_:)` that an added service still includes: left out of
        /// its application until added again or no longer included.
        var removed: Set<ObjectIdentifier> = []
    }

    // MARK: Operations

    /// Runs `work` after every change queued before it.
    func serially(_ work: @escaping @Sendable () async -> Void) {
        engine.changes.enqueue(work)
    }

    /// `add(_:)`: publishes `service` (moving included services it carries out of their own
    /// applications), then calls `didAdd`, then `done` (on the manager's queue).
    func publish(_ service: MutableService, then done: (@Sendable ((any Error)?) -> Void)? = nil) {
        serially {
            let error = await self.engine.addToLayout(service)
            self.post(.didAdd(service, error, done: done))
        }
    }

    /// `remove(_:)`: takes `service` out of the added services and out of every application
    /// that carries it because another service includes it.
    ///
    /// On the chain of service changes, as `add(_:)` is: an `add` still waiting there (behind a
    /// slow registration) is undone by a later `remove`, not the other way round (the
    /// interleaving tester's seed 9022 notifySockets: remove, add, add, remove left the service
    /// registered).
    /// `done` runs on the manager's queue once bluetoothd has the applications that are wanted now.
    func unpublish(_ service: MutableService, then done: (@Sendable () -> Void)? = nil) {
        serially {
            self.engine.sync { state in
                state.services.removeAll { $0 === service }
                state.inclusion.removed.insert(ObjectIdentifier(service))
            }
            self.saveStateSoon()
            _ = await self.engine.reconcileApplications()
            if let done { self.queue.async(execute: done) }
        }
    }

    /// `removeAllServices()`, on the chain of service changes (see ``unpublish(_:then:)``).
    func unpublishAll(then done: (@Sendable () -> Void)? = nil) {
        serially {
            self.engine.sync { state in
                state.services.removeAll()
                state.inclusion.removed.removeAll()
            }
            self.saveStateSoon()
            _ = await self.engine.reconcileApplications()
            if let done { self.queue.async(execute: done) }
        }
    }

    /// Registration failures that say nothing about the service: bluetoothd or the bus left.
    static let interruptedByBluetoothdOrBus: Set<BlueZError.Code> = [.disconnected, .noReply, .serviceAbsent]

    // MARK: Layouts

    /// The applications wanted for `services` (the added services, in order): one for each
    /// service that no other added service includes.
    static func layouts(for services: [MutableService], excluding removed: Set<ObjectIdentifier>)
        -> [ApplicationLayout]
    {
        let all = services.map { layout(for: $0, excluding: removed) }
        let carried = Set(all.flatMap { $0.services.dropLast().map(ObjectIdentifier.init) })
        return all.filter { !carried.contains(ObjectIdentifier($0.host)) }
    }

    /// The application for `host`: its included services in depth-first post-order (each once,
    /// after the services it includes), then `host`.
    static func layout(for host: MutableService, excluding removed: Set<ObjectIdentifier>) -> ApplicationLayout {
        let order = includeOrder(of: host, excluding: removed).order
        let index = Dictionary(
            uniqueKeysWithValues: order.enumerated().map { (ObjectIdentifier($0.element), $0.offset) })
        let includes = order.enumerated().map { position, service in
            var seen: Set<Int> = []
            return service.publishedIncludedServices.compactMap { included -> Int? in
                guard let i = index[ObjectIdentifier(included)], i < position, seen.insert(i).inserted else {
                    return nil
                }
                return i
            }
        }
        return ApplicationLayout(services: order, includes: includes)
    }

    /// `service` and what it includes (skipping `removed`), in post-order; `cycle` when a
    /// service includes itself directly or not (the edge that closes the cycle is dropped).
    static func includeOrder(of service: MutableService, excluding removed: Set<ObjectIdentifier>)
        -> (order: [MutableService], cycle: Bool)
    {
        var order: [MutableService] = []
        var done: Set<ObjectIdentifier> = []
        var visiting: Set<ObjectIdentifier> = []
        var cycle = false
        func visit(_ node: MutableService) {
            let id = ObjectIdentifier(node)
            guard !done.contains(id) else { return }
            guard visiting.insert(id).inserted else {
                cycle = true
                return
            }
            for included in node.publishedIncludedServices where !removed.contains(ObjectIdentifier(included)) {
                visit(included)
            }
            visiting.remove(id)
            done.insert(id)
            order.append(node)
        }
        visit(service)
        return (order, cycle)
    }

    /// The removed services that some added service still includes (the others are forgotten,
    /// so that adding an including service again carries them again).
    static func stillIncluded(_ removed: Set<ObjectIdentifier>, by services: [MutableService])
        -> Set<ObjectIdentifier>
    {
        guard !removed.isEmpty else { return removed }
        let reachable = services.flatMap { includeOrder(of: $0, excluding: []).order.dropLast() }
        return removed.intersection(reachable.map(ObjectIdentifier.init))
    }

    // MARK: Restoration

    /// The restoration records of the added `services` and of the services they include
    /// (skipping `removed`), with the include relation as indices into the returned list.
    static func serviceRecords(_ services: [MutableService], excluding removed: Set<ObjectIdentifier>)
        -> [PeripheralRestorationRecord.Service]
    {
        var all = services
        for service in services {
            for included in includeOrder(of: service, excluding: removed).order
            where !all.contains(where: { $0 === included }) {
                all.append(included)
            }
        }
        let index = Dictionary(
            all.enumerated().map { (ObjectIdentifier($0.element), $0.offset) }, uniquingKeysWith: { first, _ in first })
        return all.enumerated().map { position, service in
            var record = PeripheralRestorationRecord.Service(service)
            let includes = service.publishedIncludedServices.filter { !removed.contains(ObjectIdentifier($0)) }
                .compactMap { index[ObjectIdentifier($0)] }
            record.includes = includes.isEmpty ? nil : includes
            record.isAdded = position < services.count ? nil : false
            return record
        }
    }

    /// The added services of `records`, rebuilt with their included services. Includes that are
    /// out of range or close a cycle (a hand-edited or hostile file may hold them) are dropped, as
    /// ``PeripheralRestorationRecord/includeDepth(_:)`` ignores them: a cycle of services that
    /// include each other would be refused when published, and never freed.
    static func restoredServices(_ records: [PeripheralRestorationRecord.Service]) -> [MutableService] {
        let services = records.map(\.mutableService)
        let acyclic = PeripheralRestorationRecord.acyclicIncludes(records.map { $0.includes ?? [] }).includes
        for (index, (record, service)) in zip(records, services).enumerated() {
            guard let service, record.includes != nil else { continue }
            service.includedServices = acyclic[index].compactMap { services[$0] }
        }
        return zip(records, services).compactMap { record, service in record.isAdded == false ? nil : service }
    }
}
