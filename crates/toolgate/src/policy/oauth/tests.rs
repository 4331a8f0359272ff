//! The verifier against an issuer served from this test (metadata and JWKS over HTTP on
//! loopback, fetches counted), with tokens signed by a test-only RSA key
//! (`test_key.pem`, made for these tests and used nowhere else). The real authorization
//! server (oidc-provider) drives the whole path in `tests/peers/test_oauth.py`.

use super::config::{RawAuth, RawOAuth};
use super::*;
use crate::policy::{Profile, Tier};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};

const TEST_KEY: &[u8] = include_bytes!("test_key.pem");
/// The modulus of `test_key.pem` (base64url), as a JWKS publishes it.
const TEST_N: &str = "3tJDTZ6daKDjH_YU-K7R8oCAtDe7M1J8rwV5wR72zfWw-3pxqwqgQ5q-er6KZSajkL2Zx_AO3FO-aC4-B3VXmKw_-yknYX0ppmcRzAqZN_RKbUcy3GT8lpKvYD2wQd8vUg8hX8LSH-WO18vovqYopQoo1to1tjzqE7ero_igAMa44aAIBajzO5WTthAlssEsxZNRA_azyxhrmNQ6hv59mHfJqIlmtNdY4pPrBEd1XWqHt2wALkr6R8WcwbU4ke1-kLPjG1HLv0VyECeRqwwXXcryTwDdvRy4BqyyGnTz6r4UxKGojFRjgJvuWG7ahPwCUjv-YJ19k3_2ojjqBCkXhw";
const AUD: &str = "http://127.0.0.1:8377/mcp";

struct Issuer {
    url: String,
    fetches: Arc<AtomicUsize>,
    kids: Arc<Mutex<Vec<String>>>,
}

/// An issuer on a loopback port: RFC 8414 metadata and a JWKS listing the test key under
/// each of `kids` (changeable, as a rotation does).
async fn issuer(kids: &[&str]) -> Issuer {
    issuer_on(
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        kids,
    )
}

fn issuer_on(listener: tokio::net::TcpListener, kids: &[&str]) -> Issuer {
    let url = format!("http://{}", listener.local_addr().unwrap());
    let fetches = Arc::new(AtomicUsize::new(0));
    let kids: Arc<Mutex<Vec<String>>> =
        Arc::new(Mutex::new(kids.iter().map(|k| k.to_string()).collect()));
    let (f, k, u) = (fetches.clone(), kids.clone(), url.clone());
    let app = axum::Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            axum::routing::get(move || {
                let u = u.clone();
                async move { axum::Json(json!({"issuer": u, "jwks_uri": format!("{u}/jwks")})) }
            }),
        )
        .route(
            "/jwks",
            axum::routing::get(move || {
                f.fetch_add(1, Ordering::SeqCst);
                let keys: Vec<Value> = (k.lock().unwrap().iter())
                    .map(|kid| json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": TEST_N, "e": "AQAB"}))
                    .collect();
                async move { axum::Json(json!({ "keys": keys })) }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    Issuer { url, fetches, kids }
}

fn verifier(issuer: &str, extra: &str) -> Arc<Verifier> {
    // An hour between refetches unless the test says otherwise.
    let floor = if extra.contains("jwks_refresh_min_secs") {
        ""
    } else {
        "jwks_refresh_min_secs = 3600\n"
    };
    let text = format!(
        "[oauth]\nissuer = \"{issuer}\"\nresource = \"{AUD}\"\nclock_skew_secs = 0\n{floor}{extra}"
    );
    let raw: RawAuth = toml::from_str(&text).unwrap();
    let raw: RawOAuth = raw.oauth.unwrap();
    let listen = "127.0.0.1:8377".parse().unwrap();
    let profiles = [(
        "all".to_string(),
        Arc::new(Profile {
            name: "all".into(),
            ..Profile::default()
        }),
    )]
    .into();
    Verifier::new(
        raw.validate(std::path::Path::new("t.toml"), listen, &profiles)
            .unwrap(),
    )
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn claims(iss: &str) -> Value {
    json!({"iss": iss, "sub": "alice", "aud": AUD, "exp": now() + 300, "iat": now(), "scope": "mcp tools", "groups": ["admins"]})
}

fn sign(kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = kid.map(str::to_string);
    encode(
        &header,
        claims,
        &EncodingKey::from_rsa_pem(TEST_KEY).unwrap(),
    )
    .unwrap()
}

/// A token with a header and payload as given and the signature of another token.
fn forged(header: &Value, payload: &str, signature: &str) -> String {
    use base64::Engine as _;
    let b = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!(
        "{}.{}.{signature}",
        b.encode(header.to_string()),
        b.encode(payload)
    )
}

#[tokio::test]
async fn a_good_token_is_its_subject_with_the_mapped_grant() {
    let iss = issuer(&["k1"]).await;
    let v = verifier(
        &iss.url,
        "[oauth.default]\nscopes = [\"docs/*\"]\n[[oauth.map]]\nname = \"admins\"\nclaim = \"groups\"\nvalues = [\"admins\"]\nscopes = [\"*\"]\ntier = \"destructive\"\nprofile = \"all\"\n",
    );
    let token = sign(Some("k1"), &claims(&iss.url));
    let grant = v.authenticate(&token).await.unwrap();
    assert_eq!(grant.name, "oauth:admins");
    // The grant keeps the token for a token-exchange upstream, and never prints it.
    assert_eq!(
        grant.token.as_ref().map(|t| t.secret()),
        Some(token.as_str())
    );
    assert!(!format!("{grant:?}").contains(&token));
    assert_eq!(grant.tier, Tier::Destructive);
    assert_eq!(grant.profile.as_deref(), Some("all"));
    assert_eq!(grant.subject, Some(Principal::subject(&iss.url, "alice")));
    assert!(grant.expires.unwrap() > SystemTime::now());
    // Another group: the default, and still alice.
    let mut c = claims(&iss.url);
    c["groups"] = json!(["readers"]);
    let grant = v.authenticate(&sign(Some("k1"), &c)).await.unwrap();
    assert_eq!(grant.name, "oauth:default");
    assert_eq!(grant.tier, Tier::Read);
    assert!(grant.missing_permission("github/x", Tier::Read).is_some());
    assert!(grant.missing_permission("docs/x", Tier::Read).is_none());
    assert_eq!(iss.fetches.load(Ordering::SeqCst), 1, "the keys are cached");
}

#[tokio::test]
async fn every_wrong_token_is_refused_with_its_reason() {
    let iss = issuer(&["k1"]).await;
    let v = verifier(&iss.url, "required_scopes = [\"mcp\"]\n");
    let good = claims(&iss.url);
    let with = |k: &str, val: Value| {
        let mut c = good.clone();
        c[k] = val;
        sign(Some("k1"), &c)
    };
    let without = |k: &str| {
        let mut c = good.clone();
        c.as_object_mut().unwrap().remove(k);
        sign(Some("k1"), &c)
    };
    let good_token = sign(Some("k1"), &good);
    let signature = good_token.rsplit('.').next().unwrap().to_string();
    let cases: Vec<(&str, String, TokenRejection)> = vec![
        (
            "expired",
            with("exp", json!(now() - 10)),
            TokenRejection::Expired,
        ),
        (
            "not yet valid",
            with("nbf", json!(now() + 600)),
            TokenRejection::NotYetValid,
        ),
        (
            "another issuer",
            with("iss", json!("https://evil.example.com")),
            TokenRejection::Issuer(iss.url.clone()),
        ),
        (
            "another resource",
            with("aud", json!("https://other.example.com/mcp")),
            TokenRejection::Audience(AUD.into()),
        ),
        (
            "no subject",
            without("sub"),
            TokenRejection::MissingClaim("sub".into()),
        ),
        (
            "no expiry",
            without("exp"),
            TokenRejection::MissingClaim("exp".into()),
        ),
        (
            "without the scope",
            with("scope", json!("tools")),
            TokenRejection::InsufficientScope("mcp".into()),
        ),
        (
            "an unknown key",
            sign(Some("k9"), &good),
            TokenRejection::UnknownKey,
        ),
        (
            "alg none",
            forged(&json!({"alg": "none", "kid": "k1"}), &good.to_string(), ""),
            TokenRejection::Algorithm("none".into()),
        ),
        (
            "HS256 with the public key as the secret",
            encode(
                &Header {
                    kid: Some("k1".into()),
                    ..Header::new(Algorithm::HS256)
                },
                &good,
                &EncodingKey::from_secret(TEST_N.as_bytes()),
            )
            .unwrap(),
            TokenRejection::Algorithm("HS256".into()),
        ),
        (
            "a changed payload",
            forged(
                &json!({"alg": "RS256", "kid": "k1"}),
                &with_sub(&good, "root"),
                &signature,
            ),
            TokenRejection::Signature,
        ),
        (
            "not a JWT",
            "tg_not_a_key".into(),
            TokenRejection::Malformed("not a JWT".into()),
        ),
        (
            "huge",
            "a".repeat(MAX_TOKEN_BYTES + 1),
            TokenRejection::TooLarge,
        ),
    ];
    for (what, token, want) in cases {
        let got = v.verify(&token).await.map(|v| v.subject);
        assert_eq!(got, Err(want), "{what}");
    }
    assert!(v.verify(&good_token).await.is_ok());
}

fn with_sub(claims: &Value, sub: &str) -> String {
    let mut c = claims.clone();
    c["sub"] = json!(sub);
    c.to_string()
}

#[tokio::test]
async fn a_claim_named_twice_is_refused_even_when_signed() {
    let iss = issuer(&["k1"]).await;
    let v = verifier(&iss.url, "");
    let mut payload = claims(&iss.url).to_string();
    payload.insert_str(1, "\"sub\":\"root\",");
    use base64::Engine as _;
    let b = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let head = b.encode(json!({"alg": "RS256", "kid": "k1", "typ": "JWT"}).to_string());
    let message = format!("{head}.{}", b.encode(&payload));
    let key = EncodingKey::from_rsa_pem(TEST_KEY).unwrap();
    let signature = jsonwebtoken::crypto::sign(message.as_bytes(), &key, Algorithm::RS256).unwrap();
    let got = v
        .verify(&format!("{message}.{signature}"))
        .await
        .map(|v| v.subject);
    assert_eq!(got, Err(TokenRejection::DuplicateClaim("sub".into())));
}

#[tokio::test]
async fn a_rotated_key_is_fetched_once_and_made_up_kids_fetch_no_more() {
    let iss = issuer(&["k1"]).await;
    let v = verifier(&iss.url, "");
    assert!(v.verify(&sign(Some("k1"), &claims(&iss.url))).await.is_ok());
    assert_eq!(iss.fetches.load(Ordering::SeqCst), 1);
    // The issuer rotates to k2 within the floor (an hour here): k2 is unknown and the
    // floor holds it back.
    *iss.kids.lock().unwrap() = vec!["k2".into()];
    let k2 = sign(Some("k2"), &claims(&iss.url));
    assert_eq!(
        v.verify(&k2).await.map(|_| ()),
        Err(TokenRejection::UnknownKey)
    );
    assert_eq!(iss.fetches.load(Ordering::SeqCst), 1, "within the floor");
    // With a floor of 0 every unknown kid refetches, and k2 is then known.
    let v = verifier(&iss.url, "jwks_refresh_min_secs = 0\n");
    *iss.kids.lock().unwrap() = vec!["k1".into()];
    assert!(v.verify(&sign(Some("k1"), &claims(&iss.url))).await.is_ok());
    *iss.kids.lock().unwrap() = vec!["k2".into()];
    assert!(v.verify(&k2).await.is_ok(), "refetched on the unknown kid");
    assert_eq!(iss.fetches.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn an_issuer_that_is_down_is_unavailable_and_heals() {
    // A port nothing listens on, then the issuer there.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let url = format!("http://127.0.0.1:{port}");
    let v = verifier(&url, "");
    let token = sign(Some("k1"), &claims(&url));
    let got = v.verify(&token).await.map(|_| ());
    assert!(
        matches!(got, Err(TokenRejection::Unavailable(_))),
        "{got:?}"
    );
    assert_eq!(got.unwrap_err().status(), 503);
    // The issuer comes up: within a second the next token is checked, no restart.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let _issuer = issuer_on(listener, &["k1"]);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(v.verify(&token).await.is_ok());
}

mod malformed {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Truncated, spliced, re-encoded or random tokens: never a panic, never accepted.
        #[test]
        fn no_mangled_token_is_accepted(cut in 0usize..2000, junk in "[A-Za-z0-9_.=+/-]{0,64}", pos in 0usize..2000, nested in 0usize..64) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let iss = issuer(&["k1"]).await;
                let v = verifier(&iss.url, "");
                let good = sign(Some("k1"), &claims(&iss.url));
                let mut variants = vec![
                    good[..cut.min(good.len())].to_string(),
                    format!("{}{junk}{}", &good[..pos.min(good.len())], &good[pos.min(good.len())..]),
                    format!("{junk}.{junk}.{junk}"),
                ];
                // A payload nested deep, with the good signature.
                let deep = format!("{}{}{}", "{\"a\":".repeat(nested), "1", "}".repeat(nested));
                variants.push(forged(&json!({"alg": "RS256", "kid": "k1"}), &deep, good.rsplit('.').next().unwrap()));
                for t in variants {
                    if t == good { continue; }
                    prop_assert!(v.verify(&t).await.is_err(), "accepted {t:?}");
                }
                Ok(())
            })?;
        }
    }
}

#[tokio::test]
async fn a_token_checked_before_is_refused_once_it_expires() {
    let iss = issuer(&["k1"]).await;
    let v = verifier(&iss.url, "");
    let mut c = claims(&iss.url);
    c["exp"] = json!(now() + 1);
    let token = sign(Some("k1"), &c);
    assert!(v.authenticate(&token).await.is_ok());
    assert!(v.authenticate(&token).await.is_ok(), "from the cache");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(
        v.authenticate(&token).await.map(|_| ()),
        Err(TokenRejection::Expired)
    );
}
