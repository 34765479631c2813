//! Paths as the command line takes and prints them: absolute (`/a/b`, a trailing `/`
//! allowed), printed in the escaped form of [`Path::escaped`] everywhere, messages included.

use dynatree::Path;

use crate::error::{CliError, CliResult};

/// The text of a command-line path, checked to be absolute, without its trailing `/`
/// (`/a/b/` is `/a/b`; `/` stays the root).
///
/// # Errors
///
/// Exit status 1 for a relative path (`a/b`: "paths start with /: /a/b") or an empty one.
pub fn absolute(text: &str) -> CliResult<&str> {
    if text.is_empty() {
        return Err(CliError::msg(
            "path \"\": empty; the root is written /".to_owned(),
        ));
    }
    if !text.starts_with('/') {
        return Err(CliError::msg(format!(
            "path {text:?}: paths start with /: /{text}"
        )));
    }
    Ok(match text.strip_suffix('/') {
        // One trailing `/` only: `/a//` still has an empty component.
        Some(rest) if !rest.is_empty() && !rest.ends_with('/') => rest,
        _ => text,
    })
}

/// `p` (at or under `from`) carried under `to`.
pub fn rebase(p: &Path, from: &Path, to: &Path) -> CliResult<Path> {
    let rest = p.components().get(from.len()..).unwrap_or_default();
    Ok(Path::new(to.components().iter().chain(rest).cloned())?)
}

/// The byte length of the partition key of `p`'s object row (the reserved character before
/// each component), which DynamoDB limits to
/// [`MAX_HASH_KEY_BYTES`](dynatree::storage::MAX_HASH_KEY_BYTES).
pub fn object_key_len(p: &Path, reserved: char) -> usize {
    p.components()
        .iter()
        .map(|c| c.len() + reserved.len_utf8())
        .sum()
}

/// Checks that `p` can hold an object: not the root, and its key within DynamoDB's limit (the
/// checks, and the words, of the library's writes).
pub fn check_object_path(p: &Path, reserved: char) -> CliResult<()> {
    if p.is_root() {
        return Err(CliError::msg("invalid path: the root holds no object"));
    }
    let n = object_key_len(p, reserved);
    let max = dynatree::storage::MAX_HASH_KEY_BYTES;
    if n > max {
        return Err(CliError::msg(format!(
            "invalid path: the object key of {} is {n} bytes, over DynamoDB's {max}-byte partition key limit",
            p.escaped()
        )));
    }
    Ok(())
}

/// `message` with each of `paths` that the library printed plainly (`/a/b` for the
/// component `a/b`) in its escaped form (`/a%2Fb`); longer paths first, so that a path is not
/// half-replaced as the prefix of another.
pub fn escape_known(message: &str, paths: &[Path]) -> String {
    let mut pairs: Vec<(String, String)> = paths
        .iter()
        .map(|p| (p.to_string(), p.escaped()))
        .filter(|(plain, escaped)| plain != escaped)
        .collect();
    pairs.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
    pairs.dedup();
    if pairs.is_empty() {
        return message.to_owned();
    }
    // One pass over the message, so that a replacement is never replaced again.
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    'outer: while !rest.is_empty() {
        for (plain, escaped) in &pairs {
            if let Some(after) = rest.strip_prefix(plain.as_str()) {
                out.push_str(escaped);
                rest = after;
                continue 'outer;
            }
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.push(c);
        }
        rest = chars.as_str();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_paths_only() {
        assert_eq!(absolute("/a/b").unwrap(), "/a/b");
        assert_eq!(absolute("/a/b/").unwrap(), "/a/b");
        assert_eq!(absolute("/").unwrap(), "/");
        // Only one trailing `/` is dropped: the rest is the library's to refuse.
        assert_eq!(absolute("/a//").unwrap(), "/a//");
        assert_eq!(absolute("//").unwrap(), "//");
        let e = absolute("a/b").unwrap_err();
        assert_eq!(e.code(), 1);
        assert_eq!(e.message(), "path \"a/b\": paths start with /: /a/b");
        assert_eq!(absolute("").unwrap_err().code(), 1);
    }

    #[test]
    fn rebased_paths() {
        let p = |s: &str| Path::parse_escaped(s).unwrap();
        assert_eq!(
            rebase(&p("/a/x/y"), &p("/a"), &p("/b/c")).unwrap(),
            p("/b/c/x/y")
        );
        assert_eq!(rebase(&p("/a"), &p("/a"), &p("/b")).unwrap(), p("/b"));
    }

    #[test]
    fn key_lengths() {
        let p = Path::parse_escaped("/ab/c").unwrap();
        assert_eq!(object_key_len(&p, '¦'), 2 + 2 + 1 + 2);
        assert!(check_object_path(&p, '¦').is_ok());
        assert!(check_object_path(&Path::root(), '¦').is_err());
        let long = Path::new(["x".repeat(3000)]).unwrap();
        let e = check_object_path(&long, '¦').unwrap_err();
        assert!(e.message().contains("2048-byte"), "{e}");
    }

    #[test]
    fn messages_name_paths_escaped() {
        let odd = Path::new(["a/b", "c"]).unwrap();
        let plain = Path::new(["x"]).unwrap();
        assert_eq!(
            escape_known("nothing at /a/b/c (not /x)", &[plain, odd.clone()]),
            "nothing at /a%2Fb/c (not /x)"
        );
        // The longer path first: its prefix is another path.
        let parent = Path::new(["a/b"]).unwrap();
        assert_eq!(
            escape_known("cannot move /a/b to /a/b/c", &[parent, odd]),
            "cannot move /a%2Fb to /a%2Fb/c"
        );
        assert_eq!(escape_known("100% done", &[]), "100% done");
    }
}
