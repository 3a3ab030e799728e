//! Parallel steps: a turn fanning out 16 steps against the same 16 steps awaited one after the
//! other. Each step stands for I/O: it awaits a 5 ms tokio sleep and returns its index.
//!
//! `c` clients each call their own instance through a typed handle and await the reply; one
//! [`Worker`] with `c` slots runs the turns. The figure is the wall time of a turn as its
//! client sees it (admission to decoded reply), and turns per second.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use turnwise::prelude::*;
use turnwise::{Error, WorkerBackend};

use crate::engine_load::{Setup, StoreKind, Transport};
use crate::stats::Summary;

/// Steps per turn.
pub const WIDTH: u64 = 16;
/// The I/O each step stands for.
pub const IO: Duration = Duration::from_millis(5);

/// `n` steps at once, saved in order.
#[workflow(name = "bench-fan-out", version = "v1")]
pub async fn fan_out(ctx: &mut Turn, state: u64, n: u64) -> Result<Done<u64, u64>, TurnError> {
    let out: Vec<u64> = ctx
        .fan_out("io", 0..n, |_, i| async move {
            tokio::time::sleep(IO).await;
            Ok(i)
        })
        .await?;
    Ok(Done::new(state + 1).reply(out.iter().sum()))
}

/// The same `n` steps, one after the other.
#[workflow(name = "bench-sequential", version = "v1")]
pub async fn sequential(ctx: &mut Turn, state: u64, n: u64) -> Result<Done<u64, u64>, TurnError> {
    let mut sum = 0;
    for i in 0..n {
        sum += ctx
            .step(format!("io-{i}"), move |_| async move {
                tokio::time::sleep(IO).await;
                Ok(i)
            })
            .await?;
    }
    Ok(Done::new(state + 1).reply(sum))
}

/// What one level measured.
#[derive(Clone, Debug)]
pub struct FanOutResult {
    /// Instances, clients and worker slots.
    pub concurrency: usize,
    /// Measured turns.
    pub turns: u64,
    /// Wall time of the measured turns.
    pub elapsed: Duration,
    /// Turn wall time, admission to decoded reply.
    pub latency: Summary,
}

/// `turns` turns of `workflow` spread over `c` clients, each awaiting its own instance's reply.
pub async fn level<W>(
    workflow: W,
    kind: StoreKind,
    transport: Transport,
    path: &Path,
    c: usize,
    turns: u64,
) -> Result<FanOutResult, Error>
where
    W: Workflow<State = u64, Message = u64, Reply = u64> + Clone,
{
    let setup = Setup::open(kind, path, transport).await?;
    let c = c.max(1);
    let backend: Arc<dyn WorkerBackend> = setup.backend.clone();
    let running = Worker::new(backend.clone())
        .register(workflow.clone())
        .concurrency(c)
        .id("bench-fan-out")
        .run_async();
    let mut tasks = Vec::with_capacity(c);
    let started = Instant::now();
    for i in 0..c {
        let handle = workflow.start(&backend, format!("{}-{i}", W::NAME)).await?;
        let share = turns / c as u64 + u64::from((i as u64) < turns % c as u64);
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::with_capacity(share as usize);
            for k in 0..share {
                let t0 = Instant::now();
                let sum = handle.call(WIDTH, format!("m-{k}")).await?;
                if sum != WIDTH * (WIDTH - 1) / 2 {
                    return Err(CallError::from(Error::store(format!(
                        "a turn replied {sum}, not the sum of its step outputs"
                    ))));
                }
                samples.push(t0.elapsed());
            }
            Ok(samples)
        }));
    }
    let (mut samples, failure) = crate::stats::gather(tasks, "client").await;
    let elapsed = started.elapsed();
    running.stop().await?;
    if let Some(e) = failure {
        return Err(Error::store(format!("a call failed: {e}")));
    }
    Ok(FanOutResult {
        concurrency: c,
        turns: samples.len() as u64,
        elapsed,
        latency: Summary::of(&mut samples),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both shapes run end to end on each transport (a memory store, a few turns); every
    /// reply is checked against the sum of the step outputs inside [`level`].
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn both_shapes_run_on_both_transports() {
        let nowhere = Path::new("unused.db");
        for transport in [Transport::Embedded, Transport::Http] {
            let fan = level(fan_out, StoreKind::Memory, transport, nowhere, 2, 4)
                .await
                .unwrap();
            let seq = level(sequential, StoreKind::Memory, transport, nowhere, 2, 4)
                .await
                .unwrap();
            assert_eq!((fan.turns, seq.turns), (4, 4), "{transport:?}");
        }
    }
}
