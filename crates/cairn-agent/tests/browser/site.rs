//! The pages the browser tests visit: a site on 127.0.0.1 and a "secret"
//! server on 127.0.0.2 (a loopback address `allowed_private_networks` can
//! leave out while letting the site's through), each recording what reaches it.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};

/// The two servers and what reached them.
pub struct Site {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// `http://127.0.0.2:PORT`.
    pub secret: String,
    /// `METHOD PATH` of every request to the site, and each POST's body.
    pub site_log: Arc<Mutex<Vec<String>>>,
    /// Every request to the secret server.
    pub secret_log: Arc<Mutex<Vec<String>>>,
}

#[derive(Clone)]
struct Shared {
    secret: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Site {
    pub async fn start() -> Site {
        let secret_log = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&secret_log);
        let secret_app = Router::new().fallback(move |uri: axum::http::Uri| {
            let seen = Arc::clone(&seen);
            async move {
                seen.lock().unwrap().push(uri.to_string());
                ([(header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")], "SECRET-7781")
            }
        });
        let secret_listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
        let secret = format!("http://{}", secret_listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(secret_listener, secret_app).await });

        let site_log = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            secret: secret.clone(),
            log: Arc::clone(&site_log),
        };
        let app = Router::new()
            .route("/js", get(js))
            .route("/login", get(login))
            .route("/session", post(session))
            .route("/xhr", get(xhr))
            .route("/redirect", get(redirect))
            .route("/slow", get(slow))
            .route("/cookie", get(cookie))
            .route("/whoami", get(whoami))
            .route("/page/{n}", get(numbered))
            .route("/hang", get(hang))
            .route("/choose", get(choose))
            .route("/ws", get(websocket))
            .route("/files", get(files))
            .route("/report.csv", get(report))
            .layer(axum::middleware::from_fn_with_state(shared.clone(), record))
            .with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Site {
            base,
            secret,
            site_log,
            secret_log,
        }
    }

    /// The site's URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// What reached the site.
    pub fn site_requests(&self) -> Vec<String> {
        self.site_log.lock().unwrap().clone()
    }

    /// What reached the secret server.
    pub fn secret_requests(&self) -> Vec<String> {
        self.secret_log.lock().unwrap().clone()
    }
}

async fn record(
    State(shared): State<Shared>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    shared
        .log
        .lock()
        .unwrap()
        .push(format!("{} {}", request.method(), request.uri().path()));
    next.run(request).await
}

fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html><html><head><meta charset=utf-8><title>{title}</title></head><body>{body}</body></html>"
    ))
}

async fn js() -> Html<String> {
    page(
        "Status",
        "<h1>Status</h1><p id=out>Loading…</p>\
         <script>window.addEventListener('load', () => { \
           document.getElementById('out').textContent = 'All systems green 4417'; });</script>",
    )
}

async fn login() -> Html<String> {
    page(
        "Sign in",
        "<h1>Sign in</h1><form method=post action=/session>\
         <label for=user>User</label> <input id=user name=user>\
         <label for=pw>Password</label> <input id=pw name=password type=password>\
         <button type=submit>Sign in</button></form>",
    )
}

async fn session(State(shared): State<Shared>, body: String) -> Html<String> {
    shared.log.lock().unwrap().push(format!("BODY {body}"));
    let user = body
        .split('&')
        .find_map(|kv| kv.strip_prefix("user="))
        .unwrap_or("nobody")
        .to_string();
    page("Welcome", &format!("<h1>Welcome, {user}</h1>"))
}

async fn xhr(State(shared): State<Shared>) -> Html<String> {
    page(
        "Fetcher",
        &format!(
            "<h1>Fetcher</h1><p id=out>waiting</p><script>\
             fetch('{}/hidden').then(r => r.text()).then(t => {{ document.getElementById('out').textContent = 'got ' + t; }})\
             .catch(e => {{ document.getElementById('out').textContent = 'fetch failed'; }});</script>",
            shared.secret
        ),
    )
}

async fn redirect(State(shared): State<Shared>) -> Response {
    (
        StatusCode::FOUND,
        [(header::LOCATION, format!("{}/hidden", shared.secret))],
    )
        .into_response()
}

/// Never answers.
async fn slow() -> Html<String> {
    std::future::pending::<()>().await;
    page("never", "")
}

async fn cookie() -> Response {
    (
        [(header::SET_COOKIE, "seen=yes-2231; Max-Age=86400; Path=/")],
        page("Cookie set", "<p>cookie set</p>"),
    )
        .into_response()
}

async fn whoami(headers: HeaderMap) -> Html<String> {
    let cookie = headers
        .get(header::COOKIE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("no cookie")
        .to_string();
    page("Who", &format!("<p>cookie: {cookie}</p>"))
}

async fn numbered(axum::extract::Path(n): axum::extract::Path<u32>) -> Html<String> {
    page(
        &format!("Page {n}"),
        &format!("<h1>Page {n}</h1><a href=/page/{}>next</a>", n + 1),
    )
}

/// A page whose script never ends: its renderer hangs.
async fn hang() -> Html<String> {
    page("Hang", "<p>spinning</p><script>for (;;) {}</script>")
}

async fn choose() -> Html<String> {
    page(
        "Choose",
        "<label for=c>Colour</label><select id=c onchange=\"document.getElementById('out').textContent = 'chose ' + this.value\">\
         <option value=r>Red</option><option value=g>Green</option></select><p id=out>none yet</p>",
    )
}

async fn websocket(State(shared): State<Shared>) -> Html<String> {
    let ws = shared.secret.replace("http://", "ws://");
    page(
        "Socket",
        &format!(
            "<p id=out>connecting</p><script>const s = new WebSocket('{ws}/socket'); \
             s.onerror = () => {{ document.getElementById('out').textContent = 'socket closed'; }};</script>"
        ),
    )
}

async fn files() -> Html<String> {
    page("Files", "<a href=/report.csv>the report</a>")
}

async fn report() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/csv"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"report.csv\"",
            ),
        ],
        "day,visits\nmonday,3\n",
    )
        .into_response()
}
