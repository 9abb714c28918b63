//! Where the last N lines of a file start, read backwards in blocks so a
//! large log is never read whole.

use std::io::{self, Read, Seek, SeekFrom};

const BLOCK: u64 = 1024;

/// The offset of the first of the last `n` lines (`n < 0`: the start). A
/// final newline ends the last line; it does not begin another.
pub fn find_tail_line_start<F: Read + Seek>(f: &mut F, n: i64) -> io::Result<u64> {
    if n < 0 {
        return Ok(0);
    }
    let n = n as u64;
    let size = f.seek(SeekFrom::End(0))?;
    let mut count = 0u64;
    let mut left = size;
    let mut buf = Vec::new();
    let mut right = size;
    while right > 0 && count <= n {
        left = right.saturating_sub(BLOCK);
        buf.resize((right - left) as usize, 0);
        f.seek(SeekFrom::Start(left))?;
        f.read_exact(&mut buf)?;
        count += buf.iter().filter(|b| **b == b'\n').count() as u64;
        right = left;
    }
    // Drop whole lines from the front of the last block read until only
    // `n` newlines are left after the start.
    let mut start = 0usize;
    while count > n {
        match buf[start..].iter().position(|b| *b == b'\n') {
            Some(i) => start += i + 1,
            None => break,
        }
        count -= 1;
    }
    Ok(left + start as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn table() {
        let long: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let cases: &[(&str, i64, &str)] = &[
            ("a\nb\nc\n", -1, "a\nb\nc\n"),
            ("a\nb\nc\n", 0, ""),
            ("a\nb\nc\n", 1, "c\n"),
            ("a\nb\nc\n", 2, "b\nc\n"),
            ("a\nb\nc\n", 3, "a\nb\nc\n"),
            ("a\nb\nc\n", 10, "a\nb\nc\n"),
            // Newlines are what is counted: an unfinished last line (a
            // runtime still writing it) makes one line more.
            ("a\nb\nc", 1, "b\nc"),
            ("a\nb\nc", 2, "a\nb\nc"),
            ("", 5, ""),
            (&long, 2, "line 498\nline 499\n"),
            (&long, 500, &long),
        ];
        for (text, n, want) in cases {
            let mut c = Cursor::new(text.as_bytes());
            let start = find_tail_line_start(&mut c, *n).unwrap() as usize;
            assert_eq!(&text[start..], *want, "n={n}");
        }
    }

    #[test]
    fn tail_across_blocks() {
        let text: String = (0..300).map(|i| format!("{i:0>9}\n")).collect();
        let mut c = Cursor::new(text.as_bytes());
        let start = find_tail_line_start(&mut c, 150).unwrap() as usize;
        assert_eq!(text[start..].lines().count(), 150);
        assert!(text[start..].starts_with("000000150\n"));
    }
}
