//! `bazaar reprice`: a month of real orders (with a quoted comma in a
//! customer's name and a column it does not need) becomes a price list, an
//! escrow threshold and margins; a malformed file is refused by line number
//! and nothing is printed as if imported.

use crate::common;

use std::process::Command;

fn reprice(path: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bazaar")).args(["--json", "reprice"]).arg(path).output().unwrap()
}

#[test]
fn a_month_of_orders_is_repriced_and_a_malformed_one_is_refused_by_line() {
    let month = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/orders-november.csv");
    let out = reprice(&month);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((r["orders"].as_u64(), r["customers"].as_u64()), (Some(4), Some(3)));
    assert_eq!(r["price_list"][0]["sku"], "napkin");
    assert_eq!(r["price_list"][0]["price_minor"], 150);
    assert_eq!(r["suggested_escrow_threshold_minor"], 3800);
    assert_eq!((r["margin_before_minor"].as_i64(), r["margin_after_minor"].as_i64()), (Some(4000), Some(3884)));

    let dir = std::env::temp_dir().join(format!("bazaar-reprice-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let broken = dir.join("broken.csv");
    let text = std::fs::read_to_string(&month).unwrap().replace("towel:4:950", "towel:four:950");
    std::fs::write(&broken, text).unwrap();
    let out = reprice(&broken);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("line 4") && said.contains("quantity") && said.contains("was not imported"), "{said}");
    assert!(!said.contains("price_list"), "nothing half-imported: {said}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The chamber's Discover page gives the CLI's answer: `POST /v1/reprice` on the same file, then the page in
/// Debian's headless Chromium (`tests/browser/reprice.mjs`) with a good file and a broken one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_discover_page_reprices_the_same_file_and_refuses_a_broken_one_by_line() {
    let month = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/orders-november.csv");
    let dir = common::fresh_dir("bazaar-reprice-page");
    let (local, _) = common::embedded_with_operator(&dir, "op").await;
    let http = reqwest::Client::new();
    let csv = std::fs::read_to_string(&month).unwrap();
    let anonymous = http.post(format!("{}/v1/reprice", local.url)).body(csv.clone()).send().await.unwrap();
    assert_eq!(anonymous.status(), 401, "only when the chamber is open to the visitor");
    local.state.set_public_stream(true);
    let answer: serde_json::Value =
        http.post(format!("{}/v1/reprice", local.url)).body(csv.clone()).send().await.unwrap().json().await.unwrap();
    let cli: serde_json::Value = serde_json::from_slice(&reprice(&month).stdout).unwrap();
    assert_eq!(answer, cli, "the page's answer is the CLI's");
    let broken_text = csv.replace("towel:4:950", "towel:four:950");
    let refused = http.post(format!("{}/v1/reprice", local.url)).body(broken_text.clone()).send().await.unwrap();
    assert_eq!(refused.status(), 422);
    let problem: serde_json::Value = refused.json().await.unwrap();
    assert_eq!((problem["code"].as_str(), problem["facts"]["line"].as_u64()), (Some("reprice_row_invalid"), Some(4)));

    let broken = dir.join("broken.csv");
    std::fs::write(&broken, broken_text).unwrap();
    let args = vec![local.url.clone(), month.display().to_string(), broken.display().to_string()];
    let (report, exited_ok) = common::browser_driver("reprice", args).await;
    assert_eq!(report["problems"], serde_json::json!([]), "{report}");
    assert_eq!(report["prices"][0][0], "napkin", "{report}");
    assert_eq!(report["prices"][0][4], "150 units", "{report}");
    let margins = report["margins"].as_array().unwrap();
    assert!(margins[0].as_str().unwrap().contains("3,800 units"), "the suggested threshold: {report}");
    assert!(margins[2].as_str().unwrap().contains("3,884 units"), "the margin after the fee: {report}");
    let error = report["error"].as_str().unwrap();
    assert!(error.starts_with("reprice_row_invalid: line 4") && error.contains("nothing was imported"), "{error}");
    assert_eq!(report["result_hidden"], true, "nothing half-shown");
    assert_eq!(report["axe"], serde_json::json!([]), "{report}");
    assert!(exited_ok, "{report}");
    std::fs::remove_dir_all(&dir).ok();
}
