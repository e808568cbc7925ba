//! The WebAuthn relying party this registry is, built from its public URL:
//! a domain name (browsers and WebAuthn refuse IP addresses), with a loopback
//! address standing for `localhost`. `people` runs the ceremonies with it;
//! `auth` checks a session's `Origin` against it.

use crate::problem::Problem;
use axum::http::StatusCode;
use std::sync::{Arc, Mutex};
use url::Url;
use webauthn_rs::prelude::{Webauthn, WebauthnBuilder};

fn passkeys_unavailable(detail: String) -> Problem {
    Problem::new(StatusCode::SERVICE_UNAVAILABLE, "passkeys_unavailable", detail)
}

/// The relying party this registry is: built from its public URL, with a
/// loopback address standing for `localhost` (WebAuthn needs a domain name).
pub struct RelyingParty {
    pub webauthn: Webauthn,
    /// `scheme://host:port` the browser must show, as an `Origin` header carries it.
    pub origin: String,
    pub secure: bool,
}

/// The registry's relying party, built once per public URL.
#[derive(Default)]
pub struct RelyingParties(Mutex<Option<(String, Arc<RelyingParty>)>>);

/// What `public_url` makes of the relying party: its id and origin.
pub fn relying_party_for(public_url: &str) -> Result<RelyingParty, Problem> {
    let mut url = Url::parse(public_url)
        .map_err(|_| passkeys_unavailable(format!("The registry's public URL {public_url} is not a URL.")))?;
    let loopback = matches!(url.host(), Some(url::Host::Ipv4(ip)) if ip.is_loopback())
        || matches!(url.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback());
    if loopback {
        url.set_host(Some("localhost")).map_err(|_| passkeys_unavailable("localhost".into()))?;
    }
    let Some(domain) = url.domain().map(str::to_string) else {
        return Err(passkeys_unavailable(format!(
            "Passkeys need a domain name, and the registry's public URL is {public_url}: start it with --public-url https://your.domain (or http://localhost:PORT)."
        )));
    };
    let webauthn = WebauthnBuilder::new(&domain, &url)
        .and_then(|builder| builder.rp_name("Bazaar").build())
        .map_err(|error| passkeys_unavailable(format!("WebAuthn refused {url}: {error}")))?;
    let origin = url.origin().ascii_serialization();
    Ok(RelyingParty { webauthn, origin, secure: url.scheme() == "https" })
}

impl RelyingParties {
    /// The relying party for the registry's public URL (`None`: not known yet).
    pub fn get(&self, public_url: Option<String>) -> Result<Arc<RelyingParty>, Problem> {
        let public_url = public_url.ok_or_else(|| {
            passkeys_unavailable("The registry does not know its public URL yet; passkeys need it.".into())
        })?;
        let mut cached = self.0.lock().expect("relying party lock");
        if let Some((url, party)) = cached.as_ref() {
            if *url == public_url {
                return Ok(party.clone());
            }
        }
        let party = Arc::new(relying_party_for(&public_url)?);
        *cached = Some((public_url, party.clone()));
        Ok(party)
    }
}

#[cfg(test)]
mod tests {
    use super::relying_party_for;

    #[test]
    fn the_relying_party_is_a_domain_and_loopback_stands_for_localhost() {
        let local = relying_party_for("http://127.0.0.1:7878").unwrap();
        assert_eq!((local.origin.as_str(), local.secure), ("http://localhost:7878", false));
        let public = relying_party_for("https://market.example/").unwrap();
        assert_eq!((public.origin.as_str(), public.secure), ("https://market.example", true));
        let refused = relying_party_for("http://10.0.0.5:7878").err().unwrap();
        assert_eq!(refused.code, "passkeys_unavailable");
        assert!(relying_party_for("not a url").is_err());
    }
}
