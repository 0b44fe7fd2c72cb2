#if canImport(Glibc)
    import Glibc
#endif

/// The kind of Bluetooth address in a kernel socket address (`l2_bdaddr_type`, BlueZ's
/// lib/bluetooth.h `BDADDR_*`).
package enum BlueZL2CAPAddressType: UInt8, Sendable, Hashable {
    case bredr = 0
    case lePublic = 1
    case leRandom = 2
}

/// The security a kernel L2CAP socket asks of its link (`BT_SECURITY`, lib/bluetooth.h
/// `BT_SECURITY_*`).
package enum BlueZL2CAPSecurity: UInt8, Sendable, Hashable {
    /// No encryption.
    case low = 1
    /// Encryption, unauthenticated keys allowed (Just Works pairing).
    case medium = 2
    /// Encryption with authenticated keys (MITM-protected pairing).
    case high = 3
}

/// An error of a kernel L2CAP socket: the `errno` of the call that failed, or bad input found
/// before any call, in the categories the layer above acts on.
package struct BlueZSocketError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    package enum Code: Sendable, Hashable {
        /// The address is not `AA:BB:CC:DD:EE:FF`.
        case invalidAddress
        /// The PSM is outside LE's range (0x0001…0x00FF) or the kernel refused it.
        case invalidPSM
        /// The channel was closed (by us, or the peer ended it).
        case closed
        /// The peer refused the channel (no server on the PSM, no resources…).
        case refused
        /// The peer did not answer in time.
        case timedOut
        /// No link to the peer, or the link went down.
        case notConnected
        /// The link lacks the security the channel needs (encryption, authentication).
        case insufficientSecurity
        /// The kernel has no Bluetooth, or no LE credit-based channels.
        case notSupported
        /// The PSM is taken.
        case addressInUse
        /// A datagram longer than the channel's MTU.
        case messageTooLong
        /// The caller may not open Bluetooth sockets.
        case permissionDenied
        /// Any other error; see ``errno``.
        case other
    }

    package var code: Code
    /// The `errno` of the failing call; 0 for bad input found before any call.
    package var errno: Int32
    /// The call or check that failed, for messages.
    package var operation: String

    package init(_ code: Code, errno: Int32 = 0, operation: String) {
        self.code = code
        self.errno = errno
        self.operation = operation
    }

    /// The conversion of an `errno` (read once, where the call failed).
    package init(errno: Int32, operation: String) {
        self.init(Self.code(for: errno), errno: errno, operation: operation)
    }

    package var description: String {
        guard errno != 0 else { return "\(operation): \(code)" }
        return "\(operation): \(code) (\(String(cString: strerror(errno))), errno \(errno))"
    }

    static func code(for errno: Int32) -> Code {
        switch errno {
        case ECONNREFUSED: .refused
        case ETIMEDOUT: .timedOut
        case ENOTCONN, EHOSTDOWN, EHOSTUNREACH, ENETDOWN, ENETUNREACH, ENODEV: .notConnected
        case ECONNRESET, ECONNABORTED, EPIPE, EBADF, EBADFD, ESHUTDOWN: .closed
        case EACCES, EPERM: .permissionDenied
        case EADDRINUSE: .addressInUse
        case EAFNOSUPPORT, EPROTONOSUPPORT, EOPNOTSUPP, ESOCKTNOSUPPORT: .notSupported
        case EMSGSIZE: .messageTooLong
        case EKEYREJECTED: .insufficientSecurity
        default: .other
        }
    }
}

/// The kernel's `struct sockaddr_l2` (lib/l2cap.h), built as its 14 bytes: family, PSM (little
/// endian), the address (least significant byte first), CID and address type.
package struct BlueZL2CAPSocketAddress: Sendable, Hashable {
    /// `AA:BB:CC:DD:EE:FF`.
    package var address: String
    package var type: BlueZL2CAPAddressType
    package var psm: UInt16

    package static let size = 14
    static let family: UInt16 = 31  // AF_BLUETOOTH

    package init(address: String, type: BlueZL2CAPAddressType, psm: UInt16) {
        self.address = address
        self.type = type
        self.psm = psm
    }

    /// The six address bytes, least significant first (the kernel's `bdaddr_t`); nil unless
    /// `text` is six two-digit hexadecimal numbers separated by colons.
    package static func bytes(of text: String) -> [UInt8]? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 6 else { return nil }
        var bytes: [UInt8] = []
        for part in parts.reversed() {
            guard part.count == 2, part.allSatisfy(\.isHexDigit), let byte = UInt8(part, radix: 16) else {
                return nil
            }
            bytes.append(byte)
        }
        return bytes
    }

    /// The socket address's bytes; nil for an invalid ``address``.
    package func encoded() -> [UInt8]? {
        guard let bdaddr = Self.bytes(of: address) else { return nil }
        var raw = [UInt8](repeating: 0, count: Self.size)
        raw[0] = UInt8(Self.family & 0xFF)
        raw[1] = UInt8(Self.family >> 8)
        raw[2] = UInt8(psm & 0xFF)
        raw[3] = UInt8(psm >> 8)
        raw.replaceSubrange(4..<10, with: bdaddr)
        raw[12] = type.rawValue
        return raw
    }

    /// Reads a socket address the kernel wrote (`getsockname`, `accept`); nil when it is not an
    /// L2CAP one.
    package init?(decoding raw: [UInt8]) {
        guard raw.count >= Self.size, UInt16(raw[0]) | UInt16(raw[1]) << 8 == Self.family,
            let type = BlueZL2CAPAddressType(rawValue: raw[12])
        else { return nil }
        self.psm = UInt16(raw[2]) | UInt16(raw[3]) << 8
        self.address = raw[4..<10].reversed().map { byte in
            let digits = String(byte, radix: 16, uppercase: true)
            return digits.count == 1 ? "0" + digits : digits
        }.joined(separator: ":")
        self.type = type
    }
}
