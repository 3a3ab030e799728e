//! `Backend` is the route table as a trait: one method per route of `turnwise_rules::Route`,
//! the exceptions named here. A method added to the trait without a route, or a route added to
//! the table without a method (or a reason it has none), fails this test. What a worker needs
//! beyond the routes belongs to `WorkerBackend`.

use std::collections::{BTreeMap, BTreeSet};

use turnwise_rules::Route;

/// Each `Backend` method and the route it stands for.
const METHODS: &[(&str, Route)] = &[
    ("create_instance", Route::CreateInstance),
    ("send_message", Route::SendMessage),
    ("get_instance", Route::GetInstance),
    ("list_instances", Route::ListInstances),
    ("instance_inbox", Route::InstanceInbox),
    ("type_inbox", Route::TypeInbox),
    ("history", Route::History),
    ("turn", Route::Turn),
    ("await_turn", Route::Turn),
    ("control", Route::Control),
    ("delete_instance", Route::Delete),
    ("claim", Route::Claim),
    ("operation", Route::Operation),
    ("progress", Route::Progress),
    ("checkpoint", Route::Checkpoint),
    ("wait_signal", Route::WaitSignal),
    ("signal", Route::Signal),
    ("complete", Route::Complete),
    ("fail", Route::Fail),
    ("heartbeat", Route::Heartbeat),
    ("runs", Route::Runs),
    ("run", Route::GetRun),
    ("run_stats", Route::RunStats),
    ("register_schema", Route::RegisterSchema),
    ("create_schedule", Route::CreateSchedule),
    ("get_schedule", Route::GetSchedule),
    ("list_schedules", Route::ListSchedules),
    ("control_schedule", Route::ControlSchedule),
    ("restart_turn", Route::RestartTurn),
    ("fork_instance", Route::ForkInstance),
    ("compat_live", Route::CompatLive),
    ("upgrade_instances", Route::UpgradeInstances),
];

/// Methods that share a route with another method, and why.
const SHARED: &[(&str, &str)] = &[(
    "await_turn",
    "the turn route with `wait_ms` (a turnwise extension): `turn` reads at once",
)];

/// Routes with no `Backend` method, and why.
const SERVER_ONLY: &[(Route, &str)] = &[
    (Route::Status, "the server's own status, not a backend call"),
    (
        Route::ListSchemas,
        "read by the console and the CLI from the server; workers only register",
    ),
];

/// The methods of `trait Backend`, read from its source: every `fn` between the trait's
/// opening line and its closing brace at column 0.
fn backend_methods() -> BTreeSet<String> {
    let source = include_str!("../../../core/src/protocol/backend.rs");
    let start = source
        .find("pub trait Backend")
        .expect("backend.rs declares `pub trait Backend`");
    let body = &source[start..];
    let end = body.find("\n}\n").expect("the trait's closing brace");
    body[..end]
        .lines()
        .filter_map(|line| {
            let rest = line
                .trim_start()
                .strip_prefix("async fn ")
                .or_else(|| line.trim_start().strip_prefix("fn "))?;
            Some(rest.split(['(', '<']).next()?.to_owned())
        })
        .collect()
}

#[test]
fn every_backend_method_is_one_route_of_the_table() {
    let methods = backend_methods();
    let table: BTreeMap<&str, Route> = METHODS.iter().copied().collect();
    let named: BTreeSet<String> = table.keys().map(|m| (*m).to_owned()).collect();
    assert_eq!(
        methods, named,
        "Backend's methods and this test's table differ: give a new method its Route here (a \
         worker's fast path or capability belongs to WorkerBackend instead)"
    );

    let mut by_route: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (method, route) in METHODS {
        by_route
            .entry(format!("{route:?}"))
            .or_default()
            .push(method);
    }
    for route in Route::ALL {
        let key = format!("{route:?}");
        let server_only = SERVER_ONLY.iter().any(|(r, _)| *r == route);
        match by_route.get(&key) {
            None => assert!(
                server_only,
                "route {route:?} ({} {}) has no Backend method: add one, or name it in \
                 SERVER_ONLY with the reason",
                route.method(),
                route.path()
            ),
            Some(ms) => {
                assert!(!server_only, "{route:?} is server-only but has {ms:?}");
                let own: Vec<&&str> = ms
                    .iter()
                    .filter(|m| !SHARED.iter().any(|(s, _)| s == *m))
                    .collect();
                assert_eq!(
                    own.len(),
                    1,
                    "route {route:?} must be one Backend method (others named in SHARED): {ms:?}"
                );
            }
        }
    }
    assert_eq!(
        METHODS.len() - SHARED.len() + SERVER_ONLY.len(),
        Route::ALL.len(),
        "every route is one method or server-only"
    );
}
