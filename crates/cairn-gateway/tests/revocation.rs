//! Revoking a token, from any process, ends the WebSocket and event-stream
//! connections that it opened at once (the store's change signal, no
//! polling), and leaves other tokens' streams alone; a token that expires
//! ends its streams when it expires.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use std::time::Duration;

use cairn_core::clock::{Clock, SystemClock};
use cairn_gateway::auth;
use cairn_store::NewApiToken;
use futures::{SinkExt, StreamExt};
use support::TestGateway;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn socket(gw: &TestGateway, token: &str) -> Socket {
    let url = format!("{}/ws/chat", gw.base.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert(
        "Authorization",
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    let (socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    socket
}

/// Reads until the server closes; the close code it sent.
async fn closed(socket: &mut Socket) -> Option<u16> {
    while let Some(message) = socket.next().await {
        match message {
            Ok(Message::Close(frame)) => return frame.map(|f| f.code.into()),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

#[tokio::test]
async fn revoking_a_token_in_another_process_ends_its_websockets_and_event_streams_at_once() {
    let gw = TestGateway::start().await;
    let other = auth::new_token();
    gw.store
        .create_api_token(
            &NewApiToken {
                name: "other".into(),
                token_hash: auth::hash_secret(&other),
                origin: "cli".into(),
                expires_at: None,
            },
            SystemClock.now(),
        )
        .await
        .unwrap();

    let mut revoked_ws = socket(&gw, &gw.token).await;
    let mut kept_ws = socket(&gw, &other).await;
    let events = gw.get("/api/events").send().await.unwrap();
    assert_eq!(events.status(), 200);
    let mut events = events.bytes_stream();

    // `cairn token revoke` is another process: its own store on the database.
    let cli = cairn_store::Store::connect(&gw.db_url).await.unwrap();
    assert!(
        gw.store
            .signal_ready(Duration::from_secs(5))
            .await
            .is_push()
    );
    assert!(
        cli.revoke_api_token("test", SystemClock.now())
            .await
            .unwrap()
    );

    // Well under the 2 s the streams' tokens used to be polled at.
    let code = tokio::time::timeout(Duration::from_secs(1), closed(&mut revoked_ws))
        .await
        .expect("the WebSocket closed within 1 s of the revocation");
    assert_eq!(code, Some(1008));
    tokio::time::timeout(Duration::from_secs(1), async {
        while let Some(chunk) = events.next().await {
            if chunk.is_err() {
                break;
            }
        }
    })
    .await
    .expect("the event stream ended within 1 s of the revocation");

    // The other token's connection is still open and answers.
    kept_ws
        .send(Message::Ping(Default::default()))
        .await
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match kept_ws.next().await {
                Some(Ok(Message::Pong(_))) => return true,
                Some(Ok(Message::Close(_)) | Err(_)) | None => return false,
                Some(Ok(_)) => {}
            }
        }
    })
    .await
    .unwrap();
    assert!(answer, "the other token's WebSocket stayed open");
    gw.stop().await;
}

#[tokio::test]
async fn a_token_that_expires_ends_its_streams_when_it_expires() {
    let gw = TestGateway::start().await;
    let brief = auth::new_token();
    let expires = SystemClock.now() + chrono::Duration::milliseconds(1500);
    gw.store
        .create_api_token(
            &NewApiToken {
                name: "brief".into(),
                token_hash: auth::hash_secret(&brief),
                origin: "cli".into(),
                expires_at: Some(expires),
            },
            SystemClock.now(),
        )
        .await
        .unwrap();
    let mut ws = socket(&gw, &brief).await;
    let code = tokio::time::timeout(Duration::from_secs(5), closed(&mut ws))
        .await
        .expect("the WebSocket closed within 5 s");
    assert_eq!(code, Some(1008));
    assert!(
        SystemClock.now() >= expires,
        "closed at {} before the token expired at {expires}",
        SystemClock.now()
    );
    gw.stop().await;
}
