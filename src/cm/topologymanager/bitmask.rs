//! A set of NUMA node ids (0–63) as one 64-bit word, ordered as the Go
//! kubelet orders NUMA affinities: fewer nodes first, then the lower word.

use std::fmt;

/// NUMA node ids, at most 64 of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct BitMask(u64);

/// A bit outside 0–63.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("bit number must be in range 0-63, got {0}")]
pub struct BitOutOfRange(pub i64);

impl BitMask {
    pub const EMPTY: BitMask = BitMask(0);

    /// The mask of `bits`.
    pub fn new(bits: impl IntoIterator<Item = i64>) -> Result<Self, BitOutOfRange> {
        let mut mask = BitMask::EMPTY;
        for bit in bits {
            mask.add(bit)?;
        }
        Ok(mask)
    }

    /// The mask of `bits`, which callers know are machine NUMA ids.
    pub fn of(bits: &[u32]) -> Self {
        BitMask(
            bits.iter()
                .filter(|b| **b < 64)
                .fold(0, |m, b| m | (1u64 << b)),
        )
    }

    pub fn add(&mut self, bit: i64) -> Result<(), BitOutOfRange> {
        if !(0..64).contains(&bit) {
            return Err(BitOutOfRange(bit));
        }
        self.0 |= 1 << bit;
        Ok(())
    }

    pub fn and(self, other: BitMask) -> BitMask {
        BitMask(self.0 & other.0)
    }

    pub fn or(self, other: BitMask) -> BitMask {
        BitMask(self.0 | other.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn is_set(self, bit: u32) -> bool {
        bit < 64 && self.0 & (1 << bit) != 0
    }

    pub fn count(self) -> u32 {
        self.0.count_ones()
    }

    /// The set bits, lowest first.
    pub fn bits(self) -> Vec<u32> {
        (0..64).filter(|b| self.is_set(*b)).collect()
    }

    /// Fewer nodes, or as many with a lower word (Go's IsNarrowerThan).
    pub fn is_narrower_than(self, other: BitMask) -> bool {
        if self.count() == other.count() {
            return self.0 < other.0;
        }
        self.count() < other.count()
    }

    /// Every mask over `bits`: all of size 1 first, then size 2, … (each
    /// size in the order Go's IterateBitMasks produces).
    pub fn iterate(bits: &[u32], mut callback: impl FnMut(BitMask)) {
        fn go(bits: &[u32], accum: &mut Vec<u32>, size: usize, cb: &mut dyn FnMut(BitMask)) {
            if accum.len() == size {
                cb(BitMask::of(accum));
                return;
            }
            for i in 0..bits.len() {
                accum.push(bits[i]);
                go(&bits[i + 1..], accum, size, cb);
                accum.pop();
            }
        }
        for size in 1..=bits.len() {
            go(bits, &mut Vec::new(), size, &mut callback);
        }
    }
}

impl fmt::Display for BitMask {
    /// Binary, zero-padded to the pair of digits above the highest power
    /// of four the value exceeds (Go's grouping, quirks included).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = (1..32)
            .rev()
            .map(|pair| pair * 2)
            .find(|shift| self.0 > 1u64 << shift)
            .map_or(2, |shift| shift + 2);
        write!(f, "{:0width$b}", self.0, width = width)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrower_and_strings() {
        let m = |b: &[u32]| BitMask::of(b);
        let cases: [(BitMask, BitMask, bool); 5] = [
            (m(&[0]), m(&[0, 1]), true),
            (m(&[0, 1]), m(&[0]), false),
            (m(&[0]), m(&[1]), true),
            (m(&[1]), m(&[0]), false),
            (m(&[0, 1]), m(&[0, 2]), true),
        ];
        for (a, b, want) in cases {
            assert_eq!(a.is_narrower_than(b), want, "{a} narrower than {b}");
        }
        assert_eq!(m(&[0]).to_string(), "01");
        assert_eq!(m(&[0, 1]).to_string(), "11");
        assert_eq!(m(&[2]).to_string(), "100");
        assert_eq!(m(&[0, 2]).to_string(), "0101");
        assert_eq!(BitMask::EMPTY.to_string(), "00");
        assert!(BitMask::new([64]).is_err());
        assert!(BitMask::new([-1]).is_err());
        assert_eq!(m(&[1, 3]).bits(), vec![1, 3]);
    }

    #[test]
    fn iterate_in_go_order() {
        let mut seen = Vec::new();
        BitMask::iterate(&[0, 1, 2], |m| seen.push(m.bits()));
        let want: Vec<Vec<u32>> = vec![
            vec![0],
            vec![1],
            vec![2],
            vec![0, 1],
            vec![0, 2],
            vec![1, 2],
            vec![0, 1, 2],
        ];
        assert_eq!(seen, want);
    }
}
