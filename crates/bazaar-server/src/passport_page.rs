//! The passport verifier page (`GET /passport/verify`): one static HTML file with
//! inline script that checks a pasted passport in the browser, and the one place the
//! registry writes its signing keys into it.
//!
//! The key list is all the page learns from the server; verifying sends nothing back.
//! Today the list is the registry's one key; a key history will pass more entries.

use serde_json::json;

/// The page as shipped, with [`REGISTRY_KEYS_PLACEHOLDER`] where the key list goes.
pub const PASSPORT_VERIFY_HTML: &str = include_str!("../assets/passport-verify.html");

/// Stands where the JSON key list goes, inside `<script type="application/json" id="registry-keys">`.
pub const REGISTRY_KEYS_PLACEHOLDER: &str = "__REGISTRY_KEYS__";

/// The page with `keys_json` (a JSON array of `{"did", "from_ms", "until_ms"}`) filled in.
///
/// `<` is written as `\u003c`, the same JSON, so no string in the list can close the
/// script element it sits in.
pub fn passport_page(keys_json: &str) -> String {
    PASSPORT_VERIFY_HTML.replacen(REGISTRY_KEYS_PLACEHOLDER, &keys_json.replace('<', "\\u003c"), 1)
}

/// The key list for a registry that has only ever had `registry_did`'s key.
pub fn single_key_list(registry_did: &str) -> String {
    json!([{"did": registry_did, "from_ms": 0, "until_ms": null}]).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_list_is_written_once_into_its_script_block() {
        assert_eq!(PASSPORT_VERIFY_HTML.matches(REGISTRY_KEYS_PLACEHOLDER).count(), 1);
        let page = passport_page(&single_key_list("did:key:z6MkExample"));
        assert!(!page.contains(REGISTRY_KEYS_PLACEHOLDER));
        let block = page.split_once(r#"id="registry-keys">"#).unwrap().1.split_once("</script>").unwrap().0;
        let keys: serde_json::Value = serde_json::from_str(block).unwrap();
        assert_eq!(keys, json!([{"did": "did:key:z6MkExample", "from_ms": 0, "until_ms": null}]));
    }

    #[test]
    fn a_key_list_cannot_close_its_script_element() {
        let page = passport_page(&json!([{"did": "</script><script>alert(1)</script>"}]).to_string());
        let block = page.split_once(r#"id="registry-keys">"#).unwrap().1.split_once("</script>").unwrap().0;
        let keys: serde_json::Value = serde_json::from_str(block).unwrap();
        assert_eq!(keys[0]["did"], "</script><script>alert(1)</script>");
    }
}
