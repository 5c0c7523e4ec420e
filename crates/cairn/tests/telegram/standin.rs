//! A local Telegram Bot API stand-in: real HTTP on 127.0.0.1 (axum), long
//! polling `getUpdates` with Telegram's offset rule (asking from an offset
//! confirms every update before it), messages kept with their edits, and
//! every call recorded.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::Notify;

pub const TOKEN: &str = "123456:TEST-secret-token";
pub const BOT_ID: i64 = 999;

#[derive(Default)]
pub struct World {
    /// Updates not yet confirmed.
    pub updates: Vec<Value>,
    pub next_update: i64,
    /// Every call: (method, body).
    pub calls: Vec<(String, Value)>,
    /// The bot token of each call, in the same order.
    pub tokens: Vec<String>,
    /// Messages sent by the bot: id → (chat, text, keyboard?).
    pub messages: BTreeMap<i64, (i64, String, Option<Value>)>,
    pub next_message: i64,
    /// Offsets asked for, in order.
    pub offsets: Vec<i64>,
}

#[derive(Clone)]
struct Shared {
    world: Arc<Mutex<World>>,
    arrived: Arc<Notify>,
    /// The bot tokens answered (others are refused as Telegram does).
    accepted: Arc<Mutex<Vec<String>>>,
}

pub struct StandIn {
    pub url: String,
    shared: Shared,
}

async fn method(
    State(s): State<Shared>,
    Path((bot, method)): Path<(String, String)>,
    body: Option<Json<Value>>,
) -> Json<Value> {
    let body = body.map(|Json(b)| b).unwrap_or(Value::Null);
    let token = bot.strip_prefix("bot").unwrap_or_default().to_string();
    if !s.accepted.lock().unwrap().contains(&token) {
        return Json(json!({"ok": false, "error_code": 401, "description": "Unauthorized"}));
    }
    {
        let mut w = s.world.lock().unwrap();
        w.calls.push((method.clone(), body.clone()));
        w.tokens.push(token);
    }
    let result = match method.as_str() {
        "getMe" => {
            json!({"id": BOT_ID, "is_bot": true, "first_name": "Cairn Test", "username": "cairn_test_bot"})
        }
        "getUpdates" => {
            let offset = body["offset"].as_i64().unwrap_or(0);
            let wait = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
            let deadline = Instant::now() + wait;
            loop {
                let notified = s.arrived.notified();
                {
                    let mut w = s.world.lock().unwrap();
                    w.offsets.push(offset);
                    w.updates
                        .retain(|u| u["update_id"].as_i64().unwrap() >= offset);
                    if !w.updates.is_empty() || Instant::now() >= deadline {
                        break Value::Array(w.updates.clone());
                    }
                }
                let left = deadline.saturating_duration_since(Instant::now());
                let _ = tokio::time::timeout(left, notified).await;
            }
        }
        "sendMessage" => {
            let mut w = s.world.lock().unwrap();
            w.next_message += 1;
            let id = w.next_message;
            let chat = body["chat_id"].as_i64().unwrap();
            let text = body["text"].as_str().unwrap().to_string();
            let keyboard = body.get("reply_markup").cloned();
            w.messages.insert(id, (chat, text, keyboard));
            json!({"message_id": id, "chat": {"id": chat, "type": "private"}, "date": 0})
        }
        "editMessageText" => {
            let mut w = s.world.lock().unwrap();
            let id = body["message_id"].as_i64().unwrap();
            let text = body["text"].as_str().unwrap().to_string();
            if let Some(m) = w.messages.get_mut(&id) {
                m.1 = text;
                m.2 = None;
            }
            json!(true)
        }
        "getFile" => json!({"file_id": body["file_id"], "file_path": "docs/file.bin"}),
        _ => json!(true),
    };
    Json(json!({"ok": true, "result": result}))
}

async fn file() -> Vec<u8> {
    b"hello from a document".to_vec()
}

impl StandIn {
    pub fn start() -> StandIn {
        let shared = Shared {
            world: Arc::default(),
            arrived: Arc::new(Notify::new()),
            accepted: Arc::new(Mutex::new(vec![TOKEN.to_string()])),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let app_state = shared.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let app = axum::Router::new()
                    .route("/{bot}/{method}", post(method))
                    .route("/file/{bot}/{*path}", get(file))
                    .with_state(app_state);
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        let addr = rx.recv().unwrap();
        StandIn {
            url: format!("http://{addr}"),
            shared,
        }
    }

    /// Answers calls with `token` too.
    pub fn accept(&self, token: &str) {
        self.shared.accepted.lock().unwrap().push(token.to_string());
    }

    /// Numbers the next updates `n` later (as another bot's would be).
    pub fn skip_updates(&self, n: i64) {
        self.shared.world.lock().unwrap().next_update += n;
    }

    fn push(&self, mut update: Value) -> i64 {
        let id = {
            let mut w = self.shared.world.lock().unwrap();
            w.next_update += 1;
            let id = 1000 + w.next_update;
            update["update_id"] = id.into();
            // A message's id is its update's: distinct, and known to the test.
            if let Some(message) = update.get_mut("message") {
                message["message_id"] = id.into();
            }
            w.updates.push(update);
            id
        };
        self.shared.arrived.notify_waiters();
        id
    }

    /// A private text message from `user` (their chat id is their user
    /// id); its update id, which is also the message's id.
    pub fn message(&self, user: i64, text: &str) -> i64 {
        self.push(json!({"message": {
            "message_id": 1, "date": 0, "text": text,
            "from": {"id": user, "is_bot": false, "first_name": "P"},
            "chat": {"id": user, "type": "private"},
        }}))
    }

    /// A group message from `user`.
    pub fn group_message(&self, user: i64, group: i64, text: &str) -> i64 {
        self.push(json!({"message": {
            "message_id": 1, "date": 0, "text": text,
            "from": {"id": user, "is_bot": false, "first_name": "P"},
            "chat": {"id": group, "type": "group"},
        }}))
    }

    /// A document from `user`.
    pub fn document(&self, user: i64, name: &str, caption: &str) -> i64 {
        self.push(json!({"message": {
            "message_id": 1, "date": 0, "caption": caption,
            "document": {"file_id": "F1", "file_name": name, "file_size": 21},
            "from": {"id": user, "is_bot": false, "first_name": "P"},
            "chat": {"id": user, "type": "private"},
        }}))
    }

    /// `user` presses a button with `data` on message `message`.
    pub fn press(&self, user: i64, message: i64, data: &str) -> i64 {
        self.push(json!({"callback_query": {
            "id": format!("cb{message}"), "data": data,
            "from": {"id": user, "is_bot": false, "first_name": "P"},
            "message": {"message_id": message, "date": 0, "chat": {"id": user, "type": "private"}},
        }}))
    }

    pub fn world<T>(&self, f: impl FnOnce(&World) -> T) -> T {
        f(&self.shared.world.lock().unwrap())
    }

    /// Waits (up to 60 s) until `f` holds.
    pub fn until(&self, what: &str, f: impl Fn(&World) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.world(&f) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The calls of `method`.
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.world(|w| {
            w.calls
                .iter()
                .filter(|(m, _)| m == method)
                .map(|(_, b)| b.clone())
                .collect()
        })
    }

    /// Texts of the messages sent to `chat`, in order, as they are now.
    pub fn texts(&self, chat: i64) -> Vec<String> {
        self.world(|w| {
            w.messages
                .values()
                .filter(|(c, _, _)| *c == chat)
                .map(|(_, t, _)| t.clone())
                .collect()
        })
    }
}
