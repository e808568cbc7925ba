//! A page the registry serves as it is written: HTML whose scripts run only if
//! they are the ones the page was written with (each inline script allowed by
//! its SHA-256 in the Content-Security-Policy, never `'unsafe-inline'`), may
//! call only this registry (`connect-src 'self'`), cannot be framed, never be
//! sniffed, and never send a referrer. A page with data filled in keeps the
//! policy of the page as written, so nothing filled in can add a script.

use axum::http::header;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use sha2::Digest as _;

/// What every page may do besides its own scripts: its inline style, calls
/// back to this registry, forms that post here, and nothing framed or based elsewhere.
const POLICY_REST: &str =
    "style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The Content-Security-Policy for `body`: scripts from this origin, and each
/// inline `<script>` of `body` by its hash.
pub fn policy(body: &str) -> String {
    let mut sources = String::from("'self'");
    for script in inline_scripts(body) {
        let digest = sha2::Sha256::digest(script.as_bytes());
        sources.push_str(" 'sha256-");
        sources.push_str(&base64::engine::general_purpose::STANDARD.encode(digest));
        sources.push('\'');
    }
    format!("default-src 'none'; script-src {sources}; {POLICY_REST}")
}

/// The text of each `<script>` element in `body` that has no `src`.
fn inline_scripts(body: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = body;
    while let Some(start) = rest.find("<script") {
        let after_name = &rest[start + "<script".len()..];
        let Some(tag_end) = after_name.find('>') else { break };
        let attributes = &after_name[..tag_end];
        let content = &after_name[tag_end + 1..];
        let Some(close) = content.find("</script>") else { break };
        if !attributes.contains("src=") {
            found.push(&content[..close]);
        }
        rest = &content[close + "</script>".len()..];
    }
    found
}

/// A page that never changes, with its policy computed once (the chamber's
/// pages are large; hashing their scripts on every load is wasted work).
pub fn html_static(body: &'static str) -> Response {
    respond(body, static_policy(body))
}

/// `body`, rendered from `written` (the page as shipped, with data filled in):
/// its scripts are allowed by the hashes of `written`'s, never of what was filled
/// in, so no value written into the page can bring a script the page was not
/// written with. A page without scripts passes [`NO_SCRIPTS`].
pub fn html_filled(written: &'static str, body: &str) -> Response {
    respond(body, static_policy(written))
}

/// The template of a generated page that has no script of its own.
pub const NO_SCRIPTS: &str = "";

fn static_policy(written: &'static str) -> String {
    static POLICIES: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<(usize, usize), String>>> =
        std::sync::OnceLock::new();
    let policies = POLICIES.get_or_init(Default::default);
    let at = (written.as_ptr() as usize, written.len());
    policies.lock().expect("page policies").entry(at).or_insert_with(|| policy(written)).clone()
}

fn respond(body: &str, policy: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8".to_string()),
            (header::CONTENT_SECURITY_POLICY, policy),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
            (header::REFERRER_POLICY, "no-referrer".to_string()),
        ],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_inline_script_is_allowed_by_its_hash_and_nothing_inline_else() {
        let page =
            "<p>x</p><script>let a = 1;</script><script src=\"/x.js\"></script>\n<script type=\"module\">b()</script>";
        let policy = policy(page);
        assert!(
            !policy.split(';').any(|d| d.trim().starts_with("script-src") && d.contains("unsafe-inline")),
            "{policy}"
        );
        let hash = |s: &str| base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(s.as_bytes()));
        assert!(policy.contains(&format!("'sha256-{}'", hash("let a = 1;"))), "{policy}");
        assert!(policy.contains(&format!("'sha256-{}'", hash("b()"))), "{policy}");
        assert_eq!(policy.matches("'sha256-").count(), 2, "the script with `src` is not hashed: {policy}");
        assert!(policy.contains("frame-ancestors 'none'") && policy.contains("default-src 'none'"));
    }

    #[test]
    fn a_static_page_gets_the_policy_its_scripts_hash_to() {
        static PAGE: &str = "<script>one()</script>";
        let header =
            |response: Response| response.headers()[header::CONTENT_SECURITY_POLICY].to_str().unwrap().to_string();
        assert_eq!(header(html_static(PAGE)), policy(PAGE));
        assert_eq!(header(html_static(PAGE)), policy(PAGE), "the cached policy is the computed one");
    }

    #[test]
    fn a_filled_in_page_allows_only_the_scripts_it_was_written_with() {
        static WRITTEN: &str = "<p>__NAME__</p><script>greet()</script>";
        let filled = WRITTEN.replace("__NAME__", "<script>steal()</script>");
        let response = html_filled(WRITTEN, &filled);
        let policy = response.headers()[header::CONTENT_SECURITY_POLICY].to_str().unwrap().to_string();
        let hash = |s: &str| base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(s.as_bytes()));
        assert!(policy.contains(&format!("'sha256-{}'", hash("greet()"))), "{policy}");
        assert!(!policy.contains(&hash("steal()")), "a script filled in is not allowed: {policy}");
        assert_eq!(policy.matches("'sha256-").count(), 1, "{policy}");
        let bare = html_filled(NO_SCRIPTS, "<p>x</p><script>steal()</script>");
        let bare = bare.headers()[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(bare.contains("script-src 'self';") && !bare.contains("'sha256-"), "{bare}");
    }
}
