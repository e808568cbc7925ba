//! `bazaar dm key|send|read` against `bazaar serve`: sealed on the sender's
//! machine, opened on the reader's, never readable in the registry's files;
//! plaintext (and said so) with a member who has no sealing key.

use crate::common;

use std::path::Path;

use common::bazaar_json as bazaar;

/// An owner `handle` whose key is in `<dir>/<handle>.key`; returns its credential.
fn owner(dir: &Path, handle: &str, operator: &[(&str, &str)]) -> String {
    let key_file = dir.join(format!("{handle}.key"));
    let key = bazaar(&["keygen", "--out", key_file.to_str().unwrap()], &[]);
    let made = bazaar(&["owner", "--handle", handle, "--public-key", key["public_key"].as_str().unwrap()], operator);
    made["credential"].as_str().unwrap().to_string()
}

#[test]
fn dms_are_sealed_on_the_client_and_opened_on_the_client() {
    let dir = common::fresh_dir("bazaar-dm");
    let port = common::free_port();
    let registry = format!("http://127.0.0.1:{port}");
    let mut server =
        common::spawn_serve(&["--port".into(), port.to_string(), "--data-dir".into(), dir.display().to_string()]);
    let credential_file = dir.join("operator-credential");
    let operator =
        [("BAZAAR_REGISTRY", registry.as_str()), ("BAZAAR_CREDENTIAL_FILE", credential_file.to_str().unwrap())];
    let (ivy, jon, kim) = (owner(&dir, "ivy", &operator), owner(&dir, "jon", &operator), owner(&dir, "kim", &operator));
    let as_ = |credential: &str| [("BAZAAR_REGISTRY", registry.clone()), ("BAZAAR_CREDENTIAL", credential.to_string())];
    let run = |who: &str, args: &[&str]| {
        let env = as_(who);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        bazaar(args, &env)
    };
    let key_of = |handle: &str| dir.join(format!("{handle}.key")).display().to_string();
    let published = run(&ivy, &["dm", "key", "--key-file", &key_of("ivy")]);
    assert_eq!(published["published_now"], true);
    assert_eq!(run(&ivy, &["dm", "key", "--key-file", &key_of("ivy")])["published_now"], false);
    run(&jon, &["dm", "key", "--key-file", &key_of("jon")]);

    let words = "the-cli-sealed-floor-2400-zq";
    let sent = run(&ivy, &["dm", "send", "--to", "jon", "--key-file", &key_of("ivy"), "--key", "k1", words]);
    assert_eq!(sent["sealed"], true, "{sent}");
    let again = run(&ivy, &["dm", "send", "--to", "jon", "--key-file", &key_of("ivy"), "--key", "k1", words]);
    assert_eq!(again["seq"], sent["seq"], "a retry under the same key is the same message");
    let read = run(&jon, &["dm", "read", "--with", "ivy", "--key-file", &key_of("jon")]);
    assert_eq!(read["sealed"], true);
    let last = read["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["text"].as_str(), last["sealed"].as_bool(), last["signed"].as_bool()),
        (Some(words), Some(true), Some(true))
    );
    // A reader holding the wrong key sees that it cannot open, not garbage.
    let wrong = run(&jon, &["dm", "read", "--with", "ivy", "--key-file", &key_of("kim")]);
    let unopened = wrong["messages"].as_array().unwrap().last().unwrap()["text"].as_str().unwrap().to_string();
    assert!(unopened.starts_with("[sealed; cannot open"), "{unopened}");

    // Kim never published a key: the DM is plaintext, and the sender is told why.
    let plain = run(&ivy, &["dm", "send", "--to", "kim", "--key-file", &key_of("ivy"), "hello kim"]);
    assert_eq!(plain["sealed"], false);
    assert!(plain["why_not_sealed"].as_str().unwrap().contains("no sealing key"), "{plain}");
    let kims = run(&kim, &["dm", "read", "--with", "ivy", "--key-file", &key_of("kim")]);
    assert_eq!(kims["messages"].as_array().unwrap().last().unwrap()["text"], "hello kim");

    server.kill().ok();
    server.wait().ok();
    let leaked = std::fs::read_dir(&dir).unwrap().filter_map(Result::ok).any(|file| {
        file.file_name().to_string_lossy().starts_with("conversation.db")
            && std::fs::read(file.path()).unwrap().windows(words.len()).any(|w| w == words.as_bytes())
    });
    assert!(!leaked, "the sealed words are in none of the registry's files");
    assert!(
        std::fs::read_dir(&dir).unwrap().any(|f| f.unwrap().file_name().to_string_lossy() == "conversation.db"),
        "the plane's database is where the scan looked"
    );
    std::fs::remove_dir_all(&dir).ok();
}
