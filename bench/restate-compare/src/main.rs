//! The SDK-path workload of `turnwise-bench` (`bench/src/sdk_load.rs`) on Restate: a keyed
//! service (virtual object) `Checkout` whose handler runs three durable steps (`ctx.run`), then
//! updates the object's state and replies; `c` clients, each owning one key, call it through
//! Restate's ingress and wait for the reply, in a loop. Prints steps/s and the p50/p99 call for
//! each concurrency.
//!
//! Usage: `restate-compare [--turns N] [--concurrency 1,16,64]`, with a `restate-server` already
//! listening on 127.0.0.1 (ingress 8080, admin 9070); `run.sh` starts one.

use std::time::{Duration, Instant};

use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Order {
    k: u64,
    item: String,
    quantity: u32,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Ledger {
    orders: u64,
    total_cents: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Priced {
    k: u64,
    cents: u64,
}

struct Checkout;

#[object]
impl Checkout {
    #[handler]
    async fn checkout(
        &self,
        ctx: ObjectContext<'_>,
        order: Json<Order>,
    ) -> Result<Json<u64>, HandlerError> {
        let order = order.into_inner();
        let priced = ctx
            .run(|| async move {
                Ok(Json(Priced {
                    k: order.k,
                    cents: u64::from(order.quantity) * 250,
                }))
            })
            .name("reserve")
            .await?
            .into_inner();
        let charged = ctx
            .run(|| async move {
                Ok(Json(Priced {
                    cents: priced.cents + 30,
                    ..priced
                }))
            })
            .name("charge")
            .await?
            .into_inner();
        let cents = ctx
            .run(|| async move { Ok(charged.cents) })
            .name("receipt")
            .await?;
        let ledger = ctx
            .get::<Json<Ledger>>("ledger")
            .await?
            .map(Json::into_inner)
            .unwrap_or_default();
        ctx.set(
            "ledger",
            Json(Ledger {
                orders: ledger.orders + 1,
                total_cents: ledger.total_cents + cents,
            }),
        );
        Ok(Json(cents))
    }
}

fn order(k: u64) -> Order {
    Order {
        k,
        item: format!("item-{}", k % 97),
        quantity: (k % 5) as u32 + 1,
    }
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

async fn call(http: &reqwest::Client, key: &str, k: u64) -> Duration {
    let started = Instant::now();
    let response = http
        .post(format!("http://127.0.0.1:8080/Checkout/{key}/checkout"))
        .json(&order(k))
        .send()
        .await
        .expect("the ingress answers");
    assert!(
        response.status().is_success(),
        "call {k} of {key}: {}",
        response.status()
    );
    let _cents: u64 = response.json().await.expect("a number");
    started.elapsed()
}

#[tokio::main]
async fn main() {
    let turns: u64 = arg("--turns").map_or(3000, |v| v.parse().expect("--turns N"));
    let levels: Vec<usize> = arg("--concurrency")
        .unwrap_or_else(|| "1,16,64".into())
        .split(',')
        .map(|c| c.parse().expect("--concurrency 1,16,64"))
        .collect();

    tokio::spawn(
        HttpServer::new(Endpoint::builder().bind(Checkout).build())
            .listen_and_serve("127.0.0.1:9080".parse().unwrap()),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let http = reqwest::Client::new();
    let registered = http
        .post("http://127.0.0.1:9070/deployments")
        .json(&serde_json::json!({ "uri": "http://127.0.0.1:9080", "force": true }))
        .send()
        .await
        .expect("restate-server's admin API on 127.0.0.1:9070");
    assert!(
        registered.status().is_success(),
        "registering the deployment: {}",
        registered.status()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;

    println!("| c | calls | steps/s | p50 call | p99 call |");
    println!("|---:|---:|---:|---:|---:|");
    for (run, c) in levels.into_iter().enumerate() {
        let per_client = (turns / c as u64).max(1);
        // Two warm-up calls per client, as turnwise-bench does.
        let mut tasks = Vec::new();
        for i in 0..c {
            let http = http.clone();
            let key = format!("r{run}-{i}");
            tasks.push(tokio::spawn(async move {
                for k in 0..2 {
                    call(&http, &key, k).await;
                }
                key
            }));
        }
        let mut keys = Vec::new();
        for t in tasks {
            keys.push(t.await.unwrap());
        }
        let started = Instant::now();
        let mut tasks = Vec::new();
        for key in keys {
            let http = http.clone();
            tasks.push(tokio::spawn(async move {
                let mut took = Vec::with_capacity(per_client as usize);
                for k in 0..per_client {
                    took.push(call(&http, &key, 2 + k).await);
                }
                took
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        let elapsed = started.elapsed();
        all.sort();
        let pick = |q: f64| all[((all.len() - 1) as f64 * q) as usize];
        println!(
            "| {c} | {} | {:.0} | {:.2} ms | {:.2} ms |",
            all.len(),
            3.0 * all.len() as f64 / elapsed.as_secs_f64(),
            pick(0.5).as_secs_f64() * 1e3,
            pick(0.99).as_secs_f64() * 1e3,
        );
    }
}
