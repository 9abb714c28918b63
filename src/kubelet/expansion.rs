//! `$(VAR)` expansion in container commands, args, env values and
//! `subPathExpr`, with the exact semantics of the kubelet's expansion package:
//!
//! - `$(NAME)` is replaced by the mapping's value for `NAME`; an unknown name
//!   is left as written (`$(NAME)`), as the mapping decides.
//! - `$$` is an escaped `$`.
//! - `$` followed by anything else keeps both characters; a `$(` with no
//!   closing `)` is kept as written.
//!
//! The scan is byte-wise, as Go's: the character after a lone `$` is taken as
//! one byte and re-encoded as the code point of that byte value, so a `$`
//! directly before a multi-byte UTF-8 character mangles it exactly as the Go
//! kubelet does. Output that is not valid UTF-8 is repaired lossily.

use std::collections::HashMap;

const OPERATOR: u8 = b'$';
const OPENER: u8 = b'(';
const CLOSER: u8 = b')';

/// Expands every `$(VAR)` reference in `input` through `mapping`.
pub fn expand<F>(input: &str, mut mapping: F) -> String
where
    F: FnMut(&str) -> String,
{
    let bytes = input.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut checkpoint = 0usize;
    let mut cursor = 0usize;
    while cursor < bytes.len() {
        if bytes[cursor] == OPERATOR && cursor + 1 < bytes.len() {
            out.extend_from_slice(&bytes[checkpoint..cursor]);
            let (read, is_var, advance) = read_variable_name(&bytes[cursor + 1..]);
            if is_var {
                // A variable name sits between ASCII delimiters, so it is
                // valid UTF-8 whenever the input is.
                let name = String::from_utf8_lossy(&read);
                out.extend_from_slice(mapping(&name).as_bytes());
            } else {
                out.extend_from_slice(&read);
            }
            cursor += advance;
            checkpoint = cursor + 1;
        }
        cursor += 1;
    }
    out.extend_from_slice(&bytes[checkpoint.min(bytes.len())..]);
    match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// Reads what follows a `$`: returns the bytes to emit (or the variable
/// name), whether it was a variable reference, and how many bytes were
/// consumed after the `$`.
fn read_variable_name(input: &[u8]) -> (Vec<u8>, bool, usize) {
    match input[0] {
        OPERATOR => (vec![OPERATOR], false, 1),
        OPENER => {
            for i in 1..input.len() {
                if input[i] == CLOSER {
                    return (input[1..i].to_vec(), true, i + 1);
                }
            }
            (vec![OPERATOR, OPENER], false, 1)
        }
        other => {
            // Go converts the single byte to a rune: bytes >= 0x80 become the
            // two-byte encoding of U+0080..U+00FF.
            let mut v = vec![OPERATOR];
            let mut buf = [0u8; 4];
            v.extend_from_slice(char::from(other).encode_utf8(&mut buf).as_bytes());
            (v, false, 1)
        }
    }
}

/// `$(NAME)` as written, for names no context defines.
pub fn syntax_wrap(name: &str) -> String {
    format!("$({name})")
}

/// A mapping that looks `name` up in each context in turn and leaves unknown
/// references as written.
pub fn mapping_for<'a>(
    contexts: &'a [&'a HashMap<String, String>],
) -> impl FnMut(&str) -> String + 'a {
    move |name: &str| {
        for ctx in contexts {
            if let Some(v) = ctx.get(name) {
                return v.clone();
            }
        }
        syntax_wrap(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> HashMap<String, String> {
        [
            ("VAR_A", "A"),
            ("VAR_B", "B"),
            ("VAR_C", "C"),
            ("VAR_REF", "$(VAR_A)"),
            ("VAR_EMPTY", ""),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    #[test]
    fn expansion_table() {
        let cases: &[(&str, &str, &str)] = &[
            ("whole string", "$(VAR_A)", "A"),
            ("repeat", "$(VAR_A)-$(VAR_A)", "A-A"),
            ("multiple refs", "$(VAR_A)-$(VAR_B)-$(VAR_C)", "A-B-C"),
            ("beginning", "$(VAR_A)-1", "A-1"),
            ("middle", "___$(VAR_B)___", "___B___"),
            ("end", "___$(VAR_C)", "___C"),
            ("nested not expanded again", "$(VAR_REF)", "$(VAR_A)"),
            ("undefined kept", "$(VAR_NONE)", "$(VAR_NONE)"),
            ("empty value", "$(VAR_EMPTY)", ""),
            ("escaped", "$$(VAR_A)", "$(VAR_A)"),
            ("escaped then ref", "$$$(VAR_A)", "$A"),
            ("double escape", "$$$$(VAR_A)", "$$(VAR_A)"),
            ("lone dollar at end", "foo$", "foo$"),
            ("dollar then letter", "$VAR_A", "$VAR_A"),
            ("incomplete reference", "$(VAR_A", "$(VAR_A"),
            ("incomplete then ref", "$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"),
            ("empty name", "$()", "$()"),
            ("unicode literal", "héllo $(VAR_A)", "héllo A"),
            ("no refs", "plain text", "plain text"),
            ("nested parens", "$(VAR_A)$(VAR_B))", "AB)"),
            ("dollar dollar end", "$$", "$"),
            ("triple dollar end", "$$$", "$$"),
        ];
        let c = ctx();
        let contexts = [&c];
        for (name, input, want) in cases {
            let got = expand(input, mapping_for(&contexts));
            assert_eq!(&got, want, "case {name}: {input:?}");
        }
    }

    #[test]
    fn contexts_are_searched_in_order() {
        let first: HashMap<String, String> = [("X".to_string(), "first".to_string())].into();
        let second: HashMap<String, String> = [
            ("X".to_string(), "second".to_string()),
            ("Y".to_string(), "y".to_string()),
        ]
        .into();
        let contexts = [&first, &second];
        assert_eq!(expand("$(X)/$(Y)", mapping_for(&contexts)), "first/y");
    }

    #[test]
    fn dollar_before_multibyte_char_matches_go() {
        // Go re-encodes the first byte of "é" (0xC3) as U+00C3 and then copies
        // the continuation byte 0xA9 on its own: invalid UTF-8, repaired.
        let c = ctx();
        let contexts = [&c];
        let got = expand("$é", mapping_for(&contexts));
        assert_eq!(got, "$\u{c3}\u{fffd}");
    }
}
