//! Helpers for tests that need a throwaway PostgreSQL database: where the test
//! server is, and a URL for one database on it.

/// Where the test server is unless `BAZAAR_TEST_DATABASE_URL` says otherwise.
pub const DEFAULT_TEST_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The admin URL tests connect to, from `BAZAAR_TEST_DATABASE_URL` or the default.
pub fn admin_url() -> String {
    std::env::var("BAZAAR_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_TEST_URL.to_string())
}

/// `url` pointed at database `name` (URL or key=value form).
pub fn with_database(url: &str, name: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return format!("{url} dbname={name}");
    };
    let rest = &url[scheme_end + 3..];
    let query = rest.find('?').map(|i| &rest[i..]).unwrap_or("");
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    format!("{}{}/{name}{query}", &url[..scheme_end + 3], &rest[..authority_end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_urls_are_rewritten() {
        assert_eq!(with_database("postgres://u@h:5432/postgres", "x"), "postgres://u@h:5432/x");
        assert_eq!(with_database("postgres://u@h/postgres?sslmode=disable", "x"), "postgres://u@h/x?sslmode=disable");
        assert_eq!(with_database("postgres://u@h", "x"), "postgres://u@h/x");
        assert_eq!(with_database("host=h user=u", "x"), "host=h user=u dbname=x");
    }
}
