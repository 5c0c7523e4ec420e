//! A Telegram channel changed in config.toml while the daemon runs: the
//! poller is stopped and started with the new address, token or allowed
//! users, from the update where the old one stopped, without a restart.

use cairn_llm::testing::{FakeLlmServer, Scripted};

use super::standin::{StandIn, TOKEN};
use super::{Home, OWNER, asked};

/// Rewrites config.toml's channel with these settings (the daemon's file
/// watch sees it).
fn rewrite(home: &Home, token: &str, api_url: &str, allowed: &[i64]) {
    let allowed: Vec<String> = allowed.iter().map(|u| format!("\"{u}\"")).collect();
    let config = format!(
        "[gateway]\nenabled = false\n\n[channels.tg]\ntype = \"telegram\"\nbot_token = \"{token}\"\n\
         chat_id = \"{OWNER}\"\ninbound = true\nallowed_users = [{}]\napi_url = \"{api_url}\"\n",
        allowed.join(", ")
    );
    std::fs::write(home.dir.join("config.toml"), config).unwrap();
}

/// The offsets `standin` was asked for by `getUpdates`.
fn polls(standin: &StandIn) -> Vec<i64> {
    standin
        .calls("getUpdates")
        .iter()
        .map(|c| c["offset"].as_i64().unwrap_or_default())
        .collect()
}

/// One message from the owner, answered.
fn round_trip(standin: &StandIn, llm: &FakeLlmServer, text: &str) {
    let answer = format!("answer to {text}");
    llm.push(Scripted::text(answer.clone()));
    standin.message(OWNER, text);
    standin.until("the answer", |w| w.messages.values().any(|m| m.1 == answer));
}

#[test]
fn a_changed_api_url_moves_polling_to_the_new_address_without_a_restart() {
    let (old, new) = (StandIn::start(), StandIn::start());
    // Another server's update ids: past the ones the old one gave.
    new.skip_updates(100);
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&old, &llm, None);
    let daemon = home.daemon(&old);
    round_trip(&old, &llm, "before");
    let cursor = *polls(&old).last().unwrap();

    rewrite(&home, TOKEN, &new.url, &[OWNER]);
    new.until("a poll at the new address", |w| {
        w.calls.iter().any(|(m, _)| m == "getUpdates")
    });
    // The lease and the cursor are kept: the new poller asks from where the old stopped.
    assert!(polls(&new)[0] >= cursor, "{:?} after {cursor}", polls(&new));
    let at_old = polls(&old).len();
    round_trip(&new, &llm, "after");
    assert_eq!(polls(&old).len(), at_old, "the old address is still polled");
    assert_eq!(asked(&llm), ["before", "after"]);
    daemon.stop();
}

#[test]
fn a_changed_token_is_polled_with_at_once() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm, None);
    let daemon = home.daemon(&standin);
    let other = "654321:OTHER-secret-token";
    standin.accept(other);
    rewrite(&home, other, &standin.url, &[OWNER]);
    standin.until("a poll with the new token", |w| {
        w.calls
            .iter()
            .zip(&w.tokens)
            .any(|((m, _), t)| m == "getUpdates" && t == other)
    });
    // Every call since is the new bot's.
    let tokens = standin.world(|w| w.tokens.clone());
    let first = tokens.iter().position(|t| t == other).unwrap();
    assert!(tokens[first..].iter().all(|t| t == other), "{tokens:?}");
    round_trip(&standin, &llm, "with the new bot");
    daemon.stop();
}

#[test]
fn a_person_added_to_allowed_users_is_answered_without_a_restart() {
    let standin = StandIn::start();
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let home = Home::new(&standin, &llm, None);
    let daemon = home.daemon(&standin);
    let refused = standin.message(7, "hello?");
    super::seen(&standin, refused);
    assert!(asked(&llm).is_empty());
    let polled = polls(&standin).len();
    rewrite(&home, TOKEN, &standin.url, &[OWNER, 7]);
    // A new poller: asked again with getMe, then polling.
    standin.until("the channel started again", |w| {
        w.calls.iter().filter(|(m, _)| m == "getUpdates").count() > polled
            && w.calls.iter().filter(|(m, _)| m == "getMe").count() >= 2
    });
    llm.push(Scripted::text("welcome"));
    standin.message(7, "and now?");
    standin.until("the answer", |w| {
        w.messages.values().any(|m| m.0 == 7 && m.1 == "welcome")
    });
    assert_eq!(asked(&llm), ["and now?"]);
    daemon.stop();
}
