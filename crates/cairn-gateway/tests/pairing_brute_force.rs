//! The attack that found issue 21: a local process guessing pairing codes
//! from many loopback addresses (every 127.x.y.z reaches a loopback
//! listener), so that per-address limits never trigger. The limit on
//! wrong codes counts every client together, so the right code is void
//! long before a guess could find it, and a valid token works throughout.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use std::net::{IpAddr, Ipv4Addr};

use cairn_gateway::pairing;
use support::TestGateway;

/// Guesses sent from each address.
const GUESSES_EACH: usize = 3;

/// A client whose connections come from `127.0.0.n`.
fn client_from(n: u8) -> reqwest::Client {
    cairn_llm::tls::client_builder()
        .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, n)))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brute_force_from_60_loopback_addresses_voids_the_code() {
    let gw = TestGateway::start().await;
    let code = gw.pairing_code().await;
    let attackers: Vec<reqwest::Client> = (2..=61).map(client_from).collect();
    let mut futures = Vec::new();
    for (i, client) in attackers.iter().enumerate() {
        let (gw, code) = (&gw, &code);
        futures.push(async move {
            let mut statuses = Vec::new();
            for round in 0..GUESSES_EACH {
                let guess = loop {
                    let g = pairing::new_code();
                    if g != *code {
                        break g;
                    }
                };
                let status = client
                    .post(gw.url("/pair"))
                    .header("X-Pairing-Code", guess)
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16();
                statuses.push(status);
                // The owner's token keeps working, from an attacker's address too.
                let owner = client
                    .get(gw.url("/api/routines"))
                    .bearer_auth(&gw.token)
                    .send()
                    .await
                    .unwrap()
                    .status();
                assert_eq!(owner, 200, "address {i}, round {round}");
            }
            statuses
        });
    }
    let statuses: Vec<u16> = futures::future::join_all(futures)
        .await
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(statuses.len(), 60 * GUESSES_EACH);
    assert!(statuses.iter().all(|s| *s == 401), "{statuses:?}");
    // Only the first ten guesses were even compared; the rest met the lock.
    assert_eq!(
        gw.store.pairing_state().await.unwrap().wrong_codes,
        pairing::WRONG_CODES_LIMIT
    );

    // The right code no longer pairs, from any address.
    for client in [&gw.http, &attackers[0], &client_from(99)] {
        let status = client
            .post(gw.url("/pair"))
            .header("X-Pairing-Code", &code)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 401);
    }
    assert!(
        gw.store
            .list_api_tokens()
            .await
            .unwrap()
            .iter()
            .all(|t| t.origin != "pairing"),
        "nothing was paired"
    );
    assert_eq!(gw.get("/api/routines").send().await.unwrap().status(), 200);

    // Only a code made on the machine (`cairn pair`) pairs again.
    let fresh = gw.pairing_code().await;
    let status = gw
        .http
        .post(gw.url("/pair"))
        .header("X-Pairing-Code", &fresh)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);
    gw.stop().await;
}
