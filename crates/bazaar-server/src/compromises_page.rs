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

/// The page's style: the table fills the width and its long test paths wrap anywhere; at phone width
/// (below 40rem) each row is a card whose cells name their column, so nothing overflows.
const PAGE_CSS: &str = "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;\
line-height:1.45}td,th{border:1px solid #ccc;padding:.4rem;vertical-align:top;text-align:left;\
overflow-wrap:anywhere}table{border-collapse:collapse;width:100%}code{overflow-wrap:anywhere}\
@media (max-width:40rem){thead{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}\
table,tbody,tr,td{display:block}tr{border:1px solid #ccc;margin:0 0 1rem;padding:.2rem}td{border:0}\
td::before{content:attr(data-label);display:block;font-weight:600}}";
/// The page: the heading, the paragraphs and the table of `COMPROMISES_MD`.
pub fn compromises_page() -> String {
    let mut body = String::new();
    let mut rows = COMPROMISES_MD.lines().filter(|l| l.starts_with('|')).peekable();
    if let Some(header) = rows.next() {
        let labels = cells(header);
        body.push_str("<table><thead><tr>");
        for cell in &labels {
            body.push_str(&format!("<th scope=\"col\">{}</th>", inline(cell)));
        }
        body.push_str("</tr></thead><tbody>");
        for row in rows.filter(|row| !row.contains("---")) {
            body.push_str("<tr>");
            // Each cell names its column, for the phone layout where a row is a card and the header is hidden.
            for (n, cell) in cells(row).into_iter().enumerate() {
                let label = escape(labels.get(n).copied().unwrap_or_default());
                body.push_str(&format!("<td data-label=\"{label}\">{}</td>", inline(cell)));
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
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{PAGE_CSS}</style></head><body>\
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
            assert!(page.contains(&format!("\">{}</td>", inline(name))), "{name} is not on the page");
            count += 1;
        }
        assert!(count >= 4, "the ledger lists {count} compromises");
        assert!(!page.contains("<script"));
    }
}
