//! resource.Quantity as the API machinery treats it: parsing of `500m`,
//! `128Mi`, `1.5`, `1e3`, ceiling conversion to integer and milli values, and
//! the canonical text form the API server and the kubelet print (`24684092Ki`,
//! `100m`, `1k`).
//!
//! A quantity is held exactly as `mantissa × 10^scale`, together with the
//! format its text used (binary suffixes, decimal suffixes or an exponent),
//! which decides how it prints.

use std::fmt;
use std::str::FromStr;

/// The three ways a quantity can be written; printing keeps the one parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei`.
    BinarySI,
    /// `n`, `u`, `m`, none, `k`, `M`, `G`, `T`, `P`, `E`.
    DecimalSI,
    /// `e3`, `E-2`.
    DecimalExponent,
}

/// A parsed quantity.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    mantissa: i128,
    scale: i32,
    format: Format,
}

/// A string that is not a quantity, with the text that was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {0:?}"
    )]
    Format(String),
    #[error("quantity {0:?} is too large")]
    Overflow(String),
}

/// Finest scale kept; finer fractions round up to it (as Go does).
const MIN_SCALE: i32 = -9;

fn pow10(exp: u32) -> Option<i128> {
    10i128.checked_pow(exp)
}

impl Quantity {
    /// An integer number of bytes (or other binary unit), printed with binary suffixes.
    pub fn from_binary(value: i64) -> Self {
        Quantity {
            mantissa: value as i128,
            scale: 0,
            format: Format::BinarySI,
        }
    }

    /// An integer value printed with decimal suffixes.
    pub fn from_decimal(value: i64) -> Self {
        Quantity {
            mantissa: value as i128,
            scale: 0,
            format: Format::DecimalSI,
        }
    }

    /// A value given in thousandths (CPU millicores), printed with decimal suffixes.
    pub fn from_milli(milli: i64) -> Self {
        Quantity {
            mantissa: milli as i128,
            scale: -3,
            format: Format::DecimalSI,
        }
    }

    /// The format this quantity prints in.
    pub fn format(&self) -> Format {
        self.format
    }

    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// `ceil(self / 10^scale)`, saturating at the i64 range (Go's ScaledValue).
    pub fn scaled_value(&self, scale: i32) -> i64 {
        let shift = self.scale - scale;
        let v = if shift >= 0 {
            pow10(shift as u32)
                .and_then(|p| self.mantissa.checked_mul(p))
                .unwrap_or(if self.mantissa < 0 {
                    i128::MIN
                } else {
                    i128::MAX
                })
        } else {
            match pow10((-shift) as u32) {
                Some(p) => {
                    let q = self.mantissa / p;
                    if self.mantissa % p != 0 && self.mantissa > 0 {
                        q + 1
                    } else {
                        q
                    }
                }
                None => {
                    if self.mantissa > 0 {
                        1
                    } else {
                        0
                    }
                }
            }
        };
        v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// The integer value, rounded up (Go's `Value()`).
    pub fn value(&self) -> i64 {
        self.scaled_value(0)
    }

    /// The value as an integer when it is one exactly and fits in an i64
    /// (Go's `AsInt64`): `None` for fractions and overflows.
    pub fn as_int64(&self) -> Option<i64> {
        let v = if self.scale >= 0 {
            pow10(self.scale as u32).and_then(|p| self.mantissa.checked_mul(p))?
        } else {
            let p = pow10((-self.scale) as u32)?;
            if self.mantissa % p != 0 {
                return None;
            }
            self.mantissa / p
        };
        i64::try_from(v).ok()
    }

    /// The value in thousandths, rounded up (Go's `MilliValue()`).
    pub fn milli_value(&self) -> i64 {
        self.scaled_value(-3)
    }

    /// Exact comparison of two quantities.
    pub fn cmp_value(&self, other: &Quantity) -> std::cmp::Ordering {
        let scale = self.scale.min(other.scale);
        let a = widen(self.mantissa, self.scale - scale);
        let b = widen(other.mantissa, other.scale - scale);
        a.cmp(&b)
    }

    /// Sum of two quantities, keeping this one's format.
    pub fn add(&self, other: &Quantity) -> Quantity {
        let scale = self.scale.min(other.scale);
        let a = widen(self.mantissa, self.scale - scale);
        let b = widen(other.mantissa, other.scale - scale);
        Quantity {
            mantissa: a.saturating_add(b),
            scale,
            format: self.format,
        }
    }

    /// Difference of two quantities, keeping this one's format.
    pub fn sub(&self, other: &Quantity) -> Quantity {
        let neg = Quantity {
            mantissa: -other.mantissa,
            ..*other
        };
        self.add(&neg)
    }

    /// The canonical text form, as the API server would print it.
    pub fn to_canonical_string(&self) -> String {
        if self.mantissa == 0 {
            return "0".to_string();
        }
        let mut format = self.format;
        if format == Format::BinarySI {
            let integral = self.scale >= 0 || {
                let p = pow10((-self.scale) as u32);
                p.is_some_and(|p| self.mantissa % p == 0)
            };
            let small = self.cmp_value(&Quantity::from_decimal(-1024)).is_gt()
                && self.cmp_value(&Quantity::from_decimal(1024)).is_lt();
            if small || !integral {
                format = Format::DecimalSI;
            }
        }
        match format {
            Format::BinarySI => {
                let mut value = self.scaled_value(0) as i128;
                let mut exp = 0;
                while exp < 6 && value != 0 && value % 1024 == 0 {
                    value /= 1024;
                    exp += 1;
                }
                let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][exp];
                format!("{value}{suffix}")
            }
            Format::DecimalSI | Format::DecimalExponent => {
                let (mut amount, mut exponent) = (self.mantissa, self.scale);
                while amount != 0 && amount % 10 == 0 {
                    amount /= 10;
                    exponent += 1;
                }
                match exponent.rem_euclid(3) {
                    1 => {
                        amount *= 10;
                        exponent -= 1;
                    }
                    2 => {
                        amount *= 100;
                        exponent -= 2;
                    }
                    _ => {}
                }
                let suffix = if format == Format::DecimalExponent {
                    if exponent == 0 {
                        String::new()
                    } else {
                        format!("e{exponent}")
                    }
                } else {
                    match exponent {
                        -9 => "n".into(),
                        -6 => "u".into(),
                        -3 => "m".into(),
                        0 => String::new(),
                        3 => "k".into(),
                        6 => "M".into(),
                        9 => "G".into(),
                        12 => "T".into(),
                        15 => "P".into(),
                        18 => "E".into(),
                        e => format!("e{e}"),
                    }
                };
                format!("{amount}{suffix}")
            }
        }
    }
}

fn widen(mantissa: i128, shift: i32) -> i128 {
    pow10(shift.max(0) as u32)
        .and_then(|p| mantissa.checked_mul(p))
        .unwrap_or(if mantissa < 0 { i128::MIN } else { i128::MAX })
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp_value(other).is_eq()
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_canonical_string())
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

/// Parses a quantity the way `resource.ParseQuantity` does.
pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
    let bad = || QuantityError::Format(text.to_string());
    let overflow = || QuantityError::Overflow(text.to_string());
    let s = text.trim();
    if s.is_empty() {
        return Err(bad());
    }
    let (negative, rest) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let num_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(num_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(bad());
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    let mut mantissa: i128 = 0;
    for c in int_part.bytes().chain(frac_part.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add((c - b'0') as i128))
            .ok_or_else(overflow)?;
    }
    let mut scale = -(frac_part.len() as i32);
    let format = match suffix {
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let power = match suffix {
                "Ki" => 10,
                "Mi" => 20,
                "Gi" => 30,
                "Ti" => 40,
                "Pi" => 50,
                _ => 60,
            };
            mantissa = mantissa.checked_mul(1i128 << power).ok_or_else(overflow)?;
            Format::BinarySI
        }
        "n" | "u" | "m" | "" | "k" | "M" | "G" | "T" | "P" | "E" => {
            scale += match suffix {
                "n" => -9,
                "u" => -6,
                "m" => -3,
                "" => 0,
                "k" => 3,
                "M" => 6,
                "G" => 9,
                "T" => 12,
                "P" => 15,
                _ => 18,
            };
            Format::DecimalSI
        }
        _ if suffix.starts_with(['e', 'E']) => {
            let exp: i32 = suffix[1..].parse().map_err(|_| bad())?;
            if !(-1000..=1000).contains(&exp) {
                return Err(overflow());
            }
            scale += exp;
            Format::DecimalExponent
        }
        _ => return Err(bad()),
    };
    if scale < MIN_SCALE {
        let p = pow10((MIN_SCALE - scale) as u32).ok_or_else(overflow)?;
        let q = mantissa / p;
        mantissa = if mantissa % p != 0 { q + 1 } else { q };
        scale = MIN_SCALE;
    }
    if negative {
        mantissa = -mantissa;
    }
    Ok(Quantity {
        mantissa,
        scale,
        format,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_int64_is_exact_or_none() {
        let cases: &[(&str, Option<i64>)] = &[
            ("10Mi", Some(10 * 1024 * 1024)),
            ("1.5Mi", Some(1024 * 1024 * 3 / 2)),
            ("1k", Some(1000)),
            ("1e3", Some(1000)),
            ("-2", Some(-2)),
            ("0", Some(0)),
            ("500m", None),
            ("1.5", None),
            ("8Ei", None),
        ];
        for (text, want) in cases {
            let q = parse(text).expect(text);
            assert_eq!(q.as_int64(), *want, "{text}");
        }
    }

    #[test]
    fn canonical_forms() {
        let cases = [
            ("0", "0"),
            ("500m", "500m"),
            ("0.5", "500m"),
            ("1", "1"),
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("1.5", "1500m"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("100Mi", "100Mi"),
            ("128Mi", "128Mi"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("1536", "1536"),
            ("1023Ki", "1023Ki"),
            ("512", "512"),
            ("1e3", "1e3"),
            ("1E6", "1e6"),
            ("10G", "10G"),
            ("0.1m", "100u"),
            ("1n", "1n"),
            ("0.0000000001", "1n"),
            ("-100m", "-100m"),
            ("+2", "2"),
            ("12e-1", "1200e-3"),
        ];
        for (input, want) in cases {
            let q: Quantity = input.parse().unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(q.to_string(), want, "canonical form of {input}");
        }
    }

    #[test]
    fn node_status_style_values() {
        // Node capacity is built from byte counts with binary formatting.
        assert_eq!(
            Quantity::from_binary(24684092 * 1024).to_string(),
            "24684092Ki"
        );
        assert_eq!(
            Quantity::from_binary(243497856212).to_string(),
            "243497856212"
        );
        assert_eq!(Quantity::from_binary(0).to_string(), "0");
        assert_eq!(Quantity::from_decimal(110).to_string(), "110");
        assert_eq!(Quantity::from_milli(2000).to_string(), "2");
        assert_eq!(Quantity::from_milli(100).to_string(), "100m");
    }

    #[test]
    fn values_round_up() {
        let cases = [
            ("500m", 1, 500),
            ("1", 1, 1000),
            ("1.0001", 2, 1001),
            ("0.0001", 1, 1),
            ("128Mi", 134217728, 134217728000),
            ("100Mi", 104857600, 104857600000),
            ("-1.5", -1, -1500),
        ];
        for (input, value, milli) in cases {
            let q = parse(input).expect(input);
            assert_eq!(q.value(), value, "value of {input}");
            assert_eq!(q.milli_value(), milli, "milli value of {input}");
        }
    }

    #[test]
    fn rejects_malformed() {
        for input in [
            "", "abc", "1.2.3", "1Qi", "Mi", ".", "1e", "--1", "1 Mi", "1mi",
        ] {
            assert!(parse(input).is_err(), "{input:?} should not parse");
        }
    }

    #[test]
    fn arithmetic_and_comparison() {
        let a = parse("1Gi").unwrap();
        let b = parse("512Mi").unwrap();
        assert_eq!(a.sub(&b).to_string(), "512Mi");
        assert_eq!(b.add(&b), a);
        assert!(
            parse("100m")
                .unwrap()
                .cmp_value(&parse("0.1").unwrap())
                .is_eq()
        );
        assert!(
            parse("1")
                .unwrap()
                .cmp_value(&parse("999m").unwrap())
                .is_gt()
        );
    }
}
