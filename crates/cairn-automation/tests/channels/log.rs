//! `type = "log"`: confirms at once.

use serde_json::json;

use crate::{channel, notification};

#[tokio::test]
async fn the_log_channel_confirms() {
    let log = channel(json!({"type": "log"}));
    assert_eq!(log.deliver(&notification()).await.unwrap().detail, "logged");
}
