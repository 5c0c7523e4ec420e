//! Images on the wire: their base64 payloads, and the check that a request's
//! images can be sent at all (the model accepts images, every image's bytes
//! are loaded) before anything reaches the provider.

use base64::Engine;
use cairn_core::image::ImagePart;

use crate::error::LlmError;
use crate::types::ChatRequest;

/// The image's bytes in standard base64, when loaded.
pub(crate) fn base64_of(image: &ImagePart) -> Option<String> {
    let data = image.data.as_ref()?;
    Some(base64::engine::general_purpose::STANDARD.encode(data))
}

/// What a person is told when images reach a model configured without vision.
pub fn vision_refusal(model: &str) -> String {
    format!(
        "the model {model} is configured without vision (llm.vision = false), so it cannot be sent images; \
         send text only, or set llm.vision = true for a model that accepts images"
    )
}

/// Refuses a request with images for a model without vision, or with an
/// image whose bytes were never loaded (which would otherwise go out as a
/// broken request).
pub(crate) fn admit(
    request: &ChatRequest,
    provider: &str,
    model: &str,
    vision: bool,
) -> Result<(), LlmError> {
    let mut images = request.messages.iter().flat_map(|m| &m.images).peekable();
    if images.peek().is_none() {
        return Ok(());
    }
    if !vision {
        return Err(LlmError::config(vision_refusal(model)));
    }
    match images.find(|image| image.data.is_none()) {
        Some(missing) => Err(LlmError::config(format!(
            "{provider}: the image {} was not loaded before the request",
            missing.file_name()
        ))),
        None => Ok(()),
    }
}
