//! Images in chat messages: the formats cairn accepts (recognized by their
//! magic bytes, never by a file name or a declared type), the size bound,
//! and the fixed token estimate each image counts for in the context budget.
//!
//! A message keeps an image as an [`ImagePart`]: its media type and the
//! SHA-256 of its bytes, which names the file the agent stores it in
//! (`media/<sha256>.<ext>` in the workspace). The bytes ride along in memory
//! while a turn runs and are never serialized, so a stored history row holds
//! the reference only.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Most bytes of one image. Anthropic's API refuses larger images (5 MB);
/// OpenAI's limit is higher, so this one bound serves both.
pub const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;

/// Images one message or request may carry when `gateway.max_images` is not set.
pub const DEFAULT_MAX_IMAGES: usize = 16;

/// The refusal of `count` images where at most `max` are accepted, naming
/// the setting; `None` when they are few enough. Every entry (WebSocket
/// chat, `/v1`, Telegram, the chat service) refuses with this text.
pub fn too_many_images(count: usize, max: usize) -> Option<String> {
    (count > max).then(|| {
        format!(
            "{count} images: at most {max} are accepted in one message or request (gateway.max_images)"
        )
    })
}

/// Tokens one image counts for in context estimates: about what a
/// 1,092 × 1,092 image costs on Anthropic (w × h / 750), the most either
/// provider charges for an image at default detail.
pub const IMAGE_TOKENS: usize = 1_600;

/// An image format cairn accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageFormat {
    /// PNG.
    Png,
    /// JPEG.
    Jpeg,
    /// WebP.
    WebP,
    /// GIF (87a or 89a).
    Gif,
}

impl ImageFormat {
    /// Every accepted format.
    pub const ALL: [ImageFormat; 4] = [Self::Png, Self::Jpeg, Self::WebP, Self::Gif];

    /// The format of `bytes`, from their magic bytes; `None` for anything else.
    pub fn detect(bytes: &[u8]) -> Option<ImageFormat> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(Self::Png)
        } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(Self::Jpeg)
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some(Self::Gif)
        } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
            Some(Self::WebP)
        } else {
            None
        }
    }

    /// The IANA media type (`image/png`, …).
    pub fn media_type(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
            Self::WebP => "image/webp",
            Self::Gif => "image/gif",
        }
    }

    /// The file extension the media store uses.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Png => "png",
            Self::Jpeg => "jpg",
            Self::WebP => "webp",
            Self::Gif => "gif",
        }
    }

    /// The format with this media type.
    pub fn from_media_type(media_type: &str) -> Option<ImageFormat> {
        let wanted = media_type.trim().to_ascii_lowercase();
        Self::ALL.into_iter().find(|f| f.media_type() == wanted)
    }
}

/// Why bytes are not an image cairn accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// Not PNG, JPEG, WebP or GIF.
    #[error("not a PNG, JPEG, WebP or GIF image (recognized by its first bytes)")]
    UnknownFormat,
    /// Larger than [`MAX_IMAGE_BYTES`].
    #[error("the image is {size} bytes; at most {max} are accepted")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The bound.
        max: usize,
    },
    /// No bytes at all.
    #[error("the image is empty")]
    Empty,
}

/// Checks `bytes` are an accepted image within the size bound.
pub fn check(bytes: &[u8]) -> Result<ImageFormat, ImageError> {
    if bytes.is_empty() {
        return Err(ImageError::Empty);
    }
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(ImageError::TooLarge {
            size: bytes.len(),
            max: MAX_IMAGE_BYTES,
        });
    }
    ImageFormat::detect(bytes).ok_or(ImageError::UnknownFormat)
}

/// An image attached to a message: a reference by content hash, with its
/// bytes in memory when loaded (never serialized).
#[derive(Clone, Serialize, Deserialize)]
pub struct ImagePart {
    /// `image/png`, `image/jpeg`, `image/webp` or `image/gif`.
    pub media_type: String,
    /// Lower-case hex SHA-256 of the bytes: the name of the stored file.
    pub sha256: String,
    /// The bytes, once loaded; `None` in a row read back from the store.
    #[serde(skip)]
    pub data: Option<Arc<[u8]>>,
}

impl ImagePart {
    /// The stored file's name, `<sha256>.<ext>`.
    pub fn file_name(&self) -> String {
        let ext = ImageFormat::from_media_type(&self.media_type).map_or("bin", |f| f.extension());
        format!("{}.{ext}", self.sha256)
    }
}

/// Two parts are the same image when type and hash agree, loaded or not.
impl PartialEq for ImagePart {
    fn eq(&self, other: &Self) -> bool {
        self.media_type == other.media_type && self.sha256 == other.sha256
    }
}

impl Eq for ImagePart {}

/// Shows the reference and whether the bytes are loaded, never the bytes.
impl std::fmt::Debug for ImagePart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImagePart")
            .field("media_type", &self.media_type)
            .field("sha256", &self.sha256)
            .field("loaded_bytes", &self.data.as_ref().map(|d| d.len()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_recognized_by_magic_bytes() {
        assert_eq!(
            ImageFormat::detect(b"\x89PNG\r\n\x1a\n...."),
            Some(ImageFormat::Png)
        );
        assert_eq!(
            ImageFormat::detect(&[0xFF, 0xD8, 0xFF, 0xE0]),
            Some(ImageFormat::Jpeg)
        );
        assert_eq!(ImageFormat::detect(b"GIF89a.."), Some(ImageFormat::Gif));
        assert_eq!(
            ImageFormat::detect(b"RIFF\x10\0\0\0WEBPVP8 "),
            Some(ImageFormat::WebP)
        );
        assert_eq!(ImageFormat::detect(b"RIFF\x10\0\0\0WAVE"), None);
        assert_eq!(ImageFormat::detect(b"%PDF-1.7"), None);
        assert_eq!(ImageFormat::detect(b""), None);
    }

    #[test]
    fn checks_size_and_format() {
        assert_eq!(check(b""), Err(ImageError::Empty));
        assert_eq!(check(b"hello"), Err(ImageError::UnknownFormat));
        let mut big = b"GIF89a".to_vec();
        big.resize(MAX_IMAGE_BYTES + 1, 0);
        assert!(matches!(check(&big), Err(ImageError::TooLarge { .. })));
        big.truncate(MAX_IMAGE_BYTES);
        assert_eq!(check(&big), Ok(ImageFormat::Gif));
    }

    #[test]
    fn a_part_serializes_without_its_bytes() {
        let part = ImagePart {
            media_type: "image/png".into(),
            sha256: "ab".repeat(32),
            data: Some(Arc::from(&b"\x89PNG\r\n\x1a\nxyz"[..])),
        };
        let json = serde_json::to_string(&part).unwrap();
        assert!(!json.contains("data"), "{json}");
        let back: ImagePart = serde_json::from_str(&json).unwrap();
        assert_eq!(back, part);
        assert!(back.data.is_none());
        assert_eq!(back.file_name(), format!("{}.png", "ab".repeat(32)));
        assert!(!format!("{part:?}").contains("xyz"));
    }
}
