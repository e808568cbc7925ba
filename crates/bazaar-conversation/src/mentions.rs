//! Finding `@handle` mentions in a message body: pure text, resolved to members by the store's caller-supplied directory.

use bazaar_types::limits::{HANDLE_LEN_MAX, HANDLE_LEN_MIN};

fn is_handle_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
}

/// The distinct handles a body mentions, in order of first appearance. A
/// mention is `@` at the start or after a character that cannot be in a
/// handle (so `mail@host` is not one), then a well-formed handle.
pub fn mentioned_handles(body: &str) -> Vec<&str> {
    let mut found: Vec<&str> = Vec::new();
    let mut previous: Option<char> = None;
    for (index, c) in body.char_indices() {
        let starts = c == '@' && !previous.is_some_and(|p| is_handle_char(p) || p == '@');
        previous = Some(c);
        if !starts {
            continue;
        }
        let rest = &body[index + 1..];
        let end = rest.find(|c: char| !is_handle_char(c)).unwrap_or(rest.len());
        let handle = &rest[..end];
        let well_formed = (HANDLE_LEN_MIN..=HANDLE_LEN_MAX).contains(&handle.len());
        if well_formed && !found.contains(&handle) {
            found.push(handle);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::mentioned_handles;

    fn check(body: &str, expected: &[&str]) {
        assert_eq!(mentioned_handles(body), expected, "body: {body:?}");
    }

    #[test]
    fn mentions_are_found_once_and_in_order() {
        check("hi @alice and @bob-2, @alice again", &["alice", "bob-2"]);
        check("@carol: look", &["carol"]);
        check("mail me at dan@example.org", &[]);
        check("@ab is too short, @@eve is doubled", &[]);
        check("(@frank)", &["frank"]);
        check("@Upper is not a handle", &[]);
        check("", &[]);
    }
}
