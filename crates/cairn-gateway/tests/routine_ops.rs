//! Schedule operations over REST: pause with a note, resume, backfill,
//! next fires; each a call on the routine service.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use support::{TestGateway, error_code};

async fn json_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body)
}

async fn create(gw: &TestGateway, name: &str, trigger: Value) {
    let (status, body) = json_of(
        gw.post("/api/routines")
            .json(&json!({
                "name": name,
                "trigger": trigger,
                "action": {"type": "notification", "message": "hello"}
            }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test]
async fn pause_with_a_note_shows_and_refuses_fires_until_resumed() {
    let gw = TestGateway::start().await;
    create(&gw, "hello", json!({"type": "manual"})).await;
    let (status, body) = json_of(
        gw.post("/api/routines/hello/pause")
            .json(&json!({"note": "moving house"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["paused"]["by"], "ada (api)");
    assert_eq!(body["paused"]["note"], "moving house");
    let (_, shown) = json_of(gw.get("/api/routines/hello").send().await.unwrap()).await;
    assert_eq!(shown["paused"]["note"], "moving house");
    let (_, status_view) = json_of(gw.get("/api/status").send().await.unwrap()).await;
    assert_eq!(status_view["counts"]["paused_routines"], 1);
    let (status, code) =
        error_code(gw.post("/api/routines/hello/fire").send().await.unwrap()).await;
    assert_eq!((status, code.as_str()), (409, "conflict"));
    // Pausing again changes nothing; an empty body is a pause without a note.
    let (status, body) = json_of(gw.post("/api/routines/hello/pause").send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(body["paused"]["note"], "moving house");

    let (status, body) = json_of(gw.post("/api/routines/hello/resume").send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["was_paused"], true);
    assert_eq!(body["routine"]["paused"], Value::Null);
    let (_, body) = json_of(gw.post("/api/routines/hello/resume").send().await.unwrap()).await;
    assert_eq!(body["was_paused"], false);
    let (status, _) = error_code(
        gw.post("/api/routines/hello/pause")
            .json(&json!({"note": "x".repeat(501)}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 422);
    let (status, _) = error_code(gw.post("/api/routines/nope/pause").send().await.unwrap()).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn backfill_queues_past_slots_once_and_bounds_the_range() {
    let gw = TestGateway::start().await;
    create(
        &gw,
        "daily",
        json!({"type": "cron", "schedule": "0 9 * * *"}),
    )
    .await;
    let now = Utc::now();
    let body = json!({"from": now - Duration::hours(72) + Duration::seconds(1), "to": now});
    let (status, done) = json_of(
        gw.post("/api/routines/daily/backfill")
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 202, "{done}");
    assert_eq!(done["overlap"], "buffer_all");
    let queued = done["queued"].as_array().unwrap();
    assert_eq!(queued.len(), 3, "{done}");
    for slot in queued {
        assert_eq!(slot["status"], "waiting");
        let at: DateTime<Utc> = slot["slot"].as_str().unwrap().parse().unwrap();
        assert_eq!(at.format("%H:%M:%S").to_string(), "09:00:00");
    }
    let (_, runs) = json_of(gw.get("/api/routines/daily/runs").send().await.unwrap()).await;
    assert!(
        runs.as_array()
            .unwrap()
            .iter()
            .all(|r| r["trigger_type"] == "backfill"),
        "{runs}"
    );
    let (status, again) = json_of(
        gw.post("/api/routines/daily/backfill")
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 202);
    assert_eq!(again["queued"], json!([]));
    assert_eq!(again["already_run"].as_array().unwrap().len(), 3);

    let years = json!({"from": now - Duration::days(5 * 365), "to": now});
    let response = gw
        .post("/api/routines/daily/backfill")
        .json(&years)
        .send()
        .await
        .unwrap();
    let (status, err) = json_of(response).await;
    assert_eq!(status, 422, "{err}");
    assert_eq!(err["error"]["details"]["max_backfill"], 1000);
    for bad in [
        json!({"from": now - Duration::days(1), "to": now + Duration::days(1)}),
        json!({"from": now - Duration::days(1), "to": now, "overlap": "sometimes"}),
    ] {
        let (status, code) = error_code(
            gw.post("/api/routines/daily/backfill")
                .json(&bad)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!((status, code.as_str()), (422, "invalid"), "{bad}");
    }
}

#[tokio::test]
async fn next_lists_the_coming_fires() {
    let gw = TestGateway::start().await;
    create(
        &gw,
        "daily",
        json!({"type": "cron", "schedule": "0 9 * * *"}),
    )
    .await;
    let (status, next) = json_of(
        gw.get("/api/routines/daily/next?count=3")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{next}");
    let fires: Vec<DateTime<Utc>> = next
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["fires_at"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(fires.len(), 3);
    assert_eq!(fires[1] - fires[0], Duration::days(1));
    let (status, _) = error_code(
        gw.get("/api/routines/daily/next?count=0")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 400);
}
