//! Sealing: AES-256-GCM with a random 96-bit nonce, for tenant data that must leave the table (an
//! import's items on its queue). Each tenant has its own key, kept in its own partition
//! (`store::imports::sealing_key`); deleting the key (offboarding) leaves whatever it sealed
//! unreadable wherever it still is: crypto-shredding. The additional data binds a sealed text to
//! its context (tenant and import), so it cannot be moved to another.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

/// A sealing key's length: 256 bits.
pub const KEY_BYTES: usize = 32;

/// What sealing can fail on: only the machine's random source, or a key of the wrong length.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("the system's random source failed")]
    Random,
    #[error("a sealing key must be {KEY_BYTES} bytes")]
    Key,
}

/// A fresh random key.
pub fn new_key() -> Result<[u8; KEY_BYTES], SealError> {
    let mut key = [0u8; KEY_BYTES];
    SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| SealError::Random)?;
    Ok(key)
}

fn cipher(key: &[u8]) -> Result<LessSafeKey, SealError> {
    let key = UnboundKey::new(&AES_256_GCM, key).map_err(|_| SealError::Key)?;
    Ok(LessSafeKey::new(key))
}

/// `plaintext` sealed under `key` for `context`: nonce, ciphertext and tag, as bytes (an item's
/// sealed attributes are a binary attribute).
pub fn seal_bytes(key: &[u8], context: &[u8], plaintext: &[u8]) -> Result<Vec<u8>, SealError> {
    let cipher = cipher(key)?;
    let mut nonce = [0u8; NONCE_LEN];
    SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| SealError::Random)?;
    let mut sealed = plaintext.to_vec();
    cipher
        .seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(context),
            &mut sealed,
        )
        .map_err(|_| SealError::Key)?;
    let mut out = nonce.to_vec();
    out.extend(sealed);
    Ok(out)
}

/// The plaintext of [`seal_bytes`]' output, when `key` and `context` are the ones it was sealed
/// with and nothing was changed; `None` otherwise.
pub fn open_bytes(key: &[u8], context: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
    if sealed.len() < NONCE_LEN {
        return None;
    }
    let (nonce, body) = sealed.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
    let mut body = body.to_vec();
    let plain = cipher(key)
        .ok()?
        .open_in_place(nonce, Aad::from(context), &mut body)
        .ok()?;
    Some(plain.to_vec())
}

/// A keyed digest of `text` for `purpose` under `key`: HMAC-SHA256, its first 128 bits as 32
/// lowercase hex digits. What stands in a key for a value that must not be readable there (an
/// email), the same for the same key and text, and nothing to anyone without the key.
pub fn keyed_digest(key: &[u8], purpose: &str, text: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    let mut context = ring::hmac::Context::with_key(&key);
    context.update(purpose.as_bytes());
    context.update(b"\n");
    context.update(text.as_bytes());
    let tag = context.sign();
    tag.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A key for `purpose` derived from `key` (HKDF-SHA256): what seals data of a tenant outside the
/// table (its import messages) under its data key, without the data key itself sealing anything
/// but items. Shredding the data key shreds whatever a derived key sealed.
pub fn derived_key(key: &[u8], purpose: &str) -> [u8; KEY_BYTES] {
    let prk = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"pooltable").extract(key);
    let mut out = [0u8; KEY_BYTES];
    let info = [purpose.as_bytes()];
    // HKDF-SHA256 expands to 32 bytes (its output length) for any input: it cannot fail here.
    if let Ok(okm) = prk.expand(&info, ring::hkdf::HKDF_SHA256) {
        let _ = okm.fill(&mut out);
    }
    out
}

/// `plaintext` sealed under `key` for `context`: base64url of [`seal_bytes`].
pub fn seal(key: &[u8], context: &str, plaintext: &[u8]) -> Result<String, SealError> {
    Ok(URL_SAFE_NO_PAD.encode(seal_bytes(key, context.as_bytes(), plaintext)?))
}

/// The plaintext of [`seal`]'s output, when `key` and `context` are the ones it was sealed with
/// and nothing was changed; `None` otherwise.
pub fn open(key: &[u8], context: &str, sealed: &str) -> Option<Vec<u8>> {
    let raw = URL_SAFE_NO_PAD.decode(sealed).ok()?;
    open_bytes(key, context.as_bytes(), &raw)
}

/// How long [`seal`]'s output is for `plaintext_len` bytes.
pub fn sealed_len(plaintext_len: usize) -> usize {
    (NONCE_LEN + plaintext_len + AES_256_GCM.tag_len()).div_ceil(3) * 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_text_opens_only_with_its_key_and_context_and_unchanged() {
        let key = new_key().unwrap();
        let sealed = seal(&key, "acme\nimport-1", b"{\"items\":[]}").unwrap();
        assert!(sealed.len() <= sealed_len(12));
        assert_eq!(
            open(&key, "acme\nimport-1", &sealed).as_deref(),
            Some(&b"{\"items\":[]}"[..])
        );
        // another context, another key, or one changed character: nothing
        assert_eq!(open(&key, "globex\nimport-1", &sealed), None);
        assert_eq!(open(&new_key().unwrap(), "acme\nimport-1", &sealed), None);
        let mut edited = sealed.clone().into_bytes();
        edited[20] = if edited[20] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            open(&key, "acme\nimport-1", &String::from_utf8(edited).unwrap()),
            None
        );
        // and two seals of one text differ (a fresh nonce each)
        assert_ne!(
            seal(&key, "c", b"x").unwrap(),
            seal(&key, "c", b"x").unwrap()
        );
    }
}
