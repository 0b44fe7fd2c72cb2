/// A deliberately broken property, set with ``SimulatedBlueZ/overrideProperty(_:of:at:with:)``.
///
/// The override applies to `Get`, `GetAll`, `GetManagedObjects`,
/// `InterfacesAdded` and `PropertiesChanged` until it is cleared; setting it
/// emits a `PropertiesChanged` that shows it (the wrong value, or the name
/// among the invalidated properties).
public enum SimulatedPropertyOverride: Sendable, Hashable {
    /// The property carries a value of another D-Bus type (a string for most properties, an `int32` for strings).
    case wrongType
    /// The property is absent.
    case missing
    /// The property is this string (`s`), whatever its real type: for example a `UUID` that is
    /// not a UUID.
    case string(String)
    /// The property is this array of strings (`as`), whatever its real type: for example
    /// `UUIDs` holding text that is not a UUID.
    case strings([String])
}
