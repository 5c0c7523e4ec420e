//! Images of the conversation, stored content-addressed in the workspace.
//!
//! An image a person sends (from `cairn chat --image`, a WebSocket frame, a
//! chat adapter) is checked ([`cairn_core::image::check`]: PNG, JPEG, WebP or
//! GIF by magic bytes, at most 5 MiB) and written once to
//! `media/<sha256>.<ext>`; the message keeps an [`ImagePart`] naming it, so a
//! stored history row holds a reference, never the bytes. Before each model
//! call the agent loop loads the bytes of the images in the conversation
//! ([`prepare`]); a model without vision gets a note in their place.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use cairn_core::chat::ChatMessage;
use cairn_core::image::{self, ImageError, ImagePart};
use sha2::{Digest, Sha256};

use crate::nofollow::{OpenFor, Tree};

/// The folder of the workspace that holds images.
pub const MEDIA_DIR: &str = "media";

/// Why an image could not be taken or found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MediaError {
    /// Not an image cairn accepts.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// A `data:` URL that is not a base64 image.
    #[error("bad data URL: {0}")]
    DataUrl(String),
    /// Reading or writing the media folder failed.
    #[error("{0}")]
    Io(String),
    /// An image URL could not be fetched (refused by the network rules, or failed).
    #[error("cannot fetch the image {0}")]
    Fetch(String),
}

/// The media folder of one workspace, opened through [`crate::nofollow`]
/// (a planted link or hard link is never read or written through).
#[derive(Debug, Clone)]
pub struct MediaStore {
    workspace: Tree,
}

impl MediaStore {
    /// The store in `workspace/media`.
    pub fn new(workspace: &Path) -> Self {
        Self {
            workspace: Tree::new(workspace),
        }
    }

    /// `media/<file>` below the workspace, and the full path for messages.
    fn paths(&self, part: &ImagePart) -> (PathBuf, PathBuf) {
        let rel = Path::new(MEDIA_DIR).join(part.file_name());
        let full = self.workspace.root().join(&rel);
        (rel, full)
    }

    /// Checks `bytes` and stores them (once: the name is their hash);
    /// returns the part for a message, its bytes loaded.
    pub async fn store(&self, bytes: Vec<u8>) -> Result<ImagePart, MediaError> {
        let format = image::check(&bytes)?;
        let part = ImagePart {
            media_type: format.media_type().to_string(),
            sha256: hex(&Sha256::digest(&bytes)),
            data: None,
        };
        let (rel, path) = self.paths(&part);
        let data: Arc<[u8]> = Arc::from(bytes);
        let written = Arc::clone(&data);
        self.workspace
            .run(move |tree| {
                // Stored already when a plain file holds it; anything else
                // there (a link, say) is replaced by the written file.
                if tree.open(&rel, OpenFor::Read).is_ok() {
                    return Ok(());
                }
                // Written aside, then renamed: a reader never sees half an image.
                tree.write(&rel, &written).map(drop)
            })
            .await
            .map_err(|e| MediaError::Io(format!("cannot store {}: {e}", path.display())))?;
        Ok(ImagePart {
            data: Some(data),
            ..part
        })
    }

    /// Loads a part's bytes from its file, checking they still hash to its name.
    pub async fn load(&self, part: &mut ImagePart) -> Result<(), MediaError> {
        if part.data.is_some() {
            return Ok(());
        }
        let (rel, path) = self.paths(part);
        // One byte past the bound shows a file grown past it.
        let limit = u64::try_from(image::MAX_IMAGE_BYTES).unwrap_or(u64::MAX) + 1;
        let bytes = self
            .workspace
            .run(move |tree| tree.read(&rel, limit))
            .await
            .map_err(|e| MediaError::Io(format!("cannot read {}: {e}", path.display())))?
            .ok_or_else(|| MediaError::Io(format!("cannot read {}: it is gone", path.display())))?;
        if hex(&Sha256::digest(&bytes)) != part.sha256 {
            return Err(MediaError::Io(format!(
                "{} does not match its hash",
                path.display()
            )));
        }
        part.data = Some(Arc::from(bytes));
        Ok(())
    }
}

/// The bytes of an image at an http(s) URL, fetched under the network rules
/// of `[tools.http]` (the model's own rules: a client could otherwise make
/// the daemon fetch from the home network), at most the image bound.
pub async fn fetch_image(
    net: &crate::tools::net::NetClient,
    url: &str,
) -> Result<Vec<u8>, MediaError> {
    let fetch = |e: crate::tools::ToolError| MediaError::Fetch(format!("{url}: {e}"));
    let url = net.parse_url(url).map_err(fetch)?;
    let request = net.request(reqwest::Method::GET, url.clone()).header(
        reqwest::header::ACCEPT,
        "image/png,image/jpeg,image/webp,image/gif",
    );
    let response = net.send(request).await.map_err(fetch)?;
    if !response.status().is_success() {
        return Err(MediaError::Fetch(format!(
            "{url}: HTTP {}",
            response.status()
        )));
    }
    let body = net
        .read_body(response, image::MAX_IMAGE_BYTES)
        .await
        .map_err(fetch)?;
    if body.cut {
        return Err(ImageError::TooLarge {
            size: image::MAX_IMAGE_BYTES + 1,
            max: image::MAX_IMAGE_BYTES,
        }
        .into());
    }
    Ok(body.bytes)
}

/// The bytes of a `data:image/…;base64,…` URL.
pub fn decode_data_url(url: &str) -> Result<Vec<u8>, MediaError> {
    let rest = url
        .trim()
        .strip_prefix("data:")
        .ok_or_else(|| MediaError::DataUrl("it does not start with `data:`".into()))?;
    let (meta, payload) = rest
        .split_once(',')
        .ok_or_else(|| MediaError::DataUrl("no `,` before the data".into()))?;
    if !meta.to_ascii_lowercase().ends_with(";base64") {
        return Err(MediaError::DataUrl("only base64 data is accepted".into()));
    }
    let payload: String = payload.chars().filter(|c| !c.is_whitespace()).collect();
    // Decoded size is 3/4 of the text: refuse oversized payloads before decoding.
    if payload.len() / 4 * 3 > image::MAX_IMAGE_BYTES + 3 {
        return Err(ImageError::TooLarge {
            size: payload.len() / 4 * 3,
            max: image::MAX_IMAGE_BYTES,
        }
        .into());
    }
    base64::engine::general_purpose::STANDARD
        .decode(payload.as_bytes())
        .map_err(|e| MediaError::DataUrl(format!("the base64 data does not decode: {e}")))
}

/// The messages to send for a model call. The bytes of the conversation's
/// images are loaded into `messages` (bytes are never stored, so this
/// changes nothing persisted, and each file is read once per turn); in the
/// copy returned, an image the model cannot take — no vision, or a file that
/// is gone — becomes a note in the text, so the request stays valid.
pub async fn request_messages(
    messages: &mut [ChatMessage],
    workspace: &Path,
    vision: bool,
) -> Vec<ChatMessage> {
    if vision {
        let store = MediaStore::new(workspace);
        for part in messages.iter_mut().flat_map(|m| m.images.iter_mut()) {
            if let Err(e) = store.load(part).await {
                tracing::warn!(error = %e, "an image of the conversation cannot be read");
            }
        }
    }
    messages
        .iter()
        .map(|message| {
            if message.images.is_empty() {
                return message.clone();
            }
            let mut sent = message.clone();
            let (kept, dropped): (Vec<ImagePart>, Vec<ImagePart>) =
                std::mem::take(&mut sent.images)
                    .into_iter()
                    .partition(|part| vision && part.data.is_some());
            sent.images = kept;
            let notes: Vec<String> = dropped
                .iter()
                .map(|part| match vision {
                    false => format!("[image {} not shown: llm.vision = false]", part.file_name()),
                    true => format!("[image {} is no longer available]", part.file_name()),
                })
                .collect();
            if !notes.is_empty() {
                sent.content = format!("{}\n{}", sent.content, notes.join("\n"))
                    .trim()
                    .to_string();
            }
            sent
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIF: &[u8] = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;";

    #[tokio::test]
    async fn images_are_stored_once_by_hash_and_load_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = MediaStore::new(dir.path());
        let part = store.store(GIF.to_vec()).await.unwrap();
        assert_eq!(part.media_type, "image/gif");
        assert_eq!(part.sha256.len(), 64);
        let file = dir.path().join("media").join(part.file_name());
        assert_eq!(std::fs::read(&file).unwrap(), GIF);
        let again = store.store(GIF.to_vec()).await.unwrap();
        assert_eq!(again, part);
        assert_eq!(
            std::fs::read_dir(dir.path().join("media")).unwrap().count(),
            1
        );

        let mut stored: ImagePart =
            serde_json::from_str(&serde_json::to_string(&part).unwrap()).unwrap();
        assert!(stored.data.is_none());
        store.load(&mut stored).await.unwrap();
        assert_eq!(stored.data.as_deref(), Some(GIF));

        std::fs::write(&file, b"GIF89a tampered").unwrap();
        let mut stale = ImagePart { data: None, ..part };
        assert!(
            store
                .load(&mut stale)
                .await
                .unwrap_err()
                .to_string()
                .contains("hash")
        );
        assert!(matches!(
            store.store(b"not an image".to_vec()).await,
            Err(MediaError::Image(ImageError::UnknownFormat))
        ));
    }

    /// A `media` link out of the workspace, or a link in place of an image:
    /// never written or read through.
    #[tokio::test]
    async fn a_planted_link_is_never_read_or_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let store = MediaStore::new(dir.path());
        std::os::unix::fs::symlink(outside.path(), dir.path().join("media")).unwrap();
        let err = store.store(GIF.to_vec()).await.unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

        std::fs::remove_file(dir.path().join("media")).unwrap();
        let part = MediaStore::new(outside.path())
            .store(GIF.to_vec())
            .await
            .unwrap();
        let victim = outside.path().join("media").join(part.file_name());
        std::fs::create_dir(dir.path().join("media")).unwrap();
        let planted = dir.path().join("media").join(part.file_name());
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let mut stored = ImagePart { data: None, ..part };
        let err = store.load(&mut stored).await.unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        store.store(GIF.to_vec()).await.unwrap();
        assert!(!std::fs::symlink_metadata(&planted).unwrap().is_symlink());
        store.load(&mut stored).await.unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), GIF);
    }

    #[test]
    fn data_urls_decode() {
        assert_eq!(
            decode_data_url("data:image/gif;base64,R0lGODlhAQABAAAAADs=").unwrap(),
            GIF
        );
        assert!(decode_data_url("http://x/y.png").is_err());
        assert!(decode_data_url("data:image/png,raw").is_err());
        assert!(decode_data_url("data:image/png;base64,!!!").is_err());
    }

    #[tokio::test]
    async fn request_messages_load_images_or_leave_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let part = MediaStore::new(dir.path())
            .store(GIF.to_vec())
            .await
            .unwrap();
        let unloaded = ImagePart {
            data: None,
            ..part.clone()
        };
        let gone = ImagePart {
            sha256: "f".repeat(64),
            ..unloaded.clone()
        };
        let mut messages = vec![ChatMessage::user_with_images(
            "look",
            vec![unloaded.clone(), gone],
        )];
        let sent = request_messages(&mut messages, dir.path(), true).await;
        assert_eq!(sent[0].images.len(), 1);
        assert!(sent[0].images[0].data.is_some());
        assert!(sent[0].content.contains("is no longer available"));
        // The conversation keeps both references; the bytes are cached.
        assert_eq!(messages[0].images.len(), 2);
        assert!(messages[0].images[0].data.is_some());
        assert_eq!(messages[0].content, "look");

        let mut blind = vec![ChatMessage::user_with_images("look", vec![unloaded])];
        let sent = request_messages(&mut blind, dir.path(), false).await;
        assert!(sent[0].images.is_empty());
        assert!(
            sent[0].content.contains("llm.vision = false"),
            "{}",
            sent[0].content
        );
    }
}
