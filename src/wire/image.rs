//! An image attached to a user message: what it is (name, media type, size,
//! SHA-256), told by its first bytes, and its bytes when they are at hand.
//! It owns the pure parts only: recognising the four formats every protocol
//! takes, the data URL and base64 forms the encoders send, and the short
//! line a person sees. Reading files is `localfile::read_image`; storing
//! the copy beside a session is `session`'s.
//!
//! The bytes are never serialised: a message, an event or a journal record
//! carries the reference alone, so no JSON line ever holds megabytes of
//! base64. A reference loaded without its bytes (a session whose copy is
//! gone) is sent as a placeholder text part instead.

use base64::Engine;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The largest image file buddy attaches. The providers' own limits are of
/// this order (OpenAI 20 MB a request part, Anthropic less after resizing);
/// a bigger file is almost always a mistake, and as base64 it would be a
/// request of over 27 MB.
pub const MAX_IMAGE_BYTES: u64 = 20 * 1024 * 1024;

/// The formats every protocol accepts, by their first bytes.
const FORMATS: &[(&str, &str)] = &[
    ("image/png", "png"),
    ("image/jpeg", "jpg"),
    ("image/gif", "gif"),
    ("image/webp", "webp"),
];

/// The media type of `bytes` when they start like a PNG, JPEG, GIF or WebP
/// file. The extension is not consulted: a renamed file is what it is.
pub fn media_type_of(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// How many leading bytes `media_type_of` needs at most.
pub const MAGIC_LEN: usize = 12;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// The file name as the user gave it (its last component), for people.
    pub name: String,
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// Hex SHA-256 of the bytes: the name of the session's copy.
    pub sha256: String,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// The image itself; `None` when a reference was loaded and its copy
    /// could not be read.
    #[serde(skip)]
    pub data: Option<Arc<[u8]>>,
}

impl Image {
    /// The image of `bytes`, or `None` when they are not one of the four formats.
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Option<Image> {
        let media_type = media_type_of(&bytes)?;
        let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
        let sha256 = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        Some(Image {
            name: name.to_string(),
            media_type: media_type.to_string(),
            sha256,
            bytes: bytes.len() as u64,
            data: Some(bytes.into()),
        })
    }

    /// The file name of the content-addressed copy: `<sha256>.<ext>`. The
    /// hash is checked to be hex, so a damaged reference can never name a
    /// path outside the directory it is joined to.
    pub fn stored_name(&self) -> Option<String> {
        let hex = self.sha256.len() == 64 && self.sha256.bytes().all(|b| b.is_ascii_hexdigit());
        let ext = FORMATS
            .iter()
            .find(|(t, _)| *t == self.media_type)
            .map(|(_, e)| *e)?;
        hex.then(|| format!("{}.{ext}", self.sha256))
    }

    /// The bytes as base64, when they are at hand.
    pub fn base64(&self) -> Option<String> {
        self.data
            .as_ref()
            .map(|d| base64::engine::general_purpose::STANDARD.encode(d))
    }

    /// `data:<media type>;base64,<bytes>`, when the bytes are at hand.
    pub fn data_url(&self) -> Option<String> {
        self.base64()
            .map(|b| format!("data:{};base64,{b}", self.media_type))
    }

    /// What a person sees for it: `[image: shot.png 120 KiB]`.
    pub fn label(&self) -> String {
        format!("[image: {} {}]", self.name, human_size(self.bytes))
    }

    /// The text part sent in its place when its bytes are gone.
    pub fn missing_text(&self) -> String {
        format!(
            "[image {} ({}) was attached here, but its saved copy is missing; it cannot be shown]",
            self.name,
            human_size(self.bytes)
        )
    }
}

/// A size as people read it: "812 bytes", "120 KiB", "3.4 MiB".
pub fn human_size(n: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if n < KIB {
        format!("{n} bytes")
    } else if n < MIB {
        format!("{} KiB", n.div_ceil(KIB))
    } else {
        format!("{:.1} MiB", n as f64 / MIB as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_told_by_their_first_bytes() {
        assert_eq!(
            media_type_of(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"),
            Some("image/png")
        );
        assert_eq!(media_type_of(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(media_type_of(b"GIF89a\x01\0"), Some("image/gif"));
        assert_eq!(media_type_of(b"RIFF\x10\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(media_type_of(b"RIFF\x10\0\0\0WAVEfmt "), None);
        assert_eq!(media_type_of(b"just text, named shot.png"), None);
        assert_eq!(media_type_of(b""), None);
    }

    #[test]
    fn an_image_is_addressed_by_its_hash_and_serialised_without_its_bytes() {
        let img = Image::from_bytes("shot.png", b"\x89PNG\r\n\x1a\nrest".to_vec()).unwrap();
        assert_eq!(img.bytes, 12);
        assert_eq!(img.sha256.len(), 64);
        assert_eq!(img.stored_name().unwrap(), format!("{}.png", img.sha256));
        assert!(img
            .data_url()
            .unwrap()
            .starts_with("data:image/png;base64,iVBORw0KGgpyZXN0"));
        let json = serde_json::to_string(&img).unwrap();
        assert!(!json.contains("iVBOR"), "{json}");
        let back: Image = serde_json::from_str(&json).unwrap();
        assert_eq!(back.data, None);
        assert_eq!(back.sha256, img.sha256);
        assert_eq!(img.label(), "[image: shot.png 12 bytes]");
    }

    #[test]
    fn a_damaged_reference_names_no_path() {
        let mut img = Image::from_bytes("a.gif", b"GIF87a..".to_vec()).unwrap();
        img.sha256 = "../../etc/passwd".into();
        assert_eq!(img.stored_name(), None);
    }

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(human_size(812), "812 bytes");
        assert_eq!(human_size(120 * 1024), "120 KiB");
        assert_eq!(human_size(3 * 1024 * 1024 + 400 * 1024), "3.4 MiB");
    }
}
