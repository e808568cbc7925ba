//! Quick starts as the docs write them: the fenced code blocks a Markdown file marks with
//! `<!-- quickstart: NAME [attribute …] -->` on the line before the fence (blank lines between are allowed),
//! in document order, so a test runs exactly what a reader copies and the docs cannot drift from it. Every
//! quick start the tests run is marked this way and read here: the CLI ones (`README.md`'s `cli`,
//! `docs/connect-an-agent.md`'s `connect`, run by `quickstart_cli.rs`) and the SDK READMEs' (`python`,
//! `typescript`, run by `quickstart_sdks.rs`).
//!
//! An attribute is a bare word or `key=value` (no spaces). A block with none runs; the tests give these a
//! meaning: `file=PATH` (write the block to PATH instead of running it), `waits-for=TEXT` (after the block,
//! wait for a line of output holding TEXT; the CLI test), and `registry`, `background`, `output` (the SDK
//! test's registry command, a block left running, and the output the last block must have printed). A marker
//! with no fenced block after it panics, naming its line.
//!
//! A fence indented inside a list item indents its block's lines too: the code is each line with that indent
//! removed, as a reader copying the block gets it.
//!
//! The quick-start tests reach it as `crate::common::markdown`.
#![allow(dead_code)]

/// One marked block.
#[derive(Debug, Clone)]
pub struct Block {
    /// The quick start it belongs to (the marker's NAME).
    pub quickstart: String,
    /// The marker's attributes after the name, in order: `("file", "resident.py")`, `("background", "")`.
    pub attributes: Vec<(String, String)>,
    /// The fence's info string (`sh`, `python`, `ts`), empty when it has none.
    pub language: String,
    /// The block's text, each line ending in `\n`.
    pub code: String,
    /// The 1-based line of the marker, for messages.
    pub line: usize,
}

impl Block {
    /// The value of attribute `name` (`Some("")` for a bare word), if the marker gives it.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }
}

const MARKER: &str = "<!-- quickstart:";

/// Every marked block in `markdown`, in document order.
pub fn all_quickstart_blocks(markdown: &str) -> Vec<Block> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut blocks = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let Some(marker) = lines[at].trim().strip_prefix(MARKER) else {
            at += 1;
            continue;
        };
        let marker_line = at + 1;
        let words: Vec<&str> = marker.trim_end().trim_end_matches("-->").split_whitespace().collect();
        let (name, attributes) =
            words.split_first().unwrap_or_else(|| panic!("line {marker_line}: a marker names no quick start"));
        let attributes = attributes
            .iter()
            .map(|word| match word.split_once('=') {
                Some((key, value)) => (key.to_string(), value.to_string()),
                None => (word.to_string(), String::new()),
            })
            .collect();
        at += 1;
        while at < lines.len() && lines[at].trim().is_empty() {
            at += 1;
        }
        let fence = lines.get(at).map(|l| l.trim_start()).filter(|l| l.starts_with("```"));
        let fence = fence.unwrap_or_else(|| panic!("line {marker_line}: quick start `{name}` marks no fenced block"));
        let language = fence.trim_start_matches('`').trim().to_string();
        // A block inside a list item is indented as its fence is: the code is what follows that indent.
        let indent = lines[at].len() - fence.len();
        at += 1;
        let mut code = String::new();
        while at < lines.len() && !lines[at].trim_start().starts_with("```") {
            let line = lines[at];
            let cut = line.bytes().take(indent).take_while(u8::is_ascii_whitespace).count();
            code.push_str(&line[cut..]);
            code.push('\n');
            at += 1;
        }
        assert!(at < lines.len(), "line {marker_line}: quick start `{name}`'s block never closes");
        at += 1;
        blocks.push(Block { quickstart: name.to_string(), attributes, language, code, line: marker_line });
    }
    blocks
}

/// The blocks of quick start `name`, in document order.
pub fn quickstart_blocks(markdown: &str, name: &str) -> Vec<Block> {
    all_quickstart_blocks(markdown).into_iter().filter(|block| block.quickstart == name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_blocks_come_out_in_order_with_their_attributes() {
        let doc = "# t\n<!-- quickstart: a -->\n```sh\necho 1\n```\n\n```sh\nnot marked\n```\n\
                   <!-- quickstart: b file=x.py waits-for=ok -->\n\n```python\nprint('ok')\n```\n\
                   <!-- quickstart: a background -->\n```\necho 2\necho 3\n```\n";
        let a = quickstart_blocks(doc, "a");
        assert_eq!(a.iter().map(|b| b.code.as_str()).collect::<Vec<_>>(), ["echo 1\n", "echo 2\necho 3\n"]);
        assert_eq!((a[0].language.as_str(), a[0].line, a[1].attribute("background")), ("sh", 2, Some("")));
        let b = &quickstart_blocks(doc, "b")[0];
        assert_eq!(
            (b.attribute("file"), b.attribute("waits-for"), b.language.as_str()),
            (Some("x.py"), Some("ok"), "python")
        );
    }

    #[test]
    fn a_block_in_a_list_item_loses_its_fences_indent() {
        let doc = "1. Write it:\n\n   <!-- quickstart: a file=a.py -->\n   \
                   ```python\n   def f():\n       return 1\n\n   print(f())\n   ```\n";
        let a = &quickstart_blocks(doc, "a")[0];
        assert_eq!((a.code.as_str(), a.attribute("file")), ("def f():\n    return 1\n\nprint(f())\n", Some("a.py")));
    }

    #[test]
    #[should_panic(expected = "marks no fenced block")]
    fn a_marker_without_a_block_is_an_error() {
        all_quickstart_blocks("<!-- quickstart: a -->\ntext\n");
    }
}
