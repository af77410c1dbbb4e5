//! Physical quantities as they appear in profiles: sizes ("16KiB"), durations ("35us") and
//! rates ("600MB/s"). Each accepts a bare integer too (bytes, nanoseconds, bytes per second).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use zonelab_sim::Nanos;

fn split_number(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let num: f64 = s[..end].replace('_', "").parse().ok()?;
    if !num.is_finite() || num < 0.0 {
        return None;
    }
    Some((num, s[end..].trim()))
}

/// Parses a byte size: `4096`, `4k`/`4K`/`4KiB` (1024-based), `4KB` (1000-based), up to `T`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("'{s}' is not a size (examples: 4096, 16KiB, 2048MiB, 1TB)");
    let (num, unit) = split_number(s).ok_or_else(bad)?;
    let mult: f64 = match unit {
        "" | "B" | "b" => 1.0,
        "k" | "K" | "KiB" | "kiB" | "Ki" => 1024.0,
        "m" | "M" | "MiB" | "Mi" => 1024.0 * 1024.0,
        "g" | "G" | "GiB" | "Gi" => 1024.0 * 1024.0 * 1024.0,
        "t" | "T" | "TiB" | "Ti" => 1024f64.powi(4),
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        _ => return Err(bad()),
    };
    let v = num * mult;
    if v >= u64::MAX as f64 {
        return Err(format!("'{s}' is too large (at most 16 EiB)"));
    }
    if v.fract() != 0.0 {
        return Err(format!("'{s}' is not a whole number of bytes"));
    }
    Ok(v as u64)
}

/// Parses a duration: `350` (ns), `350ns`, `35us`, `3.5ms`, `2s`.
pub fn parse_duration(s: &str) -> Result<Nanos, String> {
    let bad = || format!("'{s}' is not a duration (examples: 800ns, 35us, 3.5ms, 1s)");
    let (num, unit) = split_number(s).ok_or_else(bad)?;
    let mult = match unit {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(bad()),
    };
    Ok(Nanos::from_f64_ns(num * mult))
}

/// Parses a rate in bytes per second: `600MB/s`, `1.2GB/s`, `985MiB/s`, or plain bytes/s.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let body = t.strip_suffix("/s").unwrap_or(t);
    parse_size(body).map_err(|_| format!("'{s}' is not a rate (examples: 600MB/s, 1.2GB/s)"))
}

macro_rules! quantity {
    ($name:ident, $inner:ty, $parse:ident, $expecting:literal, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub $inner);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                // Binary formats (device images) hold the plain number and cannot describe
                // their own types, so the int-or-string form is for text formats only.
                if !d.is_human_readable() {
                    return <$inner>::deserialize(d).map($name);
                }
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<$name, E> {
                        Ok($name(v.into()))
                    }
                    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<$name, E> {
                        u64::try_from(v)
                            .map(|v| $name(v.into()))
                            .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
                    }
                    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<$name, E> {
                        $parse(s).map($name).map_err(E::custom)
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

quantity!(
    Size,
    u64,
    parse_size,
    "a size like \"16KiB\" or a whole number of bytes",
    "A byte count read from a profile."
);
quantity!(
    Duration,
    Nanos,
    parse_duration,
    "a duration like \"35us\" or a whole number of nanoseconds",
    "A span of time read from a profile."
);
quantity!(
    Rate,
    u64,
    parse_rate,
    "a rate like \"600MB/s\" or a whole number of bytes per second",
    "A bandwidth in bytes per second read from a profile."
);

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}
impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}
impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !s.is_human_readable() {
            return self.0.serialize(s);
        }
        s.serialize_str(&format!("{}ns", self.0.0))
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_bytes(self.0))
    }
}

/// Renders a byte count with a binary unit when it divides evenly ("16KiB"), else in bytes.
pub fn format_bytes(b: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (u, m) in UNITS {
        if b >= m && b.is_multiple_of(m) {
            return format!("{}{}", b / m, u);
        }
    }
    format!("{b}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("16KiB").unwrap(), 16384);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("1077MiB").unwrap(), 1077 << 20);
        assert_eq!(parse_size("96MB").unwrap(), 96_000_000);
        assert!(parse_size("4x").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("1.5").is_err());
        assert!(parse_size("20000000TiB").unwrap_err().contains("too large"));
        assert!(parse_size("1.5").unwrap_err().contains("whole number"));
    }

    #[test]
    fn durations_and_rates() {
        assert_eq!(parse_duration("35us").unwrap(), Nanos(35_000));
        assert_eq!(parse_duration("3.5ms").unwrap(), Nanos(3_500_000));
        assert_eq!(parse_duration("800").unwrap(), Nanos(800));
        assert!(parse_duration("3 weeks").is_err());
        assert_eq!(parse_rate("600MB/s").unwrap(), 600_000_000);
        assert_eq!(parse_rate("1.2GB/s").unwrap(), 1_200_000_000);
    }

    #[test]
    fn quantities_deserialize_from_int_or_string() {
        #[derive(Deserialize)]
        struct T {
            a: Size,
            b: Duration,
            c: Rate,
        }
        let t: T = toml::from_str("a = \"16KiB\"\nb = \"35us\"\nc = 1000").unwrap();
        assert_eq!((t.a.0, t.b.0, t.c.0), (16384, Nanos(35_000), 1000));
    }
}
