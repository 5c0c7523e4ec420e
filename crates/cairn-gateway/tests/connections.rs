//! Slow and idle clients: the header timeout, the idle timeout and the cap
//! on connections, with health checks answered past the cap.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use std::time::Duration;

use cairn_gateway::listen::HEALTH_ROOM;
use support::{TestGateway, settings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Everything the server sends until it closes the connection (or resets it).
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let _ = stream.read_to_end(&mut got).await;
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_header_connections_are_cut_or_refused_while_healthz_answers() {
    const SLOW: usize = 500;
    const MAX: usize = 32;
    let mut s = settings();
    s.max_connections = MAX;
    s.header_timeout = Duration::from_secs(1);
    let gw = TestGateway::start_with(s, |g| g).await;
    let addr = gw.base.trim_start_matches("http://").to_string();

    // Each sends a request line and one header, then nothing more.
    let mut slow = Vec::with_capacity(SLOW);
    for _ in 0..SLOW {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        stream
            .write_all(b"GET /api/routines HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        slow.push(stream);
    }

    // Health checks still answer, on fresh connections, while all are open.
    let health = cairn_llm::tls::client().unwrap();
    for _ in 0..3 {
        let response = tokio::time::timeout(
            Duration::from_secs(5),
            health
                .get(gw.url("/healthz"))
                .header("connection", "close")
                .send(),
        )
        .await
        .expect("/healthz answers within 5 s")
        .unwrap();
        assert_eq!(response.status(), 200);
    }

    // Every slow connection ends: refused with a 503 at once, or cut at the
    // header timeout; none is left hanging.
    let ends = futures::future::join_all(slow.iter_mut().map(|stream| async move {
        tokio::time::timeout(Duration::from_secs(10), read_to_close(stream))
            .await
            .expect("the connection ends within 10 s")
    }))
    .await;
    let refused = ends
        .iter()
        .filter(|text| text.starts_with("HTTP/1.1 503"))
        .count();
    let cut = ends.iter().filter(|text| text.is_empty()).count();
    assert_eq!(
        refused + cut,
        SLOW,
        "{:?}",
        ends.iter()
            .find(|t| !t.is_empty() && !t.starts_with("HTTP/1.1 503"))
    );
    assert!(cut <= MAX + HEALTH_ROOM, "cut {cut}");
    let sample = ends.iter().find(|t| t.starts_with("HTTP/1.1 503")).unwrap();
    assert!(sample.contains("\"code\":\"unavailable\""), "{sample}");
    assert!(sample.contains("gateway.max_connections"), "{sample}");

    // The places are free again.
    assert_eq!(gw.get("/api/routines").send().await.unwrap().status(), 200);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_cap_a_request_gets_503_and_the_connection_closes() {
    let mut s = settings();
    s.max_connections = 2;
    let gw = TestGateway::start_with(s, |g| g).await;
    let addr = gw.base.trim_start_matches("http://").to_string();
    // Two idle connections take both places.
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(TcpStream::connect(&addr).await.unwrap());
    }
    // Wait until the server has taken both (a request on each answers).
    for stream in &mut held {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 12];
        stream.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"HTTP/1.1 200");
    }
    let mut third = TcpStream::connect(&addr).await.unwrap();
    third
        .write_all(b"GET /api/routines HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), read_to_close(&mut third))
        .await
        .expect("answered and closed, not left hanging");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1"),
        "{answer}"
    );
    assert!(
        answer.to_ascii_lowercase().contains("x-request-id: req_"),
        "like every answer, it names its request: {answer}"
    );
    // A health check past the cap is still answered.
    let mut health = TcpStream::connect(&addr).await.unwrap();
    health
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), read_to_close(&mut health))
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(held);
    gw.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_idle_kept_alive_connection_is_closed_after_the_idle_timeout() {
    let mut s = settings();
    s.header_timeout = Duration::from_secs(5);
    s.idle_timeout = Duration::from_secs(20);
    let gw = TestGateway::start_with(s, |g| g).await;
    let addr = gw.base.trim_start_matches("http://").to_string();

    // A connection that never sends a request is closed at the header timeout.
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    let mut one = [0u8; 1];
    assert!(
        tokio::time::timeout(Duration::from_secs(4), silent.read(&mut one))
            .await
            .is_err(),
        "open before the header timeout"
    );
    assert_eq!(
        silent.read(&mut one).await.unwrap_or(0),
        0,
        "closed after it"
    );

    // After a request, a kept-alive connection may wait past the header
    // timeout for its next one, up to the idle timeout.
    let mut kept = TcpStream::connect(&addr).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = kept.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    let n = tokio::time::timeout(Duration::from_secs(10), kept.read(&mut buf)).await;
    assert!(n.is_err(), "still open past the header timeout: {n:?}");
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let n = kept.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "served again");
    let open = tokio::time::timeout(Duration::from_secs(19), kept.read(&mut buf)).await;
    assert!(open.is_err(), "open within the idle timeout");
    let closed = tokio::time::timeout(Duration::from_secs(2), kept.read(&mut buf))
        .await
        .expect("closed at the idle timeout");
    assert_eq!(closed.unwrap_or(0), 0);

    // A request whose headers trickle in is cut at the header timeout.
    let mut trickle = TcpStream::connect(&addr).await.unwrap();
    trickle
        .write_all(b"GET /healthz HTTP/1.1\r\n")
        .await
        .unwrap();
    let mut ended = false;
    for i in 0..10 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if trickle
            .write_all(format!("X-{i}: y\r\n").as_bytes())
            .await
            .is_err()
        {
            ended = true;
            break;
        }
        if let Ok(r) = tokio::time::timeout(Duration::from_millis(1), trickle.read(&mut buf)).await
        {
            assert_eq!(r.unwrap_or(0), 0, "no answer to an unfinished request");
            ended = true;
            break;
        }
    }
    assert!(ended, "the trickling connection was cut");
    gw.stop().await;
}

#[tokio::test]
async fn a_body_sent_too_slowly_is_refused_even_on_an_agent_route() {
    let mut s = settings();
    s.request_timeout = Duration::from_secs(1);
    let gw = TestGateway::start_with(s, |g| g).await;
    let addr = gw.base.trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /webhook HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{{\"mess",
        gw.token
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), read_to_close(&mut stream))
        .await
        .expect("answered, not left hanging");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request_timeout"), "{answer}");
    assert!(gw.llm.requests().is_empty());
    gw.stop().await;
}

/// While the daemon still builds its app, its port already serves: the
/// health checks answer at once (alive, not ready) and any other request
/// waits for the app, then is answered by it; nothing is refused.
#[tokio::test]
async fn before_the_app_is_in_place_healthz_answers_and_the_rest_waits() {
    let listener = cairn_gateway::bind(&settings()).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let slot = cairn_gateway::AppSlot::empty();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn({
        let (slot, shutdown, limits) = (slot.clone(), shutdown.clone(), settings());
        async move { cairn_gateway::serve(listener, slot, &limits, shutdown).await }
    });
    let http = cairn_llm::tls::client().unwrap();

    let health = http.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.unwrap(), r#"{"status":"ok"}"#);
    let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    assert!(ready.text().await.unwrap().contains("starting"));

    let waiting = tokio::spawn({
        let (http, url) = (http.clone(), format!("{base}/anything"));
        async move { http.get(url).send().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiting.is_finished(),
        "a request was answered without the app"
    );
    let app = axum::Router::new().route("/anything", axum::routing::get(|| async { "the app" }));
    slot.fill(app);
    let answered = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiting request is answered once the app is in place")
        .unwrap()
        .unwrap();
    assert_eq!(answered.status(), 200);
    assert_eq!(answered.text().await.unwrap(), "the app");

    shutdown.cancel();
    server.await.unwrap().unwrap();
}
