//! Which IP addresses the web tools may reach: the one place that says so.
//!
//! An address is refused when it is not a public unicast address: loopback, private,
//! link-local, shared (CGNAT), multicast, broadcast, unspecified, documentation,
//! benchmarking, reserved, `0.0.0.0/8`, the IPv6 forms that carry an IPv4 address
//! (mapped, compatible, translated, 6to4, NAT64) when the address they carry is refused,
//! Teredo, unique-local and site-local IPv6, everything outside `2000::/3`, and the cloud
//! metadata addresses that sit outside those ranges in some clouds.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `ip` may not be reached, or `None` when it is a public address.
pub fn refusal(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refusal_v4(v4),
        IpAddr::V6(v6) => refusal_v6(v6),
    }
}

/// Cloud metadata services on addresses that are otherwise public (Azure's wire
/// server). The others (`169.254.169.254`, `100.100.100.200`, `fd00:ec2::254`,
/// `192.0.0.192`) already sit in refused ranges.
const METADATA_V4: [Ipv4Addr; 1] = [Ipv4Addr::new(168, 63, 129, 16)];

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn refusal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    const RANGES: [([u8; 4], u32, &str); 17] = [
        ([0, 0, 0, 0], 8, "\"this network\" (0.0.0.0/8)"),
        ([10, 0, 0, 0], 8, "private (10.0.0.0/8)"),
        (
            [100, 64, 0, 0],
            10,
            "shared address space, CGNAT (100.64.0.0/10)",
        ),
        ([127, 0, 0, 0], 8, "loopback (127.0.0.0/8)"),
        ([169, 254, 0, 0], 16, "link-local (169.254.0.0/16)"),
        ([172, 16, 0, 0], 12, "private (172.16.0.0/12)"),
        (
            [192, 0, 0, 0],
            24,
            "IETF protocol assignments (192.0.0.0/24)",
        ),
        ([192, 0, 2, 0], 24, "documentation (192.0.2.0/24)"),
        ([192, 31, 196, 0], 24, "AS112 (192.31.196.0/24)"),
        ([192, 52, 193, 0], 24, "AMT (192.52.193.0/24)"),
        ([192, 88, 99, 0], 24, "6to4 relay anycast (192.88.99.0/24)"),
        ([192, 168, 0, 0], 16, "private (192.168.0.0/16)"),
        ([198, 18, 0, 0], 15, "benchmarking (198.18.0.0/15)"),
        ([198, 51, 100, 0], 24, "documentation (198.51.100.0/24)"),
        ([203, 0, 113, 0], 24, "documentation (203.0.113.0/24)"),
        ([224, 0, 0, 0], 4, "multicast (224.0.0.0/4)"),
        ([240, 0, 0, 0], 4, "reserved or broadcast (240.0.0.0/4)"),
    ];
    if METADATA_V4.contains(&ip) {
        return Some("a cloud metadata service");
    }
    RANGES
        .iter()
        .find(|(net, prefix, _)| in_v4(ip, *net, *prefix))
        .map(|(_, _, why)| *why)
}

fn in_v6(ip: Ipv6Addr, net: [u16; 8], prefix: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
    u128::from(ip) & mask == u128::from(Ipv6Addr::from(net)) & mask
}

/// The IPv4 address in the low 32 bits.
fn low_v4(ip: Ipv6Addr) -> Ipv4Addr {
    Ipv4Addr::from((u128::from(ip) & 0xffff_ffff) as u32)
}

fn refusal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some("unspecified (::)");
    }
    if ip.is_loopback() {
        return Some("loopback (::1)");
    }
    // Forms that carry an IPv4 address in their low 32 bits: IPv4-mapped
    // (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d, deprecated), IPv4-translated
    // (::ffff:0:a.b.c.d) and NAT64 (64:ff9b::/96, 64:ff9b:1::/48).
    const CARRIERS: [([u16; 8], u32); 5] = [
        ([0, 0, 0, 0, 0, 0xffff, 0, 0], 96),
        ([0, 0, 0, 0, 0, 0, 0, 0], 96),
        ([0, 0, 0, 0, 0xffff, 0, 0, 0], 96),
        ([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96),
        ([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48),
    ];
    let carried = if CARRIERS.iter().any(|(n, p)| in_v6(ip, *n, *p)) {
        Some(low_v4(ip))
    } else if s[0] == 0x2002 {
        // 6to4: 2002:AABB:CCDD::/48 carries AA.BB.CC.DD.
        Some(Ipv4Addr::from((u32::from(s[1]) << 16) | u32::from(s[2])))
    } else {
        None
    };
    if let Some(v4) = carried {
        return refusal_v4(v4).map(|_| "an IPv6 form of a refused IPv4 address");
    }
    const RANGES: [([u16; 8], u32, &str); 9] = [
        ([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, "Teredo (2001::/32)"),
        (
            [0x2001, 0x2, 0, 0, 0, 0, 0, 0],
            48,
            "benchmarking (2001:2::/48)",
        ),
        (
            [0x2001, 0x10, 0, 0, 0, 0, 0, 0],
            28,
            "ORCHID (2001:10::/28)",
        ),
        (
            [0x2001, 0x20, 0, 0, 0, 0, 0, 0],
            28,
            "ORCHIDv2 (2001:20::/28)",
        ),
        (
            [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
            32,
            "documentation (2001:db8::/32)",
        ),
        (
            [0x3fff, 0, 0, 0, 0, 0, 0, 0],
            20,
            "documentation (3fff::/20)",
        ),
        ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique-local (fc00::/7)"),
        ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local (fe80::/10)"),
        ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "site-local (fec0::/10)"),
    ];
    if let Some((_, _, why)) = RANGES.iter().find(|(n, p, _)| in_v6(ip, *n, *p)) {
        return Some(why);
    }
    if ip.is_multicast() {
        return Some("multicast (ff00::/8)");
    }
    // Global unicast is 2000::/3; the rest is reserved (discard-only 100::/64 too).
    if !in_v6(ip, [0x2000, 0, 0, 0, 0, 0, 0, 0], 3) {
        return Some("reserved (outside 2000::/3)");
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn refused(s: &str) -> bool {
        refusal(s.parse().unwrap()).is_some()
    }

    #[test]
    fn special_ipv4_ranges_are_refused() {
        for ip in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "100.64.0.1",
            "100.100.100.200", // Alibaba's metadata
            "127.0.0.1",
            "127.255.255.254",
            "169.254.169.254", // AWS, GCP, Azure IMDS
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.192", // Oracle's metadata
            "192.0.2.1",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "168.63.129.16", // Azure's wire server
        ] {
            assert!(refused(ip), "{ip} should be refused");
        }
    }

    #[test]
    fn special_ipv6_ranges_and_ipv4_in_ipv6_are_refused() {
        for ip in [
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:7f00:1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "::ffff:0:10.0.0.1",
            "64:ff9b::127.0.0.1",
            "64:ff9b:1::a00:1",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2", // Teredo
            "2001:2::1",
            "2001:db8::1",
            "3fff::1",
            "fc00::1",
            "fd00:ec2::254", // AWS IMDS over IPv6
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "100::1",
            "1::1",
        ] {
            assert!(refused(ip), "{ip} should be refused");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.215.14",
            "172.32.0.1",
            "100.128.0.1",
            "198.20.0.1",
            "2606:4700::1111",
            "2a00:1450:4001::200e",
            "::ffff:8.8.8.8",
            "2002:808:808::1",
            "64:ff9b::808:808",
        ] {
            assert_eq!(refusal(ip.parse().unwrap()), None, "{ip} should pass");
        }
    }
}
