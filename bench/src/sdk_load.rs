//! The SDK path: what an application runs, measured the way a user would measure it.
//!
//! One `#[workflow]` with three `#[step]`s ([`checkout`]), `c` instances `sdk-<i>` of it, and
//! one [`Worker`] with `c` slots claiming that one workflow type. Two shapes:
//!
//! - **call and await** ([`call_level`]): `c` clients, each owning one instance, call
//!   [`Handle::call`] in a loop (admit a message, then wait for its turn's reply: woken by the
//!   engine's commit in-process, a long-poll over HTTP). A call's latency runs from the
//!   admission to the decoded reply in the client's hands.
//! - **queued first** ([`queued_level`]): every instance is sent `n` messages before the worker
//!   starts; the clock runs from the worker's start until the last reply of every instance has
//!   been observed.
//!
//! Everything crosses the typed codec (values are encoded, decoded and checked as the SDK
//! always does), and the workers and clients reach the engine through the same backend as the
//! raw phase: the engine itself, or the `Http` backend against the turnwise server's router on
//! loopback.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::Barrier;
use turnwise::prelude::*;
use turnwise::worker::RunningWorker;
use turnwise::{Error, WorkerBackend};

use crate::alloc_count::{self, Allocations};
use crate::engine_load::{Counters, Setup, StoreKind, Transport};
use crate::stats::Summary;

/// Calls each client makes before measuring starts.
const WARMUP_CALLS: u64 = 2;

/// An order: the message of a turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Order {
    /// A per-client sequence number.
    pub k: u64,
    /// What is ordered.
    pub item: String,
    /// How many.
    pub quantity: u32,
}

/// The saved state: what the instance has taken so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ledger {
    /// Orders taken.
    pub orders: u64,
    /// Their total, in cents.
    pub total_cents: u64,
}

/// A priced order: the output of a step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Priced {
    /// The order's sequence number.
    pub k: u64,
    /// Its price, in cents.
    pub cents: u64,
}

/// Step 1: look the item up.
#[step]
async fn reserve(order: Order) -> Result<Priced, TurnError> {
    Ok(Priced {
        k: order.k,
        cents: u64::from(order.quantity) * 250,
    })
}

/// Step 2: charge for it.
#[step]
async fn charge(priced: Priced) -> Result<Priced, TurnError> {
    Ok(Priced {
        cents: priced.cents + 30,
        ..priced
    })
}

/// Step 3: record the receipt.
#[step]
async fn receipt(priced: Priced) -> Result<u64, TurnError> {
    Ok(priced.cents)
}

/// The benchmark's workflow: three steps, a new state and a reply per turn.
#[workflow(name = "checkout", version = "v1")]
pub async fn checkout(
    ctx: &mut Turn,
    ledger: Ledger,
    order: Order,
) -> Result<Done<Ledger, u64>, TurnError> {
    let priced = reserve(ctx, order).await?;
    let charged = charge(ctx, priced).await?;
    let cents = receipt(ctx, charged).await?;
    let next = Ledger {
        orders: ledger.orders + 1,
        total_cents: ledger.total_cents + cents,
    };
    Ok(Done::new(next).reply(cents))
}

fn order(k: u64) -> Order {
    Order {
        k,
        item: format!("item-{}", k % 97),
        quantity: (k % 5) as u32 + 1,
    }
}

/// What one level of the SDK path measured.
#[derive(Clone, Debug)]
pub struct SdkResult {
    /// Instances, clients and worker slots.
    pub concurrency: usize,
    /// Measured turns (warm-up excluded).
    pub turns: u64,
    /// Wall time of the measured turns.
    pub elapsed: Duration,
    /// Call latency, admission to the decoded reply (call and await only).
    pub latency: Option<Summary>,
    /// The store's counters over the measured turns (SQLite only).
    pub store: Option<Counters>,
    /// Allocations over the measured turns, when they were counted.
    pub allocations: Option<Allocations>,
}

/// A worker with `c` slots on the one workflow type, over the setup's backend.
fn worker(setup: &Setup, c: usize) -> RunningWorker {
    Worker::new(setup.backend.clone())
        .register(checkout)
        .concurrency(c)
        .id("bench-worker")
        .run_async()
}

async fn start_instances(
    backend: &Arc<dyn WorkerBackend>,
    c: usize,
) -> Result<Vec<Handle<checkout>>, Error> {
    let mut handles = Vec::with_capacity(c);
    for i in 0..c {
        handles.push(checkout.start(backend, format!("sdk-{i}")).await?);
    }
    Ok(handles)
}

/// `turns` calls spread over `c` clients, each awaiting its own instance's reply, with one
/// worker of `c` slots running the turns.
pub async fn call_level(
    kind: StoreKind,
    transport: Transport,
    path: &Path,
    c: usize,
    turns: u64,
    count_allocations: bool,
) -> Result<SdkResult, Error> {
    let setup = Setup::open(kind, path, transport).await?;
    let c = c.max(1);
    let handles = start_instances(&setup.backend, c).await?;
    let running = worker(&setup, c);
    let warmed = Arc::new(Barrier::new(c + 1));
    let go = Arc::new(Barrier::new(c + 1));
    let mut tasks = Vec::with_capacity(c);
    for (i, handle) in handles.into_iter().enumerate() {
        let share = turns / c as u64 + u64::from((i as u64) < turns % c as u64);
        let (warmed, go) = (warmed.clone(), go.clone());
        tasks.push(tokio::spawn(async move {
            let mut k = 0;
            let mut failure = None;
            for _ in 0..WARMUP_CALLS {
                k += 1;
                if let Err(e) = handle.call(order(k), format!("m-{k}")).await {
                    failure = Some(e);
                    break;
                }
            }
            warmed.wait().await;
            go.wait().await;
            if let Some(e) = failure {
                return Err(e);
            }
            let mut samples = Vec::with_capacity(share as usize);
            for _ in 0..share {
                k += 1;
                let t0 = Instant::now();
                handle.call(order(k), format!("m-{k}")).await?;
                samples.push(t0.elapsed());
            }
            Ok(samples)
        }));
    }
    warmed.wait().await;
    let before = setup.counters();
    if count_allocations {
        alloc_count::start();
    }
    let started = Instant::now();
    go.wait().await;
    let (mut samples, failure) = crate::stats::gather(tasks, "client").await;
    let elapsed = started.elapsed();
    let allocations = count_allocations.then(alloc_count::stop);
    let store = setup.counters().zip(before).map(|(a, b)| a.since(b));
    running.stop().await?;
    if let Some(e) = failure {
        return Err(Error::store(format!("a call failed: {e}")));
    }
    Ok(SdkResult {
        concurrency: c,
        turns: samples.len() as u64,
        elapsed,
        latency: Some(Summary::of(&mut samples)),
        store,
        allocations,
    })
}

/// `per_instance` messages admitted to each of `c` instances before a worker of `c` slots
/// starts; measured from the worker's start to the last reply of every instance.
pub async fn queued_level(
    kind: StoreKind,
    transport: Transport,
    path: &Path,
    c: usize,
    per_instance: u64,
) -> Result<SdkResult, Error> {
    let setup = Setup::open(kind, path, transport).await?;
    let c = c.max(1);
    let handles = start_instances(&setup.backend, c).await?;
    let mut admit = Vec::with_capacity(c);
    for handle in &handles {
        let handle = handle.clone();
        admit.push(tokio::spawn(async move {
            let mut last = 0;
            for k in 1..=per_instance {
                last = handle.send(order(k), format!("m-{k}")).await?.number;
            }
            Ok::<_, Error>(last)
        }));
    }
    let mut lasts = Vec::with_capacity(c);
    for a in admit {
        lasts.push(a.await.map_err(|e| Error::store(e.to_string()))??);
    }
    let before = setup.counters();
    let started = Instant::now();
    let running = worker(&setup, c);
    let mut waits = Vec::with_capacity(c);
    for (handle, last) in handles.into_iter().zip(lasts) {
        waits.push(tokio::spawn(async move { handle.result(last).await }));
    }
    let mut failure = None;
    for w in waits {
        match w.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => failure = failure.or(Some(e)),
            Err(join) => panic!("a bench client panicked: {join}"),
        }
    }
    let elapsed = started.elapsed();
    let store = setup.counters().zip(before).map(|(a, b)| a.since(b));
    running.stop().await?;
    if let Some(e) = failure {
        return Err(Error::store(format!("a queued turn failed: {e}")));
    }
    Ok(SdkResult {
        concurrency: c,
        turns: c as u64 * per_instance,
        elapsed,
        latency: None,
        store,
        allocations: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SDK phases run end to end on each transport (a memory store, a few turns): every
    /// call is answered with the workflow's reply and every queued turn is observed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn both_shapes_run_on_both_transports() {
        let nowhere = Path::new("unused.db");
        for transport in [Transport::Embedded, Transport::Http] {
            let call = call_level(StoreKind::Memory, transport, nowhere, 3, 12, true)
                .await
                .unwrap();
            assert_eq!((call.concurrency, call.turns), (3, 12), "{transport:?}");
            let counted = call.allocations.expect("counted");
            assert!(counted.count > 0, "{transport:?}: {counted:?}");
            let queued = queued_level(StoreKind::Memory, transport, nowhere, 2, 5)
                .await
                .unwrap();
            assert_eq!(queued.turns, 10, "{transport:?}");
            assert!(queued.latency.is_none());
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_workflow_replies_with_the_priced_order() {
        let engine = turnwise::Engine::in_memory();
        let worker = Worker::new(engine.clone()).register(checkout).run_async();
        let handle = checkout.start(&engine, "one").await.unwrap();
        // quantity (7 % 5) + 1 = 3 at 250 cents, plus 30.
        assert_eq!(handle.call(order(7), "m-7").await.unwrap(), 3 * 250 + 30);
        assert_eq!(handle.state().await.unwrap().orders, 1);
        worker.stop().await.unwrap();
    }
}
