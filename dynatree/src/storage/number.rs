//! Exact arithmetic on DynamoDB numbers, for conditions (`<`, `BETWEEN`) and `ADD`: on the
//! canonical plain decimal form ([`Value::normalized`]), never through `f64`.

use std::cmp::Ordering;

use crate::item::Value;

/// A number as sign, integer digits and fraction digits (no leading zeros in the integer
/// part, no trailing zeros in the fraction; zero is `("", "")` and never negative).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Plain {
    negative: bool,
    int: Vec<u8>,
    frac: Vec<u8>,
}

impl Plain {
    /// Parses a number through its canonical form; `None` if it is not a valid number.
    fn parse(n: &str) -> Option<Self> {
        let Value::N(canon) = Value::N(n.to_owned()).normalized() else {
            return None;
        };
        let (negative, body) = match canon.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, canon.as_str()),
        };
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        if int.is_empty() && frac.is_empty()
            || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let int: Vec<u8> = int
            .trim_start_matches('0')
            .bytes()
            .map(|b| b - b'0')
            .collect();
        let frac: Vec<u8> = frac
            .trim_end_matches('0')
            .bytes()
            .map(|b| b - b'0')
            .collect();
        let zero = int.is_empty() && frac.is_empty();
        Some(Self {
            negative: negative && !zero,
            int,
            frac,
        })
    }

    fn cmp_magnitude(&self, other: &Self) -> Ordering {
        self.int
            .len()
            .cmp(&other.int.len())
            .then_with(|| self.int.cmp(&other.int))
            .then_with(|| {
                let len = self.frac.len().max(other.frac.len());
                let pad = |f: &[u8]| {
                    let mut v = f.to_vec();
                    v.resize(len, 0);
                    v
                };
                pad(&self.frac).cmp(&pad(&other.frac))
            })
    }

    fn cmp(&self, other: &Self) -> Ordering {
        match (self.negative, other.negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.cmp_magnitude(other),
            (true, true) => other.cmp_magnitude(self),
        }
    }

    /// The digits as one integer scaled by `10^scale` (most significant first).
    fn scaled(&self, scale: usize) -> Vec<u8> {
        let mut v = self.int.clone();
        v.extend_from_slice(&self.frac);
        v.resize(self.int.len() + scale, 0);
        v
    }

    fn add(&self, other: &Self) -> Self {
        let scale = self.frac.len().max(other.frac.len());
        let width = self.int.len().max(other.int.len()) + scale + 1;
        let digits = |p: &Self| {
            let s = p.scaled(scale);
            let mut v = vec![0u8; width - s.len()];
            v.extend(s);
            v
        };
        let (a, b) = (digits(self), digits(other));
        let (negative, sum) = if self.negative == other.negative {
            let mut out = vec![0u8; width];
            let mut carry = 0;
            for i in (0..width).rev() {
                let d = a[i] + b[i] + carry;
                out[i] = d % 10;
                carry = d / 10;
            }
            (self.negative, out)
        } else {
            // The larger magnitude minus the smaller, with the larger's sign.
            let (big, small, negative) = if a >= b {
                (&a, &b, self.negative)
            } else {
                (&b, &a, other.negative)
            };
            let mut out = vec![0u8; width];
            let mut borrow = 0i8;
            for i in (0..width).rev() {
                let mut d = big[i] as i8 - small[i] as i8 - borrow;
                borrow = i8::from(d < 0);
                if d < 0 {
                    d += 10;
                }
                out[i] = d as u8;
            }
            (negative, out)
        };
        let (int, frac) = sum.split_at(width - scale);
        let int: Vec<u8> = int.iter().copied().skip_while(|d| *d == 0).collect();
        let mut frac = frac.to_vec();
        while frac.last() == Some(&0) {
            frac.pop();
        }
        let zero = int.is_empty() && frac.is_empty();
        Self {
            negative: negative && !zero,
            int,
            frac,
        }
    }
}

impl std::fmt::Display for Plain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.negative {
            f.write_str("-")?;
        }
        if self.int.is_empty() {
            f.write_str("0")?;
        }
        for d in &self.int {
            write!(f, "{d}")?;
        }
        if !self.frac.is_empty() {
            f.write_str(".")?;
            for d in &self.frac {
                write!(f, "{d}")?;
            }
        }
        Ok(())
    }
}

/// Compares two DynamoDB numbers by value; `None` if either is not a valid number.
pub(crate) fn compare(a: &str, b: &str) -> Option<Ordering> {
    Some(Plain::parse(a)?.cmp(&Plain::parse(b)?))
}

/// The exact sum of two DynamoDB numbers in canonical form; `None` if either is not a valid
/// number. The sum itself may be out of DynamoDB's range: check it.
pub(crate) fn add(a: &str, b: &str) -> Option<String> {
    Some(Plain::parse(a)?.add(&Plain::parse(b)?).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_by_value() {
        assert_eq!(compare("1", "1.0"), Some(Ordering::Equal));
        assert_eq!(compare("-0", "0"), Some(Ordering::Equal));
        assert_eq!(compare("9", "10"), Some(Ordering::Less));
        assert_eq!(compare("-9", "-10"), Some(Ordering::Greater));
        assert_eq!(compare("0.5", "0.45"), Some(Ordering::Greater));
        assert_eq!(compare("-0.5", "0.1"), Some(Ordering::Less));
        assert_eq!(compare("1e3", "999.999"), Some(Ordering::Greater));
        // Beyond f64's precision.
        assert_eq!(
            compare(
                "12345678901234567890123456789012345678",
                "12345678901234567890123456789012345679"
            ),
            Some(Ordering::Less)
        );
        assert_eq!(compare("x", "1"), None);
    }

    #[test]
    fn adds_exactly() {
        assert_eq!(add("1", "2").as_deref(), Some("3"));
        assert_eq!(add("0.1", "0.2").as_deref(), Some("0.3"));
        assert_eq!(add("-5", "3").as_deref(), Some("-2"));
        assert_eq!(add("5", "-5").as_deref(), Some("0"));
        assert_eq!(add("-1.5", "-1.5").as_deref(), Some("-3"));
        assert_eq!(add("999", "1").as_deref(), Some("1000"));
        assert_eq!(
            add("1e-130", "0").as_deref(),
            Some(&*format!("0.{}1", "0".repeat(129)))
        );
        assert_eq!(
            add("99999999999999999999999999999999999999", "1").as_deref(),
            Some("100000000000000000000000000000000000000")
        );
        assert_eq!(add("10.25", "-0.75").as_deref(), Some("9.5"));
    }
}
