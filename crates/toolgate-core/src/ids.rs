//! Ids and names: random ids a client cannot guess, and the rule for simple names
//! (upstreams, profiles, keys, skills). A leaf: it depends on nothing else in the crate.

/// `n` random bytes as hex (for ids a client cannot guess).
pub fn random_hex(n: usize) -> String {
    let bytes: Vec<u8> = (0..n).map(|_| rand::random::<u8>()).collect();
    hex::encode(bytes)
}

/// True for a name fit for config keys, URLs and logs (upstreams, profiles, keys):
/// 1 to 48 ASCII letters, digits, `_`, `-` or `.`.
pub fn is_simple_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 48
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}
