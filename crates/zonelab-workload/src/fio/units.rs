//! Unit parsing and formatting shared by the option parser and the report renderer.
//!
//! Input sizes follow fio's rules for `kb_base`:
//! * `kb_base=1024` (fio's default, "compatibility mode"): the plain/SI prefixes
//!   `k`, `m`, `g`, `t`, `p` (optionally followed by `b`) are powers of two, and the IEC
//!   prefixes `kib`, `mib`, ... are powers of ten. This is fio's documented (and surprising)
//!   behaviour, kept so that existing fio job files describe the same workload here.
//! * `kb_base=1000`: SI prefixes are powers of ten and IEC prefixes powers of two.
//!
//! Suffixes are case-insensitive. A bare number is bytes; `b` also means bytes.

/// Parse an unsigned integer that may be written in hex (`0x...`).
pub fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if hex.is_empty() {
            return None;
        }
        return u64::from_str_radix(hex, 16).ok();
    }
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Split `s` into a leading decimal number (digits with at most one '.') and the rest.
fn split_number(s: &str) -> Option<(f64, u64, bool, &str)> {
    let end = s
        .bytes()
        .position(|b| !(b.is_ascii_digit() || b == b'.'))
        .unwrap_or(s.len());
    let (num, rest) = s.split_at(end);
    if num.is_empty() || num == "." || num.matches('.').count() > 1 {
        return None;
    }
    let is_int = !num.contains('.');
    let int = if is_int { num.parse::<u64>().ok()? } else { 0 };
    let f: f64 = num.parse().ok()?;
    Some((f, int, is_int, rest))
}

/// Multiplier for a size suffix under the given `kb_base`, or `None` if unknown.
pub fn size_multiplier(suffix: &str, kb_base: u32) -> Option<u64> {
    let lower = suffix.trim().to_ascii_lowercase();
    let (pow2, pow10) = (1024u64, 1000u64);
    // (prefix, is_iec)
    let (prefix, iec) = match lower.as_str() {
        "" | "b" => return Some(1),
        s if s.ends_with("ib") && s.len() == 3 => (&s[..1], true),
        s if s.ends_with('b') && s.len() == 2 => (&s[..1], false),
        s if s.len() == 1 => (s, false),
        _ => return None,
    };
    let exp = match prefix {
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        "p" => 5,
        "e" => 6,
        _ => return None,
    };
    // compat mode (1024): SI prefix => 1024, IEC prefix => 1000 (fio's quirk).
    // kb_base=1000: SI prefix => 1000, IEC prefix => 1024.
    let base = match (kb_base == 1000, iec) {
        (false, false) => pow2,
        (false, true) => pow10,
        (true, false) => pow10,
        (true, true) => pow2,
    };
    base.checked_pow(exp)
}

/// Parse a size in bytes (`4k`, `128KiB`, `1.5m`, `0x1000`, `512`). Fractions are
/// truncated to whole bytes.
pub fn parse_size(s: &str, kb_base: u32) -> Option<u64> {
    let s = s.trim();
    if s.starts_with("0x") || s.starts_with("0X") {
        return parse_u64(s);
    }
    let (f, int, is_int, rest) = split_number(s)?;
    let mult = size_multiplier(rest, kb_base)?;
    if is_int {
        return int.checked_mul(mult);
    }
    let v = f * mult as f64;
    if !v.is_finite() || v >= u64::MAX as f64 {
        return None;
    }
    Some(v as u64)
}

/// Parse a time into nanoseconds. `default_unit_ns` applies to a bare number
/// (1e9 for options whose bare unit is seconds). Accepted suffixes: `us`/`usec`,
/// `ms`/`msec`, `s`/`sec`, `m`/`min`, `h`/`hr`, `d`/`day`.
pub fn parse_time_ns(s: &str, default_unit_ns: u64) -> Option<u64> {
    let s = s.trim();
    let (f, int, is_int, rest) = split_number(s)?;
    let mult: u64 = match rest.trim().to_ascii_lowercase().as_str() {
        "" => default_unit_ns,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" | "hr" => 3_600_000_000_000,
        "d" | "day" => 86_400_000_000_000,
        _ => return None,
    };
    if is_int {
        return int.checked_mul(mult);
    }
    let v = f * mult as f64;
    if !v.is_finite() || v >= u64::MAX as f64 {
        return None;
    }
    Some(v as u64)
}

/// Parse a boolean option value: `1/0`, `true/false`, `yes/no`, `on/off`.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Unit family for [`num2str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumUnit {
    /// Plain count (IOPS): prefixes `k`, `M`, `G`... with base 1000, no unit.
    Count,
    /// Bytes in base 1024: `KiB`, `MiB`, ...
    BytesBin,
    /// Bytes in base 1000: `kB`, `MB`, ...
    BytesDec,
}

/// Render a number fio-style with at most `max_digits` digits before the
/// prefix: the value is divided by 1000 (or 1024) until its integer part fits, and the
/// remaining digit budget (minus one for the point) is spent on decimals.
/// `num2str(85_012, 4, Count)` is `85.0k`; `num2str(3_481_000_000, 4, BytesDec)` is `3481MB`.
pub fn num2str(num: u64, max_digits: usize, unit: NumUnit) -> String {
    const DEC: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    const DEC_COUNT: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    const BIN: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let (thousand, prefixes, suffix) = match unit {
        NumUnit::Count => (1000u64, DEC_COUNT, ""),
        NumUnit::BytesBin => (1024u64, BIN, "B"),
        NumUnit::BytesDec => (1000u64, DEC, "B"),
    };
    let max_digits = max_digits.max(1);
    let mut n = num;
    let mut rem = 0u64;
    let mut idx = 0usize;
    while digits(n) > max_digits && idx + 1 < prefixes.len() {
        rem = n % thousand;
        n /= thousand;
        idx += 1;
    }
    if idx == 0 {
        return format!("{n}{suffix}");
    }
    let decimals = max_digits.saturating_sub(digits(n) + 1);
    let value = n as f64 + rem as f64 / thousand as f64;
    let mut text = format!("{value:.decimals$}");
    // Rounding may add a digit (e.g. 999.96 -> "1000.0"); drop decimals then.
    if text.len() > max_digits + 1 && decimals > 0 {
        text = format!("{value:.0}");
    }
    format!("{text}{}{suffix}", prefixes[idx])
}

/// Levenshtein distance, for "did you mean" suggestions.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_compat_mode() {
        assert_eq!(parse_size("4k", 1024), Some(4096));
        assert_eq!(parse_size("4K", 1024), Some(4096));
        assert_eq!(parse_size("4kb", 1024), Some(4096));
        assert_eq!(parse_size("4KiB", 1024), Some(4000));
        assert_eq!(parse_size("1m", 1024), Some(1 << 20));
        assert_eq!(parse_size("1g", 1024), Some(1 << 30));
        assert_eq!(parse_size("1.5m", 1024), Some(3 << 19));
        assert_eq!(parse_size("512", 1024), Some(512));
        assert_eq!(parse_size("512b", 1024), Some(512));
        assert_eq!(parse_size("0x1000", 1024), Some(4096));
        assert_eq!(parse_size("4x", 1024), None);
        assert_eq!(parse_size("", 1024), None);
        assert_eq!(parse_size("k", 1024), None);
        assert_eq!(parse_size("-4k", 1024), None);
        assert_eq!(parse_size("1.2.3k", 1024), None);
        assert_eq!(parse_size("99999999999e", 1024), None);
    }

    #[test]
    fn sizes_kb_base_1000() {
        assert_eq!(parse_size("4k", 1000), Some(4000));
        assert_eq!(parse_size("4KiB", 1000), Some(4096));
        assert_eq!(parse_size("1MiB", 1000), Some(1 << 20));
    }

    #[test]
    fn times() {
        let s = 1_000_000_000;
        assert_eq!(parse_time_ns("10", s), Some(10 * s));
        assert_eq!(parse_time_ns("10s", s), Some(10 * s));
        assert_eq!(parse_time_ns("500ms", s), Some(500_000_000));
        assert_eq!(parse_time_ns("2m", s), Some(120 * s));
        assert_eq!(parse_time_ns("1h", s), Some(3600 * s));
        assert_eq!(parse_time_ns("1.5s", s), Some(1_500_000_000));
        assert_eq!(parse_time_ns("250us", s), Some(250_000));
        assert_eq!(parse_time_ns("10x", s), None);
        assert_eq!(parse_time_ns("s", s), None);
    }

    #[test]
    fn num2str_like_fio() {
        assert_eq!(num2str(85_012, 4, NumUnit::Count), "85.0k");
        assert_eq!(num2str(255, 4, NumUnit::Count), "255");
        assert_eq!(num2str(4801, 4, NumUnit::Count), "4801");
        assert_eq!(num2str(22 << 20, 4, NumUnit::BytesBin), "22.0MiB");
        assert_eq!(num2str(4096 << 20, 4, NumUnit::BytesBin), "4096MiB");
        assert_eq!(num2str(3_481_000_000, 4, NumUnit::BytesDec), "3481MB");
        assert_eq!(num2str(0, 4, NumUnit::BytesBin), "0B");
        assert_eq!(num2str(u64::MAX, 4, NumUnit::BytesBin), "16.0EiB");
    }

    #[test]
    fn distance() {
        assert_eq!(edit_distance("blocksizee", "blocksize"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
