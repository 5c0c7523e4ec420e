//! `image_url` content parts of `/v1/chat/completions` user messages:
//! `{"type":"image_url","image_url":{"url":…}}` with a `data:` URL, or an
//! http(s) URL fetched under the agent's network rules (`[tools.http]`:
//! private networks refused unless allowed). Each image is checked (PNG,
//! JPEG, WebP or GIF, at most 5 MiB) and given to the agent like one sent
//! in chat. Kept apart from the request translation, which only calls [`images_of`].

use cairn_agent::chat::ChatService;
use cairn_core::image::ImagePart;
use serde_json::Value;

/// The images of a message's content (none for a string), in order;
/// an error names the part at fault (`messages[i].content[j]`).
pub(super) async fn images_of(
    chat: &ChatService,
    message: usize,
    content: &Value,
) -> Result<Vec<ImagePart>, String> {
    let Value::Array(parts) = content else {
        return Ok(Vec::new());
    };
    let mut images = Vec::new();
    for (j, part) in parts.iter().enumerate() {
        if part.get("type").and_then(Value::as_str) != Some("image_url") {
            continue;
        }
        let at = format!("messages[{message}].content[{j}]");
        let url = match part.get("image_url") {
            Some(Value::String(url)) => url.as_str(),
            Some(object) => object
                .get("url")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{at}.image_url.url: a string is needed"))?,
            None => return Err(format!("{at}.image_url: missing")),
        };
        let image = chat
            .image_from_url(url)
            .await
            .map_err(|e| format!("{at}: {e}"))?;
        images.push(image);
    }
    Ok(images)
}

/// Gives each translated user message the images of its request message
/// (`conversation` holds the non-system messages in request order).
pub(super) async fn attach(
    chat: &ChatService,
    messages: &[super::InMessage],
    conversation: &mut [cairn_core::chat::ChatMessage],
) -> Result<(), super::OpenAiError> {
    let spoken = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| !matches!(m.role.as_str(), "system" | "developer"));
    for ((i, m), translated) in spoken.zip(conversation.iter_mut()) {
        let param = || format!("messages[{i}].content");
        let images = images_of(chat, i, &m.content_json())
            .await
            .map_err(|e| super::OpenAiError::invalid(param(), e))?;
        if images.is_empty() {
            continue;
        }
        if m.role != "user" {
            return Err(super::OpenAiError::invalid(
                param(),
                format!("messages[{i}]: images are accepted in user messages only"),
            ));
        }
        if !chat.agent().provider().vision() {
            return Err(super::OpenAiError::invalid(
                param(),
                cairn_llm::vision_refusal(chat.agent().model()),
            ));
        }
        translated.images = images;
    }
    Ok(())
}
