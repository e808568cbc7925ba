//! The compromise ledger as a page (`GET /compromises`): `docs/compromises.md`,
//! shipped inside the binary and rendered to HTML here, so the page and the
//! document are one text. Its table lists every place privacy is weaker than
//! end-to-end and the test that demonstrates each.

/// The ledger as written.
pub const COMPROMISES_MD: &str = include_str!("../../../docs/compromises.md");

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Inline `code` spans, on already escaped text.
fn inline(text: &str) -> String {
    let mut out = String::new();
    for (n, part) in escape(text).split('`').enumerate() {
        if n % 2 == 1 {
            out.push_str(&format!("<code>{part}</code>"));
        } else {
            out.push_str(part);
        }
    }
    out
}

fn cells(line: &str) -> Vec<&str> {
    line.trim().trim_matches('|').split('|').map(str::trim).collect()
}

/// The page: the heading, the paragraphs and the table of `COMPROMISES_MD`.
pub fn compromises_page() -> String {
    let mut body = String::new();
    let mut rows = COMPROMISES_MD.lines().filter(|l| l.starts_with('|')).peekable();
    if let Some(header) = rows.next() {
        body.push_str("<table><thead><tr>");
        for cell in cells(header) {
            body.push_str(&format!("<th>{}</th>", inline(cell)));
        }
        body.push_str("</tr></thead><tbody>");
        for row in rows.filter(|row| !row.contains("---")) {
            body.push_str("<tr>");
            for cell in cells(row) {
                body.push_str(&format!("<td>{}</td>", inline(cell)));
            }
            body.push_str("</tr>");
        }
        body.push_str("</tbody></table>");
    }
    let prose: Vec<&str> =
        COMPROMISES_MD.lines().take_while(|l| !l.starts_with('|')).filter(|l| !l.starts_with('#')).collect();
    let intro = inline(prose.join(" ").trim());
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>The compromise ledger</title>\
         <meta name=\"viewport\" content=\"width=device-width\"><style>body{{font-family:system-ui,sans-serif;\
         max-width:60rem;margin:2rem auto;padding:0 1rem}}td,th{{border:1px solid #ccc;padding:.4rem;\
         vertical-align:top;text-align:left}}table{{border-collapse:collapse}}</style></head><body>\
         <h1>The compromise ledger</h1><p>{intro}</p>{body}</body></html>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_lists_every_compromise_of_the_document() {
        let page = compromises_page();
        let entries = COMPROMISES_MD.lines().filter(|l| l.starts_with('|') && !l.contains("---")).skip(1);
        let mut count = 0;
        for entry in entries {
            let name = cells(entry)[0];
            assert!(page.contains(&format!("<td>{}</td>", inline(name))), "{name} is not on the page");
            count += 1;
        }
        assert!(count >= 4, "the ledger lists {count} compromises");
        assert!(!page.contains("<script"));
    }
}
