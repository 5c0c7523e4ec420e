//! Address ranges written as `ADDR` or `ADDR/PREFIX` (`127.0.0.0/8`,
//! `::1`, `10.1.2.3`), as `gateway.trusted_proxies` lists them.

use std::net::IpAddr;
use std::str::FromStr;

/// An IPv4 or IPv6 network: an address and how many leading bits count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpRange {
    addr: IpAddr,
    prefix: u8,
}

/// Why a range did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{text}\" is not an address or a range like 127.0.0.0/8 or fd00::/8: {why}")]
pub struct BadRange {
    /// What was written.
    pub text: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl IpRange {
    /// The loopback ranges, `127.0.0.0/8` and `::1`.
    pub const LOOPBACK: [&'static str; 2] = ["127.0.0.0/8", "::1"];

    /// Whether `ip` is in the range. An IPv4 address mapped into IPv6
    /// (`::ffff:127.0.0.1`) counts as the IPv4 address it carries.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => prefix_eq(
                u128::from(u32::from(net)),
                u128::from(u32::from(ip)),
                32,
                self.prefix,
            ),
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_eq(u128::from(net), u128::from(ip), 128, self.prefix)
            }
            _ => false,
        }
    }
}

/// Whether the first `prefix` of `bits` bits of `a` and `b` agree.
fn prefix_eq(a: u128, b: u128, bits: u8, prefix: u8) -> bool {
    let ignored = u32::from(bits - prefix);
    a.checked_shr(ignored).unwrap_or(0) == b.checked_shr(ignored).unwrap_or(0)
}

impl FromStr for IpRange {
    type Err = BadRange;

    fn from_str(text: &str) -> Result<Self, BadRange> {
        let bad = |why| BadRange {
            text: text.to_string(),
            why,
        };
        let (addr, prefix) = match text.trim().split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text.trim(), None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| bad("not an IP address"))?;
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => bits,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= bits)
                .ok_or_else(|| bad("the prefix length is out of range"))?,
        };
        Ok(IpRange { addr, prefix })
    }
}

impl std::fmt::Display for IpRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(text: &str) -> IpRange {
        text.parse().unwrap()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn ranges_contain_their_addresses_only() {
        let lo = range("127.0.0.0/8");
        assert!(lo.contains(ip("127.0.0.1")) && lo.contains(ip("127.255.3.4")));
        assert!(lo.contains(ip("::ffff:127.0.0.9")));
        assert!(!lo.contains(ip("128.0.0.1")) && !lo.contains(ip("::1")));
        let one = range("10.1.2.3");
        assert!(one.contains(ip("10.1.2.3")) && !one.contains(ip("10.1.2.4")));
        let v6 = range("fd00::/8");
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        assert!(range("::1").contains(ip("::1")));
        assert!(range("0.0.0.0/0").contains(ip("8.8.8.8")));
        assert!(range("::/0").contains(ip("2001:db8::1")));
    }

    #[test]
    fn bad_ranges_say_why() {
        for bad in ["localhost", "10.0.0.0/33", "::/129", "1.2.3.4/x", ""] {
            let err = bad.parse::<IpRange>().unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
    }
}
