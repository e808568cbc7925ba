//! Which network addresses are private: what a registry's webhook delivery and an agent's evidence fetch
//! refuse to reach unless told otherwise (the SSRF fence both share).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Addresses a webhook or an agent's evidence fetch may never reach unless the operator allows private
/// targets: loopback, private, link-local, shared, reserved, multicast and
/// unspecified ranges, in IPv4 and IPv6 (IPv4-mapped included).
pub fn is_private_address(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_private_v4(v4),
            None => is_private_v6(v6),
        },
    }
}

fn is_private_v4(v4: Ipv4Addr) -> bool {
    let [a, b, c, _] = v4.octets();
    v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || v4.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240
}

fn is_private_v6(v6: Ipv6Addr) -> bool {
    let first = v6.segments()[0];
    v6.is_loopback()
        || v6.is_unspecified()
        || v6.is_multicast()
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || (first == 0x2001 && v6.segments()[1] == 0x0db8)
}
