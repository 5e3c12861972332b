//! PKCE (RFC 7636, S256 only) and the `state` value of one authorization:
//! random values from the system's generator, and the challenge derived
//! from the verifier. Does not own the flow that sends them.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};

/// 32 random bytes as unpadded base64url (43 characters): a verifier of the
/// length RFC 7636 allows, also used for `state`.
pub fn random_token() -> Result<String, super::OAuthError> {
    let mut bytes = [0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| super::OAuthError::Flow("no random numbers from the system".into()))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// The S256 challenge of `verifier`: base64url(SHA-256(verifier)).
pub fn challenge(verifier: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    URL_SAFE_NO_PAD.encode(digest.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_matches_the_rfc_7636_example() {
        // Appendix B of RFC 7636.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn random_tokens_are_unreserved_43_characters_and_differ() {
        let a = random_token().unwrap();
        let b = random_token().unwrap();
        assert_eq!(a.len(), 43);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert_ne!(a, b);
    }
}
